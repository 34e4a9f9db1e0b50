"""Elementwise and indexing ops on float16 and bfloat16: each result has the inputs' dtype and
is the float32 op on the same (already rounded) inputs, rounded once.

Registry walkers run every unary, binary (comparisons included) and index op that lists the
16-bit floats among its dtypes against its float32 self. Ops whose float32 result is correctly
rounded (arithmetic, selections, comparisons, copies) must match bit for bit; for the
transcendental ones, whose float32 kernels may take another code path (a vector body or a
scalar tail) for the same element, the bound is 1 ulp of the 16-bit dtype: two float32 values
one float32 ulp apart round to the same or to adjacent 16-bit values. The rest: promotion
(Python scalars, 0-d tensors, float16 with bfloat16), gradients, in-place ops, random fills,
ranges, graph-mode fusion and the error paths."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import REGISTRY
from singa_tensor.ops._registry import kernel

from .helpers import DEVICE, to_numpy

LOW = {"float16": st.float16, "bfloat16": st.bfloat16}
SPECS = sorted(REGISTRY.values(), key=lambda s: s.name)

# float32 results that are correctly rounded or exact wherever they are computed: these match
# bit for bit; every other op is held to 1 ulp of the 16-bit dtype (see the module docstring)
TRANSCENDENTAL = {
    "exp", "log", "log1p", "expm1", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "elu",
    "gelu", "gelu_tanh", "silu", "softplus", "erf", "asin", "acos", "atan", "asinh", "acosh",
    "atanh", "sinh", "cosh", "lgamma", "digamma", "polygamma", "erfinv", "erfc", "log2",
    "log10", "exp2", "pow_scalar", "pow", "atan2", "hypot", "remainder", "floor_divide",
}
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)


def _low_specs(kind):
    return [s for s in SPECS if s.kind == kind and not s.name.startswith("_")
            and "bfloat16" in s.dtypes and "float16" in s.dtypes]


UNARY, BINARY = _low_specs("unary"), _low_specs("binary")


def _bits(t, dtype: str) -> np.ndarray:
    """The 16-bit patterns of a float16/bfloat16 tensor (every NaN as one pattern)."""
    v = to_numpy(t.float()).astype(np.float32)
    if dtype == "bfloat16":
        b = (v.view(np.uint32) >> 16).astype(np.uint16)
    else:
        b = v.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FFF), b)


def _ulps(got, want, dtype: str) -> np.ndarray:
    """Distance of two 16-bit tensors in units in the last place of dtype (NaN meets NaN)."""
    g, w = _bits(got, dtype).astype(np.int64), _bits(want, dtype).astype(np.int64)

    def ordered(b):  # sign-magnitude bits to a line of integers, -0 and +0 together
        return np.where(b & 0x8000, -(b & 0x7FFF), b & 0x7FFF)

    d = np.abs(ordered(g) - ordered(w)).astype(np.float64)
    nan_g, nan_w = g == 0x7FFF, w == 0x7FFF
    d[nan_g != nan_w] = np.inf
    d[nan_g & nan_w] = 0
    return d


def _assert_rounded_once(name, got, want, dtype):
    """got (the op on 16-bit inputs) against want (the float32 op on them, rounded)."""
    assert got.dtype is LOW[dtype], f"{name}: {got.dtype} instead of {dtype}"
    assert got.shape == want.shape, name
    if name in TRANSCENDENTAL:
        d = _ulps(got, want, dtype)
        assert d.size == 0 or d.max() <= 1, (
            f"{name} [{dtype}]: {int((d > 1).sum())} elements more than 1 ulp from the float32 "
            f"op rounded once")
    else:
        g, w = _bits(got, dtype), _bits(want, dtype)
        bad = np.flatnonzero(g != w)
        assert bad.size == 0, (
            f"{name} [{dtype}]: {bad.size} elements differ from the float32 op rounded once, "
            f"first {to_numpy(got.float()).ravel()[bad[0]]!r} vs "
            f"{to_numpy(want.float()).ravel()[bad[0]]!r}")


def _low(values, dtype, requires_grad=False):
    return st.tensor(np.asarray(values, np.float32), device=DEVICE).to(LOW[dtype]) \
        .requires_grad_(requires_grad)


def _draw(rng, domain, shape):
    lo, hi = domain
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# ---- the registry walkers ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", list(LOW))
@pytest.mark.parametrize("spec", UNARY, ids=[s.name for s in UNARY])
def test_unary_ops_round_the_float32_result_once(spec, dtype):
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    vals = _draw(rng, spec.domain, (6, 41))
    vals.ravel()[:SPECIAL.size] = SPECIAL
    x = _low(vals, dtype)
    for t in (x, x.t()):  # contiguous, and a transposed view of the same values
        with np.errstate(all="ignore"):
            got = spec.fn(t)
            want = spec.fn(t.float())
        if want.dtype is st.bool:
            assert got.dtype is st.bool and np.array_equal(to_numpy(got), to_numpy(want))
            continue
        _assert_rounded_once(spec.name, got, want.to(LOW[dtype]), dtype)


@pytest.mark.parametrize("dtype", list(LOW))
@pytest.mark.parametrize("spec", BINARY, ids=[s.name for s in BINARY])
def test_binary_ops_round_the_float32_result_once(spec, dtype):
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    b_domain = getattr(spec, "b_domain", None) or spec.domain
    cases = [((7, 33), (7, 33)), ((7, 1), (1, 33)), ((), (5, 3)), ((4, 6), ())]
    for sa, sb in cases:
        a, b = _low(_draw(rng, spec.domain, sa), dtype), _low(_draw(rng, b_domain, sb), dtype)
        got, want = spec.fn(a, b), spec.fn(a.float(), b.float())
        if want.dtype is st.bool:  # comparisons: exact on the widened values
            assert got.dtype is st.bool, spec.name
            assert np.array_equal(to_numpy(got), to_numpy(want)), (spec.name, sa, sb)
            continue
        _assert_rounded_once(spec.name, got, want.to(LOW[dtype]), dtype)
    # every pair of special values, broadcast (n, 1) against (1, n)
    a, b = _low(SPECIAL[:, None], dtype), _low(SPECIAL[None, :], dtype)
    with np.errstate(all="ignore"):
        got, want = spec.fn(a, b), spec.fn(a.float(), b.float())
    if want.dtype is st.bool:
        assert np.array_equal(to_numpy(got), to_numpy(want)), spec.name
    else:
        _assert_rounded_once(spec.name, got, want.to(LOW[dtype]), dtype)


def test_the_walkers_cover_the_elementwise_families():
    names = {s.name for s in UNARY} | {s.name for s in BINARY}
    for op in ("exp", "neg", "gelu", "clamp", "add", "div", "pow", "eq", "lt", "maximum",
               "logaddexp", "mish", "hardswish"):
        assert op in names, op


def _index_cases(rng, x, dim, n_out):
    """(name, f(x, src)) pairs of the index ops, with indices that repeat no destination (the
    accumulating ones then add once per element: one rounding)."""
    idx_gather = st.tensor(rng.integers(0, x.shape[dim], size=(4, 5)), device=DEVICE)
    perm = st.tensor(rng.permutation(n_out)[:4], device=DEVICE)
    scatter_idx = st.tensor(np.stack([rng.permutation(n_out)[:5] for _ in range(4)]),
                            device=DEVICE)
    return [
        ("gather", lambda t, s: st.gather(t, 1, idx_gather)),
        ("index_select", lambda t, s: st.index_select(t, 1, perm)),
        ("scatter", lambda t, s: t.scatter(1, scatter_idx, s)),
        ("scatter_add", lambda t, s: t.scatter_add(1, scatter_idx, s)),
        ("index_add", lambda t, s: t.index_add(1, perm, s[:, :4])),
    ]


@pytest.mark.parametrize("dtype", list(LOW))
def test_index_ops_match_float32_rounded_once(dtype):
    rng = np.random.default_rng(3)
    x = _low(rng.uniform(-3, 3, (4, 9)), dtype)
    src = _low(rng.uniform(-3, 3, (4, 5)), dtype)
    names = set()
    for name, f in _index_cases(rng, x, 1, 9):
        names.add(name)
        got, want = f(x, src), f(x.float(), src.float()).to(LOW[dtype])
        _assert_rounded_once(name, got, want, dtype)
    # the registry's index ops that take the 16-bit floats are all covered here
    listed = {s.name for s in SPECS if "bfloat16" in s.dtypes and s.name in
              ("gather", "scatter", "scatter_add", "index_select", "index_add")}
    assert listed == names


def _round(v: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to dtype (nearest, ties to even), back as float32."""
    v = np.asarray(v, np.float32)
    if dtype == "float16":
        return v.astype(np.float16).astype(np.float32)
    b = v.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("dtype", list(LOW))
def test_repeated_destinations_round_after_each_addition(dtype):
    # index_add adds its source slices in order, each sum rounded to the dtype (as PyTorch's
    # accumulation in the tensor does): 1 + 3 * 2^-9 is not 1 + 2^-9 * 3 rounded once
    eps = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[dtype]
    y = _low(np.ones((2, 3)), dtype)
    src = _low(np.full((2, 3), 0.75 * eps), dtype)
    idx = st.tensor([1, 1, 1], device=DEVICE)
    got = to_numpy(y.index_add(1, idx, src).float())
    want = np.ones((2, 3), np.float32)
    for _ in range(3):
        want[:, 1] = _round(want[:, 1] + np.float32(0.75 * eps), dtype)
    assert np.array_equal(got, want)
    assert got[0, 1] != _round(np.float32(1 + 2.25 * eps), dtype)[()]  # not one rounding
    sidx = st.tensor([[0, 0, 0], [2, 2, 2]], device=DEVICE)
    got = to_numpy(y.scatter_add(1, sidx, src).float())
    want = np.ones((2, 3), np.float32)
    for _ in range(3):
        want[0, 0] = _round(want[0, 0] + np.float32(0.75 * eps), dtype)
        want[1, 2] = _round(want[1, 2] + np.float32(0.75 * eps), dtype)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", list(LOW))
def test_float_tests_and_where_on_special_values(dtype):
    x = _low(SPECIAL, dtype)
    assert st.isnan(x).tolist() == np.isnan(SPECIAL).tolist()
    assert st.isinf(x).tolist() == np.isinf(SPECIAL).tolist()
    assert st.isfinite(x).tolist() == np.isfinite(SPECIAL).tolist()
    y = st.where(st.isnan(x), 0.5, x)
    assert y.dtype is LOW[dtype]
    assert _bits(y, dtype).tolist() == _bits(_low(np.nan_to_num(SPECIAL, nan=0.5,
                                                                 posinf=np.inf,
                                                                 neginf=-np.inf), dtype),
                                             dtype).tolist()


# ---- promotion ----------------------------------------------------------------------------------


def test_result_dtypes_follow_pytorchs_promotion():
    b = _low([1.5, -2.0, 3.25], "bfloat16")
    h = _low([1.5, -2.0, 3.25], "float16")
    f = st.tensor([1.0, 2.0, 3.0], device=DEVICE)
    i = st.tensor([1, 2, 3], device=DEVICE)
    b0 = st.tensor(2.0, device=DEVICE).to(st.bfloat16)
    f0 = st.tensor(2.0, device=DEVICE)
    cases = [
        (b + b, st.bfloat16), (h * h, st.float16), (b / b, st.bfloat16),
        (b + h, st.float32), (h - b, st.float32),  # the two 16-bit formats meet in float32
        (b + f, st.float32), (f * h, st.float32),
        (b + 2.5, st.bfloat16), (3 * h, st.float16), (b - True, st.bfloat16),
        (b * f0, st.bfloat16), (f0 + h, st.float16),  # a 0-d float32 does not widen
        (b0 * f, st.float32),  # but a 0-d 16-bit one meets n-d float32 in float32
        (b0 + h, st.float16),  # a 0-d tensor of the same category takes the n-d one's dtype
        (i * b0, st.bfloat16), (i + h, st.float16),
        (st.pow(b, 2.0), st.bfloat16), (st.pow(b, h), st.float32),
        (st.maximum(b, b), st.bfloat16), (st.clamp(h, -1, 1), st.float16),
        (st.where(b > 0, b, 0.0), st.bfloat16), (st.where(b > 0, b, h), st.float32),
        (st.exp(h), st.float16), (st.atan2(b, b), st.bfloat16),
    ]
    for k, (t, want) in enumerate(cases):
        assert t.dtype is want, (k, t.dtype, want)
    assert (b < h).dtype is st.bool and (b == 1.5).tolist() == [True, False, False]


def test_mixed_operands_compute_in_the_promoted_dtype():
    # bfloat16 * 0-d float32 stays bfloat16 and equals the product of the widened operands
    # with the scalar rounded to bfloat16 (the 0-d tensor takes the result's dtype)
    b = _low([1.5, -2.25, 3.0], "bfloat16")
    s = st.tensor(0.1, device=DEVICE)
    want = (b.float() * s.to(st.bfloat16).float()).to(st.bfloat16)
    assert _bits(b * s, "bfloat16").tolist() == _bits(want, "bfloat16").tolist()
    got = _low([1.0, 2.0], "float16") + _low([0.5, 0.25], "bfloat16")
    assert got.dtype is st.float32 and got.tolist() == [1.5, 2.25]


# ---- gradients and in-place ops -----------------------------------------------------------------


GRAD_CASES = {
    "exp": lambda x, y: st.exp(x), "tanh": lambda x, y: st.tanh(x),
    "gelu": lambda x, y: st.gelu(x), "silu": lambda x, y: st.op_registry["silu"].fn(x),
    "mul": lambda x, y: x * y, "div": lambda x, y: x / (y * y + 1.0),
    "where": lambda x, y: st.where(x > y, x, y * 2.0), "clamp": lambda x, y: x.clamp(-1, 1),
    "gather": lambda x, y: st.gather(x, 1, st.tensor([[0, 0, 2]] * 3, device=DEVICE)),
    "index_select": lambda x, y: st.index_select(y, 0, st.tensor([2, 2, 0], device=DEVICE)),
    "mish": lambda x, y: st.nn.functional.mish(x),
}


@pytest.mark.parametrize("dtype", list(LOW))
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_come_back_in_the_low_dtype(name, dtype):
    rng = np.random.default_rng(11)
    vx, vy = rng.uniform(-2, 2, (3, 3)), rng.uniform(-2, 2, (3, 3))
    x, y = _low(vx, dtype, True), _low(vy, dtype, True)
    out = GRAD_CASES[name](x, y)
    assert out.dtype is LOW[dtype]
    out.backward(st.ones(out.shape, dtype=LOW[dtype], device=DEVICE))
    # the same graph in float32 on the same rounded values: the low-precision backward
    # rounds at each of its few steps, so it agrees to a few units of the dtype's precision
    x32 = x.detach().float().requires_grad_()
    y32 = y.detach().float().requires_grad_()
    GRAD_CASES[name](x32, y32).backward(st.ones(out.shape, device=DEVICE))
    tol = {"bfloat16": 2.0 ** -5, "float16": 2.0 ** -8}[dtype]
    for t, t32 in ((x, x32), (y, y32)):
        if t32.grad is None:
            assert t.grad is None, name
            continue
        assert t.grad.dtype is LOW[dtype], (name, t.grad.dtype)
        np.testing.assert_allclose(to_numpy(t.grad.float()), to_numpy(t32.grad), rtol=tol,
                                   atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", list(LOW))
def test_inplace_ops_keep_the_dtype_and_the_out_of_place_bits(dtype):
    rng = np.random.default_rng(2)
    v, w = rng.uniform(0.1, 2, (5, 7)), rng.uniform(0.1, 2, (5, 7))
    other = _low(w, dtype)
    cases = [
        ("add_", lambda t: t.add_(other), lambda t: t + other),
        ("mul_", lambda t: t.mul_(other), lambda t: t * other),
        ("div_", lambda t: t.div_(other), lambda t: t / other),
        ("sub_ scalar", lambda t: t.sub_(0.3), lambda t: t - 0.3),
        ("mul_ scalar", lambda t: t.mul_(1.7), lambda t: t * 1.7),
        ("add_ row", lambda t: t.add_(other[0]), lambda t: t + other[0]),
        ("exp_", lambda t: t.exp_(), st.exp),
        ("sqrt_", lambda t: t.sqrt_(), st.sqrt),
        ("clamp_", lambda t: t.clamp_(0.5, 1.5), lambda t: st.clamp(t, 0.5, 1.5)),
        ("maximum_", lambda t: t.maximum_(other) if hasattr(t, "maximum_") else t.copy_(
            st.maximum(t, other)), lambda t: st.maximum(t, other)),
    ]
    for name, inplace, outofplace in cases:
        t = _low(v, dtype)
        want = outofplace(t)
        assert inplace(t) is not None and t.dtype is LOW[dtype], name
        assert _bits(t, dtype).tolist() == _bits(want, dtype).tolist(), name
    # and the sum is the float32 sum rounded once
    t = _low(v, dtype)
    t += other
    want = (_low(v, dtype).float() + other.float()).to(LOW[dtype])
    assert _bits(t, dtype).tolist() == _bits(want, dtype).tolist()


@pytest.mark.parametrize("dtype", list(LOW))
def test_python_numbers_as_pytorch_applies_them(dtype):
    # a product with (or a quotient by) a Python number keeps the number in float32; a sum
    # or difference rounds it to the tensor's dtype first (PyTorch's CPU kernels)
    rng = np.random.default_rng(5)
    v = rng.standard_normal(4000).astype(np.float32)
    t = _low(v, dtype)
    f = to_numpy(t.float())
    for s in (0.1, 0.7, 3.3, -1e-3, 7):
        rounded = float(to_numpy(_low(np.array([s]), dtype).float())[0])
        cases = [
            ("x * s", t * s, f * np.float32(s)),
            ("s * x", s * t, f * np.float32(s)),
            ("x / s", t / s, f * np.float32(1.0 / s)),
            ("x + s", t + s, f + np.float32(rounded)),
            ("x - s", t - s, f - np.float32(rounded)),
            ("mul_", t.clone().mul_(s), f * np.float32(s)),
            ("add_", t.clone().add_(s), f + np.float32(rounded)),
            ("div_", t.clone().div_(s), f * np.float32(1.0 / s)),
        ]
        for name, got, want in cases:
            assert got.dtype is LOW[dtype], name
            want_bits = _bits(st.tensor(want.astype(np.float32)).to(LOW[dtype]), dtype)
            assert _bits(got, dtype).tolist() == want_bits.tolist(), (name, s)
    x = _low(v[:5], dtype).requires_grad_()
    (x * 0.1).sum().backward()
    assert x.grad.dtype is LOW[dtype]
    np.testing.assert_array_equal(to_numpy(x.grad.float()),
                                  to_numpy(st.full((5,), 0.1).to(LOW[dtype]).float()))
    assert (t / 0.0).float().isinf().all().item()  # a zero divisor takes the plain path


# ---- composites, random fills, ranges -----------------------------------------------------------


@pytest.mark.parametrize("dtype", list(LOW))
def test_composites_round_their_float32_result_once(dtype):
    rng = np.random.default_rng(4)
    x = _low(rng.uniform(-2, 2, (4, 6)), dtype)
    y = _low(rng.uniform(0.5, 2, (4, 6)), dtype)
    F = st.nn.functional
    cases = {
        "lerp": lambda a, b: st.lerp(a, b, 0.3), "addcmul": lambda a, b: st.addcmul(a, a, b),
        "addcdiv": lambda a, b: st.addcdiv(a, a, b, value=0.5), "xlogy": st.xlogy,
        "logaddexp": st.logaddexp, "sinc": lambda a, b: st.sinc(a),
        "deg2rad": lambda a, b: st.deg2rad(a), "logit": lambda a, b: st.logit(b * 0.25),
        "hardswish": lambda a, b: F.hardswish(a), "selu": lambda a, b: F.selu(a),
        "softsign": lambda a, b: F.softsign(a), "logsigmoid": lambda a, b: F.logsigmoid(a),
        "glu": lambda a, b: F.glu(a, -1), "i0": lambda a, b: st.i0(a),
    }
    for name, f in cases.items():
        got, want = f(x, y), f(x.float(), y.float()).to(LOW[dtype])
        _assert_rounded_once(name, got, want, dtype)


@pytest.mark.parametrize("dtype", list(LOW))
def test_random_fills_are_the_float32_draws_rounded(dtype):
    d = LOW[dtype]
    for fill in (lambda dt: st.rand(3, 257, dtype=dt, device=DEVICE),
                 lambda dt: st.randn(1001, dtype=dt, device=DEVICE),
                 lambda dt: st.empty(5, 9, dtype=dt, device=DEVICE).uniform_(-2, 3),
                 lambda dt: st.empty(99, dtype=dt, device=DEVICE).normal_(1.0, 0.5)):
        st.manual_seed(7)
        got = fill(d)
        st.manual_seed(7)
        want = fill(st.float32).to(d)
        assert got.dtype is d
        assert _bits(got, dtype).tolist() == _bits(want, dtype).tolist()
    st.manual_seed(8)
    a = st.rand(100, dtype=d, device=DEVICE)
    assert not np.array_equal(to_numpy(a.float()), to_numpy(st.rand(100, dtype=d,
                                                                     device=DEVICE).float()))


@pytest.mark.parametrize("dtype", list(LOW))
def test_arange_is_the_float32_range_rounded(dtype):
    d = LOW[dtype]
    for args in ((0, 300), (-2.5, 7.25, 0.125), (1.0, 0.0, -0.1)):
        got = st.arange(*args, dtype=d, device=DEVICE)
        want = st.arange(*args, dtype=st.float32, device=DEVICE).to(d)
        assert got.dtype is d
        assert _bits(got, dtype).tolist() == _bits(want, dtype).tolist()


# ---- graph mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", list(LOW))
def test_graph_mode_fuses_low_precision_chains_with_the_eager_bits(dtype):
    d = LOW[dtype]
    rng = np.random.default_rng(5)
    x = _low(rng.standard_normal((8, 30)), dtype)
    bias = _low(rng.standard_normal(30), dtype)

    def chain(t):
        a = st.tanh(t + bias) * 2.0
        b = st.exp(a * 0.5) - 1.0
        return a, st.relu(b) / 3.0

    with st.no_grad():
        want = [_bits(v, dtype).tolist() for v in chain(x)]
        fused = st.compile(chain, warmup=0)
        fused(x)
        got = fused(x)
    assert [v.dtype for v in got] == [d, d]
    assert [_bits(v, dtype).tolist() for v in got] == want
    symbols = [c[2] for c in fused._latest.graph.calls]
    assert symbols == [f"st_fused_{d.suffix}"]


# ---- errors ------------------------------------------------------------------------------------


def test_an_op_without_a_low_precision_kernel_names_itself():
    b = _low([1.0, 2.0], "bfloat16")
    with pytest.raises(TypeError, match="logical_and: not implemented for dtype bfloat16"):
        kernel(b, "logical_and")
    with pytest.raises(TypeError, match="bitwise_not: expected an integer or bool tensor, "
                                        "got bfloat16"):
        st.bitwise_not(b)
    # a composite still checks its operands before computing in float32
    with pytest.raises(TypeError, match=r"heaviside: input \(bfloat16\) and values "
                                        r"\(float16\) must have the same dtype"):
        st.heaviside(b, _low([0.5], "float16"))
