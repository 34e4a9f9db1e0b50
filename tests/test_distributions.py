"""singa_tensor.distributions: densities, entropies and moments against closed forms computed
with numpy; sample statistics within several standard errors (fixed seed, large n); KL
divergences against Monte Carlo estimates; rsample gradients against analytic derivatives of
expectations; and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import distributions as D
from singa_tensor.distributions._special import digamma, gammainc, lgamma

from .helpers import assert_close, to_numpy

N = 200_000
LG = np.vectorize(math.lgamma)


def f64(x, grad=False):
    return st.tensor(np.asarray(x, dtype=np.float64), dtype=st.float64, requires_grad=grad)


def psi(x):
    """digamma by the recurrence and a long asymptotic series, in numpy (the reference)."""
    x = np.asarray(x, np.float64)
    shift = sum(1.0 / (x + k) for k in range(20))
    y = x + 20
    return np.log(y) - 0.5 / y - 1 / (12 * y ** 2) + 1 / (120 * y ** 4) - 1 / (252 * y ** 6) \
        - shift


def lbeta(a, b):
    return LG(a) + LG(b) - LG(a + b)


# ---- special functions ------------------------------------------------------------------------


def test_lgamma_digamma_and_incomplete_gamma():
    x = np.array([1e-3, 0.1, 0.49, 0.5, 1.0, 2.5, 7.0, 33.3, 1e3, 1e6])
    assert_close(lgamma(f64(x)), LG(x), rtol=1e-13, atol=1e-13)
    assert_close(digamma(f64(x)), psi(x), rtol=1e-10, atol=1e-10)
    t = f64(x, grad=True)
    (g,) = st.autograd.grad(lgamma(t).sum(), [t])
    assert_close(g, psi(x), rtol=1e-9, atol=1e-9)  # lgamma's own gradient is digamma
    # P(1, x) = 1 - exp(-x); P(a, x) for integer a is 1 - the Poisson tail
    xs = np.array([0.0, 0.1, 1.0, 3.0, 30.0])
    assert_close(gammainc(np.ones(5), xs), 1 - np.exp(-xs), rtol=1e-13, atol=1e-15)
    a3 = 1 - np.exp(-xs) * (1 + xs + xs ** 2 / 2)
    assert_close(gammainc(np.full(5, 3.0), xs), a3, rtol=1e-12, atol=1e-15)


# ---- closed forms ------------------------------------------------------------------------------


def _check(d, value, log_prob, mean=None, variance=None, entropy=None, rtol=1e-10):
    assert_close(d.log_prob(f64(value)), log_prob, rtol=rtol, atol=1e-12)
    if mean is not None:
        assert_close(d.mean, mean, rtol=rtol, atol=1e-12)
    if variance is not None:
        assert_close(d.variance, variance, rtol=rtol, atol=1e-12)
        assert_close(d.stddev, np.sqrt(variance), rtol=rtol, atol=1e-12)
    if entropy is not None:
        assert_close(d.entropy(), entropy, rtol=rtol, atol=1e-12)


def test_univariate_closed_forms():
    mu, s, x = np.array([0.0, 1.5]), np.array([1.0, 0.3]), np.array([0.7, 1.0])
    _check(D.Normal(f64(mu), f64(s)), x,
           -0.5 * ((x - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi), mu, s ** 2,
           0.5 + 0.5 * np.log(2 * np.pi) + np.log(s))
    lo, hi, x = np.array([0.0, -2.0]), np.array([1.0, 5.0]), np.array([0.3, 4.0])
    _check(D.Uniform(f64(lo), f64(hi)), x, -np.log(hi - lo), (lo + hi) / 2,
           (hi - lo) ** 2 / 12, np.log(hi - lo))
    rate, x = np.array([0.5, 3.0]), np.array([2.0, 0.1])
    _check(D.Exponential(f64(rate)), x, np.log(rate) - rate * x, 1 / rate, 1 / rate ** 2,
           1 - np.log(rate))
    loc, b, x = np.array([0.0, 2.0]), np.array([1.0, 0.5]), np.array([-1.0, 2.2])
    _check(D.Laplace(f64(loc), f64(b)), x, -np.log(2 * b) - np.abs(x - loc) / b, loc,
           2 * b ** 2, 1 + np.log(2 * b))
    a, r, x = np.array([0.5, 3.0]), np.array([2.0, 0.7]), np.array([0.2, 4.0])
    _check(D.Gamma(f64(a), f64(r)), x,
           a * np.log(r) + (a - 1) * np.log(x) - r * x - LG(a), a / r, a / r ** 2,
           a - np.log(r) + LG(a) + (1 - a) * psi(a), rtol=1e-9)
    a, b, x = np.array([0.5, 2.0]), np.array([3.0, 2.5]), np.array([0.1, 0.6])
    _check(D.Beta(f64(a), f64(b)), x,
           (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - lbeta(a, b), a / (a + b),
           a * b / ((a + b) ** 2 * (a + b + 1)),
           lbeta(a, b) - (a - 1) * psi(a) - (b - 1) * psi(b) + (a + b - 2) * psi(a + b),
           rtol=1e-9)
    lam, k = np.array([0.5, 4.0, 0.0]), np.array([2.0, 0.0, 0.0])
    _check(D.Poisson(f64(lam)), k, k * np.log(np.where(lam > 0, lam, 1)) - lam - LG(k + 1),
           lam, lam)
    assert D.Poisson(f64([0.0])).log_prob(f64([1.0])).item() == -math.inf
    assert_close(D.Normal(f64(0.0), f64(2.0)).cdf(f64([0.0, 2.0])), [0.5, 0.8413447460685429],
                 rtol=1e-12)
    assert_close(D.Exponential(f64(2.0)).icdf(f64([0.5])), [math.log(2) / 2], rtol=1e-12)
    assert_close(D.Laplace(f64(0.0), f64(1.0)).cdf(f64([-1.0, 1.0])),
                 [0.5 * math.exp(-1), 1 - 0.5 * math.exp(-1)], rtol=1e-12)


def test_discrete_closed_forms():
    p = np.array([0.2, 0.9])
    x = np.array([1.0, 0.0])
    want = x * np.log(p) + (1 - x) * np.log1p(-p)
    ent = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    for d in (D.Bernoulli(probs=f64(p)), D.Bernoulli(logits=f64(np.log(p / (1 - p))))):
        _check(d, x, want, p, p * (1 - p), ent, rtol=1e-9)
    w = np.array([[1.0, 2.0, 5.0], [3.0, 3.0, 0.0]])
    probs = w / w.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        logits = np.log(w)  # -inf for the impossible category
    for d in (D.Categorical(probs=f64(w)), D.Categorical(logits=f64(logits))):
        assert d.batch_shape == (2,) and d.event_shape == ()
        assert_close(d.probs, probs, rtol=1e-12)
        assert_close(d.log_prob(st.tensor([2, 1])), np.log([probs[0, 2], probs[1, 1]]),
                     rtol=1e-12)
        logs = np.log(np.where(probs > 0, probs, 1))
        assert_close(d.entropy(), -(probs * logs).sum(-1), rtol=1e-10)
        assert d.log_prob(st.tensor([[0], [1]])).shape == (2, 2)  # broadcast against batch
    c = np.array([1.0, 2.0, 3.5])
    x = np.array([0.2, 0.3, 0.5])
    c0 = c.sum()
    _check(D.Dirichlet(f64(c)), x,
           ((c - 1) * np.log(x)).sum() + LG(c0) - LG(c).sum(), c / c0,
           c * (c0 - c) / (c0 ** 2 * (c0 + 1)),
           LG(c).sum() - LG(c0) + (c0 - 3) * psi(c0) - ((c - 1) * psi(c)).sum(), rtol=1e-9)


def test_multivariate_normal_closed_forms():
    r = np.random.default_rng(0)
    b = r.standard_normal((3, 3))
    cov = b @ b.T + np.eye(3)
    loc = np.array([0.5, -1.0, 2.0])
    x = r.standard_normal((4, 3))
    diff = x - loc
    want = -0.5 * (3 * np.log(2 * np.pi) + np.einsum("ni,ij,nj->n", diff, np.linalg.inv(cov),
                                                     diff) + np.linalg.slogdet(cov)[1])
    ent = 0.5 * 3 * (1 + np.log(2 * np.pi)) + 0.5 * np.linalg.slogdet(cov)[1]
    for kw in ({"covariance_matrix": f64(cov)}, {"precision_matrix": f64(np.linalg.inv(cov))},
               {"scale_tril": f64(np.linalg.cholesky(cov))}):
        d = D.MultivariateNormal(f64(loc), **kw)
        assert d.batch_shape == () and d.event_shape == (3,)
        assert_close(d.log_prob(f64(x)), want, rtol=1e-9)
        assert_close(d.entropy(), ent, rtol=1e-10)
        assert_close(d.covariance_matrix, cov, rtol=1e-9)
        assert_close(d.variance, np.diag(cov), rtol=1e-9)
        assert_close(d.precision_matrix, np.linalg.inv(cov), rtol=1e-8)
    batched = D.MultivariateNormal(f64(np.zeros((2, 3))), f64(cov))
    assert batched.batch_shape == (2,) and batched.log_prob(f64(x[:2])).shape == (2,)


# ---- sampling ---------------------------------------------------------------------------------


def _stats_ok(x, mean, var, k=5.0):
    """Sample mean and variance within k standard errors (estimated from the sample)."""
    x = np.asarray(x, np.float64)
    n = x.shape[0]
    m = x.mean(0)
    assert np.all(np.abs(m - mean) < k * x.std(0) / np.sqrt(n) + 1e-12), (m, mean)
    dev2 = (x - m) ** 2
    v = dev2.mean(0)
    assert np.all(np.abs(v - var) < k * dev2.std(0) / np.sqrt(n) + 1e-12), (v, var)


@pytest.mark.parametrize("make", [
    lambda: D.Normal(f64([0.0, 3.0]), f64([1.0, 0.5])),
    lambda: D.Uniform(f64([0.0, -1.0]), f64([1.0, 4.0])),
    lambda: D.Exponential(f64([0.5, 4.0])),
    lambda: D.Laplace(f64([0.0, 1.0]), f64([1.0, 0.2])),
    lambda: D.Gamma(f64([0.3, 1.0, 4.5]), f64([1.0, 2.0, 0.5])),
    lambda: D.Beta(f64([0.5, 2.0]), f64([0.5, 5.0])),
    lambda: D.Bernoulli(probs=f64([0.1, 0.5])),
    lambda: D.Poisson(f64([0.3, 4.0, 2500.0])),
    lambda: D.Dirichlet(f64([0.5, 1.0, 3.0])),
], ids=["normal", "uniform", "exponential", "laplace", "gamma", "beta", "bernoulli", "poisson",
        "dirichlet"])
def test_sample_statistics(make):
    st.manual_seed(0)
    d = make()
    x = d.sample((N,))
    assert x.shape == (N,) + d.batch_shape + d.event_shape
    assert not x.requires_grad
    _stats_ok(to_numpy(x), to_numpy(d.mean), to_numpy(d.variance))


def test_categorical_and_mvn_sample_statistics():
    st.manual_seed(1)
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    x = to_numpy(D.Categorical(probs=f64(probs)).sample((N,)))
    assert x.dtype == np.int64 and x.shape == (N, 2)
    freq = np.stack([(x == k).mean(0) for k in range(4)], -1)
    se = np.sqrt(probs * (1 - probs) / N)
    assert np.all(np.abs(freq - probs) <= 5 * se + 1e-12), freq
    cov = np.array([[2.0, 0.6], [0.6, 0.5]])
    loc = np.array([1.0, -2.0])
    y = to_numpy(D.MultivariateNormal(f64(loc), f64(cov)).sample((N,)))
    _stats_ok(y, loc, np.diag(cov))
    c = np.cov(y.T)
    assert abs(c[0, 1] - cov[0, 1]) < 5 * np.sqrt((cov[0, 0] * cov[1, 1] + cov[0, 1] ** 2) / N)


def test_samples_are_reproducible_and_expand():
    d = D.Gamma(f64([0.5, 2.0]), f64(1.0))
    st.manual_seed(7)
    a = to_numpy(d.sample((5,)))
    st.manual_seed(7)
    b = to_numpy(d.sample((5,)))
    np.testing.assert_array_equal(a, b)
    e = D.Normal(0.0, 1.0).expand((2, 3))
    assert e.batch_shape == (2, 3) and e.sample((4,)).shape == (4, 2, 3)
    c = D.Categorical(logits=st.zeros(3)).expand((5,))
    assert c.batch_shape == (5,) and c.sample().shape == (5,)
    m = D.MultivariateNormal(st.zeros(2), st.eye(2)).expand((3,))
    assert m.batch_shape == (3,) and m.sample().shape == (3, 2)
    assert D.Normal(0.0, 1.0).sample().dtype is st.float32


# ---- KL ----------------------------------------------------------------------------------------


def _mc_kl(p, q, n=N):
    x = p.sample((n,))
    diff = to_numpy(p.log_prob(x) - q.log_prob(x))
    return diff.mean(0), diff.std(0) / np.sqrt(n)


def _cov(b, extra):
    return f64(b @ b.T + extra * np.eye(2))


KL_PAIRS = {
    "normal": (lambda: D.Normal(f64([0.0, 1.0]), f64([1.0, 0.5])),
               lambda: D.Normal(f64([0.5, 0.0]), f64([2.0, 0.7]))),
    "bernoulli": (lambda: D.Bernoulli(probs=f64([0.3, 0.9])),
                  lambda: D.Bernoulli(logits=f64([0.5, -1.0]))),
    "categorical": (lambda: D.Categorical(probs=f64([0.2, 0.3, 0.5])),
                    lambda: D.Categorical(logits=f64([0.0, 1.0, -1.0]))),
    "uniform": (lambda: D.Uniform(f64([0.0]), f64([1.0])),
                lambda: D.Uniform(f64([-1.0]), f64([2.0]))),
    "exponential": (lambda: D.Exponential(f64([1.0])), lambda: D.Exponential(f64([3.0]))),
    "laplace": (lambda: D.Laplace(f64([0.0]), f64([1.0])),
                lambda: D.Laplace(f64([1.0]), f64([2.0]))),
    "poisson": (lambda: D.Poisson(f64([3.0])), lambda: D.Poisson(f64([5.0]))),
    "gamma": (lambda: D.Gamma(f64([2.0, 0.5]), f64([1.0, 3.0])),
              lambda: D.Gamma(f64([3.0, 1.0]), f64([2.0, 1.0]))),
    "beta": (lambda: D.Beta(f64([2.0, 0.7]), f64([3.0, 1.5])),
             lambda: D.Beta(f64([1.0, 2.0]), f64([1.0, 2.0]))),
    "dirichlet": (lambda: D.Dirichlet(f64([1.0, 2.0, 3.0])),
                  lambda: D.Dirichlet(f64([2.0, 2.0, 2.0]))),
    "mvn": (lambda: D.MultivariateNormal(f64([0.0, 1.0]),
                                         _cov(np.array([[1.0, 0.0], [0.5, 1.0]]), 0.5)),
            lambda: D.MultivariateNormal(f64([1.0, 0.0]), scale_tril=f64([[2.0, 0.0],
                                                                             [0.3, 1.0]]))),
}


@pytest.mark.parametrize("pair", list(KL_PAIRS))
def test_kl_matches_monte_carlo(pair):
    st.manual_seed(3)
    p, q = (f() for f in KL_PAIRS[pair])
    kl = to_numpy(D.kl_divergence(p, q))
    est, se = _mc_kl(p, q)
    assert np.all(np.abs(kl - est) < 5 * se + 1e-9), (kl, est, se)
    assert np.all(kl >= 0)
    assert_close(D.kl_divergence(p, p), np.zeros(kl.shape), atol=1e-9)


def test_kl_closed_values_and_edges():
    kl = D.kl_divergence(D.Normal(f64(0.0), f64(1.0)), D.Normal(f64(1.0), f64(2.0)))
    assert_close(kl, math.log(2) + (1 + 1) / 8 - 0.5, rtol=1e-12)
    assert D.kl_divergence(D.Uniform(f64(-1.0), f64(2.0)),
                           D.Uniform(f64(0.0), f64(1.0))).item() == math.inf
    p = D.Categorical(probs=f64([0.5, 0.5, 0.0]))
    q = D.Categorical(probs=f64([0.5, 0.0, 0.5]))
    assert D.kl_divergence(p, q).item() == math.inf
    assert_close(D.kl_divergence(q, D.Categorical(probs=f64([0.25, 0.25, 0.5]))),
                 0.5 * math.log(2), rtol=1e-12)


# ---- rsample gradients ----------------------------------------------------------------------


def _rgrad(make, params, loss=lambda x: x):
    st.manual_seed(11)
    ts = [f64(p, grad=True) for p in params]
    x = make(*ts).rsample((N,))
    gs = st.autograd.grad(loss(x).mean(), ts)
    return [to_numpy(g) for g in gs]


def test_rsample_gradients_match_analytic_derivatives():
    # d/dparams of E[f(x)] in closed form; the estimates carry Monte Carlo error, hence rtol
    gl, gs = _rgrad(D.Normal, [1.5, 0.5], lambda x: x * x)  # E = mu^2 + s^2
    assert_close(gl, 3.0, rtol=2e-2) and assert_close(gs, 1.0, rtol=2e-2)
    gl, gb = _rgrad(D.Laplace, [0.5, 1.5], lambda x: x * x)  # E = mu^2 + 2 b^2
    assert_close(gl, 1.0, rtol=5e-2)
    assert_close(gb, 6.0, rtol=3e-2)
    (gr,) = _rgrad(D.Exponential, [2.0])  # E = 1 / rate
    assert_close(gr, -0.25, rtol=2e-2)
    gl, gh = _rgrad(D.Uniform, [0.0, 2.0], lambda x: x * x)  # E = (l^2 + l h + h^2) / 3
    assert_close(gl, 2.0 / 3, rtol=3e-2)
    assert_close(gh, 4.0 / 3, rtol=2e-2)
    for a in (0.4, 2.0, 9.0):
        ga, gb = _rgrad(D.Gamma, [a, 2.0])  # E = a / b
        assert_close(ga, 0.5, rtol=2e-2)
        assert_close(gb, -a / 4, rtol=2e-2)
    ga, gb = _rgrad(D.Beta, [2.0, 3.0])  # E = a / (a + b)
    assert_close(ga, 3.0 / 25, rtol=3e-2)
    assert_close(gb, -2.0 / 25, rtol=3e-2)
    (gc,) = _rgrad(D.Dirichlet, [[1.0, 2.0, 3.0]], lambda x: x[..., 0])  # E = c0 / sum c
    assert_close(gc, [5.0 / 36, -1.0 / 36, -1.0 / 36], rtol=5e-2, atol=2e-3)
    loc, low = np.array([1.0, -1.0]), np.array([[1.0, 0.0], [0.5, 2.0]])
    gl, gt = _rgrad(lambda m, t: D.MultivariateNormal(m, scale_tril=t), [loc, low],
                    lambda x: (x * x).sum(-1))  # E = |loc|^2 + |L|_F^2
    assert_close(gl, 2 * loc, rtol=3e-2)
    assert_close(np.tril(gt), 2 * low, rtol=3e-2, atol=3e-2)


def test_gamma_rsample_gradient_is_the_implicit_one():
    # x(a) held at its quantile u: P(a, x(a)) = u, so dx/da = -(dP/da) / (dP/dx)
    st.manual_seed(2)
    a = f64([0.7, 3.0, 20.0], grad=True)
    x = D.Gamma(a, f64(1.0)).rsample()
    g = [to_numpy(st.autograd.grad(x[i], [a], retain_graph=True)[0])[i] for i in range(3)]
    xv, av = to_numpy(x), to_numpy(a)
    h = 1e-4
    dpda = (gammainc(av + h, xv) - gammainc(av - h, xv)) / (2 * h)
    dpdx = np.exp((av - 1) * np.log(xv) - xv - LG(av))
    assert_close(np.array(g), -dpda / dpdx, rtol=1e-5)


def test_sample_has_no_graph_and_discrete_have_no_rsample():
    loc = f64(0.0, grad=True)
    assert not D.Normal(loc, 1.0).sample((3,)).requires_grad
    assert D.Normal(loc, 1.0).rsample((3,)).requires_grad
    for d in (D.Bernoulli(probs=0.5), D.Categorical(probs=st.ones(2)), D.Poisson(2.0)):
        assert not d.has_rsample
        with pytest.raises(NotImplementedError, match=f"{type(d).__name__} has no "
                                                      "reparameterised sampler"):
            d.rsample()


# ---- errors -----------------------------------------------------------------------------------


def test_parameter_validation():
    with pytest.raises(ValueError, match="Normal: expected parameter scale .* positive"):
        D.Normal(0.0, -1.0)
    D.Normal(0.0, -1.0, validate_args=False)  # no check when told not to
    with pytest.raises(ValueError, match="Uniform: expected parameter low .* less than high"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="Bernoulli: expected parameter probs .* in \\[0, 1\\]"):
        D.Bernoulli(probs=1.5)
    with pytest.raises(ValueError, match="Bernoulli: pass exactly one of probs and logits"):
        D.Bernoulli(probs=0.5, logits=0.0)
    with pytest.raises(ValueError, match="Categorical: pass exactly one of probs and logits"):
        D.Categorical()
    with pytest.raises(ValueError, match="Categorical: probs or logits must have at least"):
        D.Categorical(probs=st.tensor(1.0))
    with pytest.raises(ValueError, match="Categorical: expected parameter probs .* non-neg"):
        D.Categorical(probs=st.tensor([0.5, -0.1]))
    with pytest.raises(ValueError, match="Gamma: expected parameter concentration"):
        D.Gamma(0.0, 1.0)
    with pytest.raises(ValueError, match="Beta: expected parameter concentration0"):
        D.Beta(1.0, -2.0)
    with pytest.raises(ValueError, match="Dirichlet: concentration must have at least one"):
        D.Dirichlet(st.tensor(1.0))
    with pytest.raises(ValueError, match="Poisson: expected parameter rate .* non-negative"):
        D.Poisson(-1.0)
    with pytest.raises(ValueError, match="Exponential: expected parameter rate"):
        D.Exponential(st.tensor([1.0, 0.0]))
    with pytest.raises(TypeError, match="Normal: parameters must be tensors or numbers"):
        D.Normal("0", 1.0)
    with pytest.raises(TypeError, match="Normal: parameters must be floating point tensors"):
        D.Normal(st.tensor([0, 1]), 1.0)
    with pytest.raises(ValueError, match="Normal: parameter shapes .* do not broadcast"):
        D.Normal(st.zeros(2), st.ones(3))


def test_multivariate_normal_validation():
    with pytest.raises(ValueError, match="MultivariateNormal: pass exactly one of"):
        D.MultivariateNormal(st.zeros(2))
    with pytest.raises(ValueError, match="MultivariateNormal: pass exactly one of"):
        D.MultivariateNormal(st.zeros(2), st.eye(2), scale_tril=st.eye(2))
    with pytest.raises(ValueError, match="MultivariateNormal: the covariance, precision or"):
        D.MultivariateNormal(st.zeros(2), st.ones(2, 3))
    with pytest.raises(ValueError, match="MultivariateNormal: loc has 3 dims but the matrix"):
        D.MultivariateNormal(st.zeros(3), st.eye(2))
    with pytest.raises(ValueError, match="covariance_matrix to be positive-definite"):
        D.MultivariateNormal(st.zeros(2), -st.eye(2))
    with pytest.raises(ValueError, match="covariance_matrix to be symmetric"):
        D.MultivariateNormal(st.zeros(2), st.tensor([[2.0, 1.0], [0.0, 2.0]]))
    with pytest.raises(ValueError, match="scale_tril to be lower triangular with a positive"):
        D.MultivariateNormal(st.zeros(2), scale_tril=st.tensor([[1.0, 0.0], [0.0, -1.0]]))
    with pytest.raises(ValueError, match="MultivariateNormal: loc must be at least one-dim"):
        D.MultivariateNormal(st.tensor(0.0), st.eye(1))


def test_log_prob_support_and_shape_checks():
    with pytest.raises(ValueError, match="Uniform.log_prob: the value is outside the support"):
        D.Uniform(0.0, 1.0).log_prob(st.tensor([1.5]))
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(st.tensor([1.5])).item() == \
        -math.inf
    with pytest.raises(ValueError, match="Exponential.log_prob: the value is outside"):
        D.Exponential(1.0).log_prob(st.tensor([-1.0]))
    with pytest.raises(ValueError, match="Bernoulli.log_prob: the value is outside .*0, 1"):
        D.Bernoulli(probs=0.3).log_prob(st.tensor([0.5]))
    with pytest.raises(ValueError, match="Poisson.log_prob: the value is outside"):
        D.Poisson(1.0).log_prob(st.tensor([1.5]))
    with pytest.raises(ValueError, match="Categorical.log_prob: the value is outside"):
        D.Categorical(probs=st.ones(3)).log_prob(st.tensor(3))
    with pytest.raises(ValueError, match="Beta.log_prob: the value is outside"):
        D.Beta(1.0, 1.0).log_prob(st.tensor([1.0]))
    with pytest.raises(ValueError, match="Dirichlet.log_prob: the value is outside"):
        D.Dirichlet(st.ones(2)).log_prob(st.tensor([0.5, 0.6]))
    with pytest.raises(ValueError, match="Dirichlet.log_prob: the value's last dims"):
        D.Dirichlet(st.ones(2)).log_prob(st.tensor([0.2, 0.3, 0.5]))
    with pytest.raises(ValueError, match="Normal.log_prob: a value of shape \\(3,\\) does not"):
        D.Normal(st.zeros(2), 1.0).log_prob(st.zeros(3))
    with pytest.raises(TypeError, match="Normal.log_prob: the value must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)


def test_shape_kl_and_registration_errors():
    with pytest.raises(TypeError, match="Normal: a shape must be a tuple of ints"):
        D.Normal(0.0, 1.0).sample("big")
    with pytest.raises(ValueError, match="Normal: a shape cannot have negative sizes"):
        D.Normal(0.0, 1.0).sample((-1,))
    with pytest.raises(ValueError, match="Normal.expand: batch_shape \\(2,\\) cannot be"):
        D.Normal(st.zeros(2), 1.0).expand((3,))
    with pytest.raises(NotImplementedError, match="kl_divergence: no KL divergence is "
                                                  "registered for Normal and Gamma"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))
    with pytest.raises(TypeError, match="register_kl: expected Distribution subclasses"):
        D.register_kl(int, D.Normal)
    with pytest.raises(NotImplementedError, match="Poisson does not implement entropy"):
        D.Poisson(1.0).entropy()
    with pytest.raises(TypeError, match="Distribution.set_default_validate_args: expected"):
        D.Distribution.set_default_validate_args(1)
    assert st.distributions is D


@pytest.mark.parametrize("dtype", [st.float32, st.float64])
def test_small_concentrations_stay_inside_the_support(dtype):
    st.manual_seed(4)
    c = st.tensor([0.01, 0.05], dtype=dtype)
    b = D.Beta(c, c).sample((5000,))
    assert bool(((b > 0) & (b < 1)).all().item())
    assert bool(D.Beta(c, c).log_prob(b).isfinite().all().item())
    g = D.Gamma(c, 1.0).sample((5000,))
    assert bool((g > 0).all().item()) and bool(D.Gamma(c, 1.0).log_prob(g).isfinite().all().item())
    d = D.Dirichlet(st.tensor([0.02, 0.02, 0.02], dtype=dtype)).sample((2000,))
    assert not bool(st.isnan(d).any().item())
