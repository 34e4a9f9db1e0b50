"""Gamma, Beta and Dirichlet: reparameterised samplers built on gamma draws whose gradient
with respect to the concentration is the implicit reparameterisation gradient (see
_special.py); Beta and Dirichlet normalise independent gamma draws."""

from __future__ import annotations

import numpy as np

import singa_tensor as st

from . import constraints
from ._special import digamma, lbeta, lgamma, rsample_standard_gamma
from .distribution import Distribution, broadcast_all, check


class Gamma(Distribution):
    """The gamma distribution with shape `concentration` and inverse scale `rate`.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Gamma(st.tensor([2.0]), st.tensor([4.0]))
        >>> d.mean.item(), round(d.log_prob(st.tensor([0.5])).item(), 4)
        (0.5, 0.0794)
    """

    has_rsample = True
    _param_names = ("concentration", "rate")
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    _support_name = "positive values"

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all("Gamma", concentration, rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    def _check_parameters(self):
        check("Gamma", "concentration", self.concentration, self.concentration > 0, "positive")
        check("Gamma", "rate", self.rate, self.rate > 0, "positive")

    def _support_ok(self, value):
        return value > 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return st.clamp((self.concentration - 1) / self.rate, min=0.0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = rsample_standard_gamma(self.concentration, shape) / self.rate
        tiny = 1.1754943508222875e-38 if x.dtype is st.float32 else 2.2250738585072014e-308
        return st.clamp(x, min=tiny)

    def log_prob(self, value):
        value = self._validate_sample(value)
        a, b = self.concentration, self.rate
        return a * st.log(b) + (a - 1) * st.log(value) - b * value - lgamma(a)

    def entropy(self):
        a = self.concentration
        return a - st.log(self.rate) + lgamma(a) + (1.0 - a) * digamma(a)


class Beta(Distribution):
    """The beta distribution on (0, 1) with concentrations concentration1 (alpha) and
    concentration0 (beta).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Beta(st.tensor([2.0]), st.tensor([2.0]))
        >>> d.mean.item(), round(d.log_prob(st.tensor([0.5])).item(), 4)
        (0.5, 0.4055)
    """

    has_rsample = True
    _param_names = ("concentration1", "concentration0")
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    _support_name = "the open interval (0, 1)"

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(
            "Beta", concentration1, concentration0)
        super().__init__(tuple(self.concentration1.shape), (), validate_args)

    def _check_parameters(self):
        check("Beta", "concentration1", self.concentration1, self.concentration1 > 0,
              "positive")
        check("Beta", "concentration0", self.concentration0, self.concentration0 > 0,
              "positive")

    def _support_ok(self, value):
        return (value > 0) & (value < 1)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        return (a - 1) / (a + b - 2)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return a * b / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = rsample_standard_gamma(self.concentration1, shape)
        y = rsample_standard_gamma(self.concentration0, shape)
        eps = float(np.finfo(x.dtype.np).eps)
        return st.clamp(x / (x + y), eps / 2, 1 - eps / 2)  # inside (0, 1) for log_prob

    def log_prob(self, value):
        value = self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (a - 1) * st.log(value) + (b - 1) * st.log1p(-value) - lbeta(a, b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        return (lbeta(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b)
                + (a + b - 2) * digamma(a + b))


class Dirichlet(Distribution):
    """The Dirichlet distribution on the probability simplex of the last dim of
    `concentration`.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Dirichlet(st.tensor([1.0, 1.0, 2.0]))
        >>> d.mean.tolist(), d.event_shape
        ([0.25, 0.25, 0.5], (3,))
    """

    has_rsample = True
    _param_names = ("concentration",)
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    _support_name = "the simplex"

    def __init__(self, concentration, validate_args=None):
        (self.concentration,) = broadcast_all("Dirichlet", concentration)
        if self.concentration.ndim < 1:
            raise ValueError("Dirichlet: concentration must have at least one dimension")
        c = self.concentration
        super().__init__(tuple(c.shape[:-1]), tuple(c.shape[-1:]), validate_args)

    def _check_parameters(self):
        check("Dirichlet", "concentration", self.concentration, self.concentration > 0,
              "positive")

    def _support_ok(self, value):
        ok = (value >= 0).all(-1)
        return ok & ((value.sum(-1) - 1).abs() < 1e-5)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 ** 2 * (c0 + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = rsample_standard_gamma(self.concentration, shape)
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        value = self._validate_sample(value)
        c = self.concentration
        return (((c - 1) * st.log(value)).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return (lgamma(c).sum(-1) - lgamma(c0) - (k - c0) * digamma(c0)
                - ((c - 1.0) * digamma(c)).sum(-1))
