"""float32 accuracy of the libm-free unary kernels (functors.h): at most 4 ulp against a float64
reference over the whole float range, denormals included, and numpy's exact special values."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st

from .helpers import as_tensor, assert_ulp_close, to_numpy

MAX_ULP = 4.0
_erf64 = np.vectorize(math.erf, otypes=[np.float64])
_log64 = np.vectorize(math.log, otypes=[np.float64])


def _softplus64(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _gelu64(x):
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)))


# name -> (public function, float64 reference, extra dense interval where the op is delicate)
OPS = {
    "log": (st.log, np.log, (0.5, 2.0)),
    "log1p": (st.log1p, np.log1p, (-1.0, 1.0)),
    "expm1": (st.expm1, np.expm1, (-1.0, 1.0)),
    "erf": (st.erf, _erf64, (-4.5, 4.5)),
    "softplus": (st.softplus, _softplus64, (-30.0, 30.0)),
}

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, -1e-45, 1.1754942e-38,
                     -1.1754942e-38, 3.4028235e38, -3.4028235e38, 88.72283, 88.72284, 88.7229,
                     -87.33655, -103.97208, -104.0, -1e30], np.float32)


def _inputs(dense: tuple[float, float], n: int = 250_000) -> np.ndarray:
    rng = np.random.default_rng(1234)
    # random bit patterns hit every exponent (denormals included) equally often
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[~np.isnan(bits)]  # NaN payloads are covered by SPECIALS
    mag = np.exp(rng.uniform(math.log(1e-45), math.log(3.4e38), n))
    dense_pts = rng.uniform(*dense, n)
    near_one = 1.0 + rng.uniform(-1e-3, 1e-3, n // 4)
    return np.concatenate([bits, mag.astype(np.float32), (-mag).astype(np.float32),
                           dense_pts.astype(np.float32), near_one.astype(np.float32), SPECIALS])


@pytest.mark.parametrize("name", sorted(OPS))
def test_float32_within_4_ulp(name):
    fn, ref_fn, dense = OPS[name]
    x = _inputs(dense)
    y = to_numpy(fn(as_tensor(x)))
    assert y.dtype == np.float32
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    # ulps of float32 against the unrounded float64 reference; where float32 overflows or the
    # result is NaN, the kernel must agree exactly
    assert_ulp_close(y, ref, MAX_ULP, dtype=np.float32, msg=name)


@pytest.mark.parametrize("name", sorted(OPS))
def test_special_values_exact(name):
    fn, ref_fn, _ = OPS[name]
    y = to_numpy(fn(as_tensor(SPECIALS)))
    with np.errstate(all="ignore"):
        ref = ref_fn(SPECIALS.astype(np.float64)).astype(np.float32)
    special = ~np.isfinite(SPECIALS) | (SPECIALS == 0) | ~np.isfinite(ref) | (ref == 0)
    special |= np.abs(ref) == 1.0
    got, want = y[special], ref[special]
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{name}: x={SPECIALS[special][~same]} got {got[~same]} want {want[~same]}"


def test_documented_special_values():
    inf, nan = np.inf, np.nan
    cases = {
        st.log: ([0.0, -0.0, -1.0, inf, -inf, 1.0], [-inf, -inf, nan, inf, nan, 0.0]),
        st.log1p: ([-1.0, -2.0, inf, -0.0], [-inf, nan, inf, -0.0]),
        st.expm1: ([inf, -inf, -0.0, 100.0], [inf, -1.0, -0.0, inf]),
        st.erf: ([inf, -inf, -0.0, 10.0], [1.0, -1.0, -0.0, 1.0]),
    }
    for fn, (xs, want) in cases.items():
        got = to_numpy(fn(as_tensor(np.array(xs, np.float32))))
        want = np.array(want, np.float32)
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all(), (fn.__name__, got)
    assert np.isnan(to_numpy(st.log(as_tensor(np.array([nan], np.float32))))).all()


def test_exact_gelu_float32_matches_erf_reference():
    x = np.linspace(-8.0, 8.0, 100_001).astype(np.float32)
    y = to_numpy(st.gelu(as_tensor(x)))
    ref = _gelu64(x.astype(np.float64))
    # for x < -1, 1 + erf cancels (in float64 too), so only an absolute bound is meaningful there
    right = x >= -1.0
    assert_ulp_close(y[right], ref[right], MAX_ULP, dtype=np.float32, msg="gelu")
    assert np.max(np.abs(y - ref) / np.maximum(np.abs(x), 1.0)) < 2e-7


def test_float64_keeps_libm_accuracy():
    # against the math module's libm calls, not numpy's log, whose kernel differs per CPU: a
    # libm log is within an ulp of exact (glibc's 0.52, CUDA's 1) and erf within two (CUDA),
    # so two of them differ by at most 2 and 3 ulps
    x = np.linspace(1e-3, 50.0, 10_001)
    assert_ulp_close(st.log(as_tensor(x)), _log64(x), 2, msg="log")
    assert_ulp_close(st.erf(as_tensor(x - 25.0)), _erf64(x - 25.0), 3, msg="erf")
