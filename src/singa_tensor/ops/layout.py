"""Ops that change how data is laid out, not what it is: dtype casts, device moves, copies,
and the views (reshape, view, expand, permute, transpose) that share storage."""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..backend import as_device
from ..tensor import Tensor, _wrap_dim, contiguous_strides
from ._registry import (
    OpSpec,
    apply,
    broadcast_strides,
    contiguous,
    copy_into,
    expect_tensor,
    kernel_symbol,
    ptr,
    register,
    tensor_method,
)


def _np_dtype(d):
    return d.np if d.np is not None else np.float32


@register
class Cast(OpSpec):
    name = "cast"
    onnx = "Cast"
    dtypes = ("float32", "float64", "int32", "int64", "bool")

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = x.dtype
        xc = contiguous(x)
        out = Tensor._empty(x._shape, dtype, x._device, x._be)
        fn = kernel_symbol(x, f"st_cast_{x.dtype.suffix}_{dtype.suffix}")
        fn(ptr(xc), ptr(out), x.numel())
        return out

    @staticmethod
    def backward(ctx, g):
        if not ctx.src.is_floating_point:
            return (None,)
        return (cast(g, ctx.src),)

    @staticmethod
    def reference(x, dtype):
        return x.astype(_np_dtype(dtype))

    @staticmethod
    def samples():
        r = np.random.default_rng(0)
        return [((r.standard_normal((3, 4)) * 5,), {"dtype": d})
                for d in (_dt.float64, _dt.int32, _dt.int64, _dt.bool_)]


def cast(x: Tensor, dtype) -> Tensor:
    """Convert x to dtype (floats to integers truncate toward zero; anything to bool tests
    for non-zero).

    Example:
        >>> import singa_tensor as st
        >>> st.cast(st.tensor([1.7, -1.7, 0.0]), st.int64).tolist()
        [1, -1, 0]
    """
    expect_tensor("cast", x)
    dtype = _dt.as_dtype(dtype)
    if dtype is x.dtype:
        return x
    return apply(Cast, x, dtype)


@register
class ToDevice(OpSpec):
    name = "to_device"
    onnx = None

    @staticmethod
    def forward(ctx, x, device):
        ctx.src = x.device
        from .. import backend

        return backend.transfer(x, device)

    @staticmethod
    def backward(ctx, g):
        return (to_device(g, ctx.src),)

    @staticmethod
    def reference(x, device):
        return x


def to_device(x: Tensor, device) -> Tensor:
    """x copied to another device (gradients flow back to the source device).

    Example:
        >>> import singa_tensor as st
        >>> st.to_device(st.ones(2), "cpu").device
        device(type='cpu')
    """
    device = as_device(device)
    if device == x.device:
        return x
    return apply(ToDevice, x, device)


@register
class Clone(OpSpec):
    name = "clone"
    onnx = "Identity"
    dtypes = ("float32", "float64", "int64", "bool")

    @staticmethod
    def forward(ctx, x):
        out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        copy_into(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        return (g,)

    @staticmethod
    def reference(x):
        return x.copy()

    @staticmethod
    def samples():
        r = np.random.default_rng(1)
        return [((r.standard_normal((2, 3)),), {}), ((r.standard_normal(()),), {})]


@tensor_method()
def clone(x: Tensor) -> Tensor:
    """A copy with its own storage; gradients flow back to x.

    Example:
        >>> import singa_tensor as st
        >>> a = st.ones(2); b = a.clone(); _ = b.add_(1); a.tolist()
        [1.0, 1.0]
    """
    return apply(Clone, expect_tensor("clone", x))


@tensor_method("contiguous")
def make_contiguous(x: Tensor) -> Tensor:
    """x if already contiguous, else a contiguous copy (differentiable)."""
    return x if x._contig else apply(Clone, x)


# ---- views -----------------------------------------------------------------------------------


def _infer_shape(op: str, shape, numel: int) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ValueError(f"{op}: only one dimension can be inferred (-1), got shape {shape}")
    for s in shape:
        if s < -1:
            raise ValueError(f"{op}: invalid shape dimension {s} in {shape}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if unknown:
        if known == 0 or numel % known:
            raise ValueError(f"{op}: shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ValueError(f"{op}: shape {shape} is invalid for input of size {numel}")
    return shape


def _view_strides(x: Tensor, shape: tuple):
    """Strides that let x be seen as shape without a copy, or None (numpy's algorithm:
    match groups of old dimensions whose elements are laid out contiguously)."""
    if x._contig:
        return contiguous_strides(shape)
    old = [(n, s) for n, s in zip(x._shape, x._strides) if n != 1]
    new_strides = [0] * len(shape)
    oi = 0
    ni = 0
    while ni < len(shape):
        if shape[ni] == 1:
            new_strides[ni] = 1
            ni += 1
            continue
        if oi >= len(old):
            return None
        # collect a chunk of old dims and a chunk of new dims with the same element count
        onum, nnum = old[oi][0], shape[ni]
        ostart, nstart = oi, ni
        while onum != nnum:
            if onum < nnum:
                oi += 1
                if oi >= len(old):
                    return None
                onum *= old[oi][0]
            else:
                ni += 1
                while ni < len(shape) and shape[ni] == 1:
                    ni += 1
                if ni >= len(shape):
                    return None
                nnum *= shape[ni]
        for k in range(ostart, oi):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        stride = old[oi][1]
        for k in range(ni, nstart - 1, -1):
            if shape[k] == 1:
                new_strides[k] = stride
                continue
            new_strides[k] = stride
            stride *= shape[k]
        oi += 1
        ni += 1
    return tuple(new_strides)


@register
class View(OpSpec):
    name = "view"
    onnx = "Reshape"

    @staticmethod
    def forward(ctx, x, shape, strides):
        ctx.in_shape = x._shape
        return x._view(shape, strides, x._offset)

    @staticmethod
    def backward(ctx, g):
        return (reshape(g, ctx.in_shape),)

    @staticmethod
    def reference(x, *shape):
        return x.reshape(*shape)

    @staticmethod
    def samples():
        r = np.random.default_rng(2)
        return [((r.standard_normal((2, 6)), 3, 4), {}), ((r.standard_normal((4,)), -1, 2), {})]

    fn_name = "reshape"


@tensor_method()
def reshape(x: Tensor, *shape) -> Tensor:
    """Same data in a new shape: a view when the layout allows, otherwise a copy.

    Example:
        >>> import singa_tensor as st
        >>> st.arange(6).reshape(2, -1).shape
        (2, 3)
    """
    expect_tensor("reshape", x)
    shape = _infer_shape("reshape", shape, x.numel())
    if shape == x._shape:
        return x
    strides = _view_strides(x, shape)
    if strides is None:
        x = apply(Clone, x)
        strides = contiguous_strides(shape)
    return apply(View, x, shape, strides)


@tensor_method()
def view(x: Tensor, *shape) -> Tensor:
    """Like reshape, but never copies: raises if the layout does not allow a view.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(4, 2).view(8).shape
        (8,)
    """
    expect_tensor("view", x)
    if len(shape) == 1 and isinstance(shape[0], _dt.DType):
        raise TypeError("view: reinterpreting the dtype is not supported; use .to(dtype)")
    shape = _infer_shape("view", shape, x.numel())
    strides = _view_strides(x, shape)
    if strides is None:
        raise RuntimeError(
            f"view: size {shape} is not compatible with input of shape {x._shape} and strides "
            f"{x._strides}; at least one dimension spans two contiguous subspaces. Use "
            ".reshape(...) instead."
        )
    return apply(View, x, shape, strides)


@register
class Expand(OpSpec):
    name = "expand"
    onnx = "Expand"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x._shape
        return x._view(shape, broadcast_strides(x, shape), x._offset)

    @staticmethod
    def backward(ctx, g):
        return (sum_to(g, ctx.in_shape),)

    @staticmethod
    def reference(x, *shape):
        return np.broadcast_to(x, shape).copy()

    @staticmethod
    def samples():
        r = np.random.default_rng(3)
        return [((r.standard_normal((3, 1)), 2, 3, 4), {}), ((r.standard_normal(()), 5), {})]


@tensor_method()
def expand(x: Tensor, *shape) -> Tensor:
    """Broadcast x to a larger shape without copying (-1 keeps a dimension).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([[1], [2]]).expand(2, 3).tolist()
        [[1, 1, 1], [2, 2, 2]]
    """
    expect_tensor("expand", x)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim:
        raise ValueError(
            f"expand: the number of sizes provided ({len(shape)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({x.ndim})"
        )
    off = len(shape) - x.ndim
    final = []
    for i, s in enumerate(shape):
        if i >= off:
            cur = x._shape[i - off]
            if s == -1:
                s = cur
            elif s < 0:
                raise ValueError(f"expand: invalid size {s} for dimension {i} in {shape}")
            elif cur != 1 and cur != s:
                raise ValueError(
                    f"expand: the expanded size of the tensor ({s}) must match the existing size "
                    f"({cur}) at non-singleton dimension {i}; target {shape}, tensor {x._shape}"
                )
        elif s < 0:
            raise ValueError(f"expand: the size -1 is not allowed in a leading new dimension {i}")
        final.append(s)
    final = tuple(final)
    if final == x._shape:
        return x
    return apply(Expand, x, final)


@tensor_method()
def broadcast_to(x: Tensor, shape) -> Tensor:
    """numpy's broadcast_to: a read-only-in-spirit view of x in a larger shape.

    Example:
        >>> import singa_tensor as st
        >>> st.broadcast_to(st.ones(3), (2, 3)).shape
        (2, 3)
    """
    return expand(x, *tuple(shape))


@register
class Permute(OpSpec):
    name = "permute"
    onnx = "Transpose"

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        shape = tuple(x._shape[d] for d in dims)
        strides = tuple(x._strides[d] for d in dims)
        return x._view(shape, strides, x._offset)

    @staticmethod
    def backward(ctx, g):
        inv = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inv[d] = i
        return (permute(g, *inv),)

    @staticmethod
    def reference(x, *dims):
        return np.transpose(x, dims)

    @staticmethod
    def samples():
        r = np.random.default_rng(4)
        return [((r.standard_normal((2, 3, 4)), 2, 0, 1), {})]


@tensor_method()
def permute(x: Tensor, *dims) -> Tensor:
    """Reorder dimensions (a view).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3, 4).permute(2, 0, 1).shape
        (4, 2, 3)
    """
    expect_tensor("permute", x)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if len(dims) != x.ndim:
        raise ValueError(
            f"permute: number of dims don't match: got {len(dims)} dims for a tensor of "
            f"{x.ndim} dimensions"
        )
    dims = tuple(_wrap_dim(d, x.ndim, "permute") for d in dims)
    if len(set(dims)) != len(dims):
        raise ValueError(f"permute: repeated dim in {dims}")
    if dims == tuple(range(x.ndim)):
        return x
    return apply(Permute, x, dims)


@tensor_method()
def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3).transpose(0, 1).shape
        (3, 2)
    """
    expect_tensor("transpose", x)
    if x.ndim == 0:
        _wrap_dim(dim0, 0, "transpose")
        _wrap_dim(dim1, 0, "transpose")
        return x
    d0 = _wrap_dim(dim0, x.ndim, "transpose")
    d1 = _wrap_dim(dim1, x.ndim, "transpose")
    dims = list(range(x.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, *dims)


@tensor_method()
def t(x: Tensor) -> Tensor:
    """Transpose of a matrix (0-d and 1-d tensors come back unchanged).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3).t().shape
        (3, 2)
    """
    expect_tensor("t", x)
    if x.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dimensions, but it has {x.ndim}")
    return x if x.ndim < 2 else transpose(x, 0, 1)


_SUMMED_DIRECTLY = (_dt.float32, _dt.float64)


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Sum g over the dimensions that broadcasting added or stretched, back to shape."""
    if g._shape == shape:
        return g
    from .reduce import sum as _sum

    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g._shape[lead + i] != 1
    )
    if dims and not _ag._mode.enabled and g.dtype in _SUMMED_DIRECTLY:
        # plain backward (no create_graph): the reduction kernel alone, no graph op, its
        # result laid out in the target shape at once
        from .reduce import run_reduce

        r = run_reduce(g, dims, True, "sum")
        return Tensor._make(r._storage, shape, None, 0, r.dtype, r._device, r._be)
    if dims:
        g = _sum(g, dim=dims, keepdim=True)
    if lead:
        g = reshape(g, *shape) if g._shape[lead:] == shape else reshape(g, *shape)
    return g if g._shape == shape else reshape(g, *shape)


__all__ = [
    "broadcast_to",
    "cast",
    "clone",
    "expand",
    "make_contiguous",
    "permute",
    "reshape",
    "sum_to",
    "t",
    "to_device",
    "transpose",
    "view",
]

Cast.fn = staticmethod(cast)
Clone.fn = staticmethod(clone)
View.fn = staticmethod(reshape)
Expand.fn = staticmethod(expand)
Permute.fn = staticmethod(permute)
ToDevice.fn = staticmethod(to_device)


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def onnx_reshape_target(in_shape: tuple, shape: tuple) -> list:
    """Reshape's shape input that follows a dynamic (batch) dim: 0 ("copy the input's dim")
    where the target dim equals the input dim at the same position, then -1 for the first
    remaining dim, so neither bakes in the traced size of a dim that it carries over."""
    target = [0 if i < len(in_shape) and d == in_shape[i] and d != 0 else d
              for i, d in enumerate(shape)]
    free = [i for i, d in enumerate(target) if d != 0]
    if free and all(shape[i] != 0 for i in free):
        target[free[0]] = -1
    return target


def _cast_onnx(cls, b, args, attrs, outs):
    from ..onnx._export import onnx_type

    b.node("Cast", [b.value(args[0])], outputs=outs, to=onnx_type(args[1]))


def _identity_onnx(cls, b, args, attrs, outs):
    b.node("Identity", [b.value(args[0])], outputs=outs)


def _view_onnx(cls, b, args, attrs, outs):
    x, shape = args[0], tuple(args[1])
    b.node("Reshape", [b.value(x), b.ints(onnx_reshape_target(x.shape, shape))], outputs=outs)


def _expand_onnx(cls, b, args, attrs, outs):
    x, shape = args[0], tuple(args[1])
    off = len(shape) - x.ndim
    target = [1 if i >= off and d == x.shape[i - off] else d for i, d in enumerate(shape)]
    b.node("Expand", [b.value(x), b.ints(target)], outputs=outs)


def _permute_onnx(cls, b, args, attrs, outs):
    b.node("Transpose", [b.value(args[0])], outputs=outs, perm=[int(d) for d in args[1]])


Cast.onnx_export = classmethod(_cast_onnx)
ToDevice.onnx_export = classmethod(_identity_onnx)
View.onnx_export = classmethod(_view_onnx)
Expand.onnx_export = classmethod(_expand_onnx)
Permute.onnx_export = classmethod(_permute_onnx)
