"""Univariate continuous distributions with location-scale samplers: Normal, Uniform,
Exponential and Laplace."""

from __future__ import annotations

import math

import singa_tensor as st
from singa_tensor import Tensor

from . import constraints
from .distribution import Distribution, broadcast_all, check

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _uniform(shape: tuple, like: Tensor) -> Tensor:
    """Uniform draws in (0, 1) from the library's generator (0 itself is moved to the
    smallest positive value, so logarithms stay finite)."""
    u = st.rand(*shape, dtype=like.dtype, device=like.device)
    return st.clamp(u, min=float(_tiny(like)))


def _tiny(like: Tensor) -> float:
    return 1.1754943508222875e-38 if like.dtype is st.float32 else 2.2250738585072014e-308


class Normal(Distribution):
    """The normal distribution N(loc, scale^2).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Normal(st.tensor([0.0]), st.tensor([2.0]))
        >>> round(d.log_prob(st.tensor([0.0])).item(), 4), round(d.entropy().item(), 4)
        (-1.6121, 2.1121)
    """

    has_rsample = True
    _param_names = ("loc", "scale")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all("Normal", loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    def _check_parameters(self):
        check("Normal", "loc", self.loc, self.loc == self.loc, "real")
        check("Normal", "scale", self.scale, self.scale > 0, "positive")

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale ** 2

    def rsample(self, sample_shape=()):
        eps = st.randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype,
                       device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -0.5 * z * z - st.log(self.scale) - _LOG_SQRT_2PI

    def cdf(self, value):
        return 0.5 * (1 + st.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + st.log(self.scale)


class Uniform(Distribution):
    """The uniform distribution on [low, high).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Uniform(0.0, 4.0)
        >>> round(d.entropy().item(), 4), d.variance.item()
        (1.3863, 1.3333333730697632)
    """

    has_rsample = True
    _param_names = ("low", "high")
    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    _support_name = "the interval [low, high)"

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all("Uniform", low, high)
        super().__init__(tuple(self.low.shape), (), validate_args)

    def _check_parameters(self):
        check("Uniform", "low", self.low, self.low < self.high, "less than high")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.half_open_interval(self.low, self.high)

    def _support_ok(self, value):
        return (value >= self.low) & (value < self.high)

    @property
    def mean(self):
        return (self.low + self.high) / 2

    @property
    def mode(self):
        return self.low * float("nan")

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        u = st.rand(*self._extended_shape(sample_shape), dtype=self.low.dtype,
                    device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = self._validate_sample(value)
        inside = ((value >= self.low) & (value < self.high)).to(self.low.dtype)
        return st.log(inside) - st.log(self.high - self.low)

    def cdf(self, value):
        return st.clamp((value - self.low) / (self.high - self.low), 0.0, 1.0)

    def icdf(self, value):
        return self.low + value * (self.high - self.low)

    def entropy(self):
        return st.log(self.high - self.low)


class Exponential(Distribution):
    """The exponential distribution with rate `rate` (mean 1 / rate).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Exponential(st.tensor([2.0]))
        >>> d.mean.item(), round(d.log_prob(st.tensor([1.0])).item(), 4)
        (0.5, -1.3069)
    """

    has_rsample = True
    _param_names = ("rate",)
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    _support_name = "non-negative values"

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all("Exponential", rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    def _check_parameters(self):
        check("Exponential", "rate", self.rate, self.rate > 0, "positive")

    def _support_ok(self, value):
        return value >= 0

    @property
    def mean(self):
        return 1.0 / self.rate

    @property
    def mode(self):
        return self.rate * 0.0

    @property
    def stddev(self):
        return 1.0 / self.rate

    @property
    def variance(self):
        return self.rate ** -2

    def rsample(self, sample_shape=()):
        u = st.rand(*self._extended_shape(sample_shape), dtype=self.rate.dtype,
                    device=self.rate.device)
        return -st.log1p(-u) / self.rate

    def log_prob(self, value):
        value = self._validate_sample(value)
        return st.log(self.rate) - self.rate * value

    def cdf(self, value):
        return 1 - st.exp(-self.rate * value)

    def icdf(self, value):
        return -st.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - st.log(self.rate)


class Laplace(Distribution):
    """The Laplace distribution with location loc and scale b: density exp(-abs(x - loc) / b)
    / (2 b).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Laplace(0.0, 1.0)
        >>> d.variance.item(), round(d.entropy().item(), 4)
        (2.0, 1.6931)
    """

    has_rsample = True
    _param_names = ("loc", "scale")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all("Laplace", loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    def _check_parameters(self):
        check("Laplace", "loc", self.loc, self.loc == self.loc, "real")
        check("Laplace", "scale", self.scale, self.scale > 0, "positive")

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    @property
    def variance(self):
        return 2 * self.scale ** 2

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc) * 2 - 1  # in (-1, 1)
        return self.loc - self.scale * st.sign(u) * st.log1p(-u.abs())

    def log_prob(self, value):
        value = self._validate_sample(value)
        return -st.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        z = value - self.loc
        return 0.5 - 0.5 * st.sign(z) * st.expm1(-z.abs() / self.scale)

    def entropy(self):
        return 1 + st.log(2 * self.scale)
