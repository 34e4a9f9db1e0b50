"""Ordering along one dim: sort, argsort and topk, all through one kernel (st_sort) that writes
the first k entries of each ordered line of the canonical [outer, n, inner] view.

The kernels always sort stably (equal keys keep ascending index order, for ascending and
descending alike), which satisfies both stable=True and stable=False, and topk takes the lower
index first among ties. NaN counts as larger than every number, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import OpSpec, apply, expect_tensor, kernel, ptr, register, tensor_method
from .index import ScatterAdd
from .layout import cast
from .reduce import _LOW, ValuesIndices, canonical

# ---- validation ---------------------------------------------------------------------------------


def _flag(op: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def _dim(op: str, x: Tensor, dim) -> int:
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a single int, got {type(dim).__name__} {dim!r}")
    return _wrap_dim(dim, x.ndim, op)


def _size(x: Tensor, d: int) -> int:
    return x._shape[d] if x.ndim else 1


def _k(x: Tensor, d: int, k) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, (bool, np.bool_)):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__} {k!r}")
    n = _size(x, d)
    if not 0 <= k <= n:
        raise ValueError(
            f"topk: k = {int(k)} is out of range for dimension {d} of size {n} (input shape "
            f"{x._shape}); expected 0 <= k <= {n}")
    return int(k)


# ---- the kernel call ----------------------------------------------------------------------------


def _run_sort(x: Tensor, d: int, k: int, descending: bool) -> tuple:
    """(values, indices): the first k entries of each line along d, in order. A 0-d input is
    one line of one element (its value and index 0)."""
    xc, outer, n, inner = canonical(x, (d,) if x.ndim else ())
    shape = x._shape[:d] + (k,) + x._shape[d + 1:] if x.ndim else ()
    k = k if x.ndim else 1
    values = Tensor._empty(shape, x.dtype, x._device, x._be)
    indices = Tensor._empty(shape, _dt.int64, x._device, x._be)
    if values.numel():
        kernel(x, "sort")(ptr(xc), ptr(values), ptr(indices), outer, n, inner, k,
                          int(descending))
    return values, indices


def _scatter_back(ctx, g: Tensor) -> Tensor:
    """The gradient of x: g written at the indices along dim into zeros of x's shape (a
    ScatterAdd, whose own backward is a gather, so double backward works)."""
    if not ctx.in_shape:
        return g
    if g.dtype in _LOW:  # placed through float32: exact, every position is written once
        return cast(_scatter_back(ctx, cast(g, _dt.float32)), g.dtype)
    zeros = _cr.zeros(ctx.in_shape, dtype=g.dtype, device=g.device)
    return apply(ScatterAdd, zeros, ctx.d, ctx.indices, g)


class _Ordered(OpSpec):
    kind = "custom"  # one int dim and flags, not the dims the generic reduce tests draw
    dtypes = ("bool", "int32", "int64", "float16", "bfloat16", "float32", "float64")

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        return (_scatter_back(ctx, g),)


def _keep(ctx, x: Tensor, d: int, indices: Tensor) -> None:
    ctx.in_shape, ctx.d = x._shape, d
    # a plain attribute, as max/min keep theirs: an int64 tensor has no place among the
    # saved tensors that come back attached to the graph
    ctx.indices = indices._alias()


# ---- numpy references ---------------------------------------------------------------------------


def _np_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """A stable order along axis, NaN largest (numpy's argsort already puts it last); for
    descending, the stable ascending order of the reversed line, read backwards, which keeps
    equal keys in ascending index order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    rev = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return n - 1 - np.flip(rev, axis)


def _np_sorted(x: np.ndarray, dim: int, k: int | None, descending: bool) -> tuple:
    if x.ndim == 0:
        return x.copy(), np.array(0, dtype=np.int64)
    axis = dim % x.ndim
    order = _np_order(x, axis, descending)
    if k is not None:
        order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.int64)


# ---- sort ---------------------------------------------------------------------------------------


@register
class Sort(_Ordered):
    name = "sort"
    onnx = "TopK"

    @staticmethod
    def forward(ctx, x, d, descending):
        values, indices = _run_sort(x, d, _size(x, d), descending)
        _keep(ctx, x, d, indices)
        return values, indices

    @staticmethod
    def reference(x, dim=-1, descending=False, stable=False):
        return _np_sorted(x, dim, None, descending)


@tensor_method()
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """The values along dim in order, and where each came from: a named tuple (values,
    indices). The sort is always stable (equal values keep their order) and NaN sorts as the
    largest value. Values carry the gradient.

    Example:
        >>> import singa_tensor as st
        >>> r = st.sort(st.tensor([3.0, 1.0, 2.0]))
        >>> r.values.tolist(), r.indices.tolist()
        ([1.0, 2.0, 3.0], [1, 2, 0])
    """
    expect_tensor("sort", x)
    d = _dim("sort", x, dim)
    descending = _flag("sort", "descending", descending)
    _flag("sort", "stable", stable)
    return ValuesIndices(*apply(Sort, x, d, descending))


Sort.fn = staticmethod(sort)


# ---- argsort ------------------------------------------------------------------------------------


@register
class Argsort(OpSpec):
    name = "argsort"
    onnx = "TopK"
    kind = "custom"
    differentiable = False
    dtypes = _Ordered.dtypes

    @staticmethod
    def forward(ctx, x, d, descending):
        return _run_sort(x, d, _size(x, d), descending)[1]

    @staticmethod
    def reference(x, dim=-1, descending=False, stable=False):
        return _np_sorted(x, dim, None, descending)[1]


@tensor_method()
def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices (int64) that sort x along dim: sort(x, dim, descending).indices.

    Example:
        >>> import singa_tensor as st
        >>> st.argsort(st.tensor([[3, 1, 2]]), descending=True).tolist()
        [[0, 2, 1]]
    """
    expect_tensor("argsort", x)
    d = _dim("argsort", x, dim)
    descending = _flag("argsort", "descending", descending)
    _flag("argsort", "stable", stable)
    # not detached: a detached input would reach the ONNX tracer as a constant
    return apply(Argsort, x, d, descending)


Argsort.fn = staticmethod(argsort)


# ---- topk ---------------------------------------------------------------------------------------


@register
class Topk(_Ordered):
    name = "topk"
    onnx = "TopK"

    @staticmethod
    def forward(ctx, x, d, k, largest):
        values, indices = _run_sort(x, d, k, largest)
        _keep(ctx, x, d, indices)
        return values, indices

    @staticmethod
    def reference(x, k, dim=-1, largest=True, sorted=True):
        return _np_sorted(x, dim, k, largest)


@tensor_method()
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The k largest (or smallest) values along dim, in order, and their indices: a named
    tuple (values, indices). Among equal values the lower index comes first; NaN counts as
    the largest value. The result is always sorted. Values carry the gradient.

    Example:
        >>> import singa_tensor as st
        >>> r = st.topk(st.tensor([1.0, 5.0, 3.0, 5.0]), 2)
        >>> r.values.tolist(), r.indices.tolist()
        ([5.0, 5.0], [1, 3])
    """
    expect_tensor("topk", x)
    d = _dim("topk", x, dim)
    k = _k(x, d, k)
    largest = _flag("topk", "largest", largest)
    _flag("topk", "sorted", sorted)
    return ValuesIndices(*apply(Topk, x, d, k, largest))


Topk.fn = staticmethod(topk)


# ---- test samples -------------------------------------------------------------------------------


def _distinct(r, shape):
    """Values without ties, so that the order (and with it the gradient) is well defined."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((r.permutation(n) - n / 2) * 0.25 + 0.1).reshape(shape)


def _sort_samples():
    r = np.random.default_rng(21)
    return [((_distinct(r, (3, 4)),), {}),
            ((_distinct(r, (2, 5, 3)),), {"dim": 1, "descending": True}),
            ((_distinct(r, (4, 3)),), {"dim": 0, "stable": True}),
            ((_distinct(r, (6,)),), {"dim": -1, "descending": True}),
            ((_distinct(r, ()),), {})]


def _topk_samples():
    r = np.random.default_rng(22)
    return [((_distinct(r, (3, 5)), 2), {}),
            ((_distinct(r, (2, 5, 3)), 3), {"dim": 1, "largest": False}),
            ((_distinct(r, (4, 3)), 4), {"dim": 0}),
            ((_distinct(r, (6,)), 1), {"largest": False, "sorted": False}),
            ((_distinct(r, (2, 3)), 0), {"dim": 1}),
            ((_distinct(r, ()), 1), {})]


Sort.samples = staticmethod(_sort_samples)
Argsort.samples = staticmethod(_sort_samples)
Topk.samples = staticmethod(_topk_samples)


# ---- ONNX forms (OpSpec.onnx_export) ------------------------------------------------------------


def _topk_node(b, x: Tensor, d: int, k: int, largest: bool, outs) -> object:
    """One TopK node (k an int64 input from opset 10; largest and sorted from opset 11)."""
    if x.ndim == 0:  # TopK wants rank >= 1: the value itself and index 0
        b.node("Identity", [b.value(x)], outputs=outs[:1])
        b.node("Identity", [b.const(np.zeros((), dtype=np.int64))], outputs=outs[1:])
        return None
    if b.opset < 10 or (b.opset < 11 and not largest):
        return NotImplemented
    attrs = {"axis": int(d)}
    if b.opset >= 11:
        attrs.update(largest=int(largest), sorted=1)
    k = k() if callable(k) else k  # emitted only once the node is known to be written
    b.node("TopK", [b.value(x), b.ints([k]) if isinstance(k, int) else k], outputs=outs,
           **attrs)
    return None


def _whole_dim(b, x: Tensor, d: int):
    """k for a full sort: the size of dim d, read from the shape at run time, so a sorted dim
    that is dynamic (dynamic_axes) exports right; an int for a 0-d input."""
    if x.ndim == 0:
        return 1
    (shape,) = b.node("Shape", [b.value(x)])
    (n,) = b.node("Gather", [shape, b.ints([d])], axis=0)
    return n


def _sort_onnx(cls, b, args, attrs, outs):
    x, d, descending = args
    return _topk_node(b, x, d, lambda: _whole_dim(b, x, d), descending, outs)


def _argsort_onnx(cls, b, args, attrs, outs):
    x, d, descending = args
    return _topk_node(b, x, d, lambda: _whole_dim(b, x, d), descending,
                      [b.fresh("values"), *outs])


def _topk_onnx(cls, b, args, attrs, outs):
    x, d, k, largest = args
    return _topk_node(b, x, d, k, largest, outs)


Sort.onnx_export = classmethod(_sort_onnx)
Argsort.onnx_export = classmethod(_argsort_onnx)
Topk.onnx_export = classmethod(_topk_onnx)

__all__ = ["argsort", "sort", "topk"]
