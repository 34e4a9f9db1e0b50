"""Independent (batch dims of a distribution reinterpreted as event dims) and the
ExponentialFamily base class."""

from __future__ import annotations

import singa_tensor as st

from . import constraints
from .distribution import Distribution
from .transforms import _sum_rightmost


class Independent(Distribution):
    """base_distribution with its reinterpreted_batch_ndims rightmost batch dims taken as
    event dims: log_prob and entropy sum over them.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Independent, Normal
        >>> d = Independent(Normal(st.zeros(3), 1.0), 1)
        >>> d.batch_shape, d.event_shape, round(d.log_prob(st.zeros(3)).item(), 4)
        ((), (3,), -2.7568)
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if not isinstance(base_distribution, Distribution):
            raise TypeError(f"Independent: base_distribution must be a Distribution, got "
                            f"{type(base_distribution).__name__}")
        n = reinterpreted_batch_ndims
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"Independent: reinterpreted_batch_ndims must be a non-negative "
                             f"int, got {n!r}")
        batch = tuple(base_distribution.batch_shape)
        if n > len(batch):
            raise ValueError(f"Independent: reinterpreted_batch_ndims {n} is larger than the "
                             f"base distribution's batch dims {batch}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        cut = len(batch) - n
        super().__init__(batch[:cut], batch[cut:] + tuple(base_distribution.event_shape),
                         validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return False

    @constraints.dependent_property
    def support(self):
        sup = self.base_dist.support
        n = self.reinterpreted_batch_ndims
        return constraints.independent(sup, n) if n and sup is not None else sup

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        extra = tuple(self.base_dist.batch_shape[len(self.base_dist.batch_shape)
                                                 - self.reinterpreted_batch_ndims:])
        return Independent(self.base_dist.expand(batch_shape + extra),
                           self.reinterpreted_batch_ndims, self._validate_args)

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


class ExponentialFamily(Distribution):
    """Base class of families with densities h(x) exp(<theta, T(x)> - A(theta)): a subclass
    gives _natural_params, _log_normalizer(theta...) and _mean_carrier_measure, and inherits
    an entropy computed from the gradient of the log-normaliser.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import ExponentialFamily
        >>> class Unit(ExponentialFamily):  # N(mu, 1): theta = mu, A = mu^2 / 2
        ...     def __init__(self, mu):
        ...         self.mu = st.tensor(mu)
        ...         super().__init__((), ())
        ...     @property
        ...     def _natural_params(self):
        ...         return (self.mu,)
        ...     def _log_normalizer(self, mu):
        ...         return mu * mu / 2 + 0.9189385332046727
        ...     _mean_carrier_measure = -0.5  # E[log h(x)] without the constant, -E[x^2]/2
        >>> round(Unit(0.0).entropy().item(), 4)  # 0.5 + log(sqrt(2 pi)), at mu = 0
        1.4189
    """

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} does not give _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not give _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} does not give "
                                  f"_mean_carrier_measure")

    def entropy(self):
        # H = A(theta) - <theta, grad A(theta)> - E[log h(x)]
        params = [p.detach().requires_grad_(True) for p in self._natural_params]
        with st.enable_grad():
            lg = self._log_normalizer(*params)
            grads = st.autograd.grad(lg.sum(), params, create_graph=True)
        out = lg - self._mean_carrier_measure
        n = len(self.event_shape)
        for p, g in zip(params, grads):
            out = out - _sum_rightmost(p * g, n)
        return out
