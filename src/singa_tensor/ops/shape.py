"""Shape ops: views that pick or rearrange dimensions (squeeze, unsqueeze, slice, select),
joins and splits (cat, stack, split, chunk, unbind), and copies that rearrange data (flip,
roll, repeat, tril/triu, one_hot, pad).

The primitives are few: the views `squeeze`, `unsqueeze`, `slice` and `select`, plus `cat`,
`flip`, `slice_backward` and three private pad kernels. Everything else is a composition of
those and of the layout ops, so its gradient comes from theirs.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import creation
from ..tensor import Tensor, _wrap_dim
from ._registry import (
    REGISTRY,
    OpSpec,
    apply,
    check_same_device,
    copy_into,
    expect_tensor,
    register,
    tensor_method,
    traced,
)
from .layout import clone, expand, permute, reshape, transpose
from .layout import view as _view
from .reduce import normalize_dims


def _ints(op: str, values, what: str = "sizes") -> tuple:
    """*args or a single tuple/list of ints as a tuple of ints."""
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = tuple(values[0])
    for v in values:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"{op}: {what} must be ints, got {type(v).__name__} in {values}")
    return tuple(int(v) for v in values)


def _as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def _np_index(ndim: int, dim: int, index) -> tuple:
    return (slice(None),) * (dim % ndim) + (index,)


def _composite(name, onnx, fn, reference, samples, differentiable=True, dtypes=None):
    spec = type("".join(p.title() for p in name.split("_")), (OpSpec,), {
        "name": name, "onnx": onnx, "composite": True, "differentiable": differentiable,
        "fn": staticmethod(fn), "reference": staticmethod(reference),
        "samples": staticmethod(samples),
    })
    if dtypes:
        spec.dtypes = dtypes
    return register(spec)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- squeeze / unsqueeze -----------------------------------------------------------------------


@register
class Squeeze(OpSpec):
    name = "squeeze"
    onnx = "Squeeze"

    @staticmethod
    def forward(ctx, x, dims):
        ctx.in_shape = x._shape
        keep = [i for i in range(x.ndim) if i not in dims]
        return x._view(tuple(x._shape[i] for i in keep), tuple(x._strides[i] for i in keep),
                       x._offset)

    @staticmethod
    def backward(ctx, g):
        return (reshape(g, *ctx.in_shape),)

    @staticmethod
    def reference(x, dim=None):
        if dim is None:
            return np.squeeze(x)
        if x.ndim == 0:
            return x.copy()
        axes = tuple(d % x.ndim for d in _as_tuple(dim) if x.shape[d] == 1)
        return np.squeeze(x, axis=axes)

    @staticmethod
    def samples():
        return [((_rand(2, 1, 3, 1),), {}), ((_rand(2, 1, 3, 1),), {"dim": -1}),
                ((_rand(2, 1, 3, 1),), {"dim": (1, 2)}), ((_rand(),), {"dim": 0}),
                ((_rand(1, 1),), {})]


@tensor_method()
def squeeze(x: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """Drop dimensions of size 1 (all of them, or those in dim; other sizes are left alone).
    A view.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 1, 3, 1).squeeze().shape, st.zeros(2, 1, 3, 1).squeeze(-1).shape
        ((2, 3), (2, 1, 3))
    """
    expect_tensor("squeeze", x)
    dims = normalize_dims("squeeze", x, dim)
    dims = tuple(d for d in dims if x._shape[d] == 1)
    return apply(Squeeze, x, dims) if dims else x


@register
class Unsqueeze(OpSpec):
    name = "unsqueeze"
    onnx = "Unsqueeze"

    @staticmethod
    def forward(ctx, x, dim):
        ctx.in_shape = x._shape
        # any stride is valid for a size-1 dim; this one keeps contiguous tensors contiguous
        stride = x._strides[dim] * x._shape[dim] if dim < x.ndim else 1
        return x._view(x._shape[:dim] + (1,) + x._shape[dim:],
                       x._strides[:dim] + (stride,) + x._strides[dim:], x._offset)

    @staticmethod
    def backward(ctx, g):
        return (reshape(g, *ctx.in_shape),)

    @staticmethod
    def reference(x, dim):
        return np.expand_dims(x, dim)

    @staticmethod
    def samples():
        return [((_rand(2, 3), 0), {}), ((_rand(2, 3), -1), {}), ((_rand(2, 3), 1), {}),
                ((_rand(), 0), {})]


@tensor_method()
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a dimension of size 1 at dim (negative dims count from the end of the result).
    A view.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3).unsqueeze(1).shape, st.zeros(2, 3).unsqueeze(-1).shape
        ((2, 1, 3), (2, 3, 1))
    """
    expect_tensor("unsqueeze", x)
    return apply(Unsqueeze, x, _wrap_dim(dim, x.ndim + 1, "unsqueeze"))


# ---- slice / select ----------------------------------------------------------------------------


def _slice_raw(x: Tensor, dim: int, start: int, stop: int, step: int) -> Tensor:
    """x[..., start:stop:step, ...] on dim as a raw view (no autograd); arguments normalized."""
    n = len(range(start, stop, step))
    shape = x._shape[:dim] + (n,) + x._shape[dim + 1:]
    strides = x._strides[:dim] + (x._strides[dim] * step,) + x._strides[dim + 1:]
    return x._view(shape, strides, x._offset + start * x._strides[dim] if n else x._offset)


@register
class Slice(OpSpec):
    name = "slice"
    onnx = "Slice"

    @staticmethod
    def forward(ctx, x, dim, start, stop, step):
        ctx.args = (x._shape, dim, start, stop, step)
        return _slice_raw(x, dim, start, stop, step)

    @staticmethod
    def backward(ctx, g):
        return (apply(SliceBackward, g, *ctx.args),)

    @staticmethod
    def reference(x, dim, start=None, stop=None, step=1):
        return x[_np_index(x.ndim, dim, slice(start, stop, step))].copy()

    @staticmethod
    def samples():
        x = _rand(4, 5, 3)
        return [((x, 1, 1, 4), {}), ((x, -1, 0, None, 2), {}), ((x, 0, -3, -1), {}),
                ((x, 2, 5, 9), {}), ((_rand(7), 0, None, None, 3), {})]


def slice_view(x: Tensor, dim: int, start: int | None = None, stop: int | None = None,
               step: int = 1) -> Tensor:
    """x[..., start:stop:step, ...] along dim as a view sharing x's storage, with Python's
    slice rules (None for an open end, negative positions count from the end, out-of-range
    bounds are clipped). step must be positive. This is the view behind basic slicing,
    narrow, split and chunk; its gradient scatters into zeros of x's shape.

    Example:
        >>> import singa_tensor as st
        >>> st.slice_view(st.arange(10), 0, 1, None, 3).tolist()
        [1, 4, 7]
    """
    expect_tensor("slice", x)
    if x.ndim == 0:
        raise IndexError("slice: cannot slice a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "slice")
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool)):
            raise TypeError(f"slice: {name} must be an int or None, got {type(v).__name__}")
    if step is None:
        step = 1
    if step <= 0:
        raise ValueError(f"slice: step must be greater than zero, got {step}")
    start, stop, step = slice(start, stop, step).indices(x._shape[d])
    return apply(Slice, x, d, start, max(stop, start), step)


@register
class SliceBackward(OpSpec):
    """Zeros of the sliced tensor's shape with g written into the slice: the gradient of
    `slice`, and a linear map whose own gradient is `slice` again."""

    name = "slice_backward"
    onnx = None

    @staticmethod
    def forward(ctx, g, in_shape, dim, start, stop, step):
        ctx.args = (dim, start, stop, step)
        out = creation.zeros(in_shape, dtype=g.dtype, device=g._device)
        if g.numel():
            copy_into(g, _slice_raw(out, dim, start, stop, step))
        return out

    @staticmethod
    def backward(ctx, gg):
        return (apply(Slice, gg, *ctx.args),)

    @staticmethod
    def reference(g, in_shape, dim, start, stop, step):
        out = np.zeros(in_shape, dtype=g.dtype)
        out[_np_index(len(in_shape), dim, slice(start, stop, step))] = g
        return out

    @staticmethod
    def samples():
        return [((_rand(4, 2), (4, 5), 1, 1, 4, 2), {}), ((_rand(1, 3), (3, 3), 0, 2, 3, 1), {})]


def _slice_backward(g: Tensor, in_shape: tuple, dim: int, start: int, stop: int,
                    step: int) -> Tensor:
    """Zeros of in_shape with g written at [..., start:stop:step, ...] along dim (normalized
    bounds): the gradient of slice_view.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.shape import _slice_backward
        >>> _slice_backward(st.ones(2), (5,), 0, 1, 5, 2).tolist()
        [0.0, 1.0, 0.0, 1.0, 0.0]
    """
    return apply(SliceBackward, expect_tensor("slice_backward", g), tuple(in_shape), dim, start,
                 stop, step)


@tensor_method()
def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The view x[..., start:start+length, ...] along dim (start may be negative).

    Example:
        >>> import singa_tensor as st
        >>> st.arange(6).narrow(0, 2, 3).tolist()
        [2, 3, 4]
    """
    expect_tensor("narrow", x)
    if x.ndim == 0:
        raise IndexError("narrow: cannot narrow a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "narrow")
    start, length = _ints("narrow", (start, length), "start and length")
    n = x._shape[d]
    if not -n <= start <= n:
        raise IndexError(f"narrow: start ({start}) is out of range for dimension {d} of size {n}")
    start = start + n if start < 0 else start
    if length < 0:
        raise ValueError(f"narrow: length must be non-negative, got {length}")
    if start + length > n:
        raise ValueError(
            f"narrow: start ({start}) + length ({length}) exceeds dimension {d} of size {n}")
    return apply(Slice, x, d, start, start + length, 1)


@register
class Select(OpSpec):
    name = "select"
    onnx = "Gather"

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.args = (x._shape, dim, index)
        return x._view(x._shape[:dim] + x._shape[dim + 1:],
                       x._strides[:dim] + x._strides[dim + 1:],
                       x._offset + index * x._strides[dim])

    @staticmethod
    def backward(ctx, g):
        in_shape, dim, index = ctx.args
        return (apply(SliceBackward, unsqueeze(g, dim), in_shape, dim, index, index + 1, 1),)

    @staticmethod
    def reference(x, dim, index):
        return x[_np_index(x.ndim, dim, index)].copy()

    @staticmethod
    def samples():
        return [((_rand(3, 4), 0, 1), {}), ((_rand(3, 4), -1, -1), {}), ((_rand(5), 0, 2), {})]


@tensor_method()
def select(x: Tensor, dim: int, index: int) -> Tensor:
    """x[..., index, ...] along dim: a view with that dimension removed.

    Example:
        >>> import singa_tensor as st
        >>> st.select(st.arange(6).reshape(2, 3), 1, -1).tolist()
        [2, 5]
    """
    expect_tensor("select", x)
    if x.ndim == 0:
        raise IndexError("select: cannot be applied to a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "select")
    (index,) = _ints("select", (index,), "index")
    n = x._shape[d]
    if not -n <= index < n:
        raise IndexError(f"select: index {index} is out of range for dimension {d} of size {n}")
    return apply(Select, x, d, index % n)


@tensor_method()
def unbind(x: Tensor, dim: int = 0) -> tuple:
    """The slices of x along dim, each with that dimension removed (views).

    Example:
        >>> import singa_tensor as st
        >>> [t.tolist() for t in st.arange(4).reshape(2, 2).unbind(1)]
        [[0, 2], [1, 3]]
    """
    expect_tensor("unbind", x)
    if x.ndim == 0:
        raise IndexError("unbind: cannot be applied to a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "unbind")
    if x._shape[d] == 0:
        return ()
    return apply(Unbind, x, d)


@register
class Unbind(OpSpec):
    """Every slice of x along dim as a view, in one graph node: backward stacks the slices'
    gradients (one new tensor), where one select per slice would scatter each gradient into
    zeros of x's full shape and add them up."""

    name = "unbind"
    onnx = None

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        shape = x._shape[:dim] + x._shape[dim + 1:]
        strides = x._strides[:dim] + x._strides[dim + 1:]
        step = x._strides[dim]
        return tuple(x._view(shape, strides, x._offset + i * step)
                     for i in range(x._shape[dim]))

    @staticmethod
    def backward(ctx, *grads):
        return stack(list(grads), ctx.dim), None

    @staticmethod
    def reference(x, dim=0):
        return tuple(a.copy() for a in np.moveaxis(x, dim, 0))

    @staticmethod
    def samples():
        x = _rand(2, 3, 4)
        return [((x,), {}), ((x, -1), {}), ((x, 1), {}), ((_rand(5),), {})]


# ---- cat / stack / split -----------------------------------------------------------------------


@register
class Cat(OpSpec):
    name = "cat"
    onnx = "Concat"

    @staticmethod
    def forward(ctx, *tensors, dim):
        sizes = tuple(t._shape[dim] for t in tensors)
        t0 = tensors[0]
        shape = t0._shape[:dim] + (sum(sizes),) + t0._shape[dim + 1:]
        out = Tensor._empty(shape, t0.dtype, t0._device, t0._be)
        pos = 0
        for t, n in zip(tensors, sizes):
            if t.numel():
                copy_into(t, _slice_raw(out, dim, pos, pos + n, 1))
            pos += n
        ctx.dim, ctx.sizes = dim, sizes
        return out

    @staticmethod
    def backward(ctx, g):
        grads, pos = [], 0
        for n, need in zip(ctx.sizes, ctx.needs_input_grad):
            grads.append(apply(Slice, g, ctx.dim, pos, pos + n, 1) if need else None)
            pos += n
        return tuple(grads)

    @staticmethod
    def samples():
        return [((_rand(2, 3), _rand(1, 3, seed=1)), {}),
                ((_rand(2, 3), _rand(2, 1, seed=1), _rand(2, 2, seed=2)), {"dim": -1}),
                ((_rand(4),), {"dim": 0})]


def _tensor_list(op: str, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of Tensors, got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__} at position {i}")
    check_same_device(op, *tensors)
    t0 = tensors[0]
    for i, t in enumerate(tensors):
        if t.dtype is not t0.dtype:
            raise TypeError(f"{op}: expected all tensors to have the same dtype, got "
                            f"{t0.dtype.name} (tensor 0) and {t.dtype.name} (tensor {i})")
    return list(tensors)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension; all other sizes must match. (As in PyTorch,
    1-d empty tensors are skipped.)

    Example:
        >>> import singa_tensor as st
        >>> st.cat([st.zeros(2, 3), st.ones(1, 3)]).shape
        (3, 3)
    """
    tensors = _tensor_list("cat", tensors)
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise ValueError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                             "concatenated")
    tensors = [t for t in tensors if t._shape != (0,)] or tensors[:1]
    t0 = tensors[0]
    d = _wrap_dim(dim, t0.ndim, "cat")
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != t0.ndim:
            raise ValueError(f"cat: tensors must have the same number of dimensions, got shapes "
                             f"{t0._shape} (tensor 0) and {t._shape} (tensor {i})")
        for k in range(t0.ndim):
            if k != d and t._shape[k] != t0._shape[k]:
                raise ValueError(
                    f"cat: sizes of tensors must match except in dimension {d}; got shapes "
                    f"{t0._shape} (tensor 0) and {t._shape} (tensor {i}), mismatch in "
                    f"dimension {k}")
    return apply(Cat, *tensors, dim=d)




def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join same-shaped tensors along a new dimension.

    Example:
        >>> import singa_tensor as st
        >>> st.stack([st.zeros(2, 3), st.ones(2, 3)], dim=1).shape
        (2, 2, 3)
    """
    tensors = _tensor_list("stack", tensors)
    s0 = tensors[0]._shape
    for i, t in enumerate(tensors):
        if t._shape != s0:
            raise ValueError(f"stack: expects each tensor to be equal size, but got {s0} at "
                             f"entry 0 and {t._shape} at entry {i}")
    d = _wrap_dim(dim, len(s0) + 1, "stack")
    return apply(Cat, *[apply(Unsqueeze, t, d) for t in tensors], dim=d)


def _variadic(fn):
    """fn(list, dim) as fn(*tensors, dim=...): the registry's calling convention (tests pass
    tensors positionally; ONNX's Concat takes variadic inputs)."""
    def call(*tensors, dim: int = 0) -> Tensor:
        return fn(list(tensors), dim)

    call.__name__, call.__doc__ = fn.__name__, fn.__doc__
    return staticmethod(call)


Cat.fn = _variadic(cat)
Cat.reference = staticmethod(lambda *tensors, dim=0: np.concatenate(tensors, axis=dim))


def _split_sizes(op: str, x: Tensor, d: int, split_size_or_sections) -> tuple:
    n = x._shape[d]
    if isinstance(split_size_or_sections, (tuple, list)):
        sizes = _ints(op, (tuple(split_size_or_sections),), "split sizes")
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"{op}: split sizes {sizes} must be non-negative and sum to the "
                             f"size of dimension {d} ({n})")
        return sizes
    (size,) = _ints(op, (split_size_or_sections,), "split_size")
    if size < 0 or (size == 0 and n != 0):
        raise ValueError(f"{op}: split_size must be positive (it can only be 0 if dimension "
                         f"{d} has size 0), got {size}")
    if n == 0:
        return (0,)
    return (size,) * (n // size) + ((n % size,) if n % size else ())


@tensor_method()
def split(x: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple:
    """Split x along dim into views of split_size each (the last may be smaller), or into
    pieces of the given sizes.

    Example:
        >>> import singa_tensor as st
        >>> [t.tolist() for t in st.arange(5).split(2)]
        [[0, 1], [2, 3], [4]]
    """
    expect_tensor("split", x)
    if x.ndim == 0:
        raise IndexError("split: cannot split a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "split")
    out, pos = [], 0
    for s in _split_sizes("split", x, d, split_size_or_sections):
        out.append(apply(Slice, x, d, pos, pos + s, 1))
        pos += s
    return tuple(out)


@tensor_method()
def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split x into `chunks` views of equal size ceil(n / chunks) along dim (the last may be
    smaller, and there may be fewer pieces, as in PyTorch).

    Example:
        >>> import singa_tensor as st
        >>> [t.shape for t in st.zeros(6, 2).chunk(4)]
        [(2, 2), (2, 2), (2, 2)]
    """
    expect_tensor("chunk", x)
    (chunks,) = _ints("chunk", (chunks,), "chunks")
    if chunks <= 0:
        raise ValueError(f"chunk: number of chunks must be greater than 0, got {chunks}")
    if x.ndim == 0:
        raise IndexError("chunk: cannot chunk a 0-d tensor")
    d = _wrap_dim(dim, x.ndim, "chunk")
    n = x._shape[d]
    if n == 0:
        return split(x, (0,) * chunks, d)
    return split(x, -(-n // chunks), d)


def _np_split(x, sizes, dim):
    return tuple(a.copy() for a in np.split(x, np.cumsum(sizes)[:-1].astype(int), axis=dim))


def _split_reference(x, split_size_or_sections, dim=0):
    n = x.shape[dim]
    s = split_size_or_sections
    sizes = list(s) if isinstance(s, (list, tuple)) else [s] * (n // s) + [n % s] * bool(n % s)
    return _np_split(x, sizes, dim)


def _chunk_reference(x, chunks, dim=0):
    size = -(-x.shape[dim] // chunks)
    return _split_reference(x, size, dim)


# ---- copies that rearrange data ----------------------------------------------------------------


@register
class Flip(OpSpec):
    name = "flip"
    onnx = None

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        if out.numel():
            strides, off = list(x._strides), x._offset
            for d in dims:
                off += (x._shape[d] - 1) * strides[d]
                strides[d] = -strides[d]
            copy_into(x._view(x._shape, tuple(strides), off), out)
        return out

    @staticmethod
    def backward(ctx, g):
        return (apply(Flip, g, ctx.dims),)

    @staticmethod
    def reference(x, dims):
        return np.flip(x, axis=dims).copy() if x.ndim else x.copy()

    @staticmethod
    def samples():
        return [((_rand(2, 3, 4), (0, 2)), {}), ((_rand(2, 3), -1), {}), ((_rand(5), [0]), {}),
                ((_rand(), ()), {})]


@tensor_method()
def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """Reverse the order of elements along dims (a copy).

    Example:
        >>> import singa_tensor as st
        >>> st.arange(4).reshape(2, 2).flip(1).tolist()
        [[1, 0], [3, 2]]
    """
    expect_tensor("flip", x)
    dims = normalize_dims("flip", x, _as_tuple(dims))
    return apply(Flip, x, dims)


@tensor_method()
def roll(x: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Tensor:
    """Shift elements cyclically along dims (over the flattened tensor when dims is None).

    Example:
        >>> import singa_tensor as st
        >>> st.arange(5).roll(2).tolist()
        [3, 4, 0, 1, 2]
    """
    expect_tensor("roll", x)
    shifts = _ints("roll", (shifts,), "shifts")
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: shifts {shifts} need dims of the same length")
        return reshape(roll(reshape(x, -1), shifts, 0), *x._shape)
    dims = tuple(_wrap_dim(d, x.ndim, "roll") for d in _as_tuple(dims))
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts and dims must align, got shifts {shifts} and dims {dims}")
    y = x
    for s, d in zip(shifts, dims):
        n = y._shape[d] if y.ndim else 1
        s = s % n if n else 0
        if s:
            y = cat([apply(Slice, y, d, n - s, n, 1), apply(Slice, y, d, 0, n - s, 1)], d)
    return clone(x) if y is x else y


@tensor_method()
@traced("flatten")
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one (a view when the layout allows).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3, 4).flatten(1).shape
        (2, 12)
    """
    expect_tensor("flatten", x)
    s = _wrap_dim(start_dim, x.ndim, "flatten")
    e = _wrap_dim(end_dim, x.ndim, "flatten")
    if x.ndim == 0:
        return reshape(x, 1)
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) cannot come after end_dim "
                         f"({end_dim}) for a tensor of {x.ndim} dimensions")
    merged = math.prod(x._shape[s:e + 1])
    return reshape(x, *(x._shape[:s] + (merged,) + x._shape[e + 1:]))


def _flatten_reference(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:])


@tensor_method()
def repeat(x: Tensor, *sizes) -> Tensor:
    """Tile x: dimension i is repeated sizes[i] times (extra leading sizes add dimensions).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    expect_tensor("repeat", x)
    sizes = _ints("repeat", sizes)
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than "
                         f"the number of dimensions of the tensor ({x.ndim})")
    if any(r < 0 for r in sizes):
        raise ValueError(f"repeat: repeats must be non-negative, got {sizes}")
    shape = (1,) * (len(sizes) - x.ndim) + x._shape
    # [.., 1, n, ..] expanded to [.., r, n, ..] and merged: each block repeated r times
    pairs = tuple(v for n in shape for v in (1, n))
    big = tuple(v for r, n in zip(sizes, shape) for v in (r, n))
    y = reshape(expand(reshape(x, *pairs), *big), *(r * n for r, n in zip(sizes, shape)))
    return clone(y) if y._storage is x._storage else y  # repeat always copies, as in PyTorch


@tensor_method()
def tile(x: Tensor, dims: Sequence[int]) -> Tensor:
    """numpy's tile: like repeat, but fewer dims than x.ndim repeat the trailing dimensions.

    Example:
        >>> import singa_tensor as st
        >>> st.tile(st.zeros(2, 3), (2,)).shape
        (2, 6)
    """
    expect_tensor("tile", x)
    dims = _ints("tile", (_as_tuple(dims),), "dims")
    return repeat(x, *((1,) * (x.ndim - len(dims)) + dims))


@tensor_method("movedim", "moveaxis")
def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
            ) -> Tensor:
    """Move dimensions source to positions destination; the others keep their order. A view.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3, 4).movedim(0, -1).shape
        (3, 4, 2)
    """
    expect_tensor("movedim", x)
    src, dst = _as_tuple(source), _as_tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {src} and destination {dst} must have the same "
                         "number of dimensions")
    src = tuple(_wrap_dim(d, x.ndim, "movedim") for d in src)
    dst = tuple(_wrap_dim(d, x.ndim, "movedim") for d in dst)
    for name, dims, given in (("source", src, source), ("destination", dst, destination)):
        if len(set(dims)) != len(dims):
            raise ValueError(f"movedim: repeated dim in {name} {given}")
    if x.ndim == 0:
        return x
    order = [-1] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    order = [next(rest) if o < 0 else o for o in order]
    return permute(x, *order)


moveaxis = movedim


@tensor_method("swapaxes", "swapdims")
def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    """Swap two dimensions (numpy's name for transpose). A view.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 3, 4).swapaxes(0, 2).shape
        (4, 3, 2)
    """
    return transpose(x, axis0, axis1)


swapdims = swapaxes


@tensor_method()
def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """expand(x) to other's shape.

    Example:
        >>> import singa_tensor as st
        >>> st.ones(3).expand_as(st.zeros(2, 3)).shape
        (2, 3)
    """
    return expand(x, *expect_tensor("expand_as", other, "other")._shape)


@tensor_method()
def view_as(x: Tensor, other: Tensor) -> Tensor:
    """view(x) with other's shape (never copies).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(6).view_as(st.zeros(2, 3)).shape
        (2, 3)
    """
    return _view(x, *expect_tensor("view_as", other, "other")._shape)


@tensor_method()
def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """reshape(x) to other's shape.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(6).reshape_as(st.zeros(3, 2)).shape
        (3, 2)
    """
    return reshape(x, *expect_tensor("reshape_as", other, "other")._shape)


# ---- composites: the registry's view of the public functions above ------------------------------

Squeeze.fn = staticmethod(squeeze)
Unsqueeze.fn = staticmethod(unsqueeze)
Slice.fn = staticmethod(slice_view)
SliceBackward.fn = staticmethod(_slice_backward)
Select.fn = staticmethod(select)
Unbind.fn = staticmethod(unbind)
Flip.fn = staticmethod(flip)

_x234 = _rand(2, 3, 4)
_composite("narrow", "Slice", narrow,
           lambda x, dim, start, length: x[_np_index(
               x.ndim, dim, slice(start % x.shape[dim], start % x.shape[dim] + length))].copy(),
           lambda: [((_x234, 1, 1, 2), {}), ((_x234, -1, -3, 3), {}), ((_x234, 0, 2, 0), {})])
_composite("stack", None, stack, lambda *tensors, dim=0: np.stack(tensors, axis=dim),
           lambda: [((_rand(2, 3), _rand(2, 3, seed=1)), {}),
                    ((_rand(2, 3), _rand(2, 3, seed=1)), {"dim": -1}),
                    ((_rand(), _rand(seed=1)), {})]).fn = _variadic(stack)
_composite("split", "Split", split, _split_reference,
           lambda: [((_x234, 2, -1), {}), ((_x234, [1, 2], 1), {}), ((_rand(5), 2), {})])
_composite("chunk", None, chunk, _chunk_reference,
           lambda: [((_x234, 3, -1), {}), ((_rand(6, 2), 4), {}), ((_rand(5), 2), {})])
_composite("flatten", "Flatten", flatten, _flatten_reference,
           lambda: [((_x234,), {}), ((_x234, 1), {}), ((_x234, 0, -2), {}), ((_rand(),), {})])
_composite("repeat", "Tile", repeat, lambda x, *sizes: np.tile(x, _ints("repeat", sizes)),
           lambda: [((_rand(2, 3), 2, 1), {}), ((_rand(2, 3), 2, 1, 3), {}),
                    ((_rand(), 3), {}), ((_rand(3), (2, 2)), {})])
_composite("tile", "Tile", tile, lambda x, dims: np.tile(x, dims),
           lambda: [((_rand(2, 3), (2,)), {}), ((_rand(2, 3), (2, 1, 2)), {})])
_composite("roll", None, roll, lambda x, shifts, dims=None: np.roll(x, shifts, dims),
           lambda: [((_x234, 1), {}), ((_x234, (1, -2), (0, 2)), {}), ((_x234, 5, -2), {}),
                    ((_rand(), 1), {})])
_composite("movedim", None, movedim, np.moveaxis,
           lambda: [((_x234, 0, -1), {}), ((_x234, (0, 1), (2, 0)), {})])
_composite("swapaxes", None, swapaxes, np.swapaxes, lambda: [((_x234, 0, -1), {})])
_composite("expand_as", "Expand", expand_as, lambda x, other: np.broadcast_to(
    x, other.shape).copy(), lambda: [((_rand(3, 1), _rand(2, 3, 4)), {})])
_composite("view_as", "Reshape", view_as, lambda x, other: x.reshape(other.shape),
           lambda: [((_rand(6), _rand(2, 3)), {})])
_composite("reshape_as", "Reshape", reshape_as, lambda x, other: x.reshape(other.shape),
           lambda: [((_rand(6), _rand(3, 2)), {})])
__all__ = [
    "cat", "chunk", "expand_as", "flatten", "flip", "moveaxis", "movedim", "narrow",
    "repeat", "reshape_as", "roll", "select", "slice_view", "split", "squeeze", "stack",
    "swapaxes", "swapdims", "tile", "unbind", "unsqueeze", "view_as",
]


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------

_INT64_MAX = 2**63 - 1


def onnx_axes_node(b, op: str, x: str, axes, outs=1):
    """Squeeze/Unsqueeze: axes an attribute before opset 13, an input from 13; returns the
    output name."""
    axes = [int(a) for a in axes]
    if b.opset >= 13:
        return b.node(op, [x, b.ints(axes)], outputs=outs)[0]
    return b.node(op, [x], outputs=outs, axes=axes)[0]


_axes_node = onnx_axes_node


def _squeeze_onnx(cls, b, args, attrs, outs):
    _axes_node(b, "Squeeze", b.value(args[0]), sorted(args[1]), outs)


def _unsqueeze_onnx(cls, b, args, attrs, outs):
    _axes_node(b, "Unsqueeze", b.value(args[0]), [args[1]], outs)


def _slice_onnx(cls, b, args, attrs, outs):
    x, d, start, stop, step = args
    # a slice to the end stays one after a dynamic dim changes size
    end = _INT64_MAX if stop >= x.shape[d] else stop
    b.node("Slice", [b.value(x), b.ints([start]), b.ints([end]), b.ints([d]), b.ints([step])],
           outputs=outs)


def _select_onnx(cls, b, args, attrs, outs):
    x, d, index = args
    idx = b.const(np.asarray(index, dtype=np.int64))
    b.node("Gather", [b.value(x), idx], outputs=outs, axis=int(d))


def _cat_onnx(cls, b, args, attrs, outs):
    b.node("Concat", [b.value(t) for t in args], outputs=outs, axis=int(attrs["dim"]))


def _flatten_onnx(cls, b, args, attrs, outs):
    x = args["x"]
    s = args["start_dim"] % max(x.ndim, 1)
    e = args["end_dim"] % max(x.ndim, 1)
    if x.ndim < 2 or s != 1 or e != x.ndim - 1:
        return NotImplemented  # ONNX Flatten always gives 2-d: exported as its Reshape
    b.node("Flatten", [b.value(x)], outputs=outs, axis=1)


Squeeze.onnx_export = classmethod(_squeeze_onnx)
Unsqueeze.onnx_export = classmethod(_unsqueeze_onnx)
Slice.onnx_export = classmethod(_slice_onnx)
def _unbind_onnx(cls, b, args, attrs, outs):
    x, d = args
    for i, out in enumerate(outs):
        b.node("Gather", [b.value(x), b.const(np.asarray(i, dtype=np.int64))], outputs=[out],
               axis=int(d))


Select.onnx_export = classmethod(_select_onnx)
Unbind.onnx_export = classmethod(_unbind_onnx)
Cat.onnx_export = classmethod(_cat_onnx)
REGISTRY["flatten"].onnx_export = classmethod(_flatten_onnx)
