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
