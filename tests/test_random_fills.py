"""In-place random fills and the sampling functions: each distribution's mean and variance
within several standard errors of the exact values (fixed seeds), reproducibility through
manual_seed and generator=, graph mode's replays, and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st

N = 40000


def _np(t):
    return np.asarray(t.tolist(), dtype=np.float64)


def _moments_ok(x, mean, var, z=5.0):
    """The sample mean within z standard errors of mean; the sample variance within z standard
    errors of var (its standard error from the fourth central moment of the sample)."""
    n = x.size
    assert abs(x.mean() - mean) < z * math.sqrt(var / n), (x.mean(), mean)
    m4 = ((x - x.mean()) ** 4).mean()
    se_var = math.sqrt(max(m4 - var ** 2, 1e-30) / n)
    assert abs(x.var() - var) < z * se_var + 1e-12, (x.var(), var)


FILLS = [
    ("normal_", (2.0, 3.0), 2.0, 9.0),
    ("uniform_", (-1.0, 3.0), 1.0, 16 / 12),
    ("exponential_", (2.5,), 1 / 2.5, 1 / 2.5 ** 2),
    ("geometric_", (0.3,), 1 / 0.3, 0.7 / 0.3 ** 2),
    ("log_normal_", (0.5, 0.4), math.exp(0.5 + 0.08), (math.exp(0.16) - 1)
     * math.exp(1.0 + 0.16)),
    ("bernoulli_", (0.3,), 0.3, 0.21),
    ("random_", (2, 7), 4.0, (5 ** 2 - 1) / 12),
]


@pytest.mark.parametrize("name, args, mean, var", FILLS, ids=[f[0] for f in FILLS])
@pytest.mark.parametrize("d", [st.float32, st.float64])
def test_fill_moments(name, args, mean, var, d):
    st.manual_seed(11)
    x = st.empty(N, dtype=d)
    out = getattr(x, name)(*args)
    assert out is x and x.dtype is d
    _moments_ok(_np(x), mean, var)


def test_fill_supports():
    st.manual_seed(2)
    u = _np(st.empty(N).uniform_(-1.0, 3.0))
    assert u.min() >= -1.0 and u.max() < 3.0
    g = _np(st.empty(N).geometric_(0.3))
    assert g.min() >= 1 and np.all(g == np.round(g))
    r = _np(st.empty(N, dtype=st.int64).random_(2, 7))
    assert set(np.unique(r).tolist()) == {2, 3, 4, 5, 6}
    r = _np(st.empty(N, dtype=st.int32).random_(5))
    assert set(np.unique(r).tolist()) == {0, 1, 2, 3, 4}
    b = _np(st.empty(N).bernoulli_(0.5))
    assert set(np.unique(b).tolist()) == {0.0, 1.0}
    assert _np(st.empty(N).exponential_()).min() >= 0
    assert _np(st.empty(N).log_normal_()).min() > 0
    assert st.empty(1000, dtype=st.bool).random_().any()
    neg = _np(st.empty(N, dtype=st.int32).random_(-(2 ** 31), -(2 ** 31) + 3))
    assert set(np.unique(neg).tolist()) == {-(2 ** 31), -(2 ** 31) + 1, -(2 ** 31) + 2}
    assert set(np.unique(_np(st.empty(N).random_(-2, 1))).tolist()) == {-2.0, -1.0, 0.0}
    full = _np(st.empty(N).random_())
    assert full.min() >= 0 and full.max() <= 2 ** 24 and full.max() > 2 ** 23


def test_cauchy_quantiles():
    # no moments: compare the quartiles, median +- sigma
    st.manual_seed(4)
    x = _np(st.empty(N, dtype=st.float64).cauchy_(1.0, 2.0))
    q1, q2, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    # the standard error of a sample quantile: sqrt(q(1-q)/n) / density there
    se = math.sqrt(0.25 * 0.75 / N) / (1 / (math.pi * 2.0 * 2))  # density at median +- sigma
    se_med = math.sqrt(0.25 / N) / (1 / (math.pi * 2.0))
    assert abs(q2 - 1.0) < 5 * se_med
    assert abs(q1 - (-1.0)) < 5 * se and abs(q3 - 3.0) < 5 * se


def test_bernoulli_tensor_probabilities():
    p = st.tensor([0.0, 1.0, 0.25])
    st.manual_seed(0)
    x = st.empty(N, 3).bernoulli_(p)
    col = _np(x).mean(0)
    assert col[0] == 0.0 and col[1] == 1.0
    assert abs(col[2] - 0.25) < 5 * math.sqrt(0.25 * 0.75 / N)
    y = st.bernoulli(st.full((N,), 0.7, dtype=st.float64))
    assert y.dtype is st.float64 and abs(_np(y).mean() - 0.7) < 5 * math.sqrt(0.21 / N)
    z = st.bernoulli(st.zeros(N), p=0.2)
    assert z.shape == (N,) and abs(_np(z).mean() - 0.2) < 5 * math.sqrt(0.16 / N)


@pytest.mark.parametrize("name, args", [(f[0], f[1]) for f in FILLS] + [("cauchy_", ())])
def test_fills_reproducible(name, args):
    st.manual_seed(5)
    a = getattr(st.empty(64), name)(*args).tolist()
    st.manual_seed(5)
    b = getattr(st.empty(64), name)(*args).tolist()
    g = st.Generator().manual_seed(9)
    c = getattr(st.empty(64), name)(*args, generator=g).tolist()
    d = getattr(st.empty(64), name)(*args, generator=st.Generator().manual_seed(9)).tolist()
    assert a == b and c == d and a != c


def test_fill_on_parameter_needs_no_grad():
    w = st.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="normal_: a leaf tensor that requires grad"):
        w.normal_()
    with st.no_grad():
        w.normal_()
    assert w.requires_grad and bool((w != 0).any())


def test_fill_errors():
    x = st.empty(4)
    cases = [
        (lambda: x.normal_(0.0, -1.0), ValueError, r"normal_: expects std >= 0.0"),
        (lambda: x.uniform_(2.0, 1.0), ValueError, r"uniform_: expects from <= to"),
        (lambda: x.exponential_(0.0), ValueError, r"exponential_: expects lambd > 0.0"),
        (lambda: x.geometric_(1.5), ValueError, r"geometric_: expects p in \(0, 1\)"),
        (lambda: x.geometric_(0.0), ValueError, r"geometric_: expects p in \(0, 1\)"),
        (lambda: x.cauchy_(0.0, 0.0), ValueError, r"cauchy_: expects sigma > 0.0"),
        (lambda: x.log_normal_(0.0, -2.0), ValueError, r"log_normal_: expects std > 0.0"),
        (lambda: x.bernoulli_(1.5), ValueError, r"bernoulli_: expects p in \[0, 1\]"),
        (lambda: x.bernoulli_(st.tensor([2.0])), ValueError, r"bernoulli_: probabilities"),
        (lambda: x.random_(5, 5), ValueError, r"random_: expects 'from' to be less than 'to'"),
        (lambda: x.random_(0, 2 ** 30), ValueError, r"random_: \[0, 1073741824\) does not fit"),
        (lambda: st.empty(2, dtype=st.int32).random_(-(2 ** 31) - 1, 0), ValueError,
         r"does not fit in int32 \(values from -2147483648 to 2147483647\)"),
        (lambda: st.empty(2, dtype=st.bool).random_(0, 3), ValueError, r"does not fit in bool"),
        (lambda: x.random_(0.5, 2), TypeError, r"random_: from must be an int"),
        (lambda: x.normal_("a"), TypeError, r"normal_: mean must be a number"),
        (lambda: x.normal_(float("nan")), ValueError, r"normal_: mean must not be NaN"),
        (lambda: st.empty(2, dtype=st.int64).normal_(), TypeError,
         r"normal_: expects a floating point tensor, got int64"),
        (lambda: st.empty(2, dtype=st.int32).uniform_(), TypeError, r"uniform_: expects a "),
        (lambda: st.bernoulli(st.tensor([0.5, -0.1])), ValueError,
         r"bernoulli: probabilities must be in \[0, 1\]"),
        (lambda: st.bernoulli(st.tensor([0.5]), p=2.0), ValueError, r"bernoulli: expects p in"),
        (lambda: st.bernoulli([0.5]), TypeError, r"bernoulli: expected a Tensor, got list"),
        (lambda: st.bernoulli(st.tensor([1, 0])), TypeError, r"bernoulli: expects a floating"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


def test_integer_tensors_take_integer_fills():
    st.manual_seed(1)
    g = st.empty(N, dtype=st.int64).geometric_(0.5)
    _moments_ok(_np(g), 2.0, 2.0)
    b = st.empty(N, dtype=st.int32).bernoulli_(0.5)
    assert b.dtype is st.int32 and abs(_np(b).mean() - 0.5) < 5 * math.sqrt(0.25 / N)


# ---- multinomial --------------------------------------------------------------------------------

def test_multinomial_with_replacement_frequencies():
    w = np.array([1.0, 0.0, 3.0, 6.0])
    st.manual_seed(3)
    s = st.multinomial(st.tensor(w), N, replacement=True)
    assert s.dtype is st.int64 and s.shape == (N,)
    counts = np.bincount(_np(s).astype(int), minlength=4)
    p = w / w.sum()
    assert counts[1] == 0
    for c, pi in zip(counts, p):
        assert abs(c / N - pi) < 5 * math.sqrt(pi * (1 - pi) / N) + 1e-12


def test_multinomial_without_replacement():
    st.manual_seed(6)
    rows = st.tensor([[1.0, 2.0, 0.0, 1.0], [0.0, 0.0, 5.0, 1.0]])
    s = st.multinomial(rows, 2)
    assert s.shape == (2, 2)
    for r in s.tolist():
        assert len(set(r)) == 2
    assert sorted(s[1].tolist()) == [2, 3]
    # the first draw follows the weights: category 1 of [1, 2, 0, 1] half the time
    firsts = _np(st.multinomial(st.tensor([1.0, 2.0, 0.0, 1.0]).expand(4000, 4).contiguous(),
                                3)[:, 0])
    assert abs((firsts == 1).mean() - 0.5) < 5 * math.sqrt(0.25 / 4000)
    assert not (firsts == 2).any()
    # the second draw, given the first: P(second = 0 | first = 1) = 1 / (1 + 1) = 1/2
    # overall P(second = 1) = P(first=0) P(1|0) + P(first=3) P(1|3) = 2 * 1/4 * 2/3 = 1/3
    seconds = _np(st.multinomial(st.tensor([1.0, 2.0, 0.0, 1.0]).expand(4000, 4).contiguous(),
                                 2)[:, 1])
    assert abs((seconds == 1).mean() - 1 / 3) < 5 * math.sqrt(2 / 9 / 4000)


def test_multinomial_reproducible():
    w = st.rand(3, 10)
    st.manual_seed(8)
    a = st.multinomial(w, 5).tolist(), st.multinomial(w, 5, True).tolist()
    st.manual_seed(8)
    b = st.multinomial(w, 5).tolist(), st.multinomial(w, 5, True).tolist()
    assert a == b


def test_multinomial_errors():
    w = st.tensor([0.5, 0.0, 0.5])
    cases = [
        (lambda: st.multinomial(w, 3), ValueError, r"not enough categories of nonzero weight"),
        (lambda: st.multinomial(w, 4), ValueError, r"cannot draw 4 samples from 3 categories"),
        (lambda: st.multinomial(w, 0), ValueError, r"num_samples must be positive"),
        (lambda: st.multinomial(w, 1.0), TypeError, r"num_samples must be an int"),
        (lambda: st.multinomial(st.tensor([1.0, -1.0]), 1), ValueError,
         r"weights must be finite and non-negative"),
        (lambda: st.multinomial(st.tensor([1.0, float("inf")]), 1), ValueError,
         r"weights must be finite"),
        (lambda: st.multinomial(st.zeros(3), 1, True), ValueError,
         r"the weights of a distribution sum to zero"),
        (lambda: st.multinomial(st.zeros(2, 2, 2), 1), ValueError,
         r"input must be 1-d or 2-d"),
        (lambda: st.multinomial(st.tensor([1, 2]), 1), TypeError, r"expects a floating point"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match="multinomial: " + msg):
            fn()
    assert st.multinomial(w, 5, replacement=True).shape == (5,)


# ---- normal overloads and poisson ---------------------------------------------------------------

def test_normal_overloads():
    st.manual_seed(1)
    mean = st.tensor([0.0, 10.0]).expand(N, 2).contiguous()
    std = st.tensor([1.0, 0.5])
    x = _np(st.normal(mean, std))
    _moments_ok(x[:, 0], 0.0, 1.0)
    _moments_ok(x[:, 1], 10.0, 0.25)
    y = _np(st.normal(mean))
    _moments_ok(y[:, 1], 10.0, 1.0)
    z = st.normal(3.0, st.full((N,), 2.0, dtype=st.float64))
    assert z.dtype is st.float64
    _moments_ok(_np(z), 3.0, 4.0)
    w = st.normal(-1.0, 2.0, size=(N,))
    assert w.dtype is st.float32
    _moments_ok(_np(w), -1.0, 4.0)
    assert st.normal(0.0, 1.0, (2, 3), dtype=st.float64).dtype is st.float64


def test_normal_is_differentiable_in_mean_and_std():
    mean = st.zeros(5, requires_grad=True)
    std = st.ones(5, requires_grad=True)
    st.manual_seed(0)
    x = st.normal(mean, std)
    x.sum().backward()
    st.manual_seed(0)
    z = st.normal(st.zeros(5), st.ones(5))  # the same draws
    assert mean.grad.tolist() == [1.0] * 5
    np.testing.assert_allclose(_np(std.grad), _np(z), rtol=1e-6)


def test_normal_errors():
    with pytest.raises(ValueError, match=r"normal: std must be non-negative everywhere"):
        st.normal(st.zeros(2), st.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"normal: std must be non-negative"):
        st.normal(st.zeros(2), -1.0)
    with pytest.raises(ValueError, match=r"normal: std must be non-negative"):
        st.normal(0.0, -1.0, (2,))
    with pytest.raises(TypeError, match=r"normal: give size="):
        st.normal(0.0, 1.0)
    with pytest.raises(TypeError, match=r"normal: size is only for numbers"):
        st.normal(st.zeros(2), 1.0, (2,))
    with pytest.raises(ValueError, match=r"normal: .*cannot broadcast|normal: .*shape"):
        st.normal(st.zeros(2), st.ones(3))


@pytest.mark.parametrize("rate", [0.5, 4.0, 300.0, 1000.0])
def test_poisson_moments(rate):
    st.manual_seed(7)
    n = 20000
    x = _np(st.poisson(st.full((n,), rate, dtype=st.float64)))
    assert np.all(x == np.round(x)) and x.min() >= 0
    _moments_ok(x, rate, rate)


def test_poisson_mixed_rates_dtype_and_errors():
    st.manual_seed(2)
    r = st.tensor([0.0, 2.0, 700.0]).expand(5000, 3).contiguous()
    x = st.poisson(r)
    assert x.dtype is st.float32 and x.shape == (5000, 3)
    cols = _np(x)
    assert np.all(cols[:, 0] == 0)
    _moments_ok(cols[:, 1], 2.0, 2.0)
    _moments_ok(cols[:, 2], 700.0, 700.0)
    st.manual_seed(2)
    assert st.poisson(r).tolist() == x.tolist()
    with pytest.raises(ValueError, match="poisson: rates must be finite and non-negative"):
        st.poisson(st.tensor([-1.0]))
    with pytest.raises(TypeError, match="poisson: expects a floating point"):
        st.poisson(st.tensor([1]))


# ---- graph mode -------------------------------------------------------------------------------

def test_fills_draw_again_on_every_replay():
    def step(x):
        y = st.empty(x.shape)
        y.uniform_(-1.0, 1.0)
        return x + y.exponential_(2.0) + st.bernoulli(st.full(x.shape, 0.5))

    st.manual_seed(3)
    eager = [step(st.ones(32)).tolist() for _ in range(4)]
    st.manual_seed(3)
    compiled = st.compile(step, warmup=1)
    got = [compiled(st.ones(32)).tolist() for _ in range(4)]
    np.testing.assert_allclose(np.array(got), np.array(eager), rtol=1e-6)
    assert got[2] != got[3]
