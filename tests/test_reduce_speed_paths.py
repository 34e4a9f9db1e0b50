"""The vectorised and tiled reduction kernels against numpy: rows split into lanes (with
tails), lines along a non-last axis handled a tile of columns at a time (tile edges), one
long row split across threads, and NaN, tie and infinity handling in each of those paths."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import to_numpy

# (shape, dim): last axis with lane tails, non-last axes narrower than, and across, the
# 4096-column tile edge, shapes large enough to be split across threads, and short non-last
# axes of wide tensors (the CUDA kernel gives those one row of threads per tile)
CASES = [
    ((5, 1), -1), ((3, 7), -1), ((4, 64), -1), ((9, 65), -1), ((2, 300), 1),
    ((7, 5), 0), ((3, 257), 0), ((33, 600), 0), ((2, 5, 300), 1), ((4, 3, 3), 1),
    ((130, 520), 0), ((520, 130), 1), ((1, 1000), 0), ((3, 4100), 0), ((20, 4100), 0),
    ((2, 17, 4099), 1), ((2, 9000), 0),
]
FLOATS = [np.float32, np.float64]


def _data(shape, dtype, seed, nan=False, ties=False):
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape)
    if ties:  # few distinct values, so maxima repeat within a line
        a = np.round(a * 2)
    if nan:
        flat = a.reshape(-1)
        flat[r.choice(flat.size, size=max(1, flat.size // 50), replace=False)] = np.nan
    return a.astype(dtype)


def _close(got, want, rtol):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


def _rtol(dtype):
    return 2e-5 if dtype == np.float32 else 1e-12


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nan", [False, True])
def test_extremes_and_args(shape, dim, dtype, nan):
    a = _data(shape, dtype, 1, nan=nan, ties=not nan)
    t = st.tensor(a)
    np.testing.assert_array_equal(to_numpy(st.amax(t, dim)), np.max(a, dim))
    np.testing.assert_array_equal(to_numpy(st.amin(t, dim)), np.min(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmax(t, dim)), np.argmax(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmin(t, dim)), np.argmin(a, dim))


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_extremes_and_sum(shape, dim, dtype):
    a = np.random.default_rng(2).integers(-50, 50, size=shape).astype(dtype)
    t = st.tensor(a)
    np.testing.assert_array_equal(to_numpy(st.amax(t, dim)), np.max(a, dim))
    np.testing.assert_array_equal(to_numpy(st.amin(t, dim)), np.min(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmax(t, dim)), np.argmax(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmin(t, dim)), np.argmin(a, dim))
    np.testing.assert_array_equal(to_numpy(st.sum(t, dim)), np.sum(a, dim, dtype=np.int64))


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nan", [False, True])
def test_sum_var_logsumexp(shape, dim, dtype, nan):
    a = _data(shape, dtype, 3, nan=nan)
    t = st.tensor(a)
    a64 = a.astype(np.float64)
    rtol = _rtol(dtype)
    _close(to_numpy(st.sum(t, dim)), np.sum(a64, dim), rtol)
    if shape[dim] > 1:
        _close(to_numpy(st.var(t, dim)), np.var(a64, dim, ddof=1), rtol)
    m = np.max(a64, dim, keepdims=True)
    lse = np.squeeze(m + np.log(np.sum(np.exp(a64 - m), dim, keepdims=True)), dim)
    _close(to_numpy(st.logsumexp(t, dim)), lse, rtol)


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nan", [False, True])
def test_softmax_paths(shape, dim, dtype, nan):
    a = _data(shape, dtype, 4, nan=nan) * 5
    t = st.tensor(a)
    a64 = a.astype(np.float64)
    s = a64 - np.max(a64, dim, keepdims=True)
    lse = np.log(np.sum(np.exp(s), dim, keepdims=True))
    rtol = _rtol(dtype)
    _close(to_numpy(st.softmax(t, dim)), np.exp(s - lse), rtol)
    _close(to_numpy(st.log_softmax(t, dim)), s - lse, rtol * 10)


@pytest.mark.parametrize("dim", [0, 1])
def test_infinite_lines(dim):
    # per line: all -inf, one +inf, -inf mixed with numbers, a NaN among infinities
    a = np.array([[-np.inf] * 4, [1.0, np.inf, 2.0, 3.0], [-np.inf, 1.0, -np.inf, 0.5],
                  [np.inf, np.nan, -np.inf, 1.0]], np.float32)
    a = a if dim == 1 else np.ascontiguousarray(a.T)
    t = st.tensor(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.max(a, dim, keepdims=True)
        shift = np.where(np.isneginf(m), 0, m)
        e = np.exp(a - shift)
        sm = e / e.sum(dim, keepdims=True)
        lse = np.squeeze(shift + np.log(e.sum(dim, keepdims=True)), dim)
    lse = np.where(np.isposinf(np.squeeze(m, dim)), np.inf, lse)  # an infinite term dominates
    np.testing.assert_array_equal(to_numpy(st.amax(t, dim)), np.max(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmax(t, dim)), np.argmax(a, dim))
    np.testing.assert_array_equal(to_numpy(st.argmin(t, dim)), np.argmin(a, dim))
    _close(to_numpy(st.softmax(t, dim)), sm, 1e-6)
    _close(to_numpy(st.logsumexp(t, dim)), lse, 1e-6)


@pytest.mark.parametrize("where", ["early", "late"])
def test_long_row_split_across_threads(where):
    n = 200_003  # above the split threshold, and not a multiple of the lane count
    a = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    k = 17 if where == "early" else n - 3
    a[k] = a.max() + 1  # the maximum, repeated further on: the first index must win
    a[n - 1] = a[k]
    a[11 if where == "early" else n - 5] = a.min() - 1
    t = st.tensor(a)
    assert st.amax(t).item() == a.max()
    assert st.amin(t).item() == a.min()
    assert st.argmax(t).item() == k
    assert st.argmin(t).item() == np.argmin(a)
    a[n // 2 + 1] = np.nan
    a[n - 2] = np.nan
    t = st.tensor(a)
    assert np.isnan(st.amax(t).item()) and np.isnan(st.amin(t).item())
    assert st.argmax(t).item() == n // 2 + 1 == st.argmin(t).item()


def test_float32_sums_stay_accurate():
    ones = st.ones(1 << 24)
    assert st.sum(ones).item() == float(1 << 24)
    a = np.random.default_rng(6).random((3000, 64)).astype(np.float32)
    t = st.tensor(a)
    for dim in (0, 1, None):
        want = np.sum(a.astype(np.float64), dim)
        np.testing.assert_allclose(to_numpy(st.sum(t, dim)), want, rtol=1e-6)
    # a column sum of 2^20 values 0.1: running float32 accumulation would be 1% off
    col = np.full((1 << 20, 2), 0.1, np.float32)
    want = np.sum(col.astype(np.float64), 0)
    np.testing.assert_allclose(to_numpy(st.sum(st.tensor(col), 0)), want, rtol=1e-7)
    assert abs(to_numpy(st.var(st.tensor(a + 1000), 0)) - np.var(a.astype(np.float64) + 1000,
                                                               0, ddof=1)).max() < 1e-4


@pytest.mark.parametrize("dtype", FLOATS)
def test_long_row_softmax_logsumexp_var(dtype):
    n = 150_001  # one row split across threads
    a = (np.random.default_rng(7).standard_normal(n) * 4 + 3).astype(dtype)
    t = st.tensor(a)
    a64 = a.astype(np.float64)
    s = a64 - a64.max()
    lse = np.log(np.exp(s).sum())
    rtol = _rtol(dtype) * 5
    _close(to_numpy(st.softmax(t, 0)), np.exp(s - lse), rtol)
    _close(to_numpy(st.log_softmax(t, 0)), s - lse, rtol)
    _close(st.logsumexp(t, 0).item(), a64.max() + lse, rtol)
    _close(st.var(t).item(), np.var(a64, ddof=1), rtol)
    a[n - 7] = np.nan
    t = st.tensor(a)
    assert np.isnan(st.logsumexp(t, 0).item()) and np.isnan(st.var(t).item())
    assert np.isnan(to_numpy(st.softmax(t, 0))).all()
    a[n - 7] = np.inf
    assert st.logsumexp(st.tensor(a), 0).item() == np.inf
    minus = np.full(n, -np.inf, dtype)
    assert st.logsumexp(st.tensor(minus), 0).item() == -np.inf
    np.testing.assert_array_equal(to_numpy(st.softmax(st.tensor(minus), 0))[:3], [np.nan] * 3)
