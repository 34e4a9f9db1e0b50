"""MixtureSameFamily and LowRankMultivariateNormal."""

from __future__ import annotations

import singa_tensor as st
from singa_tensor import Tensor, linalg

from . import constraints
from .discrete import Categorical
from .distribution import Distribution, _broadcast, broadcast_all
from .multivariate_normal import MultivariateNormal


class MixtureSameFamily(Distribution):
    """A mixture of K components of one family: mixture_distribution is a Categorical over
    the rightmost batch dim (of size K) of component_distribution.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Categorical, MixtureSameFamily, Normal
        >>> mix = Categorical(probs=st.tensor([0.5, 0.5]))
        >>> d = MixtureSameFamily(mix, Normal(st.tensor([-1.0, 1.0]), st.tensor([1.0, 1.0])))
        >>> d.mean.item(), d.variance.item()
        (0.0, 2.0)
    """

    arg_constraints: dict = {}

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise TypeError(f"MixtureSameFamily: mixture_distribution must be a Categorical, "
                            f"got {type(mixture_distribution).__name__}")
        if not isinstance(component_distribution, Distribution):
            raise TypeError(f"MixtureSameFamily: component_distribution must be a "
                            f"Distribution, got {type(component_distribution).__name__}")
        cb = tuple(component_distribution.batch_shape)
        if not cb:
            raise ValueError("MixtureSameFamily: component_distribution needs a batch dim "
                             "for the components")
        k = mixture_distribution._num_events
        if cb[-1] != k:
            raise ValueError(f"MixtureSameFamily: the mixture has {k} categories but the "
                             f"components' rightmost batch dim is {cb[-1]}")
        mb = tuple(mixture_distribution.batch_shape)
        try:
            ok = _broadcast(mb, cb[:-1]) == cb[:-1]
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"MixtureSameFamily: the mixture's batch shape {mb} does not "
                             f"match the components' batch shape {cb[:-1]}")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cb[:-1], tuple(component_distribution.event_shape), validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def has_rsample(self):
        return False

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    def _pad_probs(self, p):
        return p.reshape(*(tuple(p.shape) + (1,) * self._event_ndims))

    @property
    def mean(self):
        p = self._pad_probs(self._mixture_distribution.probs)
        return (p * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        p = self._pad_probs(self._mixture_distribution.probs)
        d = -1 - self._event_ndims
        comp = self._component_distribution
        mean = (p * comp.mean).sum(d, keepdim=True)
        within = (p * comp.variance).sum(d)
        between = (p * (comp.mean - mean) ** 2).sum(d)
        return within + between

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lp = self._component_distribution.log_prob(self._pad(value))
        lw = st.log_softmax(self._mixture_distribution.logits, -1)
        return st.logsumexp(lp + lw, -1)

    def cdf(self, value):
        c = self._component_distribution.cdf(self._pad(value))
        return (c * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=()):
        with st.no_grad():
            sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (
                sample_shape,)
            idx = self._mixture_distribution.sample(sample_shape)  # sample + mixture batch
            comp = self._component_distribution.sample(sample_shape)
            # comp: sample + batch + (K,) + event
            idx = idx.expand(*(sample_shape + self._batch_shape))
            idx = idx.reshape(*(tuple(idx.shape) + (1,) * (self._event_ndims + 1)))
            idx = idx.expand(*(tuple(idx.shape[:-1 - self._event_ndims]) + (1,)
                               + self._event_shape))
            return st.gather(comp, comp.ndim - 1 - self._event_ndims, idx).squeeze(
                comp.ndim - 1 - self._event_ndims)

    def __repr__(self):
        return (f"MixtureSameFamily({self._mixture_distribution!r}, "
                f"{self._component_distribution!r})")

class LowRankMultivariateNormal(Distribution):
    """N(loc, W W^T + diag(D)) with a low-rank factor W = cov_factor (n x r) and the
    positive diagonal D = cov_diag.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.LowRankMultivariateNormal(st.zeros(2), st.zeros(2, 1),
        ...                                                 st.ones(2))
        >>> round(d.log_prob(st.zeros(2)).item(), 4)
        -1.8379
    """

    has_rsample = True
    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    _param_names = ("loc",)

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        loc, = broadcast_all("LowRankMultivariateNormal", loc)
        if loc.ndim < 1:
            raise ValueError("LowRankMultivariateNormal: loc must be at least one-dimensional")
        n = loc.shape[-1]
        if not isinstance(cov_factor, Tensor) or cov_factor.ndim < 2 or \
                cov_factor.shape[-2] != n:
            raise ValueError(f"LowRankMultivariateNormal: cov_factor must be a batch of "
                             f"{n} x rank matrices")
        if not isinstance(cov_diag, Tensor) or cov_diag.ndim < 1 or cov_diag.shape[-1] != n:
            raise ValueError(f"LowRankMultivariateNormal: cov_diag must be a batch of "
                             f"vectors of size {n}")
        self.cov_factor = cov_factor.to(loc.dtype)
        self.cov_diag = cov_diag.to(loc.dtype)
        batch = _broadcast(_broadcast(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2])),
                           tuple(cov_diag.shape[:-1]))
        self.loc = loc.expand(*(batch + (n,)))
        super().__init__(batch, (n,), validate_args)
        self._mvn = MultivariateNormal(self.loc, covariance_matrix=self.covariance_matrix,
                                       validate_args=False)

    def _check_parameters(self):
        from .distribution import check
        check("LowRankMultivariateNormal", "cov_diag", self.cov_diag, self.cov_diag > 0,
              "positive")

    @property
    def covariance_matrix(self):
        w = self.cov_factor
        return w @ w.transpose(-2, -1) + st.diag_embed(self.cov_diag)

    @property
    def scale_tril(self):
        return self._mvn.scale_tril

    @property
    def precision_matrix(self):
        return linalg.inv(self.covariance_matrix)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        v = (self.cov_factor ** 2).sum(-1) + self.cov_diag
        return v.expand(*(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        r = self.cov_factor.shape[-1]
        e_w = st.randn(*(shape[:-1] + (r,)), dtype=self.loc.dtype, device=self.loc.device)
        e_d = st.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + (self.cov_factor @ e_w.unsqueeze(-1)).squeeze(-1)
                + st.sqrt(self.cov_diag) * e_d)

    def log_prob(self, value):
        value = self._validate_sample(value)
        return self._mvn.log_prob(value)

    def entropy(self):
        return self._mvn.entropy()

