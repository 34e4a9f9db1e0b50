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
