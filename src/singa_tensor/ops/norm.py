"""Normalisation: batch, layer and group norm. Training-mode batch norm, layer norm and group
norm are primitives with fused kernels (statistics and normalisation in one pass forward, one
kernel backward) whose gradients of gradients come from the compositions they replace;
inference batch norm is a composition of reductions and arithmetic."""

from __future__ import annotations

import numpy as np

from .. import _execution
from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import (
    REGISTRY,
    OpSpec,
    apply,
    check_same_device,
    contiguous,
    expect_tensor,
    kernel,
    ptr,
    register,
    traced,
)
from .layout import cast


def _check_affine(op: str, t, shape: tuple, name: str) -> None:
    if t is not None:
        expect_tensor(op, t, name)
        if t.shape != shape:
            raise ValueError(f"{op}: {name} must have shape {shape}, got {t.shape}")


@traced("batch_norm")
def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) of (N, C, ...) over the batch and spatial dims.

    In training (or without running statistics) the batch's own mean and biased variance are
    used, and running_mean/running_var (if given) are updated in place with momentum, the
    variance unbiased, as PyTorch does. Otherwise the running statistics are used.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0], [3.0]])
        >>> [round(v, 4) for v in st.batch_norm(x, None, None, training=True).reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "batch_norm"
    expect_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dims (N, C, ...), got {x.shape}")
    c = x.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_affine(op, t, (c,), name)
    use_batch = training or running_mean is None or running_var is None
    if x.dtype in _LOW and not (use_batch and _same_dtype(x, weight, bias)):
        # statistics and normalisation in float32 (as PyTorch keeps them for 16-bit inputs),
        # the result rounded once to x's dtype; the running statistics keep their own dtype
        def f32(t):
            return None if t is None else cast(t, _dt.float32)

        out = batch_norm(f32(x), running_mean, running_var, f32(weight), f32(bias), training,
                         momentum, eps)
        return cast(out, x.dtype)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, c) + (1,) * (x.ndim - 2)
    if use_batch:
        count = x.numel() // c
        if count <= 1:
            raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                             f"input shape {x.shape}")
        if x.dtype.is_floating_point and x.dtype.name in ("float32", "float64") + _LOW_NAMES:
            stats: list = []
            out = apply(BatchNormTrain, x, weight, bias, float(eps), stats)
            mean, var = stats
        else:
            mean = x.mean(dim=dims, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
            out = None
        if training and running_mean is not None and running_var is not None:
            with _ag.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.reshape(c).detach() * momentum)
                unbiased = var.reshape(c).detach() * (count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
        if out is not None:
            return out
    else:
        mean = running_mean.reshape(*shape)
        var = running_var.reshape(*shape)
    out = (x - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


_LOW = (_dt.float16, _dt.bfloat16)
_LOW_NAMES = ("float16", "bfloat16")


def _stats_dtype(x: Tensor):
    """The dtype of the saved statistics: float32 for float16/bfloat16 inputs (whose kernels
    load each element into float32, keep the statistics in float32 and round each output
    once), else x's."""
    return _dt.float32 if x.dtype in _LOW else x.dtype


def _low_grads(x: Tensor, composed, *args) -> tuple:
    """composed(*args) (a tuple of gradients, None for some), computed in float32 when x is
    float16/bfloat16 and rounded back to x's dtype once."""
    if x.dtype not in _LOW:
        return composed(*args)
    wide = [cast(a, _dt.float32) if isinstance(a, Tensor) and a.dtype in _LOW else a
            for a in args]
    return tuple(None if d is None else cast(d, x.dtype) for d in composed(*wide))


def _same_dtype(x: Tensor, *ts) -> bool:
    return all(t is None or t.dtype is x.dtype for t in ts)


def _planes(x: Tensor) -> tuple:
    """(outer, channels, inner) of an (N, C, ...) tensor for the batch-norm kernels."""
    n, c = x._shape[0], x._shape[1]
    return n, c, (x.numel() // (n * c)) if n * c else 0


@register
class BatchNormTrain(OpSpec):
    """Batch norm with the batch's own statistics (channel axis 1):
    y = (x - mean) / sqrt(var + eps) * weight + bias. The backward counts mean and var as
    functions of x. stats, if a list, receives the batch mean and biased variance (shape (C,))
    for the running statistics."""

    name = "_batch_norm_train"
    onnx = None

    @staticmethod
    def forward(ctx, x, weight, bias, eps, stats):
        outer, c, inner = _planes(x)
        xc = contiguous(x)
        mean = Tensor._empty((c,), _stats_dtype(x), x._device, x._be)
        var = Tensor._empty((c,), _stats_dtype(x), x._device, x._be)
        kernel(x, "batch_norm_stats")(ptr(xc), ptr(mean), ptr(var), outer, c, inner)
        out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        null = x._be.ffi.NULL
        kernel(x, "batch_norm_apply")(
            ptr(xc), ptr(mean), ptr(var), null if weight is None else ptr(contiguous(weight)),
            null if bias is None else ptr(contiguous(bias)), ptr(out), outer, c, inner, eps)
        if stats is not None:
            stats[:] = [mean, var]
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.var, ctx.eps, ctx.has_bias = mean, var, eps, bias is not None
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            return _low_grads(x, _batch_norm_backward_composed, x, weight, g, ctx.eps) + (
                None, None)
        outer, c, inner = _planes(x)
        be, null = x._be, x._be.ffi.NULL

        def maybe(shape, wanted):
            return Tensor._empty(shape, x.dtype, x._device, be) if wanted else None

        dx, dw, db = maybe(x._shape, need_x), maybe((c,), need_w), maybe((c,), need_b)
        if g.dtype is not x.dtype:
            g = cast(g, x.dtype)
        kernel(x, "batch_norm_backward")(
            ptr(contiguous(x)), ptr(contiguous(g)), ptr(ctx.mean), ptr(ctx.var),
            null if weight is None else ptr(contiguous(weight)),
            *(null if t is None else ptr(t) for t in (dx, dw, db)), outer, c, inner, ctx.eps)
        return dx, dw, db, None, None

    @staticmethod
    def reference(x, weight, bias, eps, stats):
        return _batch_norm_np(x, None, None, weight, bias, training=True, eps=eps)

    @staticmethod
    def samples():
        r = np.random.default_rng(31)
        x, c = r.standard_normal((3, 4, 2, 3)), r.standard_normal(4)
        return [((x, c, c + 1.0, 1e-5, None), {}), ((x[:, :, 0, 0], None, None, 1e-3, None), {}),
                ((x, c, None, 1e-5, None), {})]


BatchNormTrain.fn = staticmethod(
    lambda x, weight, bias, eps, stats: apply(BatchNormTrain, x, weight, bias, eps, stats))


def _batch_norm_backward_composed(x, weight, g, eps) -> tuple:
    """(dx, dweight, dbias) of training-mode batch norm written with Tensor ops, the
    statistics recomputed from x so that the result differentiates correctly again."""
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    m = x.numel() // x.shape[1]
    xm = x - x.mean(dim=dims, keepdim=True)
    invstd = ((xm * xm).mean(dim=dims, keepdim=True) + eps).rsqrt()
    xhat = xm * invstd
    db = g.sum(dim=dims)
    dw = (g * xhat).sum(dim=dims)
    k = invstd if weight is None else weight.reshape(*shape) * invstd
    dx = k * (g - db.reshape(*shape) / m - xhat * dw.reshape(*shape) / m)
    return dx, (dw if weight is not None else None), db


# ---- layer and group norm: one kernel each way, the compositions for higher orders -----------


def _fused_dtype(op: str, x: Tensor, weight, bias):
    """The dtype the fused kernels compute layer or group norm in, or None when the operands'
    dtypes differ (the composition then applies the usual type promotion). A float16/bfloat16
    input with float32 weight and bias (a float32 model under autocast) computes in float32
    and returns the input's dtype, as PyTorch's mixed-type kernels do."""
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    params = [t for t in (weight, bias) if t is not None]
    if x.dtype in _LOW and params and all(t.dtype is _dt.float32 for t in params):
        return _dt.float32
    for t in params:
        if t.dtype is not x.dtype:
            return None
    return x.dtype if x.dtype.name in ("float32", "float64") + _LOW_NAMES else _dt.float32


def _tracing() -> bool:
    """Whether an ONNX export traces this call: it records the compositions, which every
    opset can express, inside the traced scope."""
    ex = _execution.running_count and _execution.current()
    return bool(ex) and ex.tracing


def _run_fused(spec, dtype, x: Tensor, weight, bias, *attrs) -> Tensor:
    if dtype is x.dtype:
        return apply(spec, x, weight, bias, *attrs)
    # float16 and bfloat16 compute in float32 and are stored back
    out = apply(spec, *(None if t is None else cast(t, dtype) for t in (x, weight, bias)), *attrs)
    return cast(out, x.dtype)


def _normalized_shape(op: str, normalized_shape) -> tuple:
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        return (normalized_shape,)
    try:
        shape = tuple(normalized_shape)
    except TypeError:
        shape = None
    if shape is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"{op}: normalized_shape must be an int or a sequence of ints, got "
                        f"{normalized_shape!r}")
    return shape


def _check_eps(op: str, eps) -> float:
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError(f"{op}: eps must be a number, got {eps!r}")
    return float(eps)


@traced("layer_norm")
def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing normalized_shape dims of x (biased variance), then scale by
    weight and shift by bias (each optional, of shape normalized_shape).

    One fused kernel forward and one backward (float16 and bfloat16: statistics in float32,
    each output rounded once); gradients of the gradient come from the composition.

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.layer_norm(st.tensor([[1.0, 3.0]]), (2,))[0].tolist()]
        [-1.0, 1.0]
    """
    op = "layer_norm"
    expect_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    shape = _normalized_shape(op, normalized_shape)
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise ValueError(f"{op}: normalized_shape {shape} must match the trailing dims of the "
                         f"input shape {x.shape}")
    _check_affine(op, weight, shape, "weight")
    _check_affine(op, bias, shape, "bias")
    check_same_device(op, x, weight, bias)
    eps = _check_eps(op, eps)
    dtype = _fused_dtype(op, x, weight, bias)
    if dtype is None or _tracing():
        return _layer_norm_composed(x, k, weight, bias, eps)
    return _run_fused(LayerNormFused, dtype, x, weight, bias, k, eps)


def _layer_norm_composed(x, k: int, weight, bias, eps: float) -> Tensor:
    dims = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    out = (x - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _rows(x: Tensor, k: int) -> tuple:
    """(rows, n): x as rows of its trailing k dims flattened."""
    n = 1
    for d in x._shape[x.ndim - k:]:
        n *= d
    rows = 1
    for d in x._shape[:x.ndim - k]:
        rows *= d
    return rows, n


def _contiguous_all(*ts) -> list:
    """Each tensor contiguous (None stays None), for the caller to hold until its kernel has
    run, so that no copy's memory goes back to the allocator while a kernel call (or a graph
    recording of it) still refers to it."""
    return [None if t is None else contiguous(t) for t in ts]


def _null_or_ptr(ref: Tensor, t):
    return ref._be.ffi.NULL if t is None else ptr(t)


@register
class LayerNormFused(OpSpec):
    """Layer norm over the trailing k dims, one kernel forward (two-pass statistics in double
    per row, saving each row's mean and rstd) and one backward (dx per row; dweight, dbias
    summed over rows in row order). weight and bias are optional, of x's dtype."""

    name = "_layer_norm"
    onnx = None

    @staticmethod
    def forward(ctx, x, weight, bias, k, eps):
        rows, n = _rows(x, k)
        xc, wc, bc = _contiguous_all(x, weight, bias)
        out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        mean = Tensor._empty((rows,), _stats_dtype(x), x._device, x._be)
        rstd = Tensor._empty((rows,), _stats_dtype(x), x._device, x._be)
        kernel(x, "layer_norm")(ptr(xc), _null_or_ptr(x, wc), _null_or_ptr(x, bc),
                                ptr(out), ptr(mean), ptr(rstd), rows, n, eps)
        ctx.save_for_backward(x, weight)
        ctx.xc = xc if xc is not x else None
        ctx.mean, ctx.rstd, ctx.k, ctx.eps = mean, rstd, k, eps
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            dx, dw, db = _low_grads(x, _layer_norm_backward_composed, x, weight, g, ctx.k,
                                    ctx.eps)
            return dx, dw if need_w else None, db if need_b else None, None, None
        rows, n = _rows(x, ctx.k)
        be, null = x._be, x._be.ffi.NULL
        shape = x._shape[x.ndim - ctx.k:]

        def maybe(s, wanted):
            return Tensor._empty(s, x.dtype, x._device, be) if wanted else None

        dx, dw = maybe(x._shape, need_x), maybe(shape, need_w and weight is not None)
        db = maybe(shape, need_b)
        if g.dtype is not x.dtype:
            g = cast(g, x.dtype)
        gc, wc = _contiguous_all(g, weight)
        kernel(x, "layer_norm_backward")(
            ptr(ctx.xc if ctx.xc is not None else x), ptr(gc), ptr(ctx.mean), ptr(ctx.rstd),
            _null_or_ptr(x, wc),
            *(null if t is None else ptr(t) for t in (dx, dw, db)), rows, n)
        return dx, dw, db, None, None

    @staticmethod
    def reference(x, weight, bias, k, eps):
        return _layer_norm_np(x, x.shape[x.ndim - k:], weight, bias, eps)

    @staticmethod
    def samples():
        r = np.random.default_rng(32)
        x = r.standard_normal((3, 4, 5))
        w, b = r.standard_normal((4, 5)), r.standard_normal((4, 5))
        return [((x, w, b, 2, 1e-5), {}), ((x, None, None, 1, 1e-5), {}),
                ((x, r.standard_normal(5), None, 1, 1e-3), {}),
                ((x[:, :1, :1], None, r.standard_normal(1), 1, 1e-5), {})]


LayerNormFused.fn = staticmethod(
    lambda x, weight, bias, k, eps: apply(LayerNormFused, x, weight, bias, k, eps))


def _layer_norm_backward_composed(x, weight, g, k: int, eps: float) -> tuple:
    """(dx, dweight, dbias) of layer norm over the trailing k dims in Tensor ops, the statistics
    recomputed from x so that the result differentiates correctly again."""
    dims = tuple(range(x.ndim - k, x.ndim))
    shape = x.shape[x.ndim - k:]
    xm = x - x.mean(dim=dims, keepdim=True)
    rstd = ((xm * xm).mean(dim=dims, keepdim=True) + eps).rsqrt()
    xhat = xm * rstd
    gw = g if weight is None else g * weight
    dx = rstd * (gw - gw.mean(dim=dims, keepdim=True)
                 - xhat * (gw * xhat).mean(dim=dims, keepdim=True))
    lead = 1
    for d in x.shape[:x.ndim - k]:
        lead *= d
    db = g.reshape(lead, *shape).sum(dim=0)
    dw = (g * xhat).reshape(lead, *shape).sum(dim=0) if weight is not None else None
    return dx, dw, db


@traced("group_norm")
def group_norm(x: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise (N, C, ...) over groups of C/num_groups channels and the spatial dims, then
    scale and shift each channel by weight and bias (each optional, of shape (C,)).

    One fused kernel forward and one backward (float16 and bfloat16: statistics in float32,
    each output rounded once); gradients of the gradient come from the composition.

    Example:
        >>> import singa_tensor as st
        >>> y = st.group_norm(st.tensor([[[1.0], [3.0]]]), 1)
        >>> [round(v, 4) for v in y.reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "group_norm"
    expect_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dims (N, C, ...), got {x.shape}")
    c = x.shape[1]
    if (not isinstance(num_groups, int) or isinstance(num_groups, bool) or num_groups < 1
            or c % num_groups):
        raise ValueError(f"{op}: num_groups={num_groups!r} must be a positive divisor of the "
                         f"{c} channels")
    _check_affine(op, weight, (c,), "weight")
    _check_affine(op, bias, (c,), "bias")
    check_same_device(op, x, weight, bias)
    eps = _check_eps(op, eps)
    dtype = _fused_dtype(op, x, weight, bias)
    if dtype is None or _tracing():
        return _group_norm_composed(x, num_groups, weight, bias, eps)
    return _run_fused(GroupNormFused, dtype, x, weight, bias, num_groups, eps)


def _group_norm_composed(x, num_groups: int, weight, bias, eps: float) -> Tensor:
    n, c = x.shape[0], x.shape[1]
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(dim=2, keepdim=True)
    var = ((g - mean) ** 2).mean(dim=2, keepdim=True)
    out = ((g - mean) * (var + eps).rsqrt()).reshape(*x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


@register
class GroupNormFused(OpSpec):
    """Group norm of (N, C, ...), one kernel forward (two-pass statistics in double per
    (sample, group) row) and one backward (dx per row; dweight, dbias summed per channel in
    order). weight and bias are optional, of x's dtype."""

    name = "_group_norm"
    onnx = None

    @staticmethod
    def forward(ctx, x, weight, bias, groups, eps):
        batch, c, inner = _planes(x)
        xc, wc, bc = _contiguous_all(x, weight, bias)
        out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        mean = Tensor._empty((batch * groups,), _stats_dtype(x), x._device, x._be)
        rstd = Tensor._empty((batch * groups,), _stats_dtype(x), x._device, x._be)
        kernel(x, "group_norm")(ptr(xc), _null_or_ptr(x, wc), _null_or_ptr(x, bc),
                                ptr(out), ptr(mean), ptr(rstd), batch, c, groups, inner, eps)
        ctx.save_for_backward(x, weight)
        ctx.xc = xc if xc is not x else None
        ctx.mean, ctx.rstd, ctx.groups, ctx.eps = mean, rstd, groups, eps
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            dx, dw, db = _low_grads(x, _group_norm_backward_composed, x, weight, g, ctx.groups,
                                    ctx.eps)
            return dx, dw if need_w else None, db if need_b else None, None, None
        batch, c, inner = _planes(x)
        be, null = x._be, x._be.ffi.NULL

        def maybe(s, wanted):
            return Tensor._empty(s, x.dtype, x._device, be) if wanted else None

        dx, dw = maybe(x._shape, need_x), maybe((c,), need_w and weight is not None)
        db = maybe((c,), need_b)
        if g.dtype is not x.dtype:
            g = cast(g, x.dtype)
        gc, wc = _contiguous_all(g, weight)
        kernel(x, "group_norm_backward")(
            ptr(ctx.xc if ctx.xc is not None else x), ptr(gc), ptr(ctx.mean), ptr(ctx.rstd),
            _null_or_ptr(x, wc),
            *(null if t is None else ptr(t) for t in (dx, dw, db)), batch, c, ctx.groups, inner)
        return dx, dw, db, None, None

    @staticmethod
    def reference(x, weight, bias, groups, eps):
        return _group_norm_np(x, groups, weight, bias, eps)

    @staticmethod
    def samples():
        r = np.random.default_rng(33)
        x, c = r.standard_normal((3, 4, 2, 3)), r.standard_normal(4)
        return [((x, c, c + 1.0, 2, 1e-5), {}), ((x, None, None, 4, 1e-5), {}),
                ((x[:, :, 0, 0], c, None, 1, 1e-3), {}), ((x[:, :, :, 0], None, c, 2, 1e-5), {})]


GroupNormFused.fn = staticmethod(
    lambda x, weight, bias, groups, eps: apply(GroupNormFused, x, weight, bias, groups, eps))


def _group_norm_backward_composed(x, weight, g, groups: int, eps: float) -> tuple:
    """(dx, dweight, dbias) of group norm in Tensor ops, the statistics recomputed from x so
    that the result differentiates correctly again."""
    n, c = x.shape[0], x.shape[1]
    shape = (1, c) + (1,) * (x.ndim - 2)
    dims = (0,) + tuple(range(2, x.ndim))
    xg = x.reshape(n, groups, -1)
    xm = xg - xg.mean(dim=2, keepdim=True)
    rstd = ((xm * xm).mean(dim=2, keepdim=True) + eps).rsqrt()
    xhat = xm * rstd
    gw = (g if weight is None else g * weight.reshape(*shape)).reshape(n, groups, -1)
    dx = rstd * (gw - gw.mean(dim=2, keepdim=True)
                 - xhat * (gw * xhat).mean(dim=2, keepdim=True))
    xhat = xhat.reshape(*x.shape)
    db = g.sum(dim=dims)
    dw = (g * xhat).sum(dim=dims) if weight is not None else None
    return dx.reshape(*x.shape), dw, db


# ---- numpy references and the registry's view --------------------------------------------------


def _norm_np(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _batch_norm_np(x, running_mean, running_var, weight=None, bias=None, training=False,
                   momentum=0.1, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training or running_mean is None:
        out = _norm_np(x, (0,) + tuple(range(2, x.ndim)), eps)
    else:
        out = (x - running_mean.reshape(shape)) / np.sqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _layer_norm_np(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    out = _norm_np(x, tuple(range(x.ndim - k, x.ndim)), eps)
    return out * (1 if weight is None else weight) + (0 if bias is None else bias)


def _group_norm_np(x, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    out = _norm_np(x.reshape(n, num_groups, -1), (2,), eps).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _composite(name, onnx, fn, reference, samples):
    spec = type("".join(p.title() for p in name.split("_")), (OpSpec,), {
        "name": name, "onnx": onnx, "composite": True, "fn": staticmethod(fn),
        "reference": staticmethod(reference), "samples": staticmethod(samples),
    })
    return register(spec)


_rng = np.random.default_rng(30)
_x = _rng.standard_normal((3, 4, 2, 3))
_c = _rng.standard_normal(4)
_composite("batch_norm", "BatchNormalization", batch_norm, _batch_norm_np, lambda: [
    ((_x, None, None, _c, _c + 1.0), {"training": True}),
    ((_x, _c, np.abs(_c) + 0.5, _c, None), {"training": False}),
])
_composite("layer_norm", "LayerNormalization", layer_norm, _layer_norm_np, lambda: [
    ((_x, (2, 3), _rng.standard_normal((2, 3)), _rng.standard_normal((2, 3))), {}),
    ((_x, 3), {})])
_composite("group_norm", "GroupNormalization", group_norm, _group_norm_np, lambda: [
    ((_x, 2, _c, _c), {}), ((_x, 4), {})])

__all__ = ["batch_norm", "group_norm", "layer_norm"]


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _affine(b, t, shape, fill: float, like: Tensor) -> str:
    if t is not None:
        return b.value(t)
    return b.const(np.full(shape, fill, dtype=np.dtype(like.dtype.name)))


def _batch_norm_onnx(cls, b, args, attrs, outs):
    x, mean, var = args["x"], args["running_mean"], args["running_var"]
    if args["training"] or mean is None or var is None or not x.dtype.is_floating_point:
        return NotImplemented
    c = x.shape[1]
    b.node("BatchNormalization",
           [b.value(x), _affine(b, args["weight"], (c,), 1.0, x),
            _affine(b, args["bias"], (c,), 0.0, x), b.value(mean), b.value(var)],
           outputs=outs, epsilon=float(args["eps"]))


def _layer_norm_onnx(cls, b, args, attrs, outs):
    x, shape = args["x"], args["normalized_shape"]
    if b.opset < 17 or not x.dtype.is_floating_point:
        return NotImplemented
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    b.node("LayerNormalization",
           [b.value(x), _affine(b, args["weight"], shape, 1.0, x),
            _affine(b, args["bias"], shape, 0.0, x)],
           outputs=outs, axis=-len(shape), epsilon=float(args["eps"]))


def _group_norm_onnx(cls, b, args, attrs, outs):
    x = args["x"]
    if b.opset < 21 or not x.dtype.is_floating_point:
        return NotImplemented  # 18-20 took per-group scales: written as its ops instead
    c = x.shape[1]
    b.node("GroupNormalization",
           [b.value(x), _affine(b, args["weight"], (c,), 1.0, x),
            _affine(b, args["bias"], (c,), 0.0, x)],
           outputs=outs, num_groups=int(args["num_groups"]), epsilon=float(args["eps"]))


REGISTRY["batch_norm"].onnx_export = classmethod(_batch_norm_onnx)
REGISTRY["layer_norm"].onnx_export = classmethod(_layer_norm_onnx)
REGISTRY["group_norm"].onnx_export = classmethod(_group_norm_onnx)
