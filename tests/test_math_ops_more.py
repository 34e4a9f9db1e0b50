"""The elementwise math ops after the first set (inverse trig and hyperbolic, the gamma family,
erfinv, log2/exp2, trunc/frac, atan2 ... fmin), the pointwise, matrix and reduction composites:
their aliases, in-place variants, named tuples, special values and error paths. Forward values
against the numpy references and the gradients are the registry's (tests/test_op_registry.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import _special_np as snp

from .helpers import as_tensor, assert_close, assert_ulp_close, to_numpy

NAN, INF = math.nan, math.inf


def t(values, dtype=None):
    return as_tensor(np.asarray(values, dtype=dtype or np.float32))


# ---- aliases and in-place variants -----------------------------------------------------------

ALIASES = [("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
           ("arccosh", "acosh"), ("arctanh", "atanh"), ("fix", "trunc"), ("sgn", "sign"),
           ("arctan2", "atan2")]


@pytest.mark.parametrize("alias, name", ALIASES)
def test_aliases_are_the_same_op(alias, name):
    assert getattr(st, alias) is getattr(st, name)
    assert getattr(st.Tensor, alias) is getattr(st.Tensor, name)
    assert hasattr(st.Tensor, alias + "_") and hasattr(st.Tensor, name + "_")


UNARY_INPLACE = {
    "asin": [0.3, -0.7], "acos": [0.3, -0.7], "atan": [2.0, -0.5], "asinh": [2.0, -0.5],
    "acosh": [1.5, 3.0], "atanh": [0.3, -0.7], "sinh": [1.0, -2.0], "cosh": [1.0, -2.0],
    "lgamma": [0.5, 4.0], "digamma": [0.5, 4.0], "erfinv": [0.5, -0.9], "erfc": [0.5, -1.0],
    "log2": [0.5, 8.0], "log10": [0.5, 100.0], "exp2": [0.5, -3.0], "trunc": [2.7, -2.7],
    "frac": [2.75, -2.75], "sgn": [2.0, -3.0], "arcsin": [0.3, -0.7], "fix": [2.7, -2.7],
    "sinc": [0.5, 0.0], "deg2rad": [90.0, -45.0], "rad2deg": [1.0, -2.0],
    "nan_to_num": [NAN, INF],
}


@pytest.mark.parametrize("name", sorted(UNARY_INPLACE))
def test_unary_inplace_matches_out_of_place(name):
    x = t(UNARY_INPLACE[name])
    want = to_numpy(getattr(x, name)())
    y = x.clone()
    assert getattr(y, name + "_")() is y
    np.testing.assert_array_equal(to_numpy(y), want)


def test_true_divide_aliases_divide_in_place():
    for name in ("div_", "true_divide_", "divide_"):
        x = t([3.0, 1.0])
        assert getattr(x, name)(t([2.0, 4.0])) is x and x.tolist() == [1.5, 0.25]


def test_polygamma_method_and_inplace_take_n():
    x = t([1.0, 2.5])
    want = to_numpy(st.polygamma(2, x))
    np.testing.assert_array_equal(to_numpy(x.polygamma(2)), want)
    y = x.clone()
    y.polygamma_(2)
    np.testing.assert_array_equal(to_numpy(y), want)
    assert_close(want, snp.polygamma(np.array([1.0, 2.5]), 2), rtol=1e-5)


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmod", "copysign", "xlogy"])
def test_binary_inplace_matches_out_of_place(name):
    a, b = t([[1.5, -2.0, 3.0]]), t([0.5, 2.0, -1.25])
    want = to_numpy(getattr(st, name)(a, b))
    y = a.clone()
    assert getattr(y, name + "_")(b) is y
    np.testing.assert_array_equal(to_numpy(y), want)


def test_fused_multiply_add_inplace_variants():
    x, a, b = t([1.0, 2.0]), t([3.0, 4.0]), t([2.0, 8.0])
    for name, kw in (("addcmul", {"value": 0.5}), ("addcdiv", {"value": -2})):
        y = x.clone()
        assert getattr(y, name + "_")(a, b, **kw) is y
        np.testing.assert_array_equal(to_numpy(y), to_numpy(getattr(st, name)(x, a, b, **kw)))
    y = x.clone()
    y.lerp_(a, 0.25)
    np.testing.assert_array_equal(to_numpy(y), [1.5, 2.5])
    y = x.clone()
    y.lerp_(a, t([0.0, 1.0]))
    np.testing.assert_array_equal(to_numpy(y), [1.0, 4.0])  # the end, exactly, at weight 1


def test_matrix_inplace_variants():
    r = np.random.default_rng(0)
    m, v1, v2 = r.standard_normal((3, 4)), r.standard_normal(3), r.standard_normal(4)
    y = as_tensor(m)
    y.addr_(as_tensor(v1), as_tensor(v2), beta=0.5, alpha=2.0)
    assert_close(y, 0.5 * m + 2.0 * np.outer(v1, v2), rtol=1e-12)
    b1, b2, c = r.standard_normal((2, 3, 4)), r.standard_normal((2, 4, 5)), r.standard_normal(
        (2, 3, 5))
    y = as_tensor(c)
    y.baddbmm_(as_tensor(b1), as_tensor(b2), alpha=-1)
    assert_close(y, c - b1 @ b2, rtol=1e-12)


# ---- special values ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gamma_family_poles_and_infinities(dtype):
    x = np.array([0.0, -0.0, -1.0, -3.0, INF, -INF, NAN], dtype)
    np.testing.assert_array_equal(to_numpy(st.lgamma(as_tensor(x))),
                                  np.array([INF, INF, INF, INF, INF, INF, NAN], dtype))
    np.testing.assert_array_equal(to_numpy(st.digamma(as_tensor(x))),
                                  np.array([-INF, INF, NAN, NAN, INF, NAN, NAN], dtype))
    np.testing.assert_array_equal(to_numpy(st.polygamma(1, as_tensor(x))),
                                  np.array([INF, INF, INF, INF, 0.0, NAN, NAN], dtype))
    np.testing.assert_array_equal(to_numpy(st.polygamma(2, as_tensor(x))),
                                  np.array([NAN, NAN, NAN, NAN, 0.0, NAN, NAN], dtype))


def test_gamma_family_below_zero():
    x = np.array([-0.5, -1.5, -2.25, -7.75])
    for fn, ref, rtol in ((st.lgamma, snp.lgamma, 1e-13), (st.digamma, snp.digamma, 1e-12),
                          (lambda v: st.polygamma(1, v), lambda v: snp.polygamma(v, 1), 1e-11),
                          (lambda v: st.polygamma(3, v), lambda v: snp.polygamma(v, 3), 1e-9)):
        assert_close(fn(as_tensor(x)), ref(x), rtol=rtol, atol=0)
    # digamma(-0.5) = digamma(1.5) + pi cot(... ) = 2 - gamma - 2 ln 2: a closed form
    assert_close(st.digamma(as_tensor(np.array([-0.5]))),
                 [2 - 0.5772156649015329 - 2 * math.log(2)], rtol=1e-13, atol=0)


def test_polygamma_refuses_far_negative_arguments_but_not_n1():
    x = as_tensor(np.array([-2e6 + 0.5]))
    assert np.isnan(to_numpy(st.polygamma(2, x))).all()
    got = to_numpy(st.polygamma(1, x))  # the reflection: pi^2 / sin^2(pi x) - psi1(1 - x)
    assert_close(got, [math.pi ** 2 - 1 / (2e6 + 0.5)], rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erfinv_special_values(dtype):
    x = np.array([1.0, -1.0, 1.5, -2.0, NAN, 0.0, -0.0], dtype)
    got = to_numpy(st.erfinv(as_tensor(x)))
    np.testing.assert_array_equal(got, np.array([INF, -INF, NAN, NAN, NAN, 0.0, -0.0], dtype))
    assert np.signbit(got[-1])


def test_kernels_float32_accuracy_on_a_dense_grid():
    # float32 kernels against float64 references; lgamma and digamma lose relative accuracy
    # next to their zeros (x ~ 1, 2 and 1.4616), so the bound there is absolute
    grid = np.linspace(-0.999, 0.999, 20001).astype(np.float32)
    assert_ulp_close(st.erfinv(as_tensor(grid)), snp.erfinv(grid.astype(np.float64)), 2,
                     dtype=np.float32, msg="erfinv")
    tail = 1.0 - np.geomspace(1e-15, 1e-3, 200)  # float64 near 1, where erfc takes over
    assert_close(st.erfinv(as_tensor(tail)), snp.erfinv(tail), rtol=1e-13, atol=0)
    pos = np.geomspace(1e-3, 1e3, 5001)
    for fn, ref in ((st.lgamma, snp.lgamma), (st.digamma, snp.digamma)):
        got = to_numpy(fn(as_tensor(pos.astype(np.float32)))).astype(np.float64)
        want = ref(pos.astype(np.float32).astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_trunc_frac_and_log2_exp2_values():
    x = t([2.5, -2.5, -0.5, INF, -INF, NAN])
    np.testing.assert_array_equal(to_numpy(st.trunc(x)), [2.0, -2.0, -0.0, INF, -INF, NAN])
    np.testing.assert_array_equal(to_numpy(st.frac(x)), [0.5, -0.5, -0.5, NAN, NAN, NAN])
    np.testing.assert_array_equal(to_numpy(st.log2(t([8.0, 0.0, -1.0]))), [3.0, -INF, NAN])
    np.testing.assert_array_equal(to_numpy(st.exp2(t([10.0, -INF, INF]))), [1024.0, 0.0, INF])
    np.testing.assert_array_equal(to_numpy(st.log10(t([1000.0]))), [3.0])


def test_fmax_fmin_ignore_nan_but_maximum_does_not():
    a, b = t([NAN, 1.0, NAN, 2.0]), t([3.0, NAN, NAN, -1.0])
    np.testing.assert_array_equal(to_numpy(st.fmax(a, b)), [3.0, 1.0, NAN, 2.0])
    np.testing.assert_array_equal(to_numpy(st.fmin(a, b)), [3.0, 1.0, NAN, -1.0])
    assert np.isnan(to_numpy(st.maximum(a, b))[:3]).all()
    ai, bi = as_tensor(np.array([1, 5], np.int64)), as_tensor(np.array([4, 2], np.int64))
    assert st.fmax(ai, bi).tolist() == [4, 5] and st.fmax(ai, bi).dtype == st.int64


def test_fmax_gradient_goes_to_the_number_next_to_a_nan():
    a = as_tensor(np.array([NAN, 1.0, 2.0]), requires_grad=True)
    b = as_tensor(np.array([3.0, NAN, 1.0]), requires_grad=True)
    st.fmax(a, b).sum().backward()
    np.testing.assert_array_equal(to_numpy(a.grad), [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(to_numpy(b.grad), [1.0, 0.0, 0.0])


def test_fmod_takes_the_dividends_sign():
    a = as_tensor(np.array([7, -7, 7, -7], np.int64))
    b = as_tensor(np.array([3, 3, -3, -3], np.int64))
    assert st.fmod(a, b).tolist() == [1, -1, 1, -1]
    assert st.remainder(a, b).tolist() == [1, 2, -2, -1]
    np.testing.assert_array_equal(to_numpy(st.fmod(t([-7.5, 7.5, 1.0]), t([2.0, -2.0, 0.0]))),
                                  [-1.5, 1.5, NAN])
    x = t([5.0])
    x.fmod_(3)
    assert x.tolist() == [2.0]


def test_copysign_signbit_and_infinity_masks():
    x = t([1.0, -0.0, 0.0, -INF, INF, NAN, -2.0])
    np.testing.assert_array_equal(to_numpy(st.signbit(x)),
                                  [False, True, False, True, False, False, True])
    np.testing.assert_array_equal(to_numpy(st.isposinf(x)),
                                  [False, False, False, False, True, False, False])
    np.testing.assert_array_equal(to_numpy(st.isneginf(x)),
                                  [False, False, False, True, False, False, False])
    got = to_numpy(st.copysign(t([2.0, 2.0, -3.0]), t([-0.0, 0.0, INF])))
    np.testing.assert_array_equal(got, [-2.0, 2.0, 3.0])
    ints = as_tensor(np.array([-1, 0, 3], np.int32))
    assert st.signbit(ints).tolist() == [True, False, False]
    assert st.isposinf(ints).tolist() == [False, False, False]


def test_atan2_and_hypot_at_the_edges():
    got = to_numpy(st.atan2(t([0.0, -0.0, 1.0, INF]), t([-1.0, -1.0, 0.0, INF])))
    assert_close(got, [math.pi, -math.pi, math.pi / 2, math.pi / 4], rtol=1e-6)
    big = as_tensor(np.array([1e300]))
    assert st.hypot(big, big).item() == pytest.approx(math.sqrt(2) * 1e300, rel=1e-15)
    assert st.hypot(t([INF]), t([NAN])).item() == INF


def test_logaddexp_and_sinc_special_values():
    a, b = t([INF, -INF, -INF, 1000.0, NAN]), t([INF, -INF, 0.0, -1000.0, 0.0])
    np.testing.assert_array_equal(to_numpy(st.logaddexp(a, b)), [INF, -INF, 0.0, 1000.0, NAN])
    np.testing.assert_array_equal(to_numpy(st.logaddexp2(a, b)), [INF, -INF, 0.0, 1000.0, NAN])
    x = as_tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
    y = st.sinc(x)
    y.sum().backward()
    assert_close(y, np.sinc([0.0, 1.0, 2.0]), atol=1e-15)
    assert_close(x.grad, [0.0, -1.0, 0.5], rtol=1e-12, atol=1e-15)  # cos(pi x)/x at integers


def test_logaddexp_gradient_splits_evenly_on_ties():
    a = as_tensor(np.array([0.5]), requires_grad=True)
    b = as_tensor(np.array([0.5]), requires_grad=True)
    st.logaddexp(a, b).backward()
    assert a.grad.item() == 0.5 and b.grad.item() == 0.5


def test_xlogy_zero_times_log_zero():
    got = to_numpy(st.xlogy(t([0.0, 0.0, 2.0, 0.0]), t([0.0, INF, 0.0, NAN])))
    np.testing.assert_array_equal(got, [0.0, 0.0, -INF, NAN])
    assert st.xlogy(3, t([1.0])).tolist() == [0.0]


def test_nan_to_num_defaults_and_values():
    x = t([NAN, INF, -INF, 1.5])
    big = float(np.finfo(np.float32).max)
    np.testing.assert_array_equal(to_numpy(st.nan_to_num(x)), [0.0, big, -big, 1.5])
    np.testing.assert_array_equal(to_numpy(x.nan_to_num(nan=1.0, posinf=2.0, neginf=-2.0)),
                                  [1.0, 2.0, -2.0, 1.5])
    h = st.nan_to_num(st.tensor([INF], dtype=st.float16))
    assert h.dtype == st.float16 and h.item() == 65504.0
    ints = as_tensor(np.array([1, 2], np.int64))
    assert st.nan_to_num(ints).tolist() == [1, 2]


def test_heaviside_deg2rad_and_float_power():
    x = t([-1.0, 0.0, 2.0, NAN])
    np.testing.assert_array_equal(to_numpy(st.heaviside(x, t([0.25]))), [0.0, 0.25, 1.0, NAN])
    assert_close(st.deg2rad(t([180.0, -90.0])), [math.pi, -math.pi / 2], rtol=1e-7)
    assert st.deg2rad(as_tensor(np.array([180], np.int64))).dtype == st.float32
    y = st.float_power(t([2.0]), t([0.5]))
    assert y.dtype == st.float64 and y.item() == pytest.approx(math.sqrt(2), rel=1e-15)
    assert st.float_power(2, as_tensor(np.array([3], np.int32))).tolist() == [8.0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_floats_compute_in_float32_and_come_back(dtype):
    d = getattr(st, dtype)
    x = st.tensor([0.5, -0.25], dtype=d)
    for fn in (st.asin, st.atanh, st.lgamma, st.digamma, st.erfinv, st.exp2, st.frac, st.sinc,
               st.deg2rad, st.nan_to_num):
        y = fn(x)
        assert y.dtype == d, fn.__name__
        assert_close(y.to(st.float32), to_numpy(fn(x.to(st.float32))), rtol=1e-2, atol=1e-3)
    for fn in (st.logaddexp, st.xlogy, lambda a, b: st.lerp(a, b, 0.3)):
        assert fn(x, x.abs()).dtype == d


# ---- reductions and scans ----------------------------------------------------------------------


def test_median_is_the_lower_middle_and_a_named_tuple():
    x = t([[1.0, 4.0, 2.0, 3.0], [5.0, 0.0, 9.0, 7.0]])
    assert st.median(x).item() == 3.0
    r = st.median(x, dim=1)
    assert r.values.tolist() == [2.0, 5.0] and r.indices.tolist() == [2, 0]
    values, indices = x.median(0, keepdim=True)
    assert values.shape == (1, 4) and indices.tolist() == [[0, 1, 0, 0]]
    r0 = st.median(st.tensor(3.0), 0)
    assert r0.values.shape == () and r0.indices.item() == 0


def test_median_nan_and_nanmedian():
    x = t([[1.0, NAN, 3.0, 2.0], [NAN, NAN, NAN, NAN]])
    r = st.median(x, 1)
    assert np.isnan(to_numpy(r.values)).all() and r.indices.tolist() == [1, 0]
    assert math.isnan(st.median(x).item())
    n = st.nanmedian(x, 1)
    np.testing.assert_array_equal(to_numpy(n.values), [2.0, NAN])
    assert n.indices.tolist()[0] == 3
    assert st.nanmedian(x).item() == 2.0


def test_median_gradient_goes_to_the_chosen_element():
    x = as_tensor(np.array([3.0, 1.0, 2.0, 5.0]), requires_grad=True)
    st.median(x).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [0.0, 0.0, 1.0, 0.0])


def test_kthvalue_mode_aminmax():
    x = t([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    r = st.kthvalue(x, 2, dim=1)
    assert r.values.tolist() == [2.0, 4.0] and r.indices.tolist() == [2, 2]
    assert x.kthvalue(1, 0, True).values.tolist() == [[0.0, 1.0, 2.0]]
    m = st.mode(as_tensor(np.array([[2, 1, 2, 1, 3], [7, 7, 0, 0, 7]], np.int64)))
    assert m.values.tolist() == [1, 7] and m.indices.tolist() == [3, 4]
    mm = st.aminmax(x)
    assert (mm.min.item(), mm.max.item()) == (0.0, 5.0)
    mn, mx = x.aminmax(dim=0, keepdim=True)
    assert mn.tolist() == [[0.0, 1.0, 2.0]] and mx.tolist() == [[3.0, 5.0, 4.0]]


def test_counts_and_nan_ignoring_sums():
    x = t([[0.0, 1.0, NAN], [2.0, 0.0, 0.0]])
    assert st.count_nonzero(x).item() == 3 and st.count_nonzero(x).dtype == st.int64
    assert st.count_nonzero(x, dim=0).tolist() == [1, 1, 1]
    assert st.nansum(x).item() == 3.0
    assert_close(st.nanmean(x, dim=1), [0.5, 2.0 / 3.0], rtol=1e-7)
    assert math.isnan(st.nanmean(t([NAN, NAN])).item())


def test_var_mean_and_std_mean():
    x = np.random.default_rng(1).standard_normal((3, 4))
    v, m = st.var_mean(as_tensor(x), dim=1, correction=0)
    assert_close(v, x.var(axis=1), rtol=1e-12) and assert_close(m, x.mean(axis=1), rtol=1e-12)
    s, m = st.std_mean(as_tensor(x), 0, keepdim=True)
    assert_close(s, x.std(axis=0, ddof=1, keepdims=True), rtol=1e-12)
    assert m.shape == (1, 4)
    v, _ = st.var_mean(as_tensor(x), False)  # the legacy unbiased flag in dim's place
    assert_close(v, x.var(), rtol=1e-12)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolations_match_numpy(interpolation):
    x = np.random.default_rng(2).standard_normal((4, 7))
    q = np.array([0.0, 0.1, 0.5, 0.73, 1.0])
    got = st.quantile(as_tensor(x), as_tensor(q), dim=1, keepdim=True,
                      interpolation=interpolation)
    want = np.quantile(x, q, axis=1, keepdims=True, method=interpolation)
    assert got.shape == want.shape == (5, 4, 1)
    assert_close(got, want, rtol=1e-12)
    whole = st.quantile(as_tensor(x), 0.3, interpolation=interpolation)
    assert whole.shape == () and whole.item() == pytest.approx(
        float(np.quantile(x, 0.3, method=interpolation)), rel=1e-12)


def test_nanquantile_skips_nan_and_quantile_does_not():
    x = t([[1.0, NAN, 3.0, 2.0], [NAN, NAN, NAN, NAN]])
    np.testing.assert_array_equal(to_numpy(st.nanquantile(x, 0.5, dim=1)), [2.0, NAN])
    assert np.isnan(to_numpy(st.quantile(x, 0.5, dim=1))).all()


def test_logcumsumexp_keeps_small_terms():
    x = np.array([-1000.0, -999.0, 0.0, 800.0])
    got = to_numpy(st.logcumsumexp(as_tensor(x), 0))
    assert_close(got, np.logaddexp.accumulate(x), rtol=1e-14)
    y = to_numpy(st.logcumsumexp(t([-INF, -INF, 0.0]), 0))
    np.testing.assert_array_equal(y, [-INF, -INF, 0.0])


def test_cummax_cummin_ties_and_nan():
    r = st.cummax(t([1.0, 3.0, 2.0, 3.0, NAN, 5.0]), 0)
    np.testing.assert_array_equal(to_numpy(r.values), [1.0, 3.0, 3.0, 3.0, NAN, NAN])
    assert r.indices.tolist() == [0, 1, 1, 3, 4, 4]
    r = st.cummin(as_tensor(np.array([[3, 1, 2, 1]], np.int64)), dim=1)
    assert r.values.tolist() == [[3, 1, 1, 1]] and r.indices.tolist() == [[0, 1, 1, 3]]
    x = as_tensor(np.array([1.0, 3.0, 2.0]), requires_grad=True)
    st.cummax(x, 0).values.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [1.0, 2.0, 0.0])


# ---- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, exc, match", [
    (st.asin, ([0.5],), {}, TypeError, r"^asin: input must be a Tensor"),
    (st.lgamma, ("x",), {}, TypeError, r"^lgamma: input must be a Tensor"),
    (st.polygamma, (-1, None), {}, ValueError, r"^polygamma: n must be a non-negative integer"),
    (st.polygamma, (1.5, None), {}, ValueError, r"^polygamma: n must be a non-negative integer"),
    (st.polygamma, (1001, None), {}, ValueError, r"^polygamma: n must be at most 1000"),
    (st.atan2, ([1.0], [1.0]), {}, TypeError, r"^atan2: expected at least one Tensor"),
    (st.hypot, ("a", None), {}, TypeError, r"^hypot: unsupported operand of type str"),
    (st.float_power, (None, "a"), {}, TypeError, r"^float_power: unsupported operand"),
    (st.addcmul, (None, [1.0], None), {}, TypeError, r"^addcmul: tensor1 must be a Tensor"),
    (st.addcmul, (None, None, None), {"value": "2"}, TypeError,
     r"^addcmul: value must be a number"),
    (st.lerp, (None, None, "w"), {}, TypeError, r"^lerp: weight must be a number or a Tensor"),
    (st.nan_to_num, (None,), {"posinf": "big"}, TypeError,
     r"^nan_to_num: posinf must be a number or None"),
    (st.heaviside, (None, "v"), {}, TypeError, r"^heaviside: values must be a Tensor"),
    (st.count_nonzero, ([1, 0],), {}, TypeError, r"^count_nonzero: input must be a Tensor"),
    (st.kthvalue, (None, 0), {}, IndexError, r"^kthvalue: k \(0\) is out of range"),
    (st.kthvalue, (None, 4), {}, IndexError, r"^kthvalue: k \(4\) is out of range"),
    (st.kthvalue, (None, 1.0), {}, TypeError, r"^kthvalue: k must be an int"),
    (st.median, (None, (0, 1)), {}, TypeError, r"^median: dim must be an int"),
    (st.mode, (None, True), {}, TypeError, r"^mode: dim must be an int"),
    (st.aminmax, (None,), {"dim": (0,)}, TypeError, r"^aminmax: dim must be an int or None"),
    (st.quantile, (None, 1.5), {}, ValueError, r"^quantile: q values must be in the range"),
    (st.quantile, (None, "q"), {}, TypeError, r"^quantile: q must be a number or a Tensor"),
    (st.quantile, (None, 0.5), {"interpolation": "cubic"}, ValueError,
     r"^quantile: interpolation must be one of linear, lower"),
    (st.nanquantile, (None, -0.1), {}, ValueError, r"^nanquantile: q values must be in"),
    (st.cummax, (None, 2), {}, IndexError, r"cummax"),
    (st.logcumsumexp, (None, 1.5), {}, TypeError, r"^logcumsumexp: dim must be an int"),
])
def test_bad_arguments_name_the_op(fn, args, kwargs, exc, match):
    x = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    args = tuple(x if a is None else a for a in args)
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_bad_dtypes_and_shapes_name_the_op():
    ints = as_tensor(np.array([1, 2], np.int64))
    with pytest.raises(ZeroDivisionError, match="^fmod: integer division by zero"):
        st.fmod(ints, as_tensor(np.array([1, 0], np.int64)))
    with pytest.raises(TypeError, match=r"^heaviside: input \(float32\) and values \(float64\)"):
        st.heaviside(t([1.0]), as_tensor(np.array([0.5])))
    with pytest.raises(TypeError, match="^addcdiv: integer division"):
        st.addcdiv(ints, ints, ints)
    with pytest.raises(TypeError, match="^lerp: expected a floating-point input, got int64"):
        st.lerp(ints, ints, 0.5)
    with pytest.raises(TypeError, match="^nanmean: expected a floating-point input"):
        st.nanmean(ints)
    with pytest.raises(TypeError, match="^quantile: expected a floating-point input"):
        st.quantile(ints, 0.5)
    with pytest.raises(ValueError, match=r"^quantile: q must be a scalar or a 1-D tensor"):
        st.quantile(t([1.0, 2.0]), t([[0.5]]))
    with pytest.raises(IndexError, match=r"^median: cannot compute on an empty tensor"):
        st.median(t(np.zeros((0,))))
    with pytest.raises(IndexError, match=r"^mode: cannot compute on an empty dim"):
        st.mode(t(np.zeros((2, 0))), 1)
    with pytest.raises(ValueError, match=r"^aminmax: cannot compute on an empty tensor"):
        st.aminmax(t(np.zeros((0, 2))))


def test_matrix_composites_check_their_operands():
    m, v = t(np.ones((2, 3))), t(np.ones(3))
    assert st.addmv(t([1.0, 2.0]), m, v, beta=2, alpha=0.5).tolist() == [3.5, 5.5]
    assert st.addmv(t([NAN, NAN]), m, v, beta=0).tolist() == [3.0, 3.0]  # input ignored
    with pytest.raises(ValueError, match=r"^addmv: shapes \(3,\) and \(2,\) cannot be broadcast"):
        st.addmv(t([1.0, 2.0, 3.0]), m, v)
    with pytest.raises(ValueError, match=r"^mv: expected a 2-D matrix and a 1-D vector"):
        st.addmv(t([1.0, 2.0]), v, v)
    with pytest.raises(TypeError, match=r"^addr: beta must be a number, got str"):
        st.addr(m, t([1.0, 2.0]), v, beta="1")
    with pytest.raises(TypeError, match=r"^addbmm: input must be a Tensor, got list"):
        st.addbmm([[0.0]], t(np.ones((2, 1, 3))), t(np.ones((2, 3, 1))))
    with pytest.raises(ValueError, match=r"^bmm: batch sizes differ"):
        st.baddbmm(t(np.ones((2, 1, 1))), t(np.ones((2, 1, 3))), t(np.ones((3, 3, 1))))
    got = st.addbmm(t([[1.0]]), t(np.ones((4, 1, 3))), t(np.ones((4, 3, 1))), beta=0.5)
    assert got.tolist() == [[12.5]]
