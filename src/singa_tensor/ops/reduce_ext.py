"""Reductions built on the float kernels and the scans: var/std, logsumexp, softmax,
log_softmax, cumsum/cumprod and norm. The dim handling and the [outer, n, inner] machinery
they share live in reduce.py."""

from __future__ import annotations

import math

import numpy as np

from .. import autograd as _ag
from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import OpSpec, apply, expect_tensor, register, tensor_method
from .elementwise import abs as _abs
from .elementwise import eq, exp, ne, sqrt, where
from .elementwise import pow as _pow
from .layout import cast
from .reduce import (
    _LOW,
    FLOAT_DTYPES,
    NUM_DTYPES,
    _along_dim,
    _check_nonempty,
    _float_input,
    _normal,
    _numel_over,
    _one_dim,
    _samples,
    _widen_int,
    amax,
    amin,
    as_dtype,
    grad_expand,
    in_float,
    mean,
    normalize_dims,
    np_axis,
    run_reduce,
)
from .reduce import onnx_reduce as _reduce_onnx_form
from .reduce import sum as _sum

# ---- var / std ---------------------------------------------------------------------------------


def _var_args(op: str, dim, unbiased, correction):
    """(dim, correction) from PyTorch's two spellings: correction=, or the legacy unbiased
    flag (which may also come alone in dim's place: var(x, True))."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError(f"{op}: dim must be an int or a tuple of ints, got bool {dim}")
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise TypeError(f"{op}: pass either correction or unbiased, not both")
        return dim, 1.0 if unbiased else 0.0
    if correction is None:
        return dim, 1.0
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"{op}: correction must be a number, got {correction!r}")
    return dim, float(correction)


@register
class Var(OpSpec):
    name = "var"
    onnx = None
    kind = "reduce"
    dtypes = FLOAT_DTYPES

    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim, ctx.correction = x._shape, dims, keepdim, correction
        ctx.save_for_backward(x)
        return run_reduce(x, dims, keepdim, "var", None, correction)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dof = _numel_over(ctx.in_shape, ctx.dims) - ctx.correction
        xf = in_float(x)
        centered = xf - mean(xf, ctx.dims, keepdim=True)
        scale = 2.0 / dof if dof > 0 else math.nan
        gx = grad_expand(in_float(g), ctx.in_shape, ctx.dims, ctx.keepdim) * centered * scale
        return (as_dtype(gx, x.dtype),)

    @staticmethod
    def reference(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dim, c = _var_args("var", dim, unbiased, correction)
        return np.var(x, axis=np_axis(x, dim), ddof=c, keepdims=keepdim)

    @staticmethod
    def samples():
        return _var_samples()


@tensor_method()
def var(x: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> Tensor:
    """Variance over dim with `correction` (default 1, Bessel's) subtracted from the count;
    `unbiased=False` means correction=0.

    Example:
        >>> import singa_tensor as st
        >>> st.var(st.tensor([1.0, 2.0, 3.0, 4.0])).item(), st.var(st.tensor([1.0, 3.0]),
        ...                                                         correction=0).item()
        (1.6666666269302368, 1.0)
    """
    dim, c = _var_args("var", dim, unbiased, correction)
    _float_input("var", x)
    dims = normalize_dims("var", x, dim)
    return apply(Var, x, dims, c, bool(keepdim))


Var.fn = staticmethod(var)


@register
class Std(OpSpec):
    name = "std"
    onnx = None
    kind = "reduce"
    dtypes = FLOAT_DTYPES
    composite = True

    @staticmethod
    def reference(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        dim, c = _var_args("std", dim, unbiased, correction)
        return np.std(x, axis=np_axis(x, dim), ddof=c, keepdims=keepdim)

    @staticmethod
    def samples():
        return _var_samples(std=True)


@tensor_method()
def std(x: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> Tensor:
    """Standard deviation: the square root of var (same arguments).

    Example:
        >>> import singa_tensor as st
        >>> st.std(st.tensor([[1.0, 3.0]]), dim=1, correction=0).tolist()
        [1.0]
    """
    dim, c = _var_args("std", dim, unbiased, correction)
    _float_input("std", x)
    normalize_dims("std", x, dim)
    # float16/bfloat16: the root of the variance (accumulated in float32), in x's dtype
    return as_dtype(sqrt(var(x, dim, keepdim=keepdim, correction=c)), x.dtype)


Std.fn = staticmethod(std)


# ---- logsumexp ---------------------------------------------------------------------------------


@register
class LogSumExp(OpSpec):
    name = "logsumexp"
    onnx = "ReduceLogSumExp"
    kind = "reduce"
    dtypes = FLOAT_DTYPES

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        y = run_reduce(x, dims, keepdim, "logsumexp")
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        y = grad_expand(in_float(y), ctx.in_shape, ctx.dims, ctx.keepdim)
        y = where(eq(y, -math.inf), 0.0, y)  # a line of -inf gets zero weights, not NaN
        gx = grad_expand(in_float(g), ctx.in_shape, ctx.dims, ctx.keepdim) * exp(in_float(x) - y)
        return (as_dtype(gx, x.dtype),)

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        m = np.amax(x, axis=np_axis(x, dim), keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        r = np.log(np.sum(np.exp(x - m), axis=np_axis(x, dim), keepdims=True)) + m
        return r if keepdim else np.squeeze(r, axis=np_axis(x, dim))

    @staticmethod
    def samples():
        return _samples(_normal)


@tensor_method()
def logsumexp(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim, computed without overflow.

    Example:
        >>> import singa_tensor as st
        >>> round(st.logsumexp(st.tensor([1000.0, 1000.0]), dim=0).item(), 3)
        1000.693
    """
    _float_input("logsumexp", x)
    dims = normalize_dims("logsumexp", x, dim)
    return apply(LogSumExp, x, dims, bool(keepdim))


LogSumExp.fn = staticmethod(logsumexp)


# ---- softmax / log_softmax ---------------------------------------------------------------------


class _SoftmaxBase(OpSpec):
    kernel_op = "softmax"
    dtypes = FLOAT_DTYPES

    @classmethod
    def forward(cls, ctx, x, d):
        y = _along_dim(x, d, cls.kernel_op)
        ctx.d = d
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def samples():
        return _samples(_normal, single_dim=True, allow_none=False, keepdim=False)


def _softmax_reference(x, dim, log):
    if x.ndim == 0:
        return np.zeros_like(x) if log else np.ones_like(x)
    z = x - np.amax(x, axis=np_axis(x, dim), keepdims=True)
    lse = np.log(np.sum(np.exp(z), axis=np_axis(x, dim), keepdims=True))
    return z - lse if log else np.exp(z - lse)


@register
class Softmax(_SoftmaxBase):
    name = "softmax"
    onnx = "Softmax"
    kernel_op = "softmax"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        yf, gf = in_float(y), in_float(g)
        return (as_dtype(yf * (gf - _sum(gf * yf, ctx.d, keepdim=True)), y.dtype),)

    @staticmethod
    def reference(x, dim, dtype=None):
        return _softmax_reference(x, dim, False)


@register
class LogSoftmax(_SoftmaxBase):
    name = "log_softmax"
    onnx = "LogSoftmax"
    kernel_op = "log_softmax"

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        yf, gf = in_float(y), in_float(g)
        return (as_dtype(gf - exp(yf) * _sum(gf, ctx.d, keepdim=True), y.dtype),)

    @staticmethod
    def reference(x, dim, dtype=None):
        return _softmax_reference(x, dim, True)


def _softmax_like(spec, x, dim, dtype) -> Tensor:
    op = spec.name
    expect_tensor(op, x)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    _float_input(op, x)
    d = _one_dim(op, x, dim)
    return apply(spec, x, d)


@tensor_method()
def softmax(x: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) normalised to sum to 1 along dim (fused and overflow-safe).

    Example:
        >>> import singa_tensor as st
        >>> st.softmax(st.tensor([[0.0, 0.0]]), dim=-1).tolist()
        [[0.5, 0.5]]
    """
    return _softmax_like(Softmax, x, dim, dtype)


@tensor_method()
def log_softmax(x: Tensor, dim: int, dtype=None) -> Tensor:
    """log(softmax(x, dim)), computed directly so it stays finite for very negative inputs.

    Example:
        >>> import singa_tensor as st
        >>> st.log_softmax(st.tensor([0.0, -1000.0]), dim=0).tolist()
        [0.0, -1000.0]
    """
    return _softmax_like(LogSoftmax, x, dim, dtype)


Softmax.fn = staticmethod(softmax)
LogSoftmax.fn = staticmethod(log_softmax)


# ---- cumsum / cumprod --------------------------------------------------------------------------


class _Scan(OpSpec):
    dtypes = NUM_DTYPES
    kernel_op = "cumsum"

    @classmethod
    def forward(cls, ctx, x, d):
        y = _along_dim(x, d, cls.kernel_op)
        ctx.d = d
        if cls.kernel_op == "cumprod":
            ctx.save_for_backward(x, y)
        return y


def _reverse_cumsum(g: Tensor, d: int) -> Tensor:
    """sum of g[j] over j >= i along d (the adjoint of cumsum), without a flip."""
    return _sum(g, d, keepdim=True) - cumsum(g, d) + g


def _scan_reference(fn, x, dim):
    r = x.copy() if x.ndim == 0 else fn(x, axis=dim)
    return r.astype(np.int64) if x.dtype in (np.int32, np.bool_) else r


@register
class Cumsum(_Scan):
    name = "cumsum"
    onnx = "CumSum"
    kernel_op = "cumsum"

    @staticmethod
    def backward(ctx, g):
        return (as_dtype(_reverse_cumsum(in_float(g), ctx.d), g.dtype),)

    @staticmethod
    def reference(x, dim, *, dtype=None):
        return _scan_reference(np.cumsum, x, dim)

    @staticmethod
    def samples():
        return _samples(_normal, single_dim=True, allow_none=False, keepdim=False)


@register
class Cumprod(_Scan):
    """Cumulative product. The backward, sum_{j>=i} g_j y_j / x_i, divides by the input: it is
    exact (to any order) for non-zero inputs only, and gives inf/NaN at zeros."""

    name = "cumprod"
    onnx = None
    kernel_op = "cumprod"
    domain = (0.5, 1.5)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = _reverse_cumsum(in_float(g) * in_float(y), ctx.d) / in_float(x)
        return (as_dtype(gx, x.dtype),)

    @staticmethod
    def reference(x, dim, *, dtype=None):
        return _scan_reference(np.cumprod, x, dim)

    @staticmethod
    def samples():
        return _samples(lambda r, s: r.uniform(0.5, 1.5, s) * r.choice([-1.0, 1.0], s),
                        single_dim=True, allow_none=False, keepdim=False)


def _scan(spec, x, dim, dtype) -> Tensor:
    op = spec.name
    expect_tensor(op, x)
    d = _one_dim(op, x, dim)
    return apply(spec, _widen_int(x, dtype), d)


@tensor_method()
def cumsum(x: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sum along dim; bool/int32 give int64.

    Example:
        >>> import singa_tensor as st
        >>> st.cumsum(st.tensor([1, 2, 3]), dim=0).tolist()
        [1, 3, 6]
    """
    return _scan(Cumsum, x, dim, dtype)


@tensor_method()
def cumprod(x: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running product along dim; bool/int32 give int64. Its gradient assumes non-zero
    inputs (see Cumprod).

    Example:
        >>> import singa_tensor as st
        >>> st.cumprod(st.tensor([1.0, 2.0, 3.0]), dim=0).tolist()
        [1.0, 2.0, 6.0]
    """
    return _scan(Cumprod, x, dim, dtype)


Cumsum.fn = staticmethod(cumsum)
Cumprod.fn = staticmethod(cumprod)


# ---- norm --------------------------------------------------------------------------------------


@register
class Norm(OpSpec):
    """The 2-norm is a primitive so its gradient at a zero vector is 0 (a subgradient) rather
    than sqrt's inf * 0; other orders are compositions of abs, sum, pow and amax/amin."""

    name = "norm"
    onnx = "ReduceL2"
    kind = "reduce"
    dtypes = FLOAT_DTYPES

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        with _ag.no_grad():
            y = sqrt(_sum(x * x, dims, keepdim))
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        y = grad_expand(y, ctx.in_shape, ctx.dims, ctx.keepdim)
        y = where(eq(y, 0.0), 1.0, y)  # x is all zero there, so x / 1 gives the 0 subgradient
        return (grad_expand(g, ctx.in_shape, ctx.dims, ctx.keepdim) * (x / y),)

    @staticmethod
    def reference(x, p=2, dim=None, keepdim=False):
        a = np.abs(x)
        if isinstance(p, str) or p == 2:
            return np.sqrt(np.sum(a * a, axis=np_axis(x, dim), keepdims=keepdim))
        if p == math.inf:
            return np.amax(a, axis=np_axis(x, dim), keepdims=keepdim)
        if p == -math.inf:
            return np.amin(a, axis=np_axis(x, dim), keepdims=keepdim)
        if p == 0:
            return np.sum(a != 0, axis=np_axis(x, dim), keepdims=keepdim).astype(x.dtype)
        return np.sum(a ** p, axis=np_axis(x, dim), keepdims=keepdim) ** (1.0 / p)

    @staticmethod
    def samples():
        r = np.random.default_rng(12)
        out = _samples(_normal)
        for p in ("fro", 1, 3, 0.5, math.inf, -math.inf):
            out.append(((r.standard_normal((3, 4)),), {"p": p, "dim": 1}))
        out.append(((r.standard_normal((2, 3)),), {"p": 1.5, "dim": (0, 1), "keepdim": True}))
        return out


@tensor_method()
def norm(x: Tensor, p=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm over dim: p is a number (inf and -inf for max/min of abs(x), 0 for the count
    of non-zeros) or "fro" (the 2-norm over the given dims).

    Example:
        >>> import singa_tensor as st
        >>> st.norm(st.tensor([3.0, -4.0])).item(), st.norm(st.tensor([3.0, -4.0]), p=1).item()
        (5.0, 7.0)
    """
    expect_tensor("norm", x)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    _float_input("norm", x)
    dims = normalize_dims("norm", x, dim)
    if isinstance(p, str):
        if p != "fro":
            raise ValueError(f"norm: unsupported norm type {p!r}; use a number or 'fro'")
        p = 2
    elif isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"norm: p must be a number or 'fro', got {type(p).__name__}")
    if x.dtype in _LOW and not (p in (0, 1) or math.isinf(p)):
        # squares and powers of 16-bit floats are summed in float32 (an unrounded square
        # each), and the norm rounded once
        return cast(norm(cast(x, _dt.float32), p, dims, keepdim), x.dtype)
    keepdim = bool(keepdim)
    if p == 2:
        return apply(Norm, x, dims, keepdim)
    if p == 0:
        return _sum(cast(ne(x, 0.0), x.dtype), dims, keepdim)
    if p == 1:  # the sum kernel accumulates 16-bit floats in float32
        return as_dtype(_sum(_abs(x), dims, keepdim), x.dtype)
    if math.isinf(p):
        _check_nonempty("norm", x, dims, dim is not None)
        return as_dtype((amax if p > 0 else amin)(_abs(x), dims, keepdim), x.dtype)
    return _pow(_sum(_pow(_abs(x), float(p)), dims, keepdim), 1.0 / p)


Norm.fn = staticmethod(norm)


def _var_samples(std: bool = False) -> list:
    """Lines of one element get correction=0 for var; std drops them (its gradient at a zero
    deviation is NaN, as in PyTorch)."""
    out = []
    for (x,), kw in _samples(_normal):
        dims = normalize_dims("var", _cr.zeros(*x.shape), kw.get("dim"))
        if _numel_over(x.shape, dims) < 2:
            if std:
                continue
            kw["correction"] = 0
        out.append(((x,), kw))
    r = np.random.default_rng(14)
    out.append(((r.standard_normal((3, 4)),), {"dim": 1, "unbiased": False}))
    out.append(((r.standard_normal((3, 4)),), {"dim": 0, "correction": 2}))
    return out



# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _softmax_onnx(cls, b, args, attrs, outs):
    x, d = args
    if x.ndim == 0:  # ONNX Softmax wants rank >= 1: as a 1-element vector
        (v,) = b.node("Reshape", [b.value(x), b.ints([1])])
        (y,) = b.node(cls.onnx, [v], axis=0)
        b.node("Reshape", [y, b.ints([])], outputs=outs)
        return
    if b.opset >= 13 or d == x.ndim - 1:
        b.node(cls.onnx, [b.value(x)], outputs=outs, axis=int(d) if x.ndim else -1)
        return
    # before opset 13 Softmax normalises the 2-d flattening at axis: move d last instead
    perm = [i for i in range(x.ndim) if i != d] + [d]
    back = [perm.index(i) for i in range(x.ndim)]
    (t,) = b.node("Transpose", [b.value(x)], perm=perm)
    (y,) = b.node(cls.onnx, [t], axis=x.ndim - 1)
    b.node("Transpose", [y], outputs=outs, perm=back)


def _logsumexp_onnx(cls, b, args, attrs, outs):
    x, dims, keepdim = args
    _reduce_onnx_form(b, "ReduceLogSumExp", x, dims, keepdim, outs)


def _norm_onnx(cls, b, args, attrs, outs):
    x, dims, keepdim = args
    _reduce_onnx_form(b, "ReduceL2", x, dims, keepdim, outs)


def _cumsum_onnx(cls, b, args, attrs, outs):
    x, d = args
    if x.ndim == 0:
        b.node("Identity", [b.value(x)], outputs=outs)
        return
    b.node("CumSum", [b.value(x), b.const(np.asarray(d, dtype=np.int64))], outputs=outs)


Softmax.onnx_export = classmethod(_softmax_onnx)
LogSoftmax.onnx_export = classmethod(_softmax_onnx)
LogSumExp.onnx_export = classmethod(_logsumexp_onnx)
Norm.onnx_export = classmethod(_norm_onnx)
Cumsum.onnx_export = classmethod(_cumsum_onnx)

__all__ = [
    "cumprod", "cumsum", "log_softmax", "logsumexp", "norm", "softmax", "std", "var",
]
