"""More index and set functions of PyTorch's surface, compositions of existing ops (sort,
cumsum, gather, scatter, scatter_add, index_select, nonzero, where ...) so they run on every
backend and take their gradients from the parts: sets and counts (unique,
unique_consecutive, bincount, histc, histogram, searchsorted, bucketize), comparisons
(isclose, allclose), argwhere and repeat_interleave. The shape functions are in
more_shape.py, the index writes (take, index_copy, scatter_reduce ...) in more_scatter.py.

Ops whose output size depends on the values (unique, bincount, histc's range) read that size
to the host, as PyTorch does.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import (
    check_same_device,
    composite,
    expect_tensor,
    tensor_method,
)
from .elementwise import where
from .index import (
    _index_arg,
    gather,
    index_select,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
)
from .layout import cast, expand
from .more_shape import _arange, _int, _rand
from .shape import cat, movedim
from .sort import argsort, sort

# ---- sets and counts ---------------------------------------------------------------------------


class _Runs(NamedTuple):
    values: Tensor    # the distinct values (rows when dim is given)
    first: Tensor     # the position in input of each one's first occurrence
    inverse: Tensor   # for each element (slice) of input, the position of its value
    counts: Tensor


def _distinct(op: str, x: Tensor, dim, consecutive: bool) -> _Runs:
    """The runs of equal elements (slices along dim) of x, after a stable sort unless
    consecutive: what unique, unique_consecutive and ONNX's Unique are made of."""
    expect_tensor(op, x)
    if x.dtype in (_dt.float16, _dt.bfloat16):  # the index kernels lack half types
        r = _distinct(op, cast(x, _dt.float32), dim, consecutive)
        return r._replace(values=cast(r.values, x.dtype))
    if dim is None:
        d, rows = None, x.reshape(-1, 1)
    else:
        d = _wrap_dim(dim, x.ndim, op)
        rows = movedim(x, d, 0).reshape(x._shape[d] if x.ndim else 1, -1)
    n, k = rows._shape
    perm = _arange(n, x)
    if not consecutive:  # lexicographic order of the rows: stable sorts from the last column
        for c in reversed(range(k)):
            perm = index_select(perm, 0, sort(index_select(rows[:, c], 0, perm),
                                              stable=True).indices)
    srt = index_select(rows, 0, perm)
    new = creation.ones(n, dtype=_dt.bool_, device=x._device)
    if n > 1 and k:
        new = cat([new[:1], (srt[1:] != srt[:-1]).any(1)])
    elif n > 1:
        new = cat([new[:1], creation.zeros(n - 1, dtype=_dt.bool_, device=x._device)])
    starts = nonzero(new).reshape(-1)
    group = cast(new, _dt.int64).cumsum(0) - 1
    inverse = scatter(creation.zeros(n, dtype=_dt.int64, device=x._device), 0, perm, group)
    ends = cat([starts[1:], creation.full((1,), n, dtype=_dt.int64, device=x._device)])
    counts = ends - starts
    vals = index_select(srt, 0, starts)
    if d is None:
        return _Runs(vals.reshape(-1), index_select(perm, 0, starts),
                     inverse.reshape(*x._shape), counts)
    vals = movedim(vals.reshape(-1, *(x._shape[:d] + x._shape[d + 1:])), 0, d)
    return _Runs(vals, index_select(perm, 0, starts), inverse, counts)


def _set_result(r: _Runs, return_inverse: bool, return_counts: bool):
    vals = r.values.detach()
    if not (return_inverse or return_counts):
        return vals
    return (vals,) + ((r.inverse,) if return_inverse else ()) + (
        (r.counts,) if return_counts else ())


def _unique_ref(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    out = np.unique(x, return_inverse=return_inverse, return_counts=return_counts, axis=dim)
    if isinstance(out, tuple) and return_inverse and dim is not None:
        out = (out[0], out[1].reshape(-1)) + out[2:]
    return out


def _set_samples():
    r = np.random.default_rng(5)
    a = r.integers(0, 4, (3, 4)).astype(np.float64)
    return [((a,), {}), ((a,), {"return_inverse": True, "return_counts": True}),
            ((a,), {"dim": 1, "return_inverse": True, "return_counts": True}),
            ((a.astype(np.int64),), {"dim": 0, "return_counts": True}),
            ((np.zeros(0),), {"return_counts": True}), ((np.array(2.0),), {})]


@composite("unique", _unique_ref, differentiable=False, method=True,
           dtypes=("float32", "float64", "int64"), samples=_set_samples)
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None):
    """The distinct elements of input (flattened), or with dim the distinct slices along
    dim, in ascending (lexicographic) order; with return_inverse also where each element
    (slice) of input went, with return_counts how often each occurs. The values are always
    sorted (as PyTorch's CUDA kernel does), whatever `sorted` says.

    Example:
        >>> import singa_tensor as st
        >>> v, inv = st.unique(st.tensor([3, 1, 3]), return_inverse=True)
        >>> v.tolist(), inv.tolist()
        ([1, 3], [1, 0, 1])
    """
    return _set_result(_distinct("unique", input, dim, False), return_inverse, return_counts)


def _unique_consecutive_ref(x, return_inverse=False, return_counts=False, dim=None):
    a = np.moveaxis(x, dim, 0) if dim is not None else x.reshape(-1)
    rows = a.reshape(len(a), int(np.prod(a.shape[1:])))
    new = np.ones(len(a), bool)
    new[1:] = (rows[1:] != rows[:-1]).any(1)
    starts = np.flatnonzero(new)
    vals = a[starts] if dim is None else np.moveaxis(a[starts], 0, dim)
    out = [vals]
    if return_inverse:
        inv = np.cumsum(new) - 1
        out.append(inv.reshape(x.shape) if dim is None else inv)
    if return_counts:
        out.append(np.diff(np.append(starts, len(a))))
    return tuple(out) if len(out) > 1 else vals


@composite("unique_consecutive", _unique_consecutive_ref, differentiable=False, method=True,
           dtypes=("float32", "float64", "int64"),
           samples=lambda: [(args, {k: v for k, v in kw.items() if k != "sorted"})
                            for args, kw in _set_samples()])
def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """unique without the sort: each run of equal consecutive elements (slices along dim)
    becomes one.

    Example:
        >>> import singa_tensor as st
        >>> st.unique_consecutive(st.tensor([1, 1, 2, 1])).tolist()
        [1, 2, 1]
    """
    return _set_result(_distinct("unique_consecutive", input, dim, True), return_inverse,
                       return_counts)


def _int_input(op: str, x) -> Tensor:
    expect_tensor(op, x)
    if x.dtype.is_floating_point or x.dtype is _dt.bool_:
        raise TypeError(f"{op}: expected an integer tensor, got {x.dtype.name}")
    return x if x.dtype is _dt.int64 else cast(x, _dt.int64)


def _bincount_ref(x, weights=None, minlength=0):
    return np.bincount(x, weights, minlength)


def _bincount_samples():
    r = np.random.default_rng(6)
    x = r.integers(0, 5, 8)
    return [((x,), {}), ((x,), {"minlength": 9}), ((x, r.standard_normal(8)), {}),
            ((np.zeros(0, np.int64),), {"minlength": 2})]


@composite("bincount", _bincount_ref, differentiable=False, method=True,
           samples=_bincount_samples)
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(input) occurs in a 1-d non-negative integer tensor (at
    least minlength bins); with weights, the sum of the weights of each value instead.

    Example:
        >>> import singa_tensor as st
        >>> st.bincount(st.tensor([0, 2, 2])).tolist()
        [1, 0, 2]
    """
    x = _int_input("bincount", input)
    minlength = _int("bincount", minlength, "minlength")
    if x.ndim != 1:
        raise ValueError(f"bincount: input must be 1-d, got shape {x._shape}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength should be >= 0, got {minlength}")
    n = x._shape[0]
    if n and x.amin().item() < 0:
        raise ValueError("bincount: input must contain only non-negative values")
    size = max(int(x.amax().item()) + 1 if n else 0, minlength)
    if weights is None:
        src = creation.ones(n, dtype=_dt.int64, device=x._device)
    else:
        expect_tensor("bincount", weights, "weights")
        check_same_device("bincount", x, weights)
        if weights._shape != x._shape:
            raise ValueError(f"bincount: weights should have the same shape as input, got "
                             f"{weights._shape} and {x._shape}")
        src = weights if weights.dtype.is_floating_point else cast(weights, _dt.float64)
    return scatter_add(creation.zeros(size, dtype=src.dtype, device=x._device), 0, x, src)


def _float_input(op: str, x) -> Tensor:
    expect_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}")
    return x


def _bin_counts(x: Tensor, lo: float, hi: float, bins: int, weight=None) -> Tensor:
    """Counts (weight sums) of x in `bins` equal bins over [lo, hi], hi in the last one."""
    flat = x.reshape(-1)
    inside = (flat >= lo) & (flat <= hi)
    pos = ((flat - lo) * (bins / (hi - lo))).floor().clamp(0, bins - 1)
    pos = cast(where(inside, pos, 0.0), _dt.int64)
    w = cast(inside, x.dtype) if weight is None else where(inside, weight.reshape(-1), 0.0)
    return scatter_add(creation.zeros(bins, dtype=x.dtype, device=x._device), 0, pos, w)


def _range_of(op: str, x: Tensor, lo: float, hi: float) -> tuple:
    if lo > hi:
        raise ValueError(f"{op}: max must be larger than min, got min {lo} and max {hi}")
    if lo == hi and x.numel():
        lo, hi = float(x.amin().item()), float(x.amax().item())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{op}: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    return lo, hi


def _histc_ref(x, bins=100, min=0.0, max=0.0):
    lo, hi = (min, max) if min != max else (x.min(), x.max()) if x.size else (min, max)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return np.histogram(x, bins, range=(lo, hi))[0].astype(x.dtype)


@composite("histc", _histc_ref, differentiable=False, method=True, samples=lambda: [
    ((_rand(20),), {"bins": 5}), ((_rand(4, 5),), {"bins": 4, "min": -1.0, "max": 1.0}),
    ((np.full(3, 2.0),), {"bins": 2})])
def histc(input: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor:
    """Counts of input's elements in `bins` equal-width bins over [min, max] (the data's
    own range when min == max); elements outside are ignored. The result has input's dtype.

    Example:
        >>> import singa_tensor as st
        >>> st.histc(st.tensor([1.0, 2.0, 1.0]), bins=4, min=0.0, max=3.0).tolist()
        [0.0, 2.0, 1.0, 0.0]
    """
    x = _float_input("histc", input)
    bins = _int("histc", bins, "bins")
    if bins <= 0:
        raise ValueError(f"histc: bins must be > 0, got {bins}")
    lo, hi = _range_of("histc", x, float(min), float(max))
    return _bin_counts(x, lo, hi, bins)


class HistogramResult(NamedTuple):
    hist: Tensor
    bin_edges: Tensor


def _histogram_ref(x, bins, *, range=None, weight=None, density=False):
    h, e = np.histogram(x, bins, range=range, weights=weight, density=density)
    return h.astype(x.dtype), e.astype(x.dtype)


@composite("histogram", _histogram_ref, differentiable=False, method=True, samples=lambda: [
    ((_rand(20), 5), {}), ((_rand(20), 4), {"range": (-1.0, 1.0), "density": True}),
    ((_rand(10), np.array([-1.0, 0.0, 0.5, 2.0])), {})])
def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False):
    """(hist, bin_edges): counts of input's elements in bins, given as a number of equal bins
    over `range` (the data's range by default) or as a 1-d tensor of increasing edges; with
    weight, sums of weights; with density, normalised to integrate to 1.

    Example:
        >>> import singa_tensor as st
        >>> h, e = st.histogram(st.tensor([1.0, 2.0, 1.0]), bins=2)
        >>> h.tolist(), e.tolist()
        ([2.0, 1.0], [1.0, 1.5, 2.0])
    """
    x = _float_input("histogram", input)
    if weight is not None:
        expect_tensor("histogram", weight, "weight")
        if weight._shape != x._shape:
            raise ValueError(f"histogram: weight should have the same shape as input, got "
                             f"{weight._shape} and {x._shape}")
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.numel() < 2:
            raise ValueError(f"histogram: bins must be a 1-d tensor of at least 2 edges, got "
                             f"shape {bins._shape}")
        edges = cast(bins, x.dtype)
        nb = edges._shape[0] - 1
        flat = x.reshape(-1)
        pos = searchsorted(edges, flat, right=True) - 1
        inside = (flat >= edges[0]) & (flat <= edges[-1])
        pos = where(pos >= nb, pos - 1, pos).clamp(0, max(nb - 1, 0))
        w = cast(inside, x.dtype) if weight is None else where(inside, weight.reshape(-1), 0.0)
        hist = scatter_add(creation.zeros(nb, dtype=x.dtype, device=x._device), 0, pos, w)
    else:
        nb = _int("histogram", bins, "bins")
        if nb <= 0:
            raise ValueError(f"histogram: bins must be > 0, got {nb}")
        lo, hi = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
        lo, hi = _range_of("histogram", x, lo, hi)
        edges = creation.linspace(lo, hi, nb + 1, dtype=x.dtype, device=x._device)
        hist = _bin_counts(x, lo, hi, nb, weight)
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / (hist.sum() * widths)
    return HistogramResult(hist, edges)


def _searchsorted_ref(seq, values, *, out_int32=False, right=False, side=None, sorter=None):
    side = side or ("right" if right else "left")
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side=side)
    else:
        out = np.stack([np.searchsorted(s, v, side=side) for s, v in
                        zip(seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1]))]
                       ).reshape(values.shape)
    return out.astype(np.int32 if out_int32 else np.int64)


def _merge_counts(seq: Tensor, vals: Tensor, right: bool) -> Tensor:
    """Row by row, how many elements of seq (B, m) sort before each of vals (B, k): one
    stable sort of both together (O((m + k) log) rather than m * k comparisons), vals placed
    before equal seq elements (left) or after them (right). NaN sorts last, as in sort."""
    (b, m), k = seq._shape, vals._shape[1]
    dev = seq._device
    if k == 0:
        return creation.zeros((b, 0), dtype=_dt.int64, device=dev)
    ones = creation.ones((b, k), dtype=_dt.int64, device=dev)
    zeros = creation.zeros((b, m), dtype=_dt.int64, device=dev)
    keys = cat([seq, vals], 1) if right else cat([vals, seq], 1)
    tag = cat([zeros, ones], 1) if right else cat([ones, zeros], 1)
    order = argsort(keys, -1, stable=True)
    is_val = gather(tag, 1, order)
    before = (_arange(m + k, seq) + 1) - is_val.cumsum(1)  # seq elements up to each place
    hit = is_val == 1
    where_from = masked_select(order - m if right else order, hit).reshape(b, k)
    counts = masked_select(before, hit).reshape(b, k)
    return scatter(creation.zeros((b, k), dtype=_dt.int64, device=dev), 1, where_from, counts)


def _searchsorted_samples():
    r = np.random.default_rng(8)
    seq = np.sort(r.integers(-3, 4, 6)).astype(np.float64)
    v = r.integers(-4, 5, (2, 3)).astype(np.float64)
    rows = np.sort(r.standard_normal((2, 5)), -1)
    return [((seq, v), {}), ((seq, v), {"right": True}), ((seq, v), {"side": "right"}),
            ((rows, r.standard_normal((2, 3))), {"out_int32": True})]


@composite("searchsorted", _searchsorted_ref, differentiable=False,
           samples=_searchsorted_samples)
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """For each value of input, the index in sorted_sequence's last dimension where it would
    be inserted to keep the order: before equal values (side="left") or after them
    (right=True / side="right"). An N-d sequence pairs its rows with input's rows; sorter
    sorts an unsorted sequence. An unsorted sequence gives unspecified indices, no error.

    Example:
        >>> import singa_tensor as st
        >>> st.searchsorted(st.tensor([1, 3, 5]), st.tensor([3, 6])).tolist()
        [1, 3]
    """
    seq = expect_tensor("searchsorted", sorted_sequence, "sorted_sequence")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side can only be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side and right can't be set to opposites, got side "
                             "of left while right was True")
        right = side == "right"
    if seq.ndim == 0:
        raise ValueError("searchsorted: sorted_sequence must have at least 1 dimension")
    scalar = not isinstance(input, Tensor)
    if scalar and not isinstance(input, (int, float, np.integer, np.floating)):
        raise TypeError(f"searchsorted: input must be a Tensor or a number, got "
                        f"{type(input).__name__}")
    v = creation.scalar_tensor(input, _dt.promote_scalar(seq.dtype, input), seq._device) \
        if scalar else input
    check_same_device("searchsorted", seq, v)
    if sorter is not None:
        sorter = _index_arg("searchsorted", sorter, seq)
        if sorter._shape != seq._shape:
            raise ValueError(f"searchsorted: sorter and sorted_sequence must have the same "
                             f"shape, got {sorter._shape} and {seq._shape}")
        seq = gather(seq, -1, sorter)
    if seq.ndim > 1 and (v.ndim != seq.ndim or v._shape[:-1] != seq._shape[:-1]):
        raise ValueError(f"searchsorted: sorted_sequence {seq._shape} and input {v._shape} "
                         "must have the same leading dimensions")
    if seq.dtype is not v.dtype:
        dt = _dt.promote(seq.dtype, v.dtype)
        seq, v = cast(seq, dt), cast(v, dt)
    if seq.dtype in (_dt.float16, _dt.bfloat16, _dt.bool_):  # sort's kernels lack these
        dt = _dt.float32 if seq.dtype.is_floating_point else _dt.int64
        seq, v = cast(seq, dt), cast(v, dt)
    b = math.prod(seq._shape[:-1])
    rows_v = v.reshape(1, v.numel()) if seq.ndim == 1 else v.reshape(b, v._shape[-1])
    out = _merge_counts(seq.reshape(b, seq._shape[-1]), rows_v, right).reshape(*v._shape)
    return cast(out, _dt.int32) if out_int32 else out


def _bucketize_ref(x, boundaries, *, out_int32=False, right=False):
    out = np.searchsorted(boundaries, x, side="right" if right else "left")
    return out.astype(np.int32 if out_int32 else np.int64)


@composite("bucketize", _bucketize_ref, differentiable=False, samples=lambda: [
    ((np.array([[1.0, 3.0], [5.0, 0.0]]), np.array([1.0, 3.0, 4.0])), {}),
    ((np.array([[1.0, 3.0], [5.0, 0.0]]), np.array([1.0, 3.0, 4.0])), {"right": True})])
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The bucket of each value of input given increasing 1-d boundaries: i with
    boundaries[i-1] < x <= boundaries[i] (with right=True, boundaries[i-1] <= x <
    boundaries[i]).

    Example:
        >>> import singa_tensor as st
        >>> st.bucketize(st.tensor([1, 4]), st.tensor([1, 3, 5])).tolist()
        [0, 2]
    """
    expect_tensor("bucketize", boundaries, "boundaries")
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-d, got shape {boundaries._shape}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ---- comparison ---------------------------------------------------------------------------------


@composite("isclose", lambda a, b, rtol=1e-5, atol=1e-8, equal_nan=False: np.isclose(
    a, b, rtol=rtol, atol=atol, equal_nan=equal_nan), kind="binary", differentiable=False,
    method=True)
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Elementwise abs(input - other) <= atol + rtol * abs(other) (broadcast), or equal (so
    equal infinities match); NaNs match each other only with equal_nan.

    Example:
        >>> import singa_tensor as st
        >>> st.isclose(st.tensor([1.0, 2.0]), st.tensor([1.0 + 1e-9, 2.1])).tolist()
        [True, False]
    """
    expect_tensor("isclose", input)
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol} and "
                         f"atol={atol}")
    if isinstance(other, Tensor):
        check_same_device("isclose", input, other)
        if input.dtype is not other.dtype and (input.dtype is _dt.bool_) != (
                other.dtype is _dt.bool_):
            raise TypeError(f"isclose: {input.dtype.name} and {other.dtype.name} can't be "
                            "compared")
    out = input == other
    if input.dtype.is_floating_point or (isinstance(other, Tensor) and
                                         other.dtype.is_floating_point) or \
            isinstance(other, float):
        diff = (input - other).abs()
        if isinstance(other, Tensor):
            close = (diff <= other.abs() * rtol + atol) & other.isfinite()
        else:
            close = diff <= abs(other) * rtol + atol if math.isfinite(other) else False
        out = out | close
        if equal_nan and isinstance(other, Tensor):
            out = out | (input.isnan() & other.isnan())
        elif equal_nan and math.isnan(other):
            out = out | input.isnan()
    elif rtol or atol:
        diff = (cast(input, _dt.float64) - other).abs()
        other_f = cast(other, _dt.float64) if isinstance(other, Tensor) else float(other)
        out = out | (diff <= abs(other_f) * rtol + atol)
    return out


@tensor_method()
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether isclose holds for every element (a Python bool).

    Example:
        >>> import singa_tensor as st
        >>> st.allclose(st.tensor([1.0, 2.0]), st.tensor([1.0, 2.0 + 1e-7]))
        True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


# ---- repeats and positions ----------------------------------------------------------------------


@composite("argwhere", lambda x: np.argwhere(x).astype(np.int64), differentiable=False,
           method=True, samples=lambda: [((np.array([[0.0, 1.5], [-2.0, 0.0]]),), {})])
def argwhere(input: Tensor) -> Tensor:
    """The (n, input.ndim) coordinates of the non-zero elements (nonzero's default form).

    Example:
        >>> import singa_tensor as st
        >>> st.argwhere(st.tensor([0, 3, 0, 4])).tolist()
        [[1], [3]]
    """
    return nonzero(input)


def _repeat_interleave_ref(x, repeats=None, dim=None, *, output_size=None):
    if repeats is None:
        return np.repeat(np.arange(len(x)), x)
    return np.repeat(x, repeats, axis=dim)


def _repeat_positions(op: str, reps: Tensor, n: int, output_size) -> Tensor:
    """For repeat counts reps (1-d, length n), the source position of each output element:
    a 1 marks where each source's run starts, and a running sum numbers them."""
    if reps._shape[0] != n:
        raise ValueError(f"{op}: repeats must have the same size as input along dim, got "
                         f"{reps._shape[0]} and {n}")
    if n and reps.amin().item() < 0:
        raise ValueError(f"{op}: repeats can not be negative")
    total = int(reps.sum().item()) if n else 0
    if output_size is not None and output_size != total:
        raise ValueError(f"{op}: output_size {output_size} does not match the sum of repeats "
                         f"{total}")
    marks = creation.zeros(total, dtype=_dt.int64, device=reps._device)
    if total == 0:
        return marks
    starts = reps.cumsum(0) - reps
    ok = cast(starts < total, _dt.int64)  # sources after the last run (0 repeats) mark nothing
    marks = scatter_add(marks, 0, starts.clamp(max=total - 1), ok)
    return marks.cumsum(0) - 1


@composite("repeat_interleave", _repeat_interleave_ref, method=True, samples=lambda: [
    ((_rand(2, 3), 2), {}), ((_rand(2, 3), 3, 1), {}),
    ((_rand(3, 2), np.array([1, 0, 2]), 0), {}), ((_rand(2, 2), np.array([2, 1, 0, 1])), {}),
    ((np.array([2, 0, 1]),), {})])
def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element (slice along dim; of the flattened input when dim is None) repeated
    `repeats` times in place: an int, or a 1-d tensor of counts, one per element. With only
    a tensor of counts, the positions 0, 1, ... repeated by them.

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([1, 2]).repeat_interleave(2).tolist()
        [1, 1, 2, 2]
        >>> st.repeat_interleave(st.tensor([[1, 2]]), st.tensor([1, 2]), dim=1).tolist()
        [[1, 2, 2]]
    """
    op = "repeat_interleave"
    expect_tensor(op, input)
    if repeats is None:
        reps = _int_input(op, input)
        if reps.ndim != 1:
            raise ValueError(f"{op}: repeats must be 0-d or 1-d, got shape {reps._shape}")
        n = reps._shape[0]
        return index_select(_arange(n, reps), 0,
                            _repeat_positions(op, reps, n, output_size))
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input.ndim, op)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x._shape[d]
    if isinstance(repeats, Tensor):
        check_same_device(op, input, repeats)
        reps = _int_input(op, repeats)
        if reps.ndim > 1:
            raise ValueError(f"{op}: repeats must be 0-d or 1-d, got shape {reps._shape}")
        if reps.numel() == 1 and n != 1:
            repeats = int(reps.reshape(()).item())
        else:
            return index_select(x, d, _repeat_positions(op, reps.reshape(-1), n, output_size))
    r = _int(op, repeats, "repeats")
    if r < 0:
        raise ValueError(f"{op}: repeats can not be negative, got {r}")
    if output_size is not None and output_size != n * r:
        raise ValueError(f"{op}: output_size {output_size} does not match the sum of repeats "
                         f"{n * r}")
    shape = x._shape[:d + 1] + (r,) + x._shape[d + 1:]
    out = expand(x.unsqueeze(d + 1), *shape)
    return out.reshape(*x._shape[:d], n * r, *x._shape[d + 1:])


__all__ = [
    "allclose", "argwhere", "bincount", "bucketize", "histc", "histogram", "isclose",
    "repeat_interleave", "searchsorted", "unique", "unique_consecutive",
]
