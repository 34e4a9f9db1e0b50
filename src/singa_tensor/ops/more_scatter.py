"""Index writes of PyTorch's surface, compositions of existing ops (gather, scatter,
scatter_add, index_select, argsort, where) so they run on every backend and take their
gradients from the parts: take, index_copy, index_fill, scatter_reduce, select_scatter,
slice_scatter, masked_scatter, put and renorm.
"""

from __future__ import annotations

import math

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import (
    broadcast_shapes as _bshapes,
)
from ._registry import (
    check_same_device,
    composite,
    expect_tensor,
)
from .elementwise import where
from .index import (
    _check_bounds,
    _index_arg,
    index_select,
    nonzero,
    scatter,
    scatter_add,
)
from .layout import cast, expand
from .more_shape import _arange, _int, _rand
from .padding import pad
from .shape import cat, movedim, narrow
from .sort import argsort

# ---- index reads and writes --------------------------------------------------------------------


def _take_ref(x, index):
    return np.take(x, index)


@composite("take", _take_ref, method=True, samples=lambda: [
    ((_rand(3, 4), np.array([[0, 11], [-1, 5]])), {}), ((_rand(5), np.array(2)), {})])
def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of input, taken as 1-d, at flat positions index (negatives count from the
    end); the result has index's shape.

    Example:
        >>> import singa_tensor as st
        >>> st.take(st.tensor([[1, 2], [3, 4]]), st.tensor([0, 3])).tolist()
        [1, 4]
    """
    expect_tensor("take", input)
    index = _index_arg("take", index, input)
    flat = input.reshape(-1)
    idx = _check_bounds("take", index.reshape(-1), 0, flat._shape[0], True)
    return index_select(flat, 0, idx).reshape(*index._shape)


def _dim_index(op: str, x: Tensor, dim, index) -> tuple:
    expect_tensor(op, x)
    d = _wrap_dim(dim, x.ndim, op)
    index = _index_arg(op, index, x)
    if index.ndim > 1:
        raise IndexError(f"{op}: index should have at most 1 dimension, got shape {index._shape}")
    n = x._shape[d] if x.ndim else 1
    return d, _check_bounds(op, index.reshape(-1), d, n, False)


def _index_copy_ref(x, dim, index, source):
    out = x.copy()
    sl = [slice(None)] * x.ndim
    for i, j in enumerate(index):
        sl[dim] = j
        out[tuple(sl)] = np.take(source, i, axis=dim)
    return out


@composite("index_copy", _index_copy_ref, method=True, inplace=True, samples=lambda: [
    ((_rand(5, 3), 0, np.array([4, 0, 2]), _rand(3, 3, seed=1)), {}),
    ((_rand(2, 4), -1, np.array([1]), _rand(2, 1, seed=1)), {})])
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of input whose slices index[i] along dim are source's slices i.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(3).index_copy(0, st.tensor([2, 0]), st.tensor([5.0, 6.0])).tolist()
        [6.0, 0.0, 5.0]
    """
    d, idx = _dim_index("index_copy", input, dim, index)
    expect_tensor("index_copy", source, "source")
    want = input._shape[:d] + (idx._shape[0],) + input._shape[d + 1:] if input.ndim else ()
    if source._shape != want and not (input.ndim == 0 and source.numel() == 1):
        raise ValueError(f"index_copy: source should have shape {want}, got {source._shape} "
                         f"(input {input._shape}, {idx._shape[0]} indices along dim {d})")
    if input.ndim == 0:
        return where(creation.tensor(idx.numel() > 0, device=input._device),
                     source.reshape(()), input)
    shape = [1] * input.ndim
    shape[d] = -1
    src = source if source.dtype is input.dtype else cast(source, input.dtype)
    return scatter(input, d, expand(idx.reshape(*shape), *want), src)


def _index_fill_ref(x, dim, index, value):
    out = x.copy()
    sl = [slice(None)] * x.ndim
    sl[dim] = index
    out[tuple(sl)] = value
    return out


@composite("index_fill", _index_fill_ref, method=True, inplace=True, samples=lambda: [
    ((_rand(4, 3), 0, np.array([3, 1]), 2.5), {}), ((_rand(2, 3), 1, np.array([0, 0]), -1.0), {}),
    ((_rand(2, 3), 1, np.array([2]), _rand(seed=4)), {})])
def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of input with the slices index along dim set to value (a number or a 0-d
    tensor).

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 2).index_fill(1, st.tensor([1]), 7.0).tolist()
        [[0.0, 7.0], [0.0, 7.0]]
    """
    d, idx = _dim_index("index_fill", input, dim, index)
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ValueError(f"index_fill: only supports a 0-dimensional value tensor, got shape "
                         f"{value._shape}")
    n = input._shape[d] if input.ndim else 1
    hit = scatter(creation.zeros(n, dtype=_dt.bool_, device=input._device), 0, idx,
                  creation.ones(idx._shape, dtype=_dt.bool_, device=input._device))
    shape = [1] * input.ndim
    if input.ndim:
        shape[d] = n
    mask = hit.reshape(*shape)
    if isinstance(value, Tensor):
        return where(mask, cast(value, input.dtype) if value.dtype is not input.dtype
                     else value, input)
    return input.masked_fill(mask, value)


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_ref(x, dim, index, src, reduce, *, include_self=True):
    out = x.astype(np.float64).copy()
    groups: dict = {}
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        dst[dim] = index[pos]
        groups.setdefault(tuple(dst), []).append(src[pos])
    fn = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}
    for dst, vals in groups.items():
        out[dst] = fn[reduce](vals + ([x[dst]] if include_self else []))
    return out.astype(x.dtype)


def _scatter_reduce_samples():
    r = np.random.default_rng(9)
    idx = r.integers(0, 3, (4, 2))
    x, s = r.standard_normal((3, 3)), r.standard_normal((5, 2))
    return [((x, 0, idx, s, red), {"include_self": inc}) for red in _REDUCTIONS
            for inc in (True, False)] + [((x, 1, idx[:3] % 2, s, "amax"), {})]


@composite("scatter_reduce", _scatter_reduce_ref, method=True, inplace=True,
           samples=_scatter_reduce_samples)
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """A copy of input where each src[i][j] (dim=0) is combined into position index[i][j]
    with `reduce` ("sum", "prod", "mean", "amax", "amin"); include_self=False leaves input's
    own values out of the positions that receive any src value.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([1.0, 2.0])
        >>> x.scatter_reduce(0, st.tensor([0, 0, 1]), st.tensor([5.0, 3.0, 1.0]), "amax").tolist()
        [5.0, 2.0]
    """
    op = "scatter_reduce"
    expect_tensor(op, input)
    expect_tensor(op, src, "src")
    if reduce not in _REDUCTIONS:
        raise ValueError(f"{op}: reduce argument must be one of {', '.join(_REDUCTIONS)}, got "
                         f"{reduce!r}")
    index = _index_arg(op, index, input)
    d = _wrap_dim(dim, input.ndim, op)
    if not (index.ndim == input.ndim == src.ndim):
        raise ValueError(f"{op}: index {index._shape}, self {input._shape} and src "
                         f"{src._shape} should have the same number of dimensions")
    for e, k in enumerate(index._shape):
        if k > src._shape[e] or (e != d and k > input._shape[e]):
            raise ValueError(f"{op}: index {index._shape} is larger than src {src._shape} or "
                             f"self {input._shape} in dimension {e}")
    _check_bounds(op, index, d, input._shape[d] if input.ndim else 1, False)
    for e, k in enumerate(index._shape):
        if k != src._shape[e]:
            src = narrow(src, e, 0, k)
    if src.dtype is not input.dtype:
        src = cast(src, input.dtype)
    fdt = input.dtype if input.dtype.is_floating_point else _dt.float64
    hits = scatter_add(creation.zeros(input._shape, dtype=fdt, device=input._device), d,
                       index, creation.ones(index._shape, dtype=fdt, device=input._device))
    touched = hits > 0
    if reduce in ("sum", "mean"):
        base = input if include_self else input.masked_fill(touched, 0)
        total = scatter_add(base, d, index, src)
        if reduce == "sum":
            return total
        cnt = hits + 1.0 if include_self else hits.clamp(min=1.0)
        mean = total / cnt if input.dtype.is_floating_point else \
            cast((cast(total, fdt) / cnt).floor(), input.dtype)
        return where(touched, mean, input)
    if reduce != "prod":
        return _scatter_extreme(input, d, index, src, reduce == "amax", include_self)
    # prod: a dense (index..., out size along dim) mask, multiplied out over index's dim
    n = input._shape[d]
    m = index.unsqueeze(-1) == _arange(n, input).reshape(*([1] * index.ndim), n)
    ones = creation.ones((), dtype=input.dtype, device=input._device)
    part = movedim(where(m, src.unsqueeze(-1), ones).prod(d), -1, d)
    region = part._shape
    if region != input._shape:  # index covers a corner of input: pad the rest back
        widths: list = []
        for e in reversed(range(input.ndim)):
            widths += [0, input._shape[e] - region[e]]
        part = pad(part, widths)
    return where(touched, input * part if include_self else part, input)


def _scatter_extreme(input: Tensor, d: int, index: Tensor, src: Tensor, largest: bool,
                     include_self: bool) -> Tensor:
    """scatter_reduce's amax/amin: each src value's flat target in input, src sorted by
    value and then (stably) by target, so that each target's run starts with its extreme."""
    strides = [math.prod(input._shape[e + 1:]) for e in range(input.ndim)]
    target = index * strides[d]
    for e, k in enumerate(index._shape):
        if e != d and k > 1:
            target = target + (_arange(k, input) * strides[e]).reshape(
                *[k if j == e else 1 for j in range(index.ndim)])
    target = expand(target, *index._shape).reshape(-1)
    flat_src = src.reshape(-1)
    by_value = argsort(flat_src, 0, descending=largest, stable=True)
    order = index_select(by_value, 0, argsort(index_select(target, 0, by_value), 0,
                                               stable=True))
    t = index_select(target, 0, order)
    n = t._shape[0]
    first = creation.ones(n, dtype=_dt.bool_, device=input._device)
    if n > 1:
        first = cat([first[:1], t[1:] != t[:-1]])
    runs = nonzero(first).reshape(-1)
    where_to = index_select(t, 0, runs)
    best = index_select(flat_src, 0, index_select(order, 0, runs))
    flat = input.reshape(-1)
    if include_self:
        own = index_select(flat, 0, where_to)
        keep = own >= best if largest else own <= best
        best = where(keep, own, best)
    return scatter(flat, 0, where_to, best).reshape(*input._shape)


def _select_scatter_ref(x, src, dim, index):
    out = x.copy()
    sl = [slice(None)] * x.ndim
    sl[dim] = index
    out[tuple(sl)] = src
    return out


@composite("select_scatter", _select_scatter_ref, method=True, samples=lambda: [
    ((_rand(3, 4), _rand(4, seed=1), 0, 2), {}), ((_rand(3, 4), _rand(3, seed=1), 1, -1), {})])
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of input whose slice `index` along dim is src (the shape of input.select(dim,
    index)).

    Example:
        >>> import singa_tensor as st
        >>> st.select_scatter(st.zeros(2, 2), st.ones(2), 0, 1).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
    """
    expect_tensor("select_scatter", input)
    expect_tensor("select_scatter", src, "src")
    d = _wrap_dim(dim, input.ndim, "select_scatter")
    n = input._shape[d]
    index = _int("select_scatter", index, "index")
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} is out of bounds for dimension {d} "
                         f"with size {n}")
    want = input._shape[:d] + input._shape[d + 1:]
    if src._shape != want:
        raise ValueError(f"select_scatter: src should have shape {want}, got {src._shape}")
    idx = creation.tensor([index % n], dtype=_dt.int64, device=input._device)
    return index_copy(input, d, idx, src.unsqueeze(d))


def _slice_scatter_ref(x, src, dim=0, start=None, end=None, step=1):
    out = x.copy()
    sl = [slice(None)] * x.ndim
    sl[dim] = slice(start, end, step)
    out[tuple(sl)] = src
    return out


@composite("slice_scatter", _slice_scatter_ref, method=True, samples=lambda: [
    ((_rand(5, 2), _rand(2, 2, seed=1)), {"start": 1, "end": 5, "step": 2}),
    ((_rand(2, 4), _rand(2, 4, seed=1)), {"dim": 1})])
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """A copy of input whose slice start:end:step along dim is src.

    Example:
        >>> import singa_tensor as st
        >>> st.slice_scatter(st.zeros(4), st.ones(2), start=0, step=2).tolist()
        [1.0, 0.0, 1.0, 0.0]
    """
    expect_tensor("slice_scatter", input)
    expect_tensor("slice_scatter", src, "src")
    d = _wrap_dim(dim, input.ndim, "slice_scatter")
    step = _int("slice_scatter", step, "step")
    if step <= 0:
        raise ValueError(f"slice_scatter: step must be positive, got {step}")
    positions = range(input._shape[d])[slice(start, end, step)]
    want = input._shape[:d] + (len(positions),) + input._shape[d + 1:]
    if src._shape != want:
        raise ValueError(f"slice_scatter: src should have shape {want}, got {src._shape}")
    if not positions:
        return input.clone()
    idx = creation.arange(positions.start, positions.stop, positions.step,
                          device=input._device)
    return index_copy(input, d, idx, src)


def _masked_scatter_ref(x, mask, source):
    out = x.copy()
    m = np.broadcast_to(mask, x.shape)
    out[m] = source.reshape(-1)[:int(m.sum())]
    return out


@composite("masked_scatter", _masked_scatter_ref, method=True, inplace=True, samples=lambda: [
    ((_rand(3, 4), _rand(3, 4, seed=2) > 0, _rand(12, seed=1)), {}),
    ((_rand(3, 4), _rand(4, seed=2) > 0, _rand(4, 4, seed=1)), {})])
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of input whose positions where mask (broadcast) is true take source's elements
    in order.

    Example:
        >>> import singa_tensor as st
        >>> x = st.zeros(4)
        >>> x.masked_scatter(st.tensor([True, False, True, False]), st.tensor([1.0, 2.0])).tolist()
        [1.0, 0.0, 2.0, 0.0]
    """
    op = "masked_scatter"
    expect_tensor(op, input)
    expect_tensor(op, source, "source")
    if mask.__class__ is not Tensor or mask.dtype is not _dt.bool_:
        got = mask.dtype.name if mask.__class__ is Tensor else type(mask).__name__
        raise TypeError(f"{op}: expected a bool tensor for mask, got {got}")
    check_same_device(op, input, mask, source)
    shape = _bshapes(input._shape, mask._shape, op=op)
    if shape != input._shape:
        raise ValueError(f"{op}: mask {mask._shape} can't be broadcast to input "
                         f"{input._shape}")
    m = expand(mask, *shape).reshape(-1)
    pos = cast(m, _dt.int64).cumsum(0) - 1
    count = int(pos[-1].item()) + 1 if pos.numel() else 0
    if count > source.numel():
        raise ValueError(f"{op}: expected source to have at least {count} elements (the true "
                         f"elements of mask), got {source.numel()}")
    if count == 0:
        return input.clone()
    src = source if source.dtype is input.dtype else cast(source, input.dtype)
    picked = index_select(src.reshape(-1), 0, pos.clamp(min=0)).reshape(*shape)
    return where(m.reshape(*shape), picked, input)


def _put_ref(x, index, source, accumulate=False):
    out = x.copy().reshape(-1)
    if accumulate:
        np.add.at(out, index.reshape(-1), source.reshape(-1))
    else:
        out[index.reshape(-1)] = source.reshape(-1)
    return out.reshape(x.shape)


@composite("put", _put_ref, method=True, inplace=True, samples=lambda: [
    ((_rand(3, 4), np.array([0, 11, -2]), _rand(3, seed=1)), {}),
    ((_rand(3, 4), np.array([[1, 1], [5, 0]]), _rand(2, 2, seed=1)), {"accumulate": True})])
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of input, taken as 1-d, with source's elements written (added, with accumulate)
    at the flat positions index.

    Example:
        >>> import singa_tensor as st
        >>> x = st.zeros(2, 2)
        >>> x.put_(st.tensor([3]), st.tensor([9.0])).tolist()
        [[0.0, 0.0], [0.0, 9.0]]
    """
    expect_tensor("put", input)
    expect_tensor("put", source, "source")
    index = _index_arg("put", index, input)
    if index.numel() != source.numel():
        raise ValueError(f"put: expected source and index to have the same number of "
                         f"elements, got {source.numel()} and {index.numel()}")
    flat = input.reshape(-1)
    idx = _check_bounds("put", index.reshape(-1), 0, flat._shape[0], True)
    src = source.reshape(-1)
    src = src if src.dtype is input.dtype else cast(src, input.dtype)
    if accumulate:
        out = scatter_add(flat, 0, idx, src)
    else:
        out = scatter(flat, 0, idx, src)
    return out.reshape(*input._shape)


def _renorm_ref(x, p, dim, maxnorm):
    axes = tuple(i for i in range(x.ndim) if i != dim % x.ndim)
    n = (np.abs(x) ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)
    return x * np.where(n > maxnorm, maxnorm / (n + 1e-7), 1.0)


@composite("renorm", _renorm_ref, method=True, inplace=True, samples=lambda: [
    ((_rand(3, 4), 2.0, 0, 1.0), {}), ((_rand(3, 4), 1.0, 1, 1.5), {}),
    ((_rand(2, 2, 3), 3.0, -1, 0.8), {})])
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """input with each sub-tensor along dim whose p-norm exceeds maxnorm scaled down to norm
    maxnorm.

    Example:
        >>> import singa_tensor as st
        >>> st.renorm(st.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.30000001192092896, 0.4000000059604645]]
    """
    expect_tensor("renorm", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"renorm: expected a floating point tensor, got {input.dtype.name}")
    if input.ndim < 2:
        raise ValueError(f"renorm: input needs at least 2 dimensions, got {input.ndim}")
    if p <= 0:
        raise ValueError(f"renorm: non-positive norm not supported, got p={p}")
    if maxnorm < 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    d = _wrap_dim(dim, input.ndim, "renorm")
    axes = [i for i in range(input.ndim) if i != d]
    a = input.abs()
    n = (a.pow(float(p)) if p != 1 else a).sum(axes, keepdim=True) ** (1.0 / p)
    scale = where(n > maxnorm, (n + 1e-7).reciprocal() * maxnorm, 1.0)
    return input * scale


__all__ = [
    "index_copy", "index_fill", "masked_scatter", "put", "renorm", "scatter_reduce",
    "select_scatter", "slice_scatter", "take",
]
