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


def _unary_kernels() -> list[str]:
    from singa_tensor.backend import cpu

    return sorted(n for n, spec in st.op_registry.items()
                  if getattr(spec, "kind", None) == "unary"
                  and not getattr(spec, "composite", False) and hasattr(cpu.lib, f"st_{n}_f32"))


_GRAD_KERNELS = ["gelu", "gelu_tanh", "silu", "relu", "sigmoid", "tanh"]


def _cpu_only():
    from .helpers import DEVICE

    if DEVICE != "cpu":
        pytest.skip("the AVX-512 build is the CPU library's")


def _both_widths(run):
    """run() with the AVX-512 build of the float32 unary kernels, then with the AVX2 one."""
    from singa_tensor.backend import cpu

    before = cpu.lib.st_cpu_avx512(-1)
    try:
        if cpu.lib.st_cpu_avx512(1) != 1:
            pytest.skip("this CPU has no AVX-512: only the AVX2 build runs")
        wide = run()
        assert cpu.lib.st_cpu_avx512(0) == 0
        narrow = run()
    finally:
        cpu.lib.st_cpu_avx512(before)
    return wide, narrow


@pytest.mark.parametrize("name", _unary_kernels())
def test_avx512_and_avx2_builds_give_the_same_bits(name):
    """The float32 unary kernels run 16 lanes wide where the CPU has AVX-512 and 8 wide with
    AVX2 (cpp/src/elementwise.cc): the same operations per element, so the same bits, NaN
    payloads aside, over random bit patterns, a dense interval and the special values, for
    lengths that leave a tail in either width."""
    _cpu_only()
    from singa_tensor.backend import cpu

    x = _inputs((-4.0, 4.0), n=20_000)[:-3]  # an odd length: a tail in either width

    def run():
        out = np.empty_like(x)
        # alpha, beta: the slope, bounds or beta/threshold of the ops that take them
        getattr(cpu.lib, f"st_{name}_f32")(cpu.ffi.from_buffer("float[]", x),
                                            cpu.ffi.from_buffer("float[]", out), x.size, 0.5, 2.0)
        return out

    wide, narrow = _both_widths(run)
    same = (wide.view(np.uint32) == narrow.view(np.uint32)) | (np.isnan(wide) & np.isnan(narrow))
    assert same.all(), (name, x[~same][:5], wide[~same][:5], narrow[~same][:5])


@pytest.mark.parametrize("name", _GRAD_KERNELS)
def test_avx512_and_avx2_gradient_kernels_give_the_same_bits(name):
    _cpu_only()
    from singa_tensor.backend import cpu

    r = np.random.default_rng(7)
    x = np.concatenate([r.uniform(-12, 12, 10_003), SPECIALS]).astype(np.float32)
    g = r.standard_normal(x.size).astype(np.float32)

    def run():
        out = np.empty_like(x)
        getattr(cpu.lib, f"st_{name}_backward_f32")(
            cpu.ffi.from_buffer("float[]", x), cpu.ffi.from_buffer("float[]", g),
            cpu.ffi.from_buffer("float[]", out), x.size, 0.0, 0.0)
        return out

    wide, narrow = _both_widths(run)
    same = (wide.view(np.uint32) == narrow.view(np.uint32)) | (np.isnan(wide) & np.isnan(narrow))
    assert same.all(), (name, x[~same][:5], wide[~same][:5], narrow[~same][:5])


def test_the_avx512_switch_reports_what_runs():
    """st_cpu_avx512(-1) asks, 0 turns the AVX-512 build off, 1 on only where the CPU has it."""
    from singa_tensor.backend import cpu

    before = cpu.lib.st_cpu_avx512(-1)
    try:
        assert cpu.lib.st_cpu_avx512(0) == 0 and cpu.lib.st_cpu_avx512(-1) == 0
        on = cpu.lib.st_cpu_avx512(1)
        assert on in (0, 1) and cpu.lib.st_cpu_avx512(-1) == on
    finally:
        cpu.lib.st_cpu_avx512(before)
