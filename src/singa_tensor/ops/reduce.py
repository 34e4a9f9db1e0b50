"""Reductions over dimensions: each reduced set of dims is brought to the kernels' canonical
[outer, n, inner] form (a free view when the dims are adjacent, one copy otherwise)."""

from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import OpSpec, apply, contiguous, expect_tensor, kernel, ptr, register
from .layout import cast, expand, permute, reshape


def normalize_dims(op: str, x: Tensor, dim) -> tuple:
    """dim (None, int or tuple of ints) as a sorted tuple of distinct non-negative dims."""
    nd = x.ndim
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(d, nd, op) for d in dim)
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} appears multiple times in the list of dims")
        if nd == 0:
            return ()
        return tuple(sorted(dims))
    d = _wrap_dim(dim, nd, op)
    return (d,) if nd else ()


def reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def canonical(x: Tensor, dims: tuple):
    """(contiguous tensor, outer, n, inner) such that reducing its middle axis of
    [outer, n, inner] reduces x over dims."""
    shape = x._shape
    if not dims:
        return contiguous(x), x.numel(), 1, 1
    lo, hi = dims[0], dims[-1]
    if hi - lo + 1 == len(dims):  # adjacent dims: a view of the contiguous data
        xc = contiguous(x)
        outer = int(np.prod(shape[:lo], dtype=np.int64))
        n = int(np.prod(shape[lo:hi + 1], dtype=np.int64))
        inner = int(np.prod(shape[hi + 1:], dtype=np.int64))
        return xc, outer, n, inner
    kept = [i for i in range(len(shape)) if i not in dims]
    with_grad_off = x._alias()
    xp = contiguous(permute(with_grad_off, *(kept + list(dims))))
    outer = int(np.prod([shape[i] for i in kept], dtype=np.int64))
    n = int(np.prod([shape[i] for i in dims], dtype=np.int64))
    return xp, outer, n, 1


def run_reduce(x: Tensor, dims: tuple, keepdim: bool, op: str, out_dtype=None, *extra):
    xc, outer, n, inner = canonical(x, dims)
    out = Tensor._empty(reduced_shape(x._shape, dims, keepdim), out_dtype or x.dtype, x._device,
                        x._be)
    if out.numel():
        kernel(x, op)(ptr(xc), ptr(out), outer, n, inner, *extra)
    return out


def grad_expand(g: Tensor, in_shape: tuple, dims: tuple, keepdim: bool) -> Tensor:
    """Broadcast a reduction's output gradient back over the reduced dims."""
    if not keepdim:
        g = reshape(g, *reduced_shape(in_shape, dims, True))
    return expand(g, *in_shape)


def _sum_dtype(x: Tensor):
    return _dt.int64 if x.dtype in (_dt.bool_, _dt.int32) else x.dtype


@register
class Sum(OpSpec):
    name = "sum"
    onnx = "ReduceSum"
    kind = "reduce"
    dtypes = ("float32", "float64", "int32", "int64")

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        return run_reduce(x, dims, keepdim, "sum")

    @staticmethod
    def backward(ctx, g):
        return (grad_expand(g, ctx.in_shape, ctx.dims, ctx.keepdim),)

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        r = np.sum(x, axis=dim, keepdims=keepdim)
        return r.astype(np.int64) if x.dtype in (np.int32, np.bool_) else r


def sum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over dim (an int, a tuple, or None for all dims).

    Example:
        >>> import singa_tensor as st
        >>> st.sum(st.ones(2, 3), dim=1).tolist()
        [3.0, 3.0]
    """
    expect_tensor("sum", x)
    dims = normalize_dims("sum", x, dim)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    elif x.dtype in (_dt.bool_, _dt.int32):
        x = cast(x, _dt.int64)
    elif x.dtype in (_dt.float16, _dt.bfloat16):
        return cast(sum(cast(x, _dt.float32), dim, keepdim), x.dtype)
    return apply(Sum, x, dims, bool(keepdim))


Sum.fn = staticmethod(sum)


def mean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over dim (float tensors).

    Example:
        >>> import singa_tensor as st
        >>> st.mean(st.tensor([[1.0, 3.0]]), dim=-1).tolist()
        [2.0]
    """
    expect_tensor("mean", x)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"mean: could not infer output dtype; input dtype must be floating point, got "
            f"{x.dtype.name} (pass dtype=st.float32)"
        )
    dims = normalize_dims("mean", x, dim)
    n = 1
    for d in dims:
        n *= x._shape[d]
    return sum(x, dims, keepdim) * (1.0 / n if n else float("nan"))


@register
class Mean(OpSpec):
    name = "mean"
    onnx = "ReduceMean"
    kind = "reduce"
    composite = True

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.mean(x, axis=dim, keepdims=keepdim)


Mean.fn = staticmethod(mean)


__all__ = ["mean", "sum"]
