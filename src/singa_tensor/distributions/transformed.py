"""TransformedDistribution: a base distribution pushed through a sequence of transforms,
and the families defined that way (LogNormal, HalfNormal, HalfCauchy, Gumbel, Weibull,
Pareto, Kumaraswamy, LogisticNormal, RelaxedBernoulli, RelaxedOneHotCategorical)."""

from __future__ import annotations

import singa_tensor as st
from singa_tensor import Tensor

from . import constraints
from .distribution import Distribution
from .transforms import ComposeTransform, Transform, _sum_rightmost


class TransformedDistribution(Distribution):
    """The distribution of y = t_n(...t_1(x)) for x from base_distribution: sample pushes
    draws through the transforms, log_prob pulls values back and adds -log abs(det J) of each.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Normal, TransformedDistribution
        >>> from singa_tensor.distributions.transforms import ExpTransform
        >>> d = TransformedDistribution(Normal(0.0, 1.0), [ExpTransform()])
        >>> round(d.log_prob(st.tensor(1.0)).item(), 4)  # the log-normal density at 1
        -0.9189
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if not isinstance(base_distribution, Distribution):
            raise TypeError(f"{type(self).__name__}: base_distribution must be a "
                            f"Distribution, got {type(base_distribution).__name__}")
        if isinstance(transforms, Transform):
            transforms = [transforms]
        transforms = list(transforms)
        for t in transforms:
            if not isinstance(t, Transform):
                raise TypeError(f"{type(self).__name__}: transforms must be Transforms, got "
                                f"{type(t).__name__}")
        self.transforms = transforms
        chain = ComposeTransform(transforms)
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event = len(base_distribution.event_shape)
        need = chain.domain.event_dim
        if len(base_shape) < need:
            raise ValueError(f"{type(self).__name__}: the base distribution's shape "
                             f"{base_shape} has fewer dims than the transforms' domain event "
                             f"dims ({need})")
        if need > base_event:
            from .independent import Independent
            base_distribution = Independent(base_distribution, need - base_event)
        self.base_dist = base_distribution
        shape = chain.forward_shape(base_shape)
        event_dim = chain.codomain.event_dim + max(base_event - need, 0)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        sup = self.transforms[-1].codomain
        extra = len(self.event_shape) - sup.event_dim
        return constraints.independent(sup, extra) if extra > 0 else sup

    def expand(self, batch_shape, _instance=None):
        """The same transforms of the base distribution expanded to batch_shape (plus the
        base's batch dims that the transforms turn into event dims).

        Example:
            >>> import singa_tensor as st
            >>> st.distributions.LogNormal(0.0, 1.0).expand((2, 3)).sample().shape
            (2, 3)
        """
        batch_shape = tuple(batch_shape)
        base_batch = tuple(self.base_dist.batch_shape)
        extra = base_batch[len(self._batch_shape):]
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.base_dist = self.base_dist.expand(batch_shape + extra)
        new._batch_shape = batch_shape
        return new

    def sample(self, sample_shape=()):
        with st.no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        value = self._validate_sample(value)
        event_dim = len(self.event_shape)
        lp = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y),
                                     event_dim - t.domain.event_dim)
            y = x
        base = _sum_rightmost(self.base_dist.log_prob(y),
                              event_dim - len(self.base_dist.event_shape))
        return base + lp

    def _monotone_sign(self):
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, Tensor):
            if not bool((sign == 1).all().item()) and not bool((sign == -1).all().item()):
                raise NotImplementedError(f"{type(self).__name__}: cdf needs transforms of "
                                          f"one sign")
            sign = int(sign.reshape(-1)[0].item())
        return sign

    def cdf(self, value):
        sign = self._monotone_sign()
        for t in reversed(self.transforms):
            value = t.inv(value)
        out = self.base_dist.cdf(value)
        return out if sign == 1 else 1 - out

    def icdf(self, value):
        sign = self._monotone_sign()
        value = value if sign == 1 else 1 - value
        x = self.base_dist.icdf(value)
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self):
        return f"{type(self).__name__}({self.base_dist!r}, {self.transforms!r})"
