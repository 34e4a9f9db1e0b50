"""Reductions and scans composed from existing ones: count_nonzero, var_mean/std_mean,
nansum/nanmean, aminmax, median/nanmedian, kthvalue, mode, quantile/nanquantile,
logcumsumexp and cummax/cummin.

The order statistics sort along the dim (NaN sorts largest) and pick positions from the sorted
values, so their gradient flows through sort to the element chosen. The scans combine shifted
copies in log2(n) doubling steps (a Hillis-Steele scan), which keeps logcumsumexp exact where
one global shift would underflow.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import composite, expect_tensor
from .elementwise import (
    ceil,
    eq,
    floor,
    ge,
    gt,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_or,
    lt,
    ne,
    where,
)
from .index import gather
from .layout import cast
from .pointwise_more import logaddexp
from .reduce import ValuesIndices, amax, amin, any, argmax, mean, np_axis
from .reduce import sum as _sum
from .reduce_ext import std, var
from .shape import cat, movedim, narrow, reshape, select, unsqueeze
from .sort import sort


class MinMax(NamedTuple):
    """What aminmax returns, like torch.return_types.aminmax."""

    min: Tensor
    max: Tensor


_R = np.random.default_rng(23)


def _seeded(samples):
    """samples() drawing the same values at every call (the tests call it more than once)."""
    def run():
        global _R
        _R = np.random.default_rng(23)
        return samples()

    return run


def _rand(*shape):
    return _R.standard_normal(shape)


# ---- counts, nan-ignoring sums, moments ----------------------------------------------------------


def _count_nonzero_np(x, dim=None):
    return np.count_nonzero(x, axis=np_axis(x, dim)).astype(np.int64)


@composite("count_nonzero", _count_nonzero_np, differentiable=False,
           dtypes=("float32", "float64", "int32", "int64"),
           samples=_seeded(lambda: [((np.round(_rand(3, 4)),), {}), ((np.round(_rand(3, 4)),),
                                                            {"dim": 1}),
                            ((np.round(_rand(2, 3, 2)),), {"dim": (0, 2)})]),
           method=True)
def count_nonzero(input, dim=None) -> Tensor:
    """The number of non-zero elements over dim (an int or a tuple; None: all), int64.

    Example:
        >>> import singa_tensor as st
        >>> st.count_nonzero(st.tensor([[0, 1, 2], [0, 0, 3]]), dim=1).tolist()
        [2, 1]
    """
    x = expect_tensor("count_nonzero", input)
    return _sum(cast(ne(x, 0), _dt.int64), dim=dim)


def _nansum_np(x, dim=None, keepdim=False):
    return np.nansum(x, axis=np_axis(x, dim), keepdims=keepdim)


def _nanmean_np(x, dim=None, keepdim=False):
    return np.nanmean(x, axis=np_axis(x, dim), keepdims=keepdim)


def _with_nans(r, shape):
    v = r.standard_normal(shape)
    v[r.random(shape) < 0.3] = np.nan
    return v


def _nan_samples():
    r = np.random.default_rng(3)
    return [((_with_nans(r, (3, 4)),), {}), ((_with_nans(r, (3, 4)),), {"dim": 1}),
            ((_with_nans(r, (2, 3, 2)),), {"dim": (0, 2), "keepdim": True})]


@composite("nansum", _nansum_np, kind="reduce", method=True)
def nansum(input, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum over dim with NaN counted as zero.

    Example:
        >>> import singa_tensor as st
        >>> st.nansum(st.tensor([1.0, float('nan'), 2.0])).item()
        3.0
    """
    x = expect_tensor("nansum", input)
    if x.dtype.is_floating_point:
        x = where(isnan(x), 0.0, x)
    return _sum(x, dim=dim, keepdim=keepdim, dtype=dtype)


@composite("nanmean", _nanmean_np, kind="reduce", method=True)
def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean over dim of the elements that are not NaN (NaN where all are).

    Example:
        >>> import singa_tensor as st
        >>> st.nanmean(st.tensor([1.0, float('nan'), 2.0])).item()
        1.5
    """
    x = expect_tensor("nanmean", input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"nanmean: expected a floating-point input, got {x.dtype.name}")
    keep = logical_not(isnan(x))
    total = _sum(where(keep, x, 0.0), dim=dim, keepdim=keepdim, dtype=dtype)
    return total / _sum(cast(keep, total.dtype), dim=dim, keepdim=keepdim)


def _moment_np(fn):
    def ref(x, dim=None, unbiased=None, keepdim=False, correction=None):
        ddof = 1.0 if correction is None else correction
        ax = np_axis(x, dim)
        return (fn(x, axis=ax, ddof=ddof, keepdims=keepdim),
                np.mean(x, axis=ax, keepdims=keepdim))

    return ref


def _moment_samples():
    return [((_rand(3, 4),), {}), ((_rand(3, 4),), {"dim": 1, "correction": 0}),
            ((_rand(2, 3, 2),), {"dim": (0, 2), "keepdim": True})]


@composite("var_mean", _moment_np(np.var), samples=_seeded(_moment_samples))
def var_mean(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple:
    """(var, mean) over dim, as var(...) and mean(...) give them.

    Example:
        >>> import singa_tensor as st
        >>> v, m = st.var_mean(st.tensor([1.0, 2.0, 3.0, 4.0]), correction=0)
        >>> v.item(), m.item()
        (1.25, 2.5)
    """
    x = expect_tensor("var_mean", input)
    d = None if isinstance(dim, bool) else dim
    return (var(x, dim, unbiased, keepdim, correction=correction),
            mean(x, dim=d, keepdim=keepdim))


@composite("std_mean", _moment_np(np.std), samples=_seeded(_moment_samples))
def std_mean(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple:
    """(std, mean) over dim, as std(...) and mean(...) give them.

    Example:
        >>> import singa_tensor as st
        >>> s, m = st.std_mean(st.tensor([1.0, 3.0]))
        >>> round(s.item(), 4), m.item()
        (1.4142, 2.0)
    """
    x = expect_tensor("std_mean", input)
    d = None if isinstance(dim, bool) else dim
    return (std(x, dim, unbiased, keepdim, correction=correction),
            mean(x, dim=d, keepdim=keepdim))


def _aminmax_np(x, dim=None, keepdim=False):
    ax = np_axis(x, dim)
    return np.amin(x, axis=ax, keepdims=keepdim), np.amax(x, axis=ax, keepdims=keepdim)


@composite("aminmax", _aminmax_np,
           samples=_seeded(lambda: [((_rand(3, 4),), {}), ((_rand(3, 4),), {"dim": 1}),
                            ((_rand(3, 4),), {"dim": 0, "keepdim": True})]),
           method=True)
def aminmax(input, *, dim=None, keepdim: bool = False) -> MinMax:
    """The smallest and largest value over dim (an int, or None for all), a named tuple
    (min, max).

    Example:
        >>> import singa_tensor as st
        >>> r = st.aminmax(st.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1)
        >>> r.min.tolist(), r.max.tolist()
        ([1.0, 2.0], [5.0, 7.0])
    """
    x = expect_tensor("aminmax", input)
    if dim is not None and not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"aminmax: dim must be an int or None, got {dim!r}")
    if x.numel() == 0:
        raise ValueError("aminmax: cannot compute on an empty tensor")
    return MinMax(amin(x, dim=dim, keepdim=keepdim), amax(x, dim=dim, keepdim=keepdim))


# ---- order statistics ----------------------------------------------------------------------------


def _one_dim(op: str, x: Tensor, dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    return _wrap_dim(dim, x.ndim, op) if x.ndim else _wrap_dim(dim, 1, op)


def _nonempty(op: str, x: Tensor, d: int | None) -> None:
    n = x.numel() if d is None or not x.ndim else x.shape[d]
    if n == 0:
        raise IndexError(f"{op}: cannot compute on an empty {'tensor' if d is None else 'dim'} "
                         f"(shape {x.shape})")


def _finish(op, values, indices, x: Tensor, d: int, keepdim: bool):
    """values and indices picked with keepdim along d of x (0-d inputs were made 1-D)."""
    if x.ndim == 0:
        return ValuesIndices(reshape(values, ()), reshape(indices, ()))
    if not keepdim:
        values, indices = select(values, d, 0), select(indices, d, 0)
    return ValuesIndices(values, indices)


def _pick(s, d: int, k: Tensor):
    return gather(s.values, d, k), gather(s.indices, d, k)


def _median_impl(op: str, x: Tensor, dim, keepdim: bool, ignore_nan: bool):
    expect_tensor(op, x)
    if dim is None:
        _nonempty(op, x, None)
        r = _median_impl(op, reshape(x, -1), 0, False, ignore_nan)
        return r.values
    d = _one_dim(op, x, dim)
    _nonempty(op, x, d)
    x1 = reshape(x, 1) if x.ndim == 0 else x
    s = sort(x1, d)
    n = x1.shape[d]
    floating = x1.dtype.is_floating_point
    if ignore_nan and floating:
        valid = _sum(cast(logical_not(isnan(x1)), _dt.int64), dim=d, keepdim=True)
        k = where(gt(valid, 0), (valid - 1) // 2, 0)
        values, indices = _pick(s, d, k)
    else:
        mid = (n - 1) // 2
        values, indices = narrow(s.values, d, mid, 1), narrow(s.indices, d, mid, 1)
        if floating:  # a NaN anywhere in the line makes the median NaN, at the first NaN
            nan = isnan(x1)
            has = any(nan, dim=d, keepdim=True)
            first = argmax(cast(nan, _dt.float32), dim=d, keepdim=True)
            values = where(has, math.nan, values)
            indices = where(has, first, indices)
    return _finish(op, values, indices, x, d, keepdim)


def _median_np(x, dim=None, keepdim=False, ignore_nan=False):
    if dim is None:
        flat = np.sort(x.reshape(-1))
        if ignore_nan:
            flat = flat[~np.isnan(flat)]
            return np.asarray(flat[(flat.size - 1) // 2] if flat.size else np.nan, x.dtype)
        if np.isnan(flat).any():
            return np.asarray(np.nan, x.dtype)
        return np.asarray(flat[(flat.size - 1) // 2])
    axis = dim % max(x.ndim, 1)
    xl = np.moveaxis(np.atleast_1d(x), axis, -1)
    vals = np.empty(xl.shape[:-1], x.dtype)
    idx = np.empty(xl.shape[:-1], np.int64)
    for pos in np.ndindex(*xl.shape[:-1]):
        line = xl[pos]
        nan = np.isnan(line)
        order = np.argsort(line, kind="stable")
        if ignore_nan:
            c = int((~nan).sum())
            j = order[(c - 1) // 2 if c else 0]
        elif nan.any():
            j = int(np.argmax(nan))
        else:
            j = order[(line.size - 1) // 2]
        vals[pos], idx[pos] = line[j], j
    if keepdim and x.ndim:
        vals, idx = np.expand_dims(vals, axis), np.expand_dims(idx, axis)
    return vals, idx


def _distinct(*shape):
    n = math.prod(shape)
    return ((_R.permutation(n) - n / 2) * 0.25 + 0.1).reshape(shape)


def _median_samples():
    return [((_distinct(3, 4),), {}), ((_distinct(3, 4),), {"dim": 1}),
            ((_distinct(2, 3, 4),), {"dim": 0, "keepdim": True}),
            ((_distinct(3, 5),), {"dim": -1})]


@composite("median", _median_np, samples=_seeded(_median_samples), method=True)
def median(input, dim=None, keepdim: bool = False):
    """The median: the lower of the two middle values for an even count. Without dim, of all
    elements (a 0-d tensor); with an int dim, a named tuple (values, indices) along it. A NaN
    in the line makes the result NaN (see nanmedian).

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0, 4.0, 2.0, 3.0], [5.0, 0.0, 9.0, 7.0]])
        >>> st.median(x).item(), st.median(x, dim=1).values.tolist()
        (3.0, [2.0, 5.0])
    """
    return _median_impl("median", input, dim, keepdim, False)


@composite("nanmedian", lambda x, dim=None, keepdim=False: _median_np(x, dim, keepdim, True),
           samples=_seeded(lambda: _median_samples()
                           + [((_with_nans(_R, (3, 5)),), {"dim": 1})]),
           method=True)
def nanmedian(input, dim=None, keepdim: bool = False):
    """median ignoring NaN (NaN only where a whole line is NaN).

    Example:
        >>> import singa_tensor as st
        >>> st.nanmedian(st.tensor([1.0, float('nan'), 3.0, 2.0])).item()
        2.0
    """
    return _median_impl("nanmedian", input, dim, keepdim, True)


def _kthvalue_np(x, k, dim=-1, keepdim=False):
    axis = dim % max(x.ndim, 1)
    x1 = np.atleast_1d(x)
    order = np.argsort(x1, axis=axis, kind="stable")
    idx = np.take(order, [k - 1], axis=axis)
    vals = np.take_along_axis(x1, idx, axis=axis)
    if not keepdim or not x.ndim:
        vals, idx = np.squeeze(vals, axis), np.squeeze(idx, axis)
    return vals.reshape(np.shape(vals)), idx.astype(np.int64)


@composite("kthvalue", _kthvalue_np,
           samples=_seeded(lambda: [((_distinct(3, 4), 2), {}),
                                    ((_distinct(3, 4), 1), {"dim": 0}),
                            ((_distinct(2, 3, 4), 4), {"dim": -1, "keepdim": True})]),
           method=True)
def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest value along dim (k from 1), a named tuple (values, indices).

    Example:
        >>> import singa_tensor as st
        >>> r = st.kthvalue(st.tensor([3.0, 1.0, 2.0]), 2)
        >>> r.values.item(), r.indices.item()
        (2.0, 2)
    """
    x = expect_tensor("kthvalue", input)
    d = _one_dim("kthvalue", x, dim)
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"kthvalue: k must be an int, got {k!r}")
    n = x.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue: k ({k}) is out of range for a dimension of size {n}")
    x1 = reshape(x, 1) if x.ndim == 0 else x
    s = sort(x1, d)
    return _finish("kthvalue", narrow(s.values, d, k - 1, 1), narrow(s.indices, d, k - 1, 1),
                   x, d, keepdim)


def _mode_np(x, dim=-1, keepdim=False):
    axis = dim % max(x.ndim, 1)
    xl = np.moveaxis(np.atleast_1d(x), axis, -1)
    vals = np.empty(xl.shape[:-1], x.dtype)
    idx = np.empty(xl.shape[:-1], np.int64)
    for pos in np.ndindex(*xl.shape[:-1]):
        line = xl[pos]
        u, c = np.unique(line, return_counts=True)
        v = u[c == c.max()].min()
        vals[pos], idx[pos] = v, np.nonzero(line == v)[0][-1]
    if keepdim and x.ndim:
        vals, idx = np.expand_dims(vals, axis), np.expand_dims(idx, axis)
    return vals, idx


@composite("mode", _mode_np,
           samples=_seeded(lambda: [((np.round(_rand(3, 6)),), {}),
                            ((np.round(_rand(4, 3)),), {"dim": 0, "keepdim": True})]),
           dtypes=("float32", "float64", "int32", "int64"), method=True,
           # the gradient goes to the element reported, but the mode of values that repeat
           # (the only interesting case) jumps under any perturbation: no finite differences
           differentiable=False)
def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along dim (the smallest of them on a tie) and the index of its
    last occurrence, a named tuple (values, indices). It compares every pair of elements of
    a line, so memory grows with the square of the dim's size.

    Example:
        >>> import singa_tensor as st
        >>> r = st.mode(st.tensor([2.0, 1.0, 2.0, 1.0, 3.0]))
        >>> r.values.item(), r.indices.item()
        (1.0, 3)
    """
    x = expect_tensor("mode", input)
    d = _one_dim("mode", x, dim)
    _nonempty("mode", x, d)
    x1 = reshape(x, 1) if x.ndim == 0 else x
    xl = movedim(x1, d, -1)
    n = xl.shape[-1]
    counts = _sum(cast(eq(unsqueeze(xl, -1), unsqueeze(xl, -2)), _dt.int64), dim=-1)
    best = eq(counts, amax(counts, dim=-1, keepdim=True))
    big = math.inf if xl.dtype.is_floating_point else int(np.iinfo(xl.dtype.np).max)
    value = amin(where(best, xl, big), dim=-1, keepdim=True)
    positions = _cr.arange(n, device=x.device)
    last = amax(where(eq(xl, value), positions, -1), dim=-1, keepdim=True)
    values = movedim(gather(xl, -1, last), -1, d)
    return _finish("mode", values, movedim(last, -1, d), x, d, keepdim)


# ---- quantiles -----------------------------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_impl(op: str, x, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):
    x = expect_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, "
                         f"got {interpolation!r}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if isinstance(q, bool) or not isinstance(q, (int, float)):
            raise TypeError(f"{op}: q must be a number or a Tensor, got {type(q).__name__}")
        qs = _cr.tensor([float(q)], dtype=x.dtype, device=x.device)
    else:
        if q.ndim > 1:
            raise ValueError(f"{op}: q must be a scalar or a 1-D tensor, got shape {q.shape}")
        scalar_q = q.ndim == 0
        qs = cast(reshape(q, -1), x.dtype)
    if qs.numel() and (amin(qs).item() < 0 or amax(qs).item() > 1):
        raise ValueError(f"{op}: q values must be in the range [0, 1]")
    if dim is None:
        xl, d_out = reshape(x, -1), None
    else:
        d_out = _one_dim(op, x, dim)
        xl = movedim(reshape(x, 1) if x.ndim == 0 else x, d_out, -1)
    if xl.shape[-1] == 0:
        raise IndexError(f"{op}: cannot compute on an empty {'tensor' if dim is None else 'dim'}")
    s = sort(xl, -1).values  # NaN last
    nan = isnan(xl)
    lead = xl.shape[:-1]
    if ignore_nan:
        count = _sum(cast(logical_not(nan), x.dtype), dim=-1, keepdim=True)  # (..., 1)
    else:
        count = _cr.full(lead + (1,), float(xl.shape[-1]), dtype=x.dtype, device=x.device)
    pos = (count - 1.0) * qs  # (..., Q)
    pos = where(lt(pos, 0.0), 0.0, pos)
    lo_f, hi_f = floor(pos), ceil(pos)
    lo_i, hi_i = cast(lo_f, _dt.int64), cast(hi_f, _dt.int64)
    lo_v, hi_v = gather(s, -1, lo_i), gather(s, -1, hi_i)
    if interpolation == "lower":
        out = lo_v
    elif interpolation == "higher":
        out = hi_v
    elif interpolation == "midpoint":
        out = (lo_v + hi_v) * 0.5
    elif interpolation == "nearest":
        from .elementwise import round as _round
        out = gather(s, -1, cast(_round(pos), _dt.int64))
    else:
        out = lo_v + (hi_v - lo_v) * (pos - lo_f)
    bad = any(nan, dim=-1, keepdim=True) if not ignore_nan else eq(count, 0.0)
    out = where(bad, math.nan, out)  # (..., Q)
    out = movedim(out, -1, 0)  # (Q, ...)
    if keepdim:
        if dim is None:
            out = reshape(out, (out.shape[0],) + (1,) * x.ndim)
        elif x.ndim:
            out = unsqueeze(out, d_out + 1)
    return select(out, 0, 0) if scalar_q else out


def _quantile_np(x, q, dim=None, keepdim=False, interpolation="linear", ignore_nan=False):
    fn = np.nanquantile if ignore_nan else np.quantile
    ax = None if dim is None else (dim % max(x.ndim, 1) if x.ndim else None)
    out = fn(x, q, axis=ax, keepdims=keepdim, method=interpolation)
    return np.asarray(out, dtype=x.dtype)


def _quantile_samples(nans=False):
    def make():
        x = _with_nans(_R, (3, 5)) if nans else _distinct(3, 5)
        # q inside (0, 1) and away from the kinks at whole positions (count - 1) * q, for
        # every count of non-NaN values a line can have
        q = np.array([0.1234, 0.3183, 0.5772, 0.8862])
        return [((x, 0.2718), {}), ((x, q), {"dim": 1}),
                ((x, 0.6180), {"dim": 0, "keepdim": True}),
                ((x, q), {"dim": None, "keepdim": True, "interpolation": "lower"}),
                ((x, 0.4142), {"dim": 1, "interpolation": "higher"}),
                ((x, 0.4142), {"dim": 1, "interpolation": "midpoint"}),
                ((x, 0.7071), {"dim": 1, "interpolation": "nearest"})]

    return make


@composite("quantile", _quantile_np, samples=_seeded(_quantile_samples()), method=True)
def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The q-th quantiles over dim (None: all elements), q a number or a 1-D tensor in [0, 1]
    (a tensor q adds a leading dim of its length). Between two sorted values the result is
    interpolated: "linear" (default), "lower", "higher", "midpoint" or "nearest". A NaN in the
    line makes the result NaN (see nanquantile).

    Example:
        >>> import singa_tensor as st
        >>> st.quantile(st.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
        2.5
    """
    return _quantile_impl("quantile", input, q, dim, keepdim, interpolation, False)


@composite("nanquantile",
           lambda x, q, dim=None, keepdim=False, interpolation="linear":
           _quantile_np(x, q, dim, keepdim, interpolation, True),
           samples=_seeded(_quantile_samples(nans=True)), method=True)
def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """quantile ignoring NaN (NaN only where a whole line is NaN).

    Example:
        >>> import singa_tensor as st
        >>> st.nanquantile(st.tensor([1.0, float('nan'), 3.0]), 0.5).item()
        2.0
    """
    return _quantile_impl("nanquantile", input, q, dim, keepdim, interpolation, True)


# ---- scans ---------------------------------------------------------------------------------------


def _shifted(x: Tensor, d: int, s: int, fill) -> Tensor:
    """x moved s places along d, the first s places filled with fill."""
    n = x.shape[d]
    pad_shape = tuple(s if i == d else m for i, m in enumerate(x.shape))
    pad = _cr.full(pad_shape, fill, dtype=x.dtype, device=x.device)
    return cat([pad, narrow(x, d, 0, n - s)], d)


def _scan_dim(op: str, x, dim) -> tuple:
    x = expect_tensor(op, x)
    d = _one_dim(op, x, dim)
    return (reshape(x, 1) if x.ndim == 0 else x), d


def _logcumsumexp_np(x, dim):
    x1 = np.atleast_1d(x)
    out = np.logaddexp.accumulate(x1, axis=dim % x1.ndim)
    return out.reshape(x.shape)


@composite("logcumsumexp", _logcumsumexp_np,
           samples=_seeded(lambda: [((_rand(3, 5),), {"dim": 1}), ((_rand(4, 2),), {"dim": 0}),
                            ((_rand(6) * 30.0,), {"dim": -1})]),
           method=True)
def logcumsumexp(input, dim: int) -> Tensor:
    """log(cumsum(exp(input))) along dim, without overflow or underflow.

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.logcumsumexp(st.tensor([0.0, 0.0, -1000.0]), 0).tolist()]
        [0.0, 0.6931, 0.6931]
    """
    x, d = _scan_dim("logcumsumexp", input, dim)
    if not x.dtype.is_floating_point:
        x = cast(x, _dt.float32)
    n, s, y = x.shape[d], 1, x
    while s < n:
        y = logaddexp(y, _shifted(y, d, s, -math.inf))
        s *= 2
    return reshape(y, input.shape)


def _cum_extreme(op: str, input, dim, later_wins):
    x, d = _scan_dim(op, input, dim)
    n = x.shape[d]
    line = tuple(n if i == d else 1 for i in range(x.ndim))
    idx = reshape(_cr.arange(n, device=x.device), *line) + _cr.zeros(x.shape, dtype=_dt.int64,
                                                                       device=x.device)
    floating = x.dtype.is_floating_point
    pad = (-math.inf if op == "cummax" else math.inf) if floating else int(
        np.iinfo(x.dtype.np).min if op == "cummax" else np.iinfo(x.dtype.np).max)
    v, s = x, 1
    while s < n:
        ev, ei = _shifted(v, d, s, pad), _shifted(idx, d, s, -1)
        take = later_wins(v, ev)
        if floating:  # NaN is the extreme: a later NaN wins, an earlier one holds
            take = logical_or(isnan(v), logical_and(logical_not(isnan(ev)), take))
        v, idx = where(take, v, ev), where(take, idx, ei)
        s *= 2
    return ValuesIndices(reshape(v, input.shape), reshape(idx, input.shape))


def _cum_np(better):
    def ref(x, dim):
        x1 = np.atleast_1d(x)
        xl = np.moveaxis(x1, dim % x1.ndim, -1)
        vals, idx = np.empty_like(xl), np.empty(xl.shape, np.int64)
        for pos in np.ndindex(*xl.shape[:-1]):
            best, bi = None, 0
            for i, v in enumerate(xl[pos]):
                if best is None or np.isnan(v) or (not np.isnan(best) and better(v, best)):
                    best, bi = v, i
                vals[pos + (i,)], idx[pos + (i,)] = best, bi
        back = (np.moveaxis(vals, -1, dim % x1.ndim), np.moveaxis(idx, -1, dim % x1.ndim))
        return back[0].reshape(x.shape), back[1].reshape(x.shape)

    return ref


def _cum_samples():
    return [((_distinct(3, 5),), {"dim": 1}), ((_distinct(4, 3),), {"dim": 0}),
            ((_distinct(7),), {"dim": 0})]


@composite("cummax", _cum_np(lambda v, b: v >= b), samples=_seeded(_cum_samples),
           dtypes=("float32", "float64", "int32", "int64"), method=True)
def cummax(input, dim: int):
    """The running maximum along dim and the index where it was reached (the latest, on a
    tie), a named tuple (values, indices); NaN, once seen, is the maximum.

    Example:
        >>> import singa_tensor as st
        >>> r = st.cummax(st.tensor([1.0, 3.0, 2.0, 3.0]), 0)
        >>> r.values.tolist(), r.indices.tolist()
        ([1.0, 3.0, 3.0, 3.0], [0, 1, 1, 3])
    """
    return _cum_extreme("cummax", input, dim, ge)


@composite("cummin", _cum_np(lambda v, b: v <= b), samples=_seeded(_cum_samples),
           dtypes=("float32", "float64", "int32", "int64"), method=True)
def cummin(input, dim: int):
    """The running minimum along dim and the index where it was reached (the latest, on a
    tie), a named tuple (values, indices); NaN, once seen, is the minimum.

    Example:
        >>> import singa_tensor as st
        >>> r = st.cummin(st.tensor([3.0, 1.0, 2.0, 1.0]), 0)
        >>> r.values.tolist(), r.indices.tolist()
        ([3.0, 1.0, 1.0, 1.0], [0, 1, 1, 3])
    """
    return _cum_extreme("cummin", input, dim, le)


__all__ = [
    "aminmax", "count_nonzero", "cummax", "cummin", "kthvalue", "logcumsumexp", "median",
    "mode", "nanmean", "nanmedian", "nanquantile", "nansum", "quantile", "std_mean",
    "var_mean",
]
