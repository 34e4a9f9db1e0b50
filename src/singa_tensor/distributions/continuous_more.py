"""More univariate continuous families: Cauchy, Gumbel, Weibull, Pareto, Kumaraswamy,
StudentT, Chi2, FisherSnedecor, VonMises and those defined by transforms of another one
(LogNormal, HalfNormal, HalfCauchy, InverseGamma, LogisticNormal)."""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st

from . import constraints
from ._special import digamma, lbeta, lgamma, rsample_standard_gamma
from .continuous import Normal, _uniform
from .distribution import Distribution, broadcast_all, check
from .gamma import Gamma
from .transformed import TransformedDistribution
from .transforms import AbsTransform, ExpTransform, PowerTransform, StickBreakingTransform

_EULER = 0.5772156649015329


def _nan_like(x):
    return st.full(tuple(x.shape), float("nan"), dtype=x.dtype, device=x.device)


def _inf_like(x):
    return st.full(tuple(x.shape), math.inf, dtype=x.dtype, device=x.device)


def _atan(x):
    """arctan as a composition of Tensor ops (so it is differentiable): reflect |x| > 1
    through pi/2 - atan(1/x), halve the angle twice, then a short odd series."""
    ax = x.abs()
    big = ax > 1
    y = st.where(big, 1 / st.where(big, ax, 1.0), ax)
    for _ in range(2):
        y = y / (1 + st.sqrt(1 + y * y))
    y2 = y * y
    series = 0.0
    for n in range(23, 0, -2):
        series = ((-1) ** ((n - 1) // 2)) / n + y2 * series if n < 23 else (
            (-1) ** ((n - 1) // 2)) / n
    r = 4 * y * series
    r = st.where(big, math.pi / 2 - r, r)
    return st.sign(x) * r


class Cauchy(Distribution):
    """The Cauchy distribution with location loc and scale `scale` (no mean or variance).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Cauchy(0.0, 1.0)
        >>> round(d.log_prob(st.tensor(0.0)).item(), 4), round(d.cdf(st.tensor(1.0)).item(), 4)
        (-1.1447, 0.75)
    """

    has_rsample = True
    _param_names = ("loc", "scale")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all("Cauchy", loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    @property
    def mean(self):
        return _nan_like(self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _inf_like(self.loc)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc)
        return self.loc + self.scale * st.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        value = self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - st.log(self.scale) - st.log1p(z * z)

    def cdf(self, value):
        return _atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return self.loc + self.scale * st.tan(math.pi * (value - 0.5))

    def entropy(self):
        return math.log(4 * math.pi) + st.log(self.scale)


class Gumbel(Distribution):
    """The Gumbel (type I extreme value) distribution: cdf exp(-exp(-(x - loc) / scale)).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Gumbel(0.0, 1.0)
        >>> round(d.mean.item(), 4), round(d.log_prob(st.tensor(0.0)).item(), 4)
        (0.5772, -1.0)
    """

    has_rsample = True
    _param_names = ("loc", "scale")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all("Gumbel", loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev ** 2

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc)
        u = st.clamp(u, max=1 - float(np.finfo(u.dtype.np).eps))
        return self.loc - self.scale * st.log(-st.log(u))

    def log_prob(self, value):
        value = self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -(z + st.exp(-z)) - st.log(self.scale)

    def cdf(self, value):
        return st.exp(-st.exp(-(value - self.loc) / self.scale))

    def icdf(self, value):
        return self.loc - self.scale * st.log(-st.log(value))

    def entropy(self):
        return st.log(self.scale) + (1 + _EULER)


class Weibull(Distribution):
    """The Weibull distribution with scale lambda and shape k: cdf 1 - exp(-(x/lambda)^k).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Weibull(1.0, 1.0)  # the unit exponential
        >>> round(d.mean.item(), 4), round(d.log_prob(st.tensor(2.0)).item(), 4)
        (1.0, -2.0)
    """

    has_rsample = True
    _param_names = ("scale", "concentration")
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all("Weibull", scale, concentration)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @property
    def mean(self):
        return self.scale * st.exp(lgamma(1 + 1 / self.concentration))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * st.clamp((k - 1) / k, min=0.0) ** (1 / k)

    @property
    def variance(self):
        k = self.concentration
        return self.scale ** 2 * (st.exp(lgamma(1 + 2 / k)) - st.exp(2 * lgamma(1 + 1 / k)))

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.scale)
        return self.scale * (-st.log(u)) ** (1 / self.concentration)

    def log_prob(self, value):
        value = self._validate_sample(value)
        k, lam = self.concentration, self.scale
        z = value / lam
        return st.log(k / lam) + (k - 1) * st.log(z) - z ** k

    def cdf(self, value):
        return 1 - st.exp(-(value / self.scale) ** self.concentration)

    def entropy(self):
        k = self.concentration
        return _EULER * (1 - 1 / k) + st.log(self.scale / k) + 1


class Pareto(Distribution):
    """The Pareto distribution on [scale, inf) with tail index alpha.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Pareto(1.0, 3.0)
        >>> d.mean.item(), round(d.log_prob(st.tensor(2.0)).item(), 4)
        (1.5, -1.674)
    """

    has_rsample = True
    _param_names = ("scale", "alpha")
    arg_constraints = {"scale": constraints.positive, "alpha": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all("Pareto", scale, alpha)
        super().__init__(tuple(self.scale.shape), (), validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = st.clamp(self.alpha, min=1.0 + 1e-12)
        return st.where(self.alpha > 1, a * self.scale / (a - 1), math.inf)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = st.clamp(self.alpha, min=2.0 + 1e-12)
        return st.where(self.alpha > 2, self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2)),
                        math.inf)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.scale)
        return self.scale * st.exp(-st.log(u) / self.alpha)

    def log_prob(self, value):
        value = self._validate_sample(value)
        a = self.alpha
        return st.log(a) + a * st.log(self.scale) - (a + 1) * st.log(value)

    def cdf(self, value):
        return 1 - (self.scale / value) ** self.alpha

    def icdf(self, value):
        return self.scale * (1 - value) ** (-1 / self.alpha)

    def entropy(self):
        return st.log(self.scale / self.alpha) + 1 / self.alpha + 1


class Kumaraswamy(Distribution):
    """The Kumaraswamy distribution on (0, 1): density a b x^(a-1) (1 - x^a)^(b-1), with
    a = concentration1 and b = concentration0.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Kumaraswamy(1.0, 1.0)  # uniform
        >>> round(d.mean.item(), 4), round(d.log_prob(st.tensor(0.3)).item(), 4)
        (0.5, 0.0)
    """

    has_rsample = True
    _param_names = ("concentration1", "concentration0")
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(
            "Kumaraswamy", concentration1, concentration0)
        super().__init__(tuple(self.concentration1.shape), (), validate_args)

    def _moment(self, n):
        a, b = self.concentration1, self.concentration0
        return b * st.exp(lbeta(1 + n / a, b))

    @property
    def mean(self):
        return self._moment(1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        m = ((a - 1) / (a * b - 1)) ** (1 / a)
        return st.where((a >= 1) & (b >= 1) & ((a > 1) | (b > 1)), m, float("nan"))

    @property
    def variance(self):
        return self._moment(2) - self._moment(1) ** 2

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.concentration1)
        a, b = self.concentration1, self.concentration0
        x = (-st.expm1(st.log(u) / b)) ** (1 / a)
        eps = float(np.finfo(x.dtype.np).eps)
        return st.clamp(x, eps / 2, 1 - eps / 2)

    def log_prob(self, value):
        value = self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (st.log(a) + st.log(b) + (a - 1) * st.log(value)
                + (b - 1) * st.log1p(-value ** a))

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic = digamma(b + 1) + _EULER
        return (1 - 1 / b) + (1 - 1 / a) * harmonic - st.log(a * b)


class StudentT(Distribution):
    """Student's t distribution with df degrees of freedom, location loc and scale.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.StudentT(3.0)
        >>> d.variance.item(), round(d.log_prob(st.tensor(0.0)).item(), 4)
        (3.0, -1.0009)
    """

    has_rsample = True
    _param_names = ("df", "loc", "scale")
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all("StudentT", df, loc, scale)
        super().__init__(tuple(self.df.shape), (), validate_args)

    @property
    def mean(self):
        return st.where(self.df > 1, self.loc, float("nan"))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        v = self.df
        safe = st.where(v > 2, v, 3.0)
        out = st.where(v > 2, self.scale ** 2 * safe / (safe - 2), math.inf)
        return st.where(v > 1, out, float("nan"))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        z = st.randn(*shape, dtype=self.df.dtype, device=self.df.device)
        g = rsample_standard_gamma(0.5 * self.df, shape)  # chi2(df) / 2
        return self.loc + self.scale * z * st.rsqrt(g / (0.5 * self.df))

    def log_prob(self, value):
        value = self._validate_sample(value)
        v = self.df
        z = (value - self.loc) / self.scale
        return (lgamma(0.5 * (v + 1)) - lgamma(0.5 * v) - 0.5 * st.log(math.pi * v)
                - st.log(self.scale) - 0.5 * (v + 1) * st.log1p(z * z / v))

    def entropy(self):
        v = self.df
        return (0.5 * (v + 1) * (digamma(0.5 * (v + 1)) - digamma(0.5 * v))
                + 0.5 * st.log(v) + lbeta(0.5 * v, st.full_like(v, 0.5)) + st.log(self.scale))


class Chi2(Gamma):
    """The chi-squared distribution with df degrees of freedom, Gamma(df / 2, 1 / 2).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Chi2(st.tensor([4.0]))
        >>> d.mean.item(), d.variance.item()
        (4.0, 8.0)
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all("Chi2", df)
        if validate_args is not False and (validate_args or Distribution._validate_default):
            check("Chi2", "df", df, df > 0, "positive")
        super().__init__(0.5 * df, st.full_like(df, 0.5), validate_args)

    @property
    def df(self):
        return self.concentration * 2


class FisherSnedecor(Distribution):
    """The F distribution with df1 and df2 degrees of freedom.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.FisherSnedecor(4.0, 6.0)
        >>> d.mean.item(), round(d.log_prob(st.tensor(1.0)).item(), 4)
        (1.5, -0.8802)
    """

    has_rsample = True
    _param_names = ("df1", "df2")
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all("FisherSnedecor", df1, df2)
        super().__init__(tuple(self.df1.shape), (), validate_args)

    @property
    def mean(self):
        d2 = self.df2
        safe = st.where(d2 > 2, d2, 3.0)
        return st.where(d2 > 2, safe / (safe - 2), float("nan"))

    @property
    def mode(self):
        d1, d2 = self.df1, self.df2
        return st.where(d1 > 2, (d1 - 2) / d1 * d2 / (d2 + 2), float("nan"))

    @property
    def variance(self):
        d1, d2 = self.df1, self.df2
        safe = st.where(d2 > 4, d2, 5.0)
        v = 2 * safe ** 2 * (d1 + safe - 2) / (d1 * (safe - 2) ** 2 * (safe - 4))
        return st.where(d2 > 4, v, float("nan"))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = rsample_standard_gamma(0.5 * self.df1, shape) / self.df1
        x2 = rsample_standard_gamma(0.5 * self.df2, shape) / self.df2
        tiny = float(np.finfo(x1.dtype.np).tiny)
        return st.clamp(x1 / x2, min=tiny)

    def log_prob(self, value):
        value = self._validate_sample(value)
        d1, d2 = self.df1, self.df2
        return (0.5 * d1 * st.log(d1 / d2) + (0.5 * d1 - 1) * st.log(value)
                - 0.5 * (d1 + d2) * st.log1p(d1 * value / d2) - lbeta(0.5 * d1, 0.5 * d2))


class LogNormal(TransformedDistribution):
    """exp(X) for X ~ N(loc, scale^2).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.LogNormal(0.0, 1.0)
        >>> round(d.mean.item(), 4), round(d.log_prob(st.tensor(1.0)).item(), 4)
        (1.6487, -0.9189)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return st.exp(self.loc + self.scale ** 2 / 2)

    @property
    def mode(self):
        return st.exp(self.loc - self.scale ** 2)

    @property
    def variance(self):
        s2 = self.scale ** 2
        return st.expm1(s2) * st.exp(2 * self.loc + s2)

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(TransformedDistribution):
    """abs(X) for X ~ N(0, scale^2).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.HalfNormal(1.0)
        >>> round(d.mean.item(), 4), round(d.log_prob(st.tensor(0.0)).item(), 4)
        (0.7979, -0.2258)
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (scale,) = broadcast_all("HalfNormal", scale)
        base = Normal(st.zeros_like(scale), scale, validate_args=validate_args)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return st.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale ** 2 * (1 - 2 / math.pi)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return st.where(value >= 0, lp, -math.inf)

    def cdf(self, value):
        return 2 * self.base_dist.cdf(value) - 1

    def entropy(self):
        return 0.5 * math.log(math.pi / 2) + st.log(self.scale) + 0.5


class HalfCauchy(TransformedDistribution):
    """abs(X) for X ~ Cauchy(0, scale).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.HalfCauchy(1.0)
        >>> round(d.log_prob(st.tensor(0.0)).item(), 4), round(d.cdf(st.tensor(1.0)).item(), 4)
        (-0.4516, 0.5)
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (scale,) = broadcast_all("HalfCauchy", scale)
        base = Cauchy(st.zeros_like(scale), scale, validate_args=validate_args)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return _inf_like(self.scale)

    @property
    def mode(self):
        return st.zeros_like(self.scale)

    @property
    def variance(self):
        return _inf_like(self.scale)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return st.where(value >= 0, lp, -math.inf)

    def cdf(self, value):
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value):
        return self.scale * st.tan(math.pi / 2 * value)

    def entropy(self):
        return math.log(2 * math.pi) + st.log(self.scale)


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate): density b^a / Gamma(a) x^(-a-1) e^(-b/x).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.InverseGamma(3.0, 2.0)
        >>> d.mean.item(), round(d.log_prob(st.tensor(1.0)).item(), 4)
        (1.0, -0.6137)
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-1.0), validate_args=validate_args)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        a = self.concentration
        safe = st.where(a > 1, a, 2.0)
        return st.where(a > 1, self.rate / (safe - 1), math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        a = self.concentration
        safe = st.where(a > 2, a, 3.0)
        return st.where(a > 2, self.rate ** 2 / ((safe - 1) ** 2 * (safe - 2)), math.inf)

    def entropy(self):
        a = self.concentration
        return a + st.log(self.rate) + lgamma(a) - (1 + a) * digamma(a)


class LogisticNormal(TransformedDistribution):
    """The stick-breaking image of N(loc, scale^2) on R^(K-1): a distribution on the
    K-simplex.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.LogisticNormal(st.zeros(2), st.ones(2))
        >>> d.event_shape, d.sample((3,)).shape
        ((3,), (3, 3))
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand((1,))
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale


# ---- von Mises ----------------------------------------------------------------------------------

def _log_i0(k):
    """log of the modified Bessel function I0 for k >= 0 (Abramowitz and Stegun 9.8.1-2,
    relative error below 2e-7)."""
    small = k < 3.75
    ks = st.where(small, k, 1.0)
    t = (ks / 3.75) ** 2
    poly_s = 1 + t * (3.5156229 + t * (3.0899424 + t * (1.2067492 + t * (
        0.2659732 + t * (0.0360768 + t * 0.0045813)))))
    kl = st.where(small, 3.75, k)
    u = 3.75 / kl
    poly_l = (0.39894228 + u * (0.01328592 + u * (0.00225319 + u * (-0.00157565 + u * (
        0.00916281 + u * (-0.02057706 + u * (0.02635537 + u * (-0.01647633
                                                               + u * 0.00392377))))))))
    return st.where(small, st.log(poly_s), kl - 0.5 * st.log(kl) + st.log(poly_l))


def _i1_over_i0(k):
    """I1(k) / I0(k) for k >= 0 (Abramowitz and Stegun 9.8.3-4)."""
    small = k < 3.75
    ks = st.where(small, k, 1.0)
    t = (ks / 3.75) ** 2
    i1_s = ks * (0.5 + t * (0.87890594 + t * (0.51498869 + t * (0.15084934 + t * (
        0.02658733 + t * (0.00301532 + t * 0.00032411))))))
    kl = st.where(small, 3.75, k)
    u = 3.75 / kl
    p1 = (0.39894228 + u * (-0.03988024 + u * (-0.00362018 + u * (0.00163801 + u * (
        -0.01031555 + u * (0.02282967 + u * (-0.02895312 + u * (0.01787654
                                                                - u * 0.00420059))))))))
    i1_l = st.log(p1) + kl - 0.5 * st.log(kl)
    return st.where(small, i1_s / st.exp(_log_i0(ks)), st.exp(i1_l - _log_i0(kl)))


class VonMises(Distribution):
    """The von Mises distribution on the circle: density exp(kappa cos(x - loc)) /
    (2 pi I0(kappa)); draws by the rejection sampler of Best and Fisher (no rsample).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.VonMises(0.0, 1.0)
        >>> round(d.log_prob(st.tensor(0.0)).item(), 4)
        -1.0738
    """

    _param_names = ("loc", "concentration")
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.interval(-math.pi, math.pi)

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all("VonMises", loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # circular variance
        return 1 - _i1_over_i0(self.concentration)

    def log_prob(self, value):
        value = self._validate_sample(value)
        k = self.concentration
        return k * st.cos(value - self.loc) - math.log(2 * math.pi) - _log_i0(k)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        loc = self.loc.detach().expand(*shape).numpy(force=True).astype(np.float64).ravel()
        k = self.concentration.detach().expand(*shape).numpy(force=True).astype(
            np.float64).ravel()
        n = k.size
        out = np.empty(n)
        tau = 1 + np.sqrt(1 + 4 * k * k)
        rho = (tau - np.sqrt(2 * tau)) / (2 * k)
        r = (1 + rho * rho) / (2 * rho)
        todo = np.arange(n)
        while todo.size:
            u = st.rand(3, todo.size, dtype=st.float64).numpy(force=True)
            z = np.cos(math.pi * u[0])
            f = (1 + r[todo] * z) / (r[todo] + z)
            c = k[todo] * (r[todo] - f)
            ok = (c * (2 - c) - u[1] > 0) | (np.log(c / u[1]) + 1 - c >= 0)
            theta = np.sign(u[2] - 0.5) * np.arccos(np.clip(f, -1, 1))
            out[todo[ok]] = theta[ok]
            todo = todo[~ok]
        x = np.mod(out + loc + math.pi, 2 * math.pi) - math.pi
        return st.tensor(x.reshape(shape), dtype=self.loc.dtype, device=self.loc.device)


class GeneralizedPareto(Distribution):
    """The generalised Pareto distribution with location loc, scale and shape
    concentration xi: cdf 1 - (1 + xi z)^(-1/xi), z = (x - loc) / scale (1 - exp(-z) at
    xi = 0); bounded above by loc - scale / xi when xi < 0.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.GeneralizedPareto(0.0, 1.0, 0.0)  # the unit exponential
        >>> d.mean.item(), round(d.log_prob(st.tensor(2.0)).item(), 4)
        (1.0, -2.0)
    """

    has_rsample = True
    _param_names = ("loc", "scale", "concentration")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(
            "GeneralizedPareto", loc, scale, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args)

    def _parts(self):
        xi = self.concentration
        zero = xi.abs() < 1e-8
        return xi, zero, st.where(zero, 1.0, xi)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        xi = self.concentration
        upper = st.where(xi < 0, self.loc - self.scale / st.where(xi < 0, xi, -1.0), math.inf)
        return constraints.interval(self.loc, upper)

    @property
    def mean(self):
        xi = self.concentration
        return st.where(xi < 1, self.loc + self.scale / st.where(xi < 1, 1 - xi, 1.0),
                        math.inf)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        xi = self.concentration
        ok = xi < 0.5
        safe = st.where(ok, xi, 0.0)
        return st.where(ok, self.scale ** 2 / ((1 - safe) ** 2 * (1 - 2 * safe)), math.inf)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.loc)
        return self.icdf(u)

    def icdf(self, value):
        xi, zero, safe = self._parts()
        t = -st.log1p(-value)  # a unit exponential
        z = st.where(zero, t, st.expm1(safe * t) / safe)
        return self.loc + self.scale * z

    def log_prob(self, value):
        value = self._validate_sample(value)
        xi, zero, safe = self._parts()
        z = (value - self.loc) / self.scale
        inner = st.clamp(1 + safe * z, min=float(np.finfo(z.dtype.np).tiny))
        lp = st.where(zero, -z, -(1 / safe + 1) * st.log(inner))
        return lp - st.log(self.scale)

    def cdf(self, value):
        xi, zero, safe = self._parts()
        z = (value - self.loc) / self.scale
        inner = st.clamp(1 + safe * z, min=0.0)
        return st.where(zero, -st.expm1(-z), 1 - inner ** (-1 / safe))

    def entropy(self):
        return st.log(self.scale) + self.concentration + 1
