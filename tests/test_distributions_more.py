"""singa_tensor.distributions, the wider surface: constraints, transforms (inverses and
log-det-Jacobians against finite differences), TransformedDistribution and the further
families (densities, moments and entropies against closed forms in numpy, sample statistics
within several standard errors with fixed seeds), rsample gradients and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import distributions as D
from singa_tensor.distributions import constraints as C

from .helpers import assert_close, to_numpy

LG = np.vectorize(math.lgamma)


def f64(x, grad=False):
    return st.tensor(np.asarray(x, dtype=np.float64), dtype=st.float64, requires_grad=grad)


# ---- constraints ------------------------------------------------------------------------------

@pytest.mark.parametrize("c, good, bad", [
    (C.real, 1.0, float("nan")), (C.positive, 0.5, 0.0), (C.nonnegative, 0.0, -1e-9),
    (C.unit_interval, 1.0, 1.5), (C.interval(-1.0, 2.0), 2.0, 2.5),
    (C.greater_than(3.0), 3.5, 3.0), (C.greater_than_eq(3.0), 3.0, 2.9),
    (C.less_than(1.0), 0.0, 1.0), (C.half_open_interval(0.0, 1.0), 0.0, 1.0),
    (C.integer_interval(0, 4), 4.0, 2.5), (C.boolean, 1.0, 2.0),
    (C.nonnegative_integer, 3.0, -1.0), (C.positive_integer, 1.0, 0.0),
])
def test_scalar_constraints(c, good, bad):
    out = c.check(f64([good, bad]))
    assert out.dtype is st.bool and out.tolist() == [True, False]


def test_event_constraints():
    assert C.simplex.check(f64([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])).tolist() == [
        True, False, False]
    assert C.simplex.event_dim == 1 and C.real_vector.event_dim == 1
    assert C.real_vector.check(f64([[1.0, 2.0], [1.0, float("nan")]])).tolist() == [True, False]
    low = f64([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 1.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]])
    assert C.lower_cholesky.check(low).tolist() == [True, False, False]
    assert C.lower_triangular.check(low).tolist() == [True, False, True]
    pd = f64([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 2.0], [0.0, 1.0]]])
    assert C.positive_definite.check(pd).tolist() == [True, False, False]
    ind = C.independent(C.positive, 1)
    assert ind.event_dim == 1 and ind.check(f64([[1.0, 2.0], [1.0, -2.0]])).tolist() == [
        True, False]
    assert C.one_hot.check(f64([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]


def test_constraint_errors():
    with pytest.raises(TypeError, match="positive.check|greater_than.check"):
        C.positive.check([1.0])
    with pytest.raises(ValueError, match="constraints.simplex: expected a value of at least 1"):
        C.simplex.check(f64(1.0))
    with pytest.raises(ValueError, match="dependent constraint"):
        C.dependent.check(f64(1.0))
    with pytest.raises(TypeError, match="constraints.independent: expected a Constraint"):
        C.independent(1.0, 1)
    assert C.is_dependent(D.Uniform.arg_constraints["low"])


@pytest.mark.parametrize("make", [
    lambda: D.Normal(0.0, 1.0), lambda: D.Exponential(1.0), lambda: D.Laplace(0.0, 1.0),
    lambda: D.Uniform(0.0, 1.0), lambda: D.Bernoulli(probs=0.3),
    lambda: D.Categorical(probs=f64([0.2, 0.8])), lambda: D.Poisson(2.0),
    lambda: D.Gamma(2.0, 1.0), lambda: D.Beta(2.0, 2.0), lambda: D.Dirichlet(f64([1.0, 2.0])),
    lambda: D.MultivariateNormal(f64([0.0, 0.0]), st.eye(2, dtype=st.float64)),
])
def test_existing_families_declare_constraints(make):
    d = make()
    assert isinstance(d.arg_constraints, dict) and d.arg_constraints
    assert all(isinstance(c, C.Constraint) for c in d.arg_constraints.values())
    assert isinstance(d.support, C.Constraint)
    x = d.sample((5,))
    assert bool(d.support.check(x).all().item())


# ---- transforms -------------------------------------------------------------------------------

T = D.transforms

SCALAR_TRANSFORMS = [
    (T.ExpTransform(), [-1.5, 0.0, 2.0]),
    (T.AffineTransform(1.0, -3.0), [-1.0, 0.5, 2.0]),
    (T.AffineTransform(f64([1.0, 2.0, 3.0]), f64([0.5, 2.0, -1.0])), [-1.0, 0.5, 2.0]),
    (T.SigmoidTransform(), [-3.0, 0.0, 4.0]),
    (T.TanhTransform(), [-2.0, 0.1, 1.5]),
    (T.SoftplusTransform(), [-2.0, 0.0, 3.0]),
    (T.PowerTransform(2.5), [0.3, 1.0, 2.0]),
    (T.PowerTransform(-1.0), [0.3, 1.0, 2.0]),
    (T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.ExpTransform()]), [-1.0, 0.0, 0.7]),
    (T.ExpTransform().inv, [0.5, 1.0, 3.0]),
]


@pytest.mark.parametrize("t, xs", SCALAR_TRANSFORMS)
def test_scalar_transform_inverse_and_jacobian(t, xs):
    x = np.array(xs)
    y = t(f64(x))
    assert_close(to_numpy(t.inv(y)), x, rtol=1e-9, atol=1e-12)
    h = 1e-6
    fd = (to_numpy(t(f64(x + h))) - to_numpy(t(f64(x - h)))) / (2 * h)
    assert_close(to_numpy(t.log_abs_det_jacobian(f64(x), y)), np.log(np.abs(fd)), rtol=1e-6,
                 atol=1e-6)
    assert t.bijective
    sign = t.sign
    sign = to_numpy(sign) if isinstance(sign, st.Tensor) else sign
    assert np.all(np.sign(fd) == sign)


def test_stick_breaking_transform():
    t = T.StickBreakingTransform()
    x = np.array([0.3, -1.2, 0.8])
    y = t(f64(x))
    yn = to_numpy(y)
    assert yn.shape == (4,) and abs(yn.sum() - 1) < 1e-12 and np.all(yn > 0)
    assert bool(C.simplex.check(y).item())
    assert_close(to_numpy(t.inv(y)), x, rtol=1e-9, atol=1e-12)
    h = 1e-6
    jac = np.stack([(to_numpy(t(f64(x + h * e))) - to_numpy(t(f64(x - h * e))))[:-1] / (2 * h)
                    for e in np.eye(3)], 1)
    assert_close(t.log_abs_det_jacobian(f64(x), y).item(), np.log(abs(np.linalg.det(jac))),
                 rtol=1e-6, atol=1e-7)
    assert t.forward_shape((5, 3)) == (5, 4) and t.inverse_shape((5, 4)) == (5, 3)


def test_other_transforms():
    x = f64([[0.5, -1.0], [2.0, 0.3]])
    low = T.LowerCholeskyTransform()(x)
    assert_close(to_numpy(low), np.array([[math.exp(0.5), 0.0], [2.0, math.exp(0.3)]]))
    assert_close(to_numpy(T.LowerCholeskyTransform().inv(low)), np.array([[0.5, 0], [2, 0.3]]))
    r = T.ReshapeTransform((4,), (2, 2))
    z = st.arange(8, dtype=st.float64).reshape(2, 4)
    assert r(z).shape == (2, 2, 2) and r.inv(r(z)).tolist() == z.tolist()
    assert r.log_abs_det_jacobian(z, r(z)).shape == (2,)
    it = T.IndependentTransform(T.ExpTransform(), 1)
    assert_close(to_numpy(it.log_abs_det_jacobian(x, it(x))), to_numpy(x).sum(-1))
    sm = T.SoftmaxTransform()(x)
    assert_close(to_numpy(sm.sum(-1)), np.ones(2))
    assert T.AbsTransform()(f64([-2.0])).tolist() == [2.0]
    ct = T.CatTransform([T.ExpTransform(), T.identity_transform], 0, [1, 2])
    v = f64([0.0, 5.0, -5.0])
    assert ct(v).tolist() == [1.0, 5.0, -5.0] and ct.inv(ct(v)).tolist() == v.tolist()
    stt = T.StackTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)], 1)
    assert stt(x).tolist() == [[math.exp(0.5), -2.0], [math.exp(2.0), 0.6]]
    assert T.identity_transform(x) is x
    assert T.ExpTransform() == T.ExpTransform() and T.AffineTransform(0.0, 1.0) != T.ExpTransform()


@pytest.mark.parametrize("c, points", [
    (C.real, [-3.0, 0.0, 2.0]), (C.positive, [-3.0, 0.0, 2.0]),
    (C.greater_than(2.0), [-3.0, 0.0, 2.0]), (C.less_than(-1.0), [-3.0, 0.0, 2.0]),
    (C.unit_interval, [-3.0, 0.0, 2.0]), (C.interval(-2.0, 5.0), [-3.0, 0.0, 2.0]),
])
def test_biject_to_lands_in_the_constraint(c, points):
    for reg in (D.biject_to, D.transform_to):
        t = reg(c)
        y = t(f64(points))
        assert bool(c.check(y).all().item())
        assert_close(to_numpy(t.inv(y)), np.array(points), rtol=1e-8, atol=1e-10)


def test_biject_to_simplex_and_errors():
    y = D.biject_to(C.simplex)(f64([0.1, 0.2]))
    assert y.shape == (3,) and bool(C.simplex.check(y).item())
    y = D.transform_to(C.simplex)(f64([0.1, 0.2]))
    assert y.shape == (2,) and bool(C.simplex.check(y).item())
    y = D.transform_to(C.lower_cholesky)(f64([[0.1, 3.0], [0.2, 0.0]]))
    assert bool(C.lower_cholesky.check(y).item())
    y = D.biject_to(C.independent(C.positive, 1))(f64([[0.1, -3.0]]))
    assert bool((y > 0).all().item())
    with pytest.raises(TypeError, match="biject_to: expected a Constraint"):
        D.biject_to(1.0)
    with pytest.raises(NotImplementedError, match="biject_to: cannot transform"):
        D.biject_to(C.boolean)
    with pytest.raises(TypeError, match="ComposeTransform: parts must be Transforms"):
        T.ComposeTransform([1])
    with pytest.raises(ValueError, match="ReshapeTransform: in_shape"):
        T.ReshapeTransform((3,), (2, 2))
    with pytest.raises(TypeError, match="AffineTransform: loc must be"):
        T.AffineTransform("a", 1.0)
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)


def test_transformed_distribution():
    base = D.Normal(f64([0.0, 1.0]), f64([1.0, 0.5]))
    d = D.TransformedDistribution(base, [T.AffineTransform(1.0, 2.0), T.ExpTransform()])
    y = f64([0.7, 3.0])
    # y = exp(1 + 2 x): log y ~ N(1 + 2 mu, (2 sigma)^2), density / y
    m, s = 1 + 2 * np.array([0.0, 1.0]), 2 * np.array([1.0, 0.5])
    ref = -0.5 * ((np.log(to_numpy(y)) - m) / s) ** 2 - np.log(s) - 0.5 * math.log(
        2 * math.pi) - np.log(to_numpy(y))
    assert_close(to_numpy(d.log_prob(y)), ref, rtol=1e-10)
    assert d.has_rsample and d.batch_shape == (2,) and d.event_shape == ()
    assert_close(to_numpy(d.cdf(y)), to_numpy(base.cdf(f64((np.log(to_numpy(y)) - 1) / 2))))
    st.manual_seed(0)
    x = d.sample((1000,))
    assert x.shape == (1000, 2) and bool((x > 0).all().item())
    # event dims: an IndependentTransform of a scalar base
    d2 = D.TransformedDistribution(base, T.IndependentTransform(T.ExpTransform(), 1))
    assert d2.batch_shape == () and d2.event_shape == (2,)
    assert_close(d2.log_prob(y).item(), to_numpy(
        D.TransformedDistribution(base, T.ExpTransform()).log_prob(y)).sum())
    # stick breaking of an independent normal: a distribution on the simplex
    d3 = D.TransformedDistribution(D.Normal(st.zeros(2, dtype=st.float64), 1.0),
                                   T.StickBreakingTransform())
    assert d3.event_shape == (3,) and d3.batch_shape == ()
    v = d3.sample((4,))
    assert v.shape == (4, 3) and d3.log_prob(v).shape == (4,)
    with pytest.raises(TypeError, match="TransformedDistribution: transforms must be"):
        D.TransformedDistribution(base, [1])
    with pytest.raises(TypeError, match="TransformedDistribution: base_distribution"):
        D.TransformedDistribution(1, [])
    with pytest.raises(ValueError, match="TransformedDistribution.log_prob: the value is "
                                         "outside the support"):
        d.log_prob(f64([-1.0, 1.0]))


def test_independent():
    base = D.Normal(f64([[0.0, 1.0, 2.0]]), f64([1.0, 2.0, 3.0]))
    d = D.Independent(base, 1)
    assert d.batch_shape == (1,) and d.event_shape == (3,)
    v = f64([[0.5, 0.5, 0.5]])
    assert_close(to_numpy(d.log_prob(v)), to_numpy(base.log_prob(v)).sum(-1))
    assert_close(to_numpy(d.entropy()), to_numpy(base.entropy()).sum(-1))
    assert d.sample((2,)).shape == (2, 1, 3) and d.has_rsample
    assert d.expand((4,)).batch_shape == (4,)
    q = D.Independent(D.Normal(f64([[1.0, 1.0, 1.0]]), 1.0), 1)
    assert_close(to_numpy(D.kl_divergence(d, q)),
                 to_numpy(D.kl_divergence(base, q.base_dist)).sum(-1))
    with pytest.raises(ValueError, match="Independent: reinterpreted_batch_ndims 3 is larger"):
        D.Independent(base, 3)
    with pytest.raises(TypeError, match="Independent: base_distribution must be"):
        D.Independent(3, 1)


# ---- the further families: densities against closed forms ---------------------------------------

def _np_i0(k):
    k = np.asarray(k, np.float64)
    return sum((k * k / 4) ** j / math.factorial(j) ** 2 for j in range(80))


EG = 0.5772156649015329
X = np.array([0.3, 1.2, 2.5])

DENSITIES = [
    ("Cauchy", lambda: D.Cauchy(f64(0.5), f64(2.0)), X,
     lambda x: -np.log(np.pi * 2.0 * (1 + ((x - 0.5) / 2.0) ** 2))),
    ("Gumbel", lambda: D.Gumbel(f64(0.5), f64(2.0)), X,
     lambda x: -((x - 0.5) / 2 + np.exp(-(x - 0.5) / 2)) - np.log(2.0)),
    ("Weibull", lambda: D.Weibull(f64(1.5), f64(2.5)), X,
     lambda x: np.log(2.5 / 1.5) + 1.5 * np.log(x / 1.5) - (x / 1.5) ** 2.5),
    ("Pareto", lambda: D.Pareto(f64(0.2), f64(3.0)), X,
     lambda x: np.log(3.0) + 3.0 * np.log(0.2) - 4.0 * np.log(x)),
    ("Kumaraswamy", lambda: D.Kumaraswamy(f64(2.0), f64(3.0)), np.array([0.1, 0.5, 0.9]),
     lambda x: np.log(6.0) + np.log(x) + 2 * np.log1p(-x ** 2)),
    ("StudentT", lambda: D.StudentT(f64(4.5), f64(0.5), f64(2.0)), X,
     lambda x: LG(2.75) - LG(2.25) - 0.5 * np.log(4.5 * np.pi) - np.log(2.0)
     - 2.75 * np.log1p(((x - 0.5) / 2) ** 2 / 4.5)),
    ("Chi2", lambda: D.Chi2(f64(3.0)), X,
     lambda x: -1.5 * np.log(2) - LG(1.5) + 0.5 * np.log(x) - x / 2),
    ("FisherSnedecor", lambda: D.FisherSnedecor(f64(5.0), f64(7.0)), X,
     lambda x: 0.5 * (5 * np.log(5 * x) + 7 * np.log(7) - 12 * np.log(5 * x + 7)) - np.log(x)
     - (LG(2.5) + LG(3.5) - LG(6.0))),
    ("LogNormal", lambda: D.LogNormal(f64(0.2), f64(0.7)), X,
     lambda x: -0.5 * ((np.log(x) - 0.2) / 0.7) ** 2 - np.log(0.7 * x * np.sqrt(2 * np.pi))),
    ("HalfNormal", lambda: D.HalfNormal(f64(1.5)), X,
     lambda x: np.log(2) - 0.5 * (x / 1.5) ** 2 - np.log(1.5 * np.sqrt(2 * np.pi))),
    ("HalfCauchy", lambda: D.HalfCauchy(f64(1.5)), X,
     lambda x: np.log(2) - np.log(np.pi * 1.5 * (1 + (x / 1.5) ** 2))),
    ("InverseGamma", lambda: D.InverseGamma(f64(3.0), f64(2.0)), X,
     lambda x: 3 * np.log(2.0) - LG(3.0) - 4 * np.log(x) - 2.0 / x),
    ("VonMises", lambda: D.VonMises(f64(0.5), f64(2.0)), np.array([-2.0, 0.0, 1.0]),
     lambda x: 2.0 * np.cos(x - 0.5) - np.log(2 * np.pi * _np_i0(2.0))),
    ("VonMises large", lambda: D.VonMises(f64(0.5), f64(8.0)), np.array([-2.0, 0.0, 1.0]),
     lambda x: 8.0 * np.cos(x - 0.5) - np.log(2 * np.pi * _np_i0(8.0))),
    ("ContinuousBernoulli", lambda: D.ContinuousBernoulli(probs=f64(0.2)),
     np.array([0.1, 0.5, 0.9]),
     lambda x: x * np.log(0.2) + (1 - x) * np.log(0.8)
     + np.log(2 * np.arctanh(0.6) / 0.6)),
]


@pytest.mark.parametrize("name, make, x, ref", DENSITIES, ids=[d[0] for d in DENSITIES])
def test_log_prob_closed_form(name, make, x, ref):
    d = make()
    tol = 2e-7 if name.startswith("VonMises") else 1e-10
    assert_close(to_numpy(d.log_prob(f64(x))), ref(x), rtol=tol, atol=tol)


# density, moments and entropy checked against each other by quadrature on a fine grid
QUADRATURE = [
    (lambda: D.Cauchy(f64(0.5), f64(2.0)), (-4000, 4000), ("entropy", "heavy")),
    (lambda: D.Gumbel(f64(0.5), f64(2.0)), (-15, 80), ("mean", "variance", "entropy")),
    (lambda: D.Weibull(f64(1.5), f64(2.5)), (1e-12, 12), ("mean", "variance", "entropy")),
    (lambda: D.Pareto(f64(0.2), f64(5.0)), (0.2, 400), ("mean", "variance", "entropy")),
    (lambda: D.Kumaraswamy(f64(2.0), f64(3.0)), (0, 1), ("mean", "variance", "entropy")),
    (lambda: D.StudentT(f64(6.0), f64(0.5), f64(2.0)), (-3000, 3000),
     ("mean", "variance", "entropy")),
    (lambda: D.Chi2(f64(3.0)), (1e-14, 80), ("mean", "variance", "entropy")),
    (lambda: D.FisherSnedecor(f64(5.0), f64(9.0)), (1e-12, 3000), ("mean", "variance")),
    (lambda: D.LogNormal(f64(0.2), f64(0.5)), (1e-9, 60), ("mean", "variance", "entropy")),
    (lambda: D.HalfNormal(f64(1.5)), (0, 20), ("mean", "variance", "entropy")),
    (lambda: D.HalfCauchy(f64(1.5)), (0, 1e4), ("entropy", "heavy")),
    (lambda: D.InverseGamma(f64(5.0), f64(2.0)), (1e-6, 300), ("mean", "variance", "entropy")),
    (lambda: D.VonMises(f64(0.5), f64(2.0)), (-math.pi, math.pi), ("variance_circ",)),
    (lambda: D.ContinuousBernoulli(probs=f64(0.2)), (0, 1), ("mean", "variance", "entropy")),
    (lambda: D.ContinuousBernoulli(probs=f64(0.8)), (0, 1), ("mean", "variance", "entropy")),
    (lambda: D.ContinuousBernoulli(probs=f64(0.5004)), (0, 1), ("mean", "variance",
                                                                "entropy")),
]


@pytest.mark.parametrize("make, lim, what", QUADRATURE)
def test_moments_by_quadrature(make, lim, what):
    d = make()
    x = np.linspace(lim[0], lim[1], 2_000_001)
    lp = to_numpy(d.log_prob(f64(x)))
    p = np.exp(lp)
    tail = 1 - np.trapezoid(p, x)
    assert abs(tail) < 2e-3, tail
    if "mean" in what:
        assert_close(d.mean.item(), np.trapezoid(x * p, x), rtol=1e-4, atol=1e-5)
    if "variance" in what:
        m = np.trapezoid(x * p, x)
        assert_close(d.variance.item(), np.trapezoid((x - m) ** 2 * p, x), rtol=1e-3, atol=1e-5)
    if "entropy" in what:
        # heavy tails: the truncated integral misses a little of the entropy
        assert_close(d.entropy().item(), -np.trapezoid(p * np.where(p > 0, lp, 0.0), x),
                     rtol=4e-3 if "heavy" in what else 1e-3, atol=1e-4)
    if "variance_circ" in what:
        assert_close(d.variance.item(), 1 - np.trapezoid(np.cos(x - 0.5) * p, x), rtol=1e-6)


@pytest.mark.parametrize("make, lo, hi", [
    (lambda: D.Cauchy(f64(0.5), f64(2.0)), -3.0, 4.0),
    (lambda: D.Gumbel(f64(0.5), f64(2.0)), -3.0, 4.0),
    (lambda: D.Weibull(f64(1.5), f64(2.5)), 0.1, 3.0),
    (lambda: D.Pareto(f64(0.2), f64(3.0)), 0.3, 3.0),
    (lambda: D.HalfNormal(f64(1.5)), 0.1, 3.0),
    (lambda: D.HalfCauchy(f64(1.5)), 0.1, 3.0),
    (lambda: D.LogNormal(f64(0.2), f64(0.5)), 0.3, 3.0),
])
def test_cdf_is_the_integral_of_the_density(make, lo, hi):
    d = make()
    x = np.linspace(lo, hi, 200_001)
    p = np.exp(to_numpy(d.log_prob(f64(x))))
    assert_close(d.cdf(f64(hi)).item() - d.cdf(f64(lo)).item(), np.trapezoid(p, x), rtol=1e-7)
    if hasattr(d, "icdf") and type(d).__name__ not in ("Weibull", "HalfNormal", "LogNormal"):
        q = d.cdf(f64([lo, hi]))
        assert_close(to_numpy(d.icdf(q)), np.array([lo, hi]), rtol=1e-8)


# ---- sampling ---------------------------------------------------------------------------------

SAMPLED = [
    lambda: D.Gumbel(f64(0.5), f64(2.0)), lambda: D.Weibull(f64(1.5), f64(2.5)),
    lambda: D.Pareto(f64(0.2), f64(5.0)), lambda: D.Kumaraswamy(f64(2.0), f64(3.0)),
    lambda: D.StudentT(f64(6.0), f64(0.5), f64(2.0)), lambda: D.Chi2(f64(3.0)),
    lambda: D.FisherSnedecor(f64(5.0), f64(12.0)), lambda: D.LogNormal(f64(0.2), f64(0.5)),
    lambda: D.HalfNormal(f64(1.5)), lambda: D.InverseGamma(f64(6.0), f64(2.0)),
    lambda: D.ContinuousBernoulli(probs=f64(0.2)),
    lambda: D.Geometric(probs=f64(0.3)), lambda: D.Binomial(f64(12.0), probs=f64(0.3)),
    lambda: D.NegativeBinomial(f64(4.0), probs=f64(0.4)),
    lambda: D.RelaxedBernoulli(f64(0.7), probs=f64(0.3)),
]


@pytest.mark.parametrize("make", SAMPLED)
def test_sample_mean_within_standard_errors(make):
    d = make()
    st.manual_seed(3)
    n = 200_000
    x = to_numpy(d.sample((n,)))
    assert x.shape == (n,)
    assert bool(d.support.check(f64(x)).all().item())
    if type(d).__name__ == "RelaxedBernoulli":
        return  # no closed-form mean; the support check and log_prob below suffice
    se = math.sqrt(d.variance.item() / n)
    assert abs(x.mean() - d.mean.item()) < 5 * se
    assert abs(x.var() - d.variance.item()) < 0.05 * d.variance.item()


def test_heavy_tailed_and_circular_samples():
    st.manual_seed(4)
    n = 200_000
    x = to_numpy(D.Cauchy(f64(0.5), f64(2.0)).sample((n,)))
    # quartiles of the Cauchy: loc -+ scale
    assert_close(np.percentile(x, [25, 50, 75]), np.array([-1.5, 0.5, 2.5]), atol=0.05)
    h = to_numpy(D.HalfCauchy(f64(1.5)).sample((n,)))
    assert h.min() >= 0 and abs(np.median(h) - 1.5) < 0.03
    d = D.VonMises(f64(0.5), f64(2.0))
    v = to_numpy(d.sample((n,)))
    assert v.min() >= -math.pi and v.max() <= math.pi
    assert abs(np.mean(np.cos(v - 0.5)) - (1 - d.variance.item())) < 5 * math.sqrt(0.5 / n)
    assert abs(np.mean(np.sin(v - 0.5))) < 5 * math.sqrt(0.5 / n)


def test_relaxed_bernoulli_density_and_samples():
    d = D.RelaxedBernoulli(f64(0.7), probs=f64(0.3))
    x = np.linspace(1e-7, 1 - 1e-7, 2_000_001)
    p = np.exp(to_numpy(d.log_prob(f64(x))))
    assert abs(np.trapezoid(p, x) - 1) < 1e-3
    st.manual_seed(5)
    s = to_numpy(d.sample((200_000,)))
    assert abs(s.mean() - np.trapezoid(x * p, x)) < 0.005
    # at a low temperature the draws are nearly the coin's
    cold = to_numpy(D.RelaxedBernoulli(f64(0.05), probs=f64(0.3)).sample((100_000,)))
    assert abs((cold > 0.5).mean() - 0.3) < 0.01


# ---- discrete families ------------------------------------------------------------------------

def test_discrete_pmfs_and_moments():
    k = np.arange(0, 60, dtype=np.float64)
    g = D.Geometric(probs=f64(0.3))
    ref = k * np.log(0.7) + np.log(0.3)
    assert_close(to_numpy(g.log_prob(f64(k))), ref, rtol=1e-12)
    assert_close(g.entropy().item(), -(np.exp(ref) * ref).sum(), rtol=1e-6)
    assert_close(D.Geometric(logits=f64(math.log(0.3 / 0.7))).mean.item(), 0.7 / 0.3)
    b = D.Binomial(f64(12.0), probs=f64(0.3))
    kb = np.arange(13.0)
    comb = LG(13) - LG(kb + 1) - LG(13 - kb)
    refb = comb + kb * np.log(0.3) + (12 - kb) * np.log(0.7)
    assert_close(to_numpy(b.log_prob(f64(kb))), refb, rtol=1e-10)
    assert_close(b.entropy().item(), -(np.exp(refb) * refb).sum(), rtol=1e-10)
    assert b.mode.item() == 3.0 and b.enumerate_support().shape == (13,)
    nb = D.NegativeBinomial(f64(4.0), probs=f64(0.4))
    refn = LG(k + 4) - LG(k + 1) - LG(4.0) + 4 * np.log(0.6) + k * np.log(0.4)
    assert_close(to_numpy(nb.log_prob(f64(k))), refn, rtol=1e-10)
    assert_close(nb.mean.item(), (np.exp(refn) * k).sum(), rtol=1e-6)
    m = D.Multinomial(5, probs=f64([0.2, 0.3, 0.5]))
    v = f64([[1.0, 1.0, 3.0], [0.0, 5.0, 0.0]])
    refm = LG(6) - LG(to_numpy(v) + 1).sum(-1) + (to_numpy(v) * np.log([0.2, 0.3, 0.5])).sum(-1)
    assert_close(to_numpy(m.log_prob(v)), refm, rtol=1e-10)
    assert_close(to_numpy(m.variance), 5 * np.array([0.2, 0.3, 0.5]) * np.array([0.8, 0.7, 0.5]))
    oh = D.OneHotCategorical(probs=f64([0.2, 0.3, 0.5]))
    assert_close(to_numpy(oh.log_prob(st.eye(3, dtype=st.float64))), np.log([0.2, 0.3, 0.5]))
    assert oh.mode.tolist() == [0.0, 0.0, 1.0] and oh.enumerate_support().shape == (3, 3)


def test_discrete_sampling():
    st.manual_seed(6)
    m = D.Multinomial(7, probs=f64([0.2, 0.3, 0.5]))
    x = to_numpy(m.sample((50_000,)))
    assert x.shape == (50_000, 3) and np.all(x.sum(-1) == 7)
    se = np.sqrt(to_numpy(m.variance) / 50_000)
    assert np.all(np.abs(x.mean(0) - to_numpy(m.mean)) < 5 * se)
    oh = D.OneHotCategorical(logits=f64([[0.0, 1.0, 2.0]]))
    s = to_numpy(oh.sample((50_000,)))
    assert s.shape == (50_000, 1, 3) and np.all(s.sum(-1) == 1)
    p = to_numpy(oh.probs)[0]
    assert np.all(np.abs(s[:, 0].mean(0) - p) < 5 * np.sqrt(p * (1 - p) / 50_000))


def test_straight_through_gradient():
    p = f64([0.2, 0.8], grad=True)
    d = D.OneHotCategoricalStraightThrough(probs=p)
    st.manual_seed(0)
    x = d.rsample((10,))
    w = f64([1.0, 3.0])
    (x * w).sum().backward()
    # value + probs - probs.detach(): d/dp of sum(w * probs) through the normalisation
    g = np.array([1.0, 3.0]) * 10
    pn = np.array([0.2, 0.8])
    ref = g - (g * pn).sum()  # probs = p / sum(p), with sum(p) = 1
    assert_close(to_numpy(p.grad), ref, rtol=1e-10)


def test_relaxed_one_hot_categorical():
    t = f64(0.6)
    d = D.RelaxedOneHotCategorical(t, probs=f64([0.2, 0.3, 0.5]))
    st.manual_seed(7)
    x = d.rsample((20_000,))
    xn = to_numpy(x)
    assert xn.shape == (20_000, 3) and np.allclose(xn.sum(-1), 1)
    lp = to_numpy(d.log_prob(x))
    assert np.all(np.isfinite(lp))
    # the density on the 2-simplex integrates to one (coordinates x1, x2; x3 = 1 - x1 - x2)
    n = 1201
    g = (np.arange(n) + 0.5) / n
    a, b = np.meshgrid(g, g, indexing="ij")
    mask = a + b < 1
    pts = np.stack([a[mask], b[mask], 1 - a[mask] - b[mask]], -1)
    dens = np.exp(to_numpy(d.log_prob(f64(pts))))
    assert abs(dens.sum() / n ** 2 - 1) < 0.02
    # low temperature: the argmax frequencies are the probs
    cold = to_numpy(D.RelaxedOneHotCategorical(f64(0.05), probs=f64([0.2, 0.3, 0.5])).sample(
        (50_000,)))
    freq = np.bincount(cold.argmax(-1), minlength=3) / 50_000
    assert np.all(np.abs(freq - [0.2, 0.3, 0.5]) < 0.01)


# ---- mixtures and the low-rank normal ---------------------------------------------------------

def test_mixture_same_family():
    mix = D.Categorical(probs=f64([0.3, 0.7]))
    comp = D.Normal(f64([-1.0, 2.0]), f64([0.5, 1.5]))
    d = D.MixtureSameFamily(mix, comp)
    x = np.array([-1.0, 0.0, 3.0])
    dens = lambda m, s, v: np.exp(-0.5 * ((v - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))  # noqa
    ref = np.log(0.3 * dens(-1, 0.5, x) + 0.7 * dens(2, 1.5, x))
    assert_close(to_numpy(d.log_prob(f64(x))), ref, rtol=1e-12)
    mean = 0.3 * -1 + 0.7 * 2
    assert_close(d.mean.item(), mean)
    assert_close(d.variance.item(), 0.3 * (0.25 + 1) + 0.7 * (2.25 + 4) - mean ** 2)
    st.manual_seed(8)
    s = to_numpy(d.sample((100_000,)))
    assert abs(s.mean() - mean) < 5 * math.sqrt(d.variance.item() / 100_000)
    assert_close(d.cdf(f64(0.5)).item(), 0.3 * comp.cdf(f64(0.5))[0].item()
                 + 0.7 * comp.cdf(f64(0.5))[1].item())
    # a batch of mixtures of multivariate components
    comp2 = D.Independent(D.Normal(st.zeros(4, 2, 3, dtype=st.float64), 1.0), 1)
    d2 = D.MixtureSameFamily(D.Categorical(probs=st.ones(4, 2, dtype=st.float64)), comp2)
    assert d2.batch_shape == (4,) and d2.event_shape == (3,)
    assert d2.sample((5,)).shape == (5, 4, 3) and d2.log_prob(st.zeros(4, 3)).shape == (4,)
    with pytest.raises(ValueError, match="MixtureSameFamily: the mixture has 3 categories"):
        D.MixtureSameFamily(D.Categorical(probs=f64([1.0, 1.0, 1.0])), comp)
    with pytest.raises(TypeError, match="MixtureSameFamily: mixture_distribution must be"):
        D.MixtureSameFamily(comp, comp)


def test_low_rank_multivariate_normal():
    w = f64([[1.0, 0.5], [0.0, 1.0], [2.0, -1.0]])
    dg = f64([0.5, 1.0, 2.0])
    loc = f64([0.0, 1.0, -1.0])
    d = D.LowRankMultivariateNormal(loc, w, dg)
    cov = to_numpy(w) @ to_numpy(w).T + np.diag(to_numpy(dg))
    v = np.array([0.5, 0.5, 0.5])
    diff = v - to_numpy(loc)
    ref = -0.5 * (3 * np.log(2 * np.pi) + np.linalg.slogdet(cov)[1]
                  + diff @ np.linalg.solve(cov, diff))
    assert_close(d.log_prob(f64(v)).item(), ref, rtol=1e-10)
    assert_close(d.entropy().item(), 0.5 * (3 * (1 + np.log(2 * np.pi))
                                            + np.linalg.slogdet(cov)[1]), rtol=1e-10)
    assert_close(to_numpy(d.variance), np.diag(cov))
    st.manual_seed(9)
    s = to_numpy(d.rsample((100_000,)))
    assert_close(np.cov(s.T), cov, atol=0.1)
    with pytest.raises(ValueError, match="LowRankMultivariateNormal: cov_diag must be"):
        D.LowRankMultivariateNormal(loc, w, f64([1.0]))
    with pytest.raises(ValueError, match="LowRankMultivariateNormal: expected parameter "
                                         "cov_diag"):
        D.LowRankMultivariateNormal(loc, w, f64([1.0, -1.0, 1.0]))


# ---- KL divergences against Monte Carlo -------------------------------------------------------

KL_PAIRS = [
    (lambda: D.Gumbel(f64(0.5), f64(2.0)), lambda: D.Gumbel(f64(-0.5), f64(1.2))),
    (lambda: D.HalfNormal(f64(1.5)), lambda: D.HalfNormal(f64(0.8))),
    (lambda: D.Pareto(f64(1.0), f64(3.0)), lambda: D.Pareto(f64(0.5), f64(2.0))),
    (lambda: D.LogNormal(f64(0.2), f64(0.5)), lambda: D.LogNormal(f64(0.0), f64(0.9))),
    (lambda: D.Independent(D.Normal(f64([0.0, 1.0]), f64([1.0, 2.0])), 1),
     lambda: D.Independent(D.Normal(f64([0.5, 0.0]), f64([1.5, 1.0])), 1)),
]


@pytest.mark.parametrize("mp, mq", KL_PAIRS)
def test_kl_against_monte_carlo(mp, mq):
    p, q = mp(), mq()
    st.manual_seed(10)
    x = p.sample((400_000,))
    diff = to_numpy(p.log_prob(x) - q.log_prob(x))
    kl = D.kl_divergence(p, q).item()
    assert abs(diff.mean() - kl) < 5 * diff.std() / math.sqrt(diff.size)


def test_discrete_kl_exact_sums():
    k = np.arange(0, 400, dtype=np.float64)
    p, q = D.Geometric(probs=f64(0.3)), D.Geometric(probs=f64(0.6))
    lp, lq = to_numpy(p.log_prob(f64(k))), to_numpy(q.log_prob(f64(k)))
    assert_close(D.kl_divergence(p, q).item(), (np.exp(lp) * (lp - lq)).sum(), rtol=1e-9)
    p, q = D.Binomial(f64(9.0), probs=f64(0.3)), D.Binomial(f64(9.0), logits=f64(0.4))
    kb = f64(np.arange(10.0))
    lp, lq = to_numpy(p.log_prob(kb)), to_numpy(q.log_prob(kb))
    assert_close(D.kl_divergence(p, q).item(), (np.exp(lp) * (lp - lq)).sum(), rtol=1e-9)
    with pytest.raises(NotImplementedError, match="Binomials with different total_count"):
        D.kl_divergence(p, D.Binomial(f64(3.0), probs=f64(0.3)))
    a = D.OneHotCategorical(probs=f64([0.2, 0.8]))
    b = D.OneHotCategorical(probs=f64([0.5, 0.5]))
    assert_close(D.kl_divergence(a, b).item(), 0.2 * math.log(0.4) + 0.8 * math.log(1.6))
    assert D.kl_divergence(D.Pareto(f64(0.5), f64(3.0)), D.Pareto(f64(1.0), f64(3.0))).item() \
        == math.inf
    t1 = D.TransformedDistribution(D.Normal(f64(0.0), f64(1.0)), [D.ExpTransform()])
    t2 = D.TransformedDistribution(D.Normal(f64(1.0), f64(1.0)), [D.ExpTransform()])
    assert_close(D.kl_divergence(t1, t2).item(), 0.5)
    t3 = D.TransformedDistribution(D.Normal(f64(1.0), f64(1.0)), [D.SigmoidTransform()])
    with pytest.raises(NotImplementedError, match="TransformedDistributions with different "
                                                  "transforms"):
        D.kl_divergence(t1, t3)


# ---- rsample gradients ------------------------------------------------------------------------

def _mc_grad(make, params, n=400_000, seed=11):
    ts = [f64(v, grad=True) for v in params]
    st.manual_seed(seed)
    make(*ts).rsample((n,)).mean().backward()
    return [t.grad.item() for t in ts]


@pytest.mark.parametrize("make, params, dmean", [
    # d E[X] / d params, analytic
    (D.Gumbel, [0.5, 2.0], lambda m, s: [1.0, EG]),
    (D.Weibull, [1.5, 2.5], lambda lam, k: [math.gamma(1 + 1 / k),
                                            -lam * math.gamma(1 + 1 / k) * _dg(1 + 1 / k)
                                            / k ** 2]),
    (D.Pareto, [0.2, 5.0], lambda s, a: [a / (a - 1), -s / (a - 1) ** 2]),
    (D.LogNormal, [0.2, 0.5], lambda m, s: [math.exp(m + s * s / 2),
                                            s * math.exp(m + s * s / 2)]),
    (D.HalfNormal, [1.5], lambda s: [math.sqrt(2 / math.pi)]),
    (D.Kumaraswamy, [2.0, 3.0], None),
    (D.StudentT, [6.0, 0.5, 2.0], lambda v, m, s: [0.0, 1.0, 0.0]),
    (D.InverseGamma, [6.0, 2.0], lambda a, b: [-b / (a - 1) ** 2, 1 / (a - 1)]),
    (D.Chi2, [3.0], lambda v: [1.0]),
])
def test_rsample_gradients(make, params, dmean):
    g = _mc_grad(make, params)
    if dmean is None:  # Kumaraswamy: differentiate the closed-form mean numerically
        h = 1e-6
        ref = []
        for i in range(len(params)):
            up = list(params)
            dn = list(params)
            up[i] += h
            dn[i] -= h
            ref.append((make(*map(f64, up)).mean.item() - make(*map(f64, dn)).mean.item())
                       / (2 * h))
    else:
        ref = dmean(*params)
    assert make(*map(f64, params)).has_rsample
    assert_close(np.array(g), np.array(ref), rtol=0.03, atol=0.01)


def _dg(x):
    h = 1e-6
    return (math.lgamma(x + h) - math.lgamma(x - h)) / (2 * h)


def test_more_rsample_gradients():
    w = f64([[1.0], [0.5]], grad=True)
    dg = f64([0.5, 1.0], grad=True)
    st.manual_seed(12)
    x = D.LowRankMultivariateNormal(f64([0.0, 0.0]), w, dg).rsample((200_000,))
    (x ** 2).sum(-1).mean().backward()  # E|x|^2 = sum(W^2) + sum(D)
    assert_close(to_numpy(w.grad), 2 * np.array([[1.0], [0.5]]), rtol=0.03)
    assert_close(to_numpy(dg.grad), np.ones(2), rtol=0.03)
    p = f64(0.3, grad=True)
    st.manual_seed(13)
    D.ContinuousBernoulli(probs=p).rsample((200_000,)).mean().backward()
    h = 1e-6
    ref = (D.ContinuousBernoulli(probs=f64(0.3 + h)).mean.item()
           - D.ContinuousBernoulli(probs=f64(0.3 - h)).mean.item()) / (2 * h)
    assert_close(p.grad.item(), ref, rtol=0.03)


# ---- validation -------------------------------------------------------------------------------

@pytest.mark.parametrize("make, match", [
    (lambda: D.Cauchy(0.0, -1.0), "Cauchy: expected parameter scale"),
    (lambda: D.Gumbel(0.0, 0.0), "Gumbel: expected parameter scale"),
    (lambda: D.Weibull(-1.0, 1.0), "Weibull: expected parameter scale"),
    (lambda: D.Pareto(1.0, -2.0), "Pareto: expected parameter alpha"),
    (lambda: D.Kumaraswamy(0.0, 1.0), "Kumaraswamy: expected parameter concentration1"),
    (lambda: D.StudentT(-1.0), "StudentT: expected parameter df"),
    (lambda: D.Chi2(-3.0), "Chi2: expected parameter df"),
    (lambda: D.FisherSnedecor(1.0, 0.0), "FisherSnedecor: expected parameter df2"),
    (lambda: D.LogNormal(0.0, -1.0), "Normal: expected parameter scale"),
    (lambda: D.HalfNormal(-1.0), "Normal: expected parameter scale"),
    (lambda: D.InverseGamma(1.0, -1.0), "Gamma: expected parameter rate"),
    (lambda: D.VonMises(0.0, -1.0), "VonMises: expected parameter concentration"),
    (lambda: D.Geometric(probs=0.0), "Geometric: expected parameter probs"),
    (lambda: D.Binomial(2.5, probs=0.5), "Binomial: expected parameter total_count"),
    (lambda: D.Binomial(2, probs=1.5), "Binomial: expected parameter probs"),
    (lambda: D.NegativeBinomial(0.0, probs=0.5), "NegativeBinomial: expected parameter total"),
    (lambda: D.ContinuousBernoulli(probs=2.0), "ContinuousBernoulli: expected parameter probs"),
    (lambda: D.RelaxedBernoulli(-1.0, probs=0.5), "LogitRelaxedBernoulli: expected parameter "
                                                  "temperature"),
    (lambda: D.Multinomial(3, probs=f64([-1.0, 2.0])), "Categorical: expected parameter probs"),
    (lambda: D.Geometric(), "Geometric: pass exactly one of probs and logits"),
])
def test_parameter_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("d, bad", [
    (lambda: D.HalfNormal(1.0), -1.0), (lambda: D.Weibull(1.0, 1.0), -0.5),
    (lambda: D.Pareto(1.0, 2.0), 0.5), (lambda: D.Kumaraswamy(1.0, 2.0), 1.5),
    (lambda: D.Geometric(probs=0.5), 1.5), (lambda: D.Binomial(3, probs=0.5), 4.0),
    (lambda: D.Chi2(2.0), -1.0), (lambda: D.VonMises(0.0, 1.0), 4.0),
    (lambda: D.LogNormal(0.0, 1.0), -1.0), (lambda: D.InverseGamma(2.0, 1.0), -1.0),
])
def test_values_outside_the_support(d, bad):
    dist = d()
    with pytest.raises(ValueError, match=f"{type(dist).__name__}.log_prob: the value is "
                                         f"outside the support"):
        dist.log_prob(st.tensor(bad))


def test_validation_can_be_switched_off_and_other_errors():
    d = D.HalfNormal(1.0, validate_args=False)
    assert d.log_prob(st.tensor(-1.0)).item() == -math.inf
    D.Cauchy(0.0, -1.0, validate_args=False)
    with pytest.raises(ValueError, match="Multinomial.log_prob: the value is outside"):
        D.Multinomial(3, probs=f64([0.5, 0.5])).log_prob(f64([1.0, 1.0]))
    with pytest.raises(TypeError, match="Multinomial: total_count must be an int"):
        D.Multinomial(2.5, probs=f64([0.5, 0.5]))
    with pytest.raises(ValueError, match="OneHotCategorical.log_prob: the value is outside"):
        D.OneHotCategorical(probs=f64([0.5, 0.5])).log_prob(f64([1.0, 1.0]))
    with pytest.raises(TypeError, match="Cauchy: parameters must be tensors or numbers"):
        D.Cauchy("a", 1.0)


def test_exponential_family_entropy_and_shapes():
    class Expo(D.ExponentialFamily):  # rate r: theta = -r, A = -log(-theta), h = 1
        arg_constraints = {"rate": C.positive}
        support = C.nonnegative

        def __init__(self, rate):
            self.rate = f64(rate)
            super().__init__(tuple(self.rate.shape), ())

        @property
        def _natural_params(self):
            return (-self.rate,)

        def _log_normalizer(self, theta):
            return -st.log(-theta)

        _mean_carrier_measure = 0.0

    assert_close(to_numpy(Expo([0.5, 2.0]).entropy()),
                 to_numpy(D.Exponential(f64([0.5, 2.0])).entropy()), rtol=1e-12)
    for d in (D.Gumbel(f64([0.0, 1.0]), 1.0), D.Binomial(5, probs=f64([0.2, 0.4])),
              D.Geometric(probs=f64([0.2, 0.4])), D.StudentT(f64([3.0, 4.0]))):
        e = d.expand((3, 2))
        assert e.batch_shape == (3, 2) and e.sample((4,)).shape == (4, 3, 2)


def test_corr_cholesky_transform():
    t = T.CorrCholeskyTransform()
    x = np.array([0.5, -0.2, 1.0, 0.3, -0.7, 0.1])
    y = t(f64(x))
    assert y.shape == (4, 4) and bool(C.corr_cholesky.check(y).item())
    corr = to_numpy(y @ y.T)
    assert_close(np.diag(corr), np.ones(4), rtol=1e-12)
    assert_close(to_numpy(t.inv(y)), x, rtol=1e-9, atol=1e-12)
    rows, cols = np.tril_indices(4, -1)
    h = 1e-6
    jac = np.stack([(to_numpy(t(f64(x + h * e))) - to_numpy(t(f64(x - h * e))))[rows, cols]
                    / (2 * h) for e in np.eye(6)], 1)
    assert_close(t.log_abs_det_jacobian(f64(x), y).item(), np.log(abs(np.linalg.det(jac))),
                 rtol=1e-6)
    assert t.forward_shape((2, 6)) == (2, 4, 4) and t.inverse_shape((2, 4, 4)) == (2, 6)
    assert D.biject_to(C.corr_cholesky) == t
    with pytest.raises(ValueError, match="CorrCholeskyTransform: a vector of 4 entries"):
        t(f64([0.0, 0.0, 0.0, 0.0]))


def test_positive_definite_and_cdf_transforms():
    t = T.PositiveDefiniteTransform()
    x = f64([[0.3, 5.0], [-1.0, 0.2]])
    y = t(x)
    assert bool(C.positive_definite.check(y).item())
    assert_close(to_numpy(t.inv(y)), np.array([[0.3, 0.0], [-1.0, 0.2]]), rtol=1e-10)
    assert isinstance(D.transform_to(C.positive_definite), T.PositiveDefiniteTransform)
    n = D.Normal(f64(0.5), f64(2.0))
    c = T.CumulativeDistributionTransform(n)
    v = f64([-1.0, 0.5, 3.0])
    assert_close(to_numpy(c(v)), to_numpy(n.cdf(v)))
    h = 1e-6
    fd = (to_numpy(c(f64(to_numpy(v) + h))) - to_numpy(c(f64(to_numpy(v) - h)))) / (2 * h)
    assert_close(to_numpy(c.log_abs_det_jacobian(v, c(v))), np.log(fd), rtol=1e-6)
    u = D.Uniform(f64(0.0), f64(4.0))
    cu = T.CumulativeDistributionTransform(u)
    assert cu.inv(f64(0.25)).item() == 1.0 and cu.domain.check(f64(1.0)).item()


@pytest.mark.parametrize("xi", [0.0, 0.25, -0.3])
def test_generalized_pareto(xi):
    d = D.GeneralizedPareto(f64(0.5), f64(2.0), f64(xi))
    hi = 0.5 - 2.0 / xi if xi < 0 else 400.0
    x = np.linspace(0.5, hi - 1e-9, 2_000_001)
    z = (x - 0.5) / 2
    ref = -z if xi == 0 else -(1 / xi + 1) * np.log1p(xi * z)
    lp = to_numpy(d.log_prob(f64(x)))
    assert_close(lp, ref - np.log(2.0), rtol=1e-9, atol=1e-9)
    p = np.exp(lp)
    assert abs(np.trapezoid(p, x) - 1) < 1e-3
    m = np.trapezoid(x * p, x)
    assert_close(d.mean.item(), m, rtol=1e-3)
    assert_close(d.variance.item(), np.trapezoid((x - m) ** 2 * p, x), rtol=1e-2)
    assert_close(d.entropy().item(), -np.trapezoid(p * lp, x), rtol=1e-3, atol=1e-4)
    assert_close(d.cdf(f64(x[1000])).item(), np.trapezoid(p[:1001], x[:1001]), rtol=1e-6)
    st.manual_seed(14)
    s = to_numpy(d.sample((200_000,)))
    assert s.min() >= 0.5 and s.max() <= hi
    assert abs(s.mean() - d.mean.item()) < 5 * math.sqrt(d.variance.item() / 200_000)
    with pytest.raises(ValueError, match="GeneralizedPareto.log_prob: the value is outside"):
        d.log_prob(f64(0.0))


def test_wishart():
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    d = D.Wishart(f64(4.5), covariance_matrix=f64(cov))
    x = np.array([[3.0, 1.0], [1.0, 2.5]])
    p, nu = 2, 4.5
    ref = (0.5 * (nu - p - 1) * np.linalg.slogdet(x)[1]
           - 0.5 * np.trace(np.linalg.solve(cov, x)) - 0.5 * nu * p * np.log(2)
           - 0.5 * nu * np.linalg.slogdet(cov)[1]
           - (0.25 * p * (p - 1) * np.log(np.pi) + LG(nu / 2) + LG(nu / 2 - 0.5)))
    assert_close(d.log_prob(f64(x)).item(), ref, rtol=1e-10)
    assert_close(to_numpy(d.mean), nu * cov)
    st.manual_seed(15)
    n = 200_000
    s = d.sample((n,))
    sn = to_numpy(s)
    se = np.sqrt(to_numpy(d.variance) / n)
    assert np.all(np.abs(sn.mean(0) - nu * cov) < 5 * se)
    assert_close(sn.var(0), to_numpy(d.variance), rtol=0.05)
    # entropy against the Monte Carlo mean of -log_prob
    lp = to_numpy(d.log_prob(s))
    assert abs(-lp.mean() - d.entropy().item()) < 5 * lp.std() / math.sqrt(n)
    # the same distribution from the precision matrix or the Cholesky factor
    d2 = D.Wishart(f64(4.5), precision_matrix=f64(np.linalg.inv(cov)))
    d3 = D.Wishart(f64(4.5), scale_tril=f64(np.linalg.cholesky(cov)))
    for e in (d2, d3):
        assert_close(e.log_prob(f64(x)).item(), ref, rtol=1e-9)
    # rsample: d E[X] / d df = Sigma
    df = f64(4.5, grad=True)
    st.manual_seed(16)
    D.Wishart(df, covariance_matrix=f64(cov)).rsample((n,)).mean(0).sum().backward()
    assert_close(df.grad.item(), cov.sum(), rtol=0.03)
    with pytest.raises(ValueError, match="Wishart: expected parameter df"):
        D.Wishart(f64(0.5), covariance_matrix=f64(cov))
    with pytest.raises(ValueError, match="Wishart: pass exactly one of"):
        D.Wishart(f64(3.0))
    with pytest.raises(ValueError, match="Wishart: expected parameter covariance_matrix to be "
                                         "positive-definite"):
        D.Wishart(f64(3.0), covariance_matrix=f64([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Wishart.log_prob: the value is outside"):
        d.log_prob(f64([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("eta", [0.7, 2.0])
def test_lkj_cholesky_two_by_two_density(eta):
    d = D.LKJCholesky(2, f64(eta))
    r = np.linspace(-1 + 1e-9, 1 - 1e-9, 400_001)
    low = np.zeros((r.size, 2, 2))
    low[:, 0, 0], low[:, 1, 0], low[:, 1, 1] = 1.0, r, np.sqrt(1 - r * r)
    lp = to_numpy(d.log_prob(f64(low)))
    ref = (eta - 1) * np.log1p(-r * r) - (0.5 * math.log(math.pi) + LG(eta) - LG(eta + 0.5))
    assert_close(lp, ref, rtol=1e-9, atol=1e-9)


def test_lkj_cholesky_sampling():
    eta, dim, n = 1.5, 4, 100_000
    d = D.LKJCholesky(dim, f64(eta))
    st.manual_seed(17)
    low = d.sample((n,))
    assert low.shape == (n, dim, dim) and bool(C.corr_cholesky.check(low).all().item())
    corr = to_numpy(low @ low.transpose(-2, -1))
    # every off-diagonal correlation is 2 Beta(a, a) - 1, a = eta + (dim - 2) / 2
    a = eta + (dim - 2) / 2
    var = 1 / (2 * a + 1)
    for i, j in [(1, 0), (2, 1), (3, 0), (3, 2)]:
        c = corr[:, i, j]
        assert abs(c.mean()) < 5 * math.sqrt(var / n)
        assert abs(c.var() - var) < 0.03 * var
    assert np.all(np.isfinite(to_numpy(d.log_prob(low[:10]))))
    with pytest.raises(ValueError, match="LKJCholesky: dim must be an int of at least 2"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="LKJCholesky: expected parameter concentration"):
        D.LKJCholesky(3, -1.0)


def test_transformed_families_expand():
    for d in (D.LogNormal(f64(0.0), f64(1.0)), D.HalfNormal(f64(2.0)),
              D.InverseGamma(f64(3.0), f64(1.0)), D.RelaxedBernoulli(f64(0.5), probs=f64(0.3))):
        e = d.expand((4, 2))
        assert e.batch_shape == (4, 2) and e.sample((3,)).shape == (3, 4, 2)
        assert_close(to_numpy(e.log_prob(f64(0.5))), np.full((4, 2), d.log_prob(f64(0.5)).item()))
    ln = D.LogisticNormal(f64([0.0, 1.0]), f64([1.0, 1.0]))
    e = ln.expand((5,))
    assert e.batch_shape == (5,) and e.event_shape == (3,) and e.sample().shape == (5, 3)
    with pytest.raises(ValueError, match="cannot be expanded"):
        D.LogNormal(f64([0.0, 1.0]), 1.0).expand((3,))
