"""Indexing: gather/scatter along a dim, index_select/index_add, masks, nonzero, and the
Tensor's `[]` (getitem/setitem) with numpy's basic and advanced indexing rules.

Basic indexing (ints, slices, None, ...) is one strided view, the private `as_strided` op.
Its offsets and strides count elements of the input's row-major layout, so the op means the
same on any input layout and its backward (scatter into zeros) and double backward (the view
again) need nothing else. Advanced indexing merges the indexed dims and runs index_select on
linear indices; writes go through one scatter at linear positions.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim, contiguous_strides
from ._registry import (
    OpSpec,
    apply,
    broadcast_shapes,
    broadcast_strides,
    check_same_device,
    contiguous,
    copy_into,
    expect_tensor,
    host_decision,
    kernel,
    ptr,
    register,
    tensor_method,
)
from .elementwise import _run_binary, where
from .layout import cast, expand, reshape


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _outer_inner(shape, dim):
    return _prod(shape[:dim]), _prod(shape[dim + 1:])


def _scalar(value, like: Tensor) -> Tensor:
    return creation.scalar_tensor(value, _dt.int64, like._device)


# ---- index validation -------------------------------------------------------------------------


def _index_arg(op: str, index, x: Tensor) -> Tensor:
    """index as an int64 tensor on x's device (int32 is accepted and converted)."""
    if index.__class__ is not Tensor:
        raise TypeError(f"{op}: index must be a Tensor, got {type(index).__name__}")
    if index.dtype is _dt.int32:
        index = cast(index, _dt.int64)
    elif index.dtype is not _dt.int64:
        raise TypeError(f"{op}: expected an int64 (or int32) index tensor, got {index.dtype.name}")
    check_same_device(op, x, index)
    return index


def _min_max(idx: Tensor) -> tuple:
    # a backend whose memory numpy can see answers in microseconds without a kernel launch;
    # others reduce on the device and ship two numbers back
    if hasattr(idx._be, "view_numpy"):
        a = idx._numpy()
        return int(a.min()), int(a.max())
    from .reduce import amax, amin
    from .shape import stack

    lo, hi = stack([amin(idx), amax(idx)]).tolist()  # one round trip for both
    return int(lo), int(hi)


def _check_bounds(op: str, idx: Tensor, dim: int, n: int, wrap: bool) -> Tensor:
    """Raise IndexError for an index outside the dim; wrap negatives where the op allows."""
    if idx.numel() == 0:
        return idx
    lo_ok = -n if wrap else 0
    # under graph capture only these answers guard the replay, not the index values
    lo, hi = host_decision(lambda: _min_max(idx),
                           lambda v: (v[1] >= n or v[0] < lo_ok, v[0] < 0))
    if hi >= n or lo < lo_ok:
        bad = hi if hi >= n else lo
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension {dim} with size {n}")
    return where(idx < 0, idx + n, idx) if lo < 0 else idx


def _check_sizes(op: str, index_shape, shape, dim, what: str) -> None:
    for d, (a, b) in enumerate(zip(index_shape, shape)):
        if d != dim and a > b:
            raise ValueError(
                f"{op}: size does not match at dimension {d}: expected index {index_shape} to be "
                f"no larger than {what} {shape}" + (f" apart from dimension {dim}" if dim is not
                                                     None else "")
            )


# ---- the strided view behind basic indexing --------------------------------------------------


def _to_storage(x: Tensor, shape, strides, offset):
    """(shape, storage strides, storage offset) of the view that (strides, offset), counted in
    x's row-major layout, describe. Each stride must step along one dim of x (a basic index)."""
    if _prod(shape) == 0:
        return shape, contiguous_strides(shape), x._offset
    cs = contiguous_strides(x._shape)
    soff, rem = x._offset, offset
    for n, c, s in zip(x._shape, cs, x._strides):
        if n > 1:
            q, rem = divmod(rem, c)
            soff += q * s
    out = []
    for n, st in zip(shape, strides):
        if n == 1 or st == 0:
            out.append(0)
            continue
        for m, c, s in zip(x._shape, cs, x._strides):
            if m > 1 and c <= st < c * m and st % c == 0:
                out.append(st // c * s)
                break
        else:
            raise ValueError(f"as_strided: stride {st} steps along no dim of shape {x._shape}")
    return shape, tuple(out), soff


@register
class AsStrided(OpSpec):
    name = "as_strided"
    onnx = None

    @staticmethod
    def forward(ctx, x, shape, strides, offset):
        ctx.in_shape, ctx.view = x._shape, (shape, strides, offset)
        return x._view(*_to_storage(x, shape, strides, offset))

    @staticmethod
    def backward(ctx, g):
        return (apply(AsStridedBackward, g, ctx.in_shape, *ctx.view),)

    @staticmethod
    def reference(x, shape, strides, offset):
        flat = np.ascontiguousarray(x).reshape(-1)[offset:]
        st = tuple(s * flat.itemsize for s in strides)
        return np.lib.stride_tricks.as_strided(flat, shape, st).copy()

    @staticmethod
    def samples():
        x = np.random.default_rng(10).standard_normal((4, 5, 6))
        return [((x,), {"shape": (2, 1, 3), "strides": (30, 0, 2), "offset": 37}),
                ((x,), {"shape": (5,), "strides": (6,), "offset": 3})]


def as_strided(x: Tensor, shape, strides, offset: int = 0) -> Tensor:
    """A view of x; strides and offset count elements of x's row-major layout, and each stride
    must step along a single dim of x (what basic indexing produces)."""
    return apply(AsStrided, x, tuple(shape), tuple(strides), int(offset))


AsStrided.fn = staticmethod(as_strided)


@register
class AsStridedBackward(OpSpec):
    name = "as_strided_backward"
    onnx = None

    @staticmethod
    def forward(ctx, g, in_shape, shape, strides, offset):
        ctx.view = (shape, strides, offset)
        out = creation.zeros(in_shape, dtype=g.dtype, device=g.device)
        if g.numel():
            copy_into(g, out._view(*_to_storage(out, shape, strides, offset)))
        return out

    @staticmethod
    def backward(ctx, gg):
        return (apply(AsStrided, gg, *ctx.view),)

    @staticmethod
    def reference(g, in_shape, shape, strides, offset):
        out = np.zeros(in_shape, dtype=g.dtype)
        flat = out.reshape(-1)[offset:]
        st = tuple(s * flat.itemsize for s in strides)
        np.lib.stride_tricks.as_strided(flat, shape, st)[...] = g
        return out

    @staticmethod
    def samples():
        g = np.random.default_rng(11).standard_normal((2, 3))
        return [((g,), {"in_shape": (4, 5, 6), "shape": (2, 3), "strides": (30, 2),
                        "offset": 37})]


def as_strided_backward(g: Tensor, in_shape, shape, strides, offset: int = 0) -> Tensor:
    """Zeros of in_shape with g written at the as_strided view (shape, strides, offset)."""
    return apply(AsStridedBackward, g, tuple(in_shape), tuple(shape), tuple(strides),
                 int(offset))


AsStridedBackward.fn = staticmethod(as_strided_backward)


def _narrow_to(t: Tensor, shape, keep_dim=None) -> Tensor:
    """The leading block of t with index shape `shape` (t's own size kept at keep_dim)."""
    target = tuple(t._shape[d] if d == keep_dim else n for d, n in enumerate(shape))
    if target == t._shape:
        return t
    return apply(AsStrided, t, target, contiguous_strides(t._shape), 0)


# ---- gather / scatter along a dim ------------------------------------------------------------


def _scatter_into(out: Tensor, dim: int, index: Tensor, src: Tensor, op: str) -> None:
    """Run st_scatter(_add) into the fresh contiguous out; index and src share a shape no
    larger than out's apart from dim."""
    if not index.numel():
        return
    ish = index._shape
    sub = tuple(out._shape[d] if d == dim else n for d, n in enumerate(ish))
    view = out if sub == out._shape else out._view(sub, out._strides, 0)
    target = contiguous(view)
    outer, inner = _outer_inner(ish, dim)
    kernel(out, op)(ptr(contiguous(src)), ptr(contiguous(index)), ptr(target), outer,
                    sub[dim], ish[dim], inner)
    if target is not view:
        copy_into(target, view)


def _fresh_copy(x: Tensor) -> Tensor:
    out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
    copy_into(x, out)
    return out


@register
class Gather(OpSpec):
    name = "gather"
    dtypes = ("float16", "bfloat16", "float32", "float64")
    onnx = "GatherElements"

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.dim, ctx.in_shape = dim, x._shape
        ctx.save_for_backward(index)
        out = Tensor._empty(index._shape, x.dtype, x._device, x._be)
        if out.numel():
            outer, inner = _outer_inner(index._shape, dim)
            kernel(x, "gather")(ptr(contiguous(x)), ptr(contiguous(index)), ptr(out), outer,
                                x._shape[dim], index._shape[dim], inner)
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = creation.zeros(ctx.in_shape, dtype=g.dtype, device=g.device)
        return apply(ScatterAdd, zeros, ctx.dim, index, g), None, None

    @staticmethod
    def reference(x, dim, index, *, sparse_grad=False):
        sl = tuple(slice(None) if d == dim % x.ndim else slice(0, n)
                   for d, n in enumerate(index.shape))
        return np.take_along_axis(x[sl], index, axis=dim)

    @staticmethod
    def samples():
        r = np.random.default_rng(12)
        return [((r.standard_normal((3, 4)), 1, r.integers(0, 4, (3, 5))), {}),
                ((r.standard_normal((4, 5, 2)), 0, r.integers(0, 4, (2, 3, 2))), {}),
                ((r.standard_normal((4, 5)), -1, r.integers(0, 5, (4, 0))), {})]


def _gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    return apply(Gather, _narrow_to(x, index._shape, dim), dim, index)


@tensor_method()
def gather(x: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """out[i][j][k] = x[index[i][j][k]][j][k] (for dim=0): pick along dim at each position.

    Example:
        >>> import singa_tensor as st
        >>> st.gather(st.tensor([[1, 2], [3, 4]]), 1, st.tensor([[1, 1], [0, 1]])).tolist()
        [[2, 2], [3, 4]]
    """
    expect_tensor("gather", x)
    index = _index_arg("gather", index, x)
    if x.ndim == 0 and index.ndim <= 1:
        _wrap_dim(dim, 0, "gather")
        return reshape(gather(reshape(x, 1), 0, reshape(index, -1)), *index._shape)
    d = _wrap_dim(dim, x.ndim, "gather")
    if index.ndim != x.ndim:
        raise ValueError(f"gather: index {index._shape} must have as many dims as input "
                         f"{x._shape}")
    _check_sizes("gather", index._shape, x._shape, d, "input")
    index = _check_bounds("gather", index, d, x._shape[d], wrap=False)
    return _gather(x, d, index)


Gather.fn = staticmethod(gather)


def _scatter_args(op: str, x, dim, index, src):
    expect_tensor(op, x)
    index = _index_arg(op, index, x)
    d = _wrap_dim(dim, x.ndim, op)
    if index.ndim != max(x.ndim, 1) and not (x.ndim == 0 and index.ndim == 0):
        raise ValueError(f"{op}: index {index._shape} must have as many dims as input "
                         f"{x._shape}")
    if src.__class__ is not Tensor:
        if not isinstance(src, (int, float, bool, np.number)):
            raise TypeError(f"{op}: src must be a Tensor or a number, got {type(src).__name__}")
        src = creation.full(index._shape, src, dtype=x.dtype, device=x.device)
    if src.dtype is not x.dtype:
        raise TypeError(f"{op}: expected src of dtype {x.dtype.name} like the input, got "
                        f"{src.dtype.name}")
    check_same_device(op, x, src)
    if src.ndim != index.ndim:
        raise ValueError(f"{op}: index {index._shape} must have as many dims as src "
                         f"{src._shape}")
    _check_sizes(op, index._shape, src._shape, None, "src")
    if x.ndim == 0:
        return x, d, index, src, True
    _check_sizes(op, index._shape, x._shape, d, "input")
    index = _check_bounds(op, index, d, x._shape[d], wrap=False)
    return x, d, index, _narrow_to(src, index._shape), False


def _scatter_0d(fn, x, index, src):
    return reshape(fn(reshape(x, 1), 0, reshape(index, 1), reshape(src, 1)))


@register
class Scatter(OpSpec):
    name = "scatter"
    dtypes = ("float16", "bfloat16", "float32", "float64")
    onnx = "ScatterElements"

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim = dim
        ctx.save_for_backward(index)
        out = _fresh_copy(x)
        _scatter_into(out, dim, index, src, "scatter")
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gx = gs = None
        if ctx.needs_input_grad[0]:
            zeros = creation.zeros(index._shape, dtype=g.dtype, device=g.device)
            gx = apply(Scatter, g, ctx.dim, index, zeros)
        if ctx.needs_input_grad[3]:
            gs = _gather(g, ctx.dim, index)
        return gx, None, None, gs

    @staticmethod
    def reference(x, dim, index, src):
        out = x.copy()
        for pos in np.ndindex(*index.shape):
            dst = list(pos)
            dst[dim] = index[pos]
            out[tuple(dst)] = src[pos] if isinstance(src, np.ndarray) else src
        return out

    @staticmethod
    def samples():
        r = np.random.default_rng(13)
        perm = np.stack([r.permutation(5)[:3] for _ in range(4)], 1)  # no repeats: grads exact
        return [((r.standard_normal((5, 4)), 0, perm, r.standard_normal((3, 4))), {}),
                ((r.standard_normal((6, 5)), 0, perm[:, :2], r.standard_normal((4, 3))), {}),
                ((r.standard_normal((3, 4)), 1, perm[:3, :1].T % 4, 2.5), {})]


@tensor_method(inplace="scatter_", inplace_kind="inplace")
def scatter(x: Tensor, dim: int, index: Tensor, src=None, *, value=None) -> Tensor:
    """A copy of x with src (a tensor, or a number) written at index along dim:
    out[index[i][j]][j] = src[i][j] for dim=0.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(3).scatter(0, st.tensor([2, 0]), st.tensor([5.0, 6.0])).tolist()
        [6.0, 0.0, 5.0]
    """
    if src is None:
        src = value
    x, d, index, src, zero_d = _scatter_args("scatter", x, dim, index, src)
    if zero_d:
        return _scatter_0d(scatter, x, index, src)
    return apply(Scatter, x, d, index, src)


Scatter.fn = staticmethod(scatter)


@register
class ScatterAdd(OpSpec):
    name = "scatter_add"
    dtypes = ("float16", "bfloat16", "float32", "float64")
    onnx = "ScatterElements"

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim = dim
        ctx.save_for_backward(index)
        out = _fresh_copy(x)
        _scatter_into(out, dim, index, src, "scatter_add")
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gs = _gather(g, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return g, None, None, gs

    @staticmethod
    def reference(x, dim, index, src):
        out = x.copy()
        for pos in np.ndindex(*index.shape):
            dst = list(pos)
            dst[dim] = index[pos]
            out[tuple(dst)] += src[pos]
        return out

    @staticmethod
    def samples():
        r = np.random.default_rng(14)
        return [((r.standard_normal((3, 4)), 1, r.integers(0, 4, (3, 6)),
                  r.standard_normal((3, 6))), {}),
                ((r.standard_normal((4, 5)), 0, r.integers(0, 4, (6, 2)),
                  r.standard_normal((7, 3))), {})]


@tensor_method(inplace="scatter_add_", inplace_kind="inplace")
def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of x with src added at index along dim (repeated indices accumulate).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(3).scatter_add(0, st.tensor([2, 2]), st.tensor([5.0, 6.0])).tolist()
        [0.0, 0.0, 11.0]
    """
    expect_tensor("scatter_add", src, "src")
    x, d, index, src, zero_d = _scatter_args("scatter_add", x, dim, index, src)
    if zero_d:
        return _scatter_0d(scatter_add, x, index, src)
    return apply(ScatterAdd, x, d, index, src)


ScatterAdd.fn = staticmethod(scatter_add)


# ---- index_select / index_add -----------------------------------------------------------------


def _vector_index(op: str, x: Tensor, dim, index) -> tuple:
    index = _index_arg(op, index, x)
    if index.ndim > 1:
        raise ValueError(f"{op}: index must be a vector (0-d or 1-d), got shape {index._shape}")
    d = _wrap_dim(dim, x.ndim, op)
    n = x._shape[d] if x.ndim else 1
    index = _check_bounds(op, index, d, n, wrap=False)
    return d, contiguous(reshape(index, -1))


@register
class IndexSelect(OpSpec):
    name = "index_select"
    dtypes = ("float16", "bfloat16", "float32", "float64")
    onnx = "Gather"

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.dim, ctx.in_shape = dim, x._shape
        ctx.save_for_backward(index)
        shape = x._shape[:dim] + (index._shape[0],) + x._shape[dim + 1:]
        out = Tensor._empty(shape, x.dtype, x._device, x._be)
        if out.numel():
            outer, inner = _outer_inner(x._shape, dim)
            kernel(x, "index_select")(ptr(contiguous(x)), ptr(index), ptr(out), outer,
                                      x._shape[dim], index._shape[0], inner)
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = creation.zeros(ctx.in_shape, dtype=g.dtype, device=g.device)
        return apply(IndexAdd, zeros, ctx.dim, index, g), None, None

    @staticmethod
    def reference(x, dim, index):
        return np.take(x, index.reshape(-1), axis=dim)

    @staticmethod
    def samples():
        r = np.random.default_rng(15)
        return [((r.standard_normal((4, 3)), 0, np.array([3, 0, 3, 1])), {}),
                ((r.standard_normal((2, 5, 3)), -2, np.array([4, 4])), {}),
                ((r.standard_normal((2, 5)), 1, np.zeros(0, np.int64)), {})]


@tensor_method()
def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of x at the positions in the 1-d index along dim.

    Example:
        >>> import singa_tensor as st
        >>> st.index_select(st.tensor([[1, 2], [3, 4]]), 0, st.tensor([1, 1])).tolist()
        [[3, 4], [3, 4]]
    """
    expect_tensor("index_select", x)
    d, index = _vector_index("index_select", x, dim, index)
    if x.ndim == 0:
        x = reshape(x, 1)
    return apply(IndexSelect, x, d, index)


IndexSelect.fn = staticmethod(index_select)


@register
class IndexAdd(OpSpec):
    name = "index_add"
    dtypes = ("float16", "bfloat16", "float32", "float64")
    onnx = None

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim = dim
        ctx.save_for_backward(index)
        out = _fresh_copy(x)
        if index.numel() and out.numel():
            outer, inner = _outer_inner(x._shape, dim)
            kernel(x, "index_add")(ptr(contiguous(src)), ptr(index), ptr(out), outer,
                                   x._shape[dim], index._shape[0], inner)
        return out

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gs = apply(IndexSelect, g, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return g, None, None, gs

    @staticmethod
    def reference(x, dim, index, source, *, alpha=1):
        out = x.copy()
        moved = np.moveaxis(out, dim, 0)
        np.add.at(moved, index.reshape(-1), np.moveaxis(source, dim, 0) * alpha)
        return out

    @staticmethod
    def samples():
        r = np.random.default_rng(16)
        return [((r.standard_normal((4, 3)), 0, np.array([3, 0, 3]),
                  r.standard_normal((3, 3))), {}),
                ((r.standard_normal((2, 5)), 1, np.array([1, 4]), r.standard_normal((2, 2))),
                 {"alpha": 2.0})]


@tensor_method(inplace="index_add_", inplace_kind="inplace")
def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of x with alpha * source added at the positions in the 1-d index along dim.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(3).index_add(0, st.tensor([0, 0]), st.tensor([1.0, 2.0])).tolist()
        [3.0, 0.0, 0.0]
    """
    expect_tensor("index_add", x)
    expect_tensor("index_add", source, "source")
    d, index = _vector_index("index_add", x, dim, index)
    if x.ndim == 0:
        return reshape(index_add(reshape(x, 1), 0, index, reshape(source, -1), alpha=alpha))
    want = x._shape[:d] + (index._shape[0],) + x._shape[d + 1:]
    if source._shape != want:
        raise ValueError(f"index_add: source must have shape {want} for input {x._shape} and "
                         f"{index._shape[0]} indices along dim {d}, got {source._shape}")
    if source.dtype is not x.dtype:
        raise TypeError(f"index_add: expected source of dtype {x.dtype.name}, got "
                        f"{source.dtype.name}")
    check_same_device("index_add", x, source)
    if alpha != 1:
        source = source * alpha
    return apply(IndexAdd, x, d, index, source)


IndexAdd.fn = staticmethod(index_add)


# ---- masks and nonzero ------------------------------------------------------------------------


def _flat_nonzero(mask: Tensor) -> Tensor:
    """Row-major positions of the true elements of a bool tensor, as 1-d int64."""
    mc = contiguous(mask)
    n = mc.numel()
    out = Tensor._empty((n,), _dt.int64, mask._device, mask._be)
    count = kernel(mc, "nonzero")(ptr(mc), n, ptr(out), n) if n else 0
    return out._view((count,), (1,), 0)


def _unravel(flat: Tensor, shape) -> list:
    """Per-dim coordinates of row-major positions (no division by zero: dims here are > 0)."""
    cols = []
    for n, c in zip(shape, contiguous_strides(shape)):
        col = flat if c == 1 else _run_binary(flat, _scalar(c, flat), "floor_divide")
        if col is not flat or len(cols):
            col = _run_binary(col, _scalar(n, flat), "remainder")
        cols.append(col)
    return cols


@register
class Nonzero(OpSpec):
    name = "nonzero"
    onnx = "NonZero"
    differentiable = False
    dtypes = ("float64", "int64", "bool")

    @staticmethod
    def forward(ctx, x):
        flat = _flat_nonzero(x if x.dtype is _dt.bool_ else cast(x, _dt.bool_))
        count = flat._shape[0]
        out = Tensor._empty((count, x.ndim), _dt.int64, x._device, x._be)
        if count and x.ndim:
            for k, col in enumerate(_unravel(flat, x._shape)):
                copy_into(col, out._view((count,), (x.ndim,), k))
        return out

    @staticmethod
    def reference(x, *, as_tuple=False):
        return tuple(np.nonzero(x)) if as_tuple else np.argwhere(x).astype(np.int64)

    @staticmethod
    def samples():
        r = np.random.default_rng(17)
        a = r.integers(-1, 2, (3, 4)).astype(np.float64)
        return [((a,), {}), ((a > 0,), {}), ((a[0],), {"as_tuple": True}),
                ((np.zeros((2, 0)),), {})]


@tensor_method()
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """Coordinates of the non-zero elements: an (n, x.ndim) int64 tensor, or with as_tuple one
    1-d tensor per dim (usable as an index).

    Example:
        >>> import singa_tensor as st
        >>> st.nonzero(st.tensor([[0, 3], [5, 0]])).tolist()
        [[0, 1], [1, 0]]
    """
    expect_tensor("nonzero", x)
    out = apply(Nonzero, x)
    if not as_tuple:
        return out
    n, nd = out._shape
    # through apply: a traced view, so ONNX export reads each column off the NonZero node
    return tuple(apply(AsStrided, out, (n,), (nd,), k) for k in range(nd))


Nonzero.fn = staticmethod(nonzero)


def _bool_mask(op: str, mask, x: Tensor) -> Tensor:
    if mask.__class__ is not Tensor or mask.dtype is not _dt.bool_:
        got = mask.dtype.name if mask.__class__ is Tensor else type(mask).__name__
        raise TypeError(f"{op}: expected a bool tensor for mask, got {got}")
    check_same_device(op, x, mask)
    return mask


@register
class MaskedSelect(OpSpec):
    name = "masked_select"
    onnx = None
    composite = True

    @staticmethod
    def reference(x, mask):
        xb, mb = np.broadcast_arrays(x, mask)
        return xb[mb]

    @staticmethod
    def samples():
        r = np.random.default_rng(18)
        return [((r.standard_normal((3, 4)), r.standard_normal((3, 4)) > 0), {}),
                ((r.standard_normal((3, 1)), r.standard_normal((2, 1, 4)) > 0), {})]


@tensor_method()
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of x where mask (broadcast with x) is true, as a 1-d tensor.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1, -2], [-3, 4]])
        >>> st.masked_select(x, x > 0).tolist()
        [1, 4]
    """
    expect_tensor("masked_select", x)
    mask = _bool_mask("masked_select", mask, x)
    shape = broadcast_shapes(x._shape, mask._shape, op="masked_select")
    mb = mask._view(shape, broadcast_strides(mask, shape), mask._offset)
    return apply(IndexSelect, reshape(expand(x, *shape), -1), 0, _flat_nonzero(mb))


MaskedSelect.fn = staticmethod(masked_select)


@register
class TakeAlongDim(OpSpec):
    name = "take_along_dim"
    onnx = None
    composite = True

    @staticmethod
    def reference(x, indices, dim=None):
        if dim is None:
            return np.take_along_axis(x.reshape(-1), indices.reshape(-1), 0)
        return np.take_along_axis(x, indices, dim)

    @staticmethod
    def samples():
        r = np.random.default_rng(19)
        return [((r.standard_normal((3, 4)), r.integers(0, 4, (3, 2)), 1), {}),
                ((r.standard_normal((3, 1)), r.integers(0, 3, (2, 5)), 0), {}),
                ((r.standard_normal((3, 4)), r.integers(0, 12, (5,))), {})]


@tensor_method()
def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """gather with the non-indexed dims of x and indices broadcast (flattened when dim=None).

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[10, 30, 20]])
        >>> st.take_along_dim(x, st.tensor([[0, 2, 1]]), dim=1).tolist()
        [[10, 20, 30]]
    """
    expect_tensor("take_along_dim", x)
    indices = _index_arg("take_along_dim", indices, x)
    if dim is None:
        return gather(reshape(x, -1), 0, reshape(indices, -1))
    d = _wrap_dim(dim, x.ndim, "take_along_dim")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_dim: input {x._shape} and indices {indices._shape} should "
                         "have the same number of dimensions")
    rest = broadcast_shapes(x._shape[:d] + (1,) + x._shape[d + 1:],
                            indices._shape[:d] + (1,) + indices._shape[d + 1:],
                            op="take_along_dim")
    x = expand(x, *(rest[:d] + (x._shape[d],) + rest[d + 1:]))
    indices = expand(indices, *(rest[:d] + (indices._shape[d],) + rest[d + 1:]))
    return gather(x, d, indices)


TakeAlongDim.fn = staticmethod(take_along_dim)




# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _gather_onnx(cls, b, args, attrs, outs):
    x, dim, index = args
    b.node(cls.onnx, [b.value(x), b.value(index)], outputs=outs, axis=int(dim))


def _scatter_onnx(cls, b, args, attrs, outs):
    x, dim, index, src = args
    reduction = None
    if cls is ScatterAdd:
        if b.opset < 16:
            return NotImplemented  # ScatterElements adds repeated indices from opset 16 only
        reduction = "add"
    b.node("ScatterElements", [b.value(x), b.value(index), b.value(src)], outputs=outs,
           axis=int(dim), reduction=reduction)


def _nonzero_onnx(cls, b, args, attrs, outs):
    # ONNX NonZero gives (ndim, count); ours is (count, ndim)
    (nz,) = b.node("NonZero", [b.value(args[0])])
    b.node("Transpose", [nz], outputs=outs, perm=[1, 0])


IndexSelect.onnx_export = classmethod(_gather_onnx)
Gather.onnx_export = classmethod(_gather_onnx)
Scatter.onnx_export = classmethod(_scatter_onnx)
ScatterAdd.onnx_export = classmethod(_scatter_onnx)
Nonzero.onnx_export = classmethod(_nonzero_onnx)

__all__ = ["gather", "index_add", "index_select", "masked_select", "nonzero", "scatter",
           "scatter_add", "take_along_dim"]
