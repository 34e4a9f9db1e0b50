"""Continuous relaxations of discrete families (Concrete / Gumbel-softmax):
RelaxedBernoulli, RelaxedOneHotCategorical, and ContinuousBernoulli."""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st

from . import constraints
from .continuous import _uniform
from .discrete import Categorical, _one_of, _probs_to_logits
from .distribution import Distribution, broadcast_all, check
from .transformed import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli draw: (logits + logistic noise) / temperature.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.relaxed import LogitRelaxedBernoulli
        >>> d = LogitRelaxedBernoulli(st.tensor(1.0), logits=st.tensor(0.0))
        >>> round(d.log_prob(st.tensor(0.0)).item(), 4)
        -1.3863
    """

    has_rsample = True
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    _param_names = ("temperature", "probs", "logits")

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        _one_of(type(self).__name__, probs, logits)
        given = probs if probs is not None else logits
        t, p = broadcast_all(type(self).__name__, temperature, given)
        self.temperature = t
        if probs is not None:
            self.probs, self._given = p, "probs"
        else:
            self.logits, self._given = p, "logits"
        super().__init__(tuple(p.shape), (), validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = st.sigmoid(self.__dict__["logits"])
            return self.probs
        if name == "logits":
            self.logits = _probs_to_logits(self.__dict__["probs"], True)
            return self.logits
        raise AttributeError(name)

    def _check_parameters(self):
        name = type(self).__name__
        check(name, "temperature", self.temperature, self.temperature > 0, "positive")
        if self._given == "probs":
            check(name, "probs", self.probs, (self.probs >= 0) & (self.probs <= 1), "in [0, 1]")

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.logits)
        u = st.clamp(u, max=1 - float(np.finfo(u.dtype.np).eps))
        return (self.logits + st.log(u) - st.log1p(-u)) / self.temperature

    def log_prob(self, value):
        value = self._validate_sample(value)
        diff = self.logits - value * self.temperature
        return st.log(self.temperature) + diff - 2 * st.softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    """A relaxed coin on (0, 1): sigmoid of a LogitRelaxedBernoulli draw; as temperature
    goes to 0 the draws approach Bernoulli(probs).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.RelaxedBernoulli(st.tensor(0.5), probs=st.tensor(0.3))
        >>> x = d.rsample((4,))
        >>> x.shape, bool(((x > 0) & (x < 1)).all().item())
        ((4,), True)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def probs(self):
        return self.base_dist.probs

    @property
    def logits(self):
        return self.base_dist.logits


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical draw: log_softmax((logits + Gumbel noise) /
    temperature).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions.relaxed import ExpRelaxedCategorical
        >>> d = ExpRelaxedCategorical(st.tensor(1.0), probs=st.tensor([0.5, 0.5]))
        >>> d.event_shape
        (2,)
    """

    has_rsample = True
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    _param_names = ("temperature",)

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        lg = self._categorical.logits
        (self.temperature,) = broadcast_all(type(self).__name__, temperature)
        self.temperature = self.temperature.to(lg.dtype)
        k = self._categorical._num_events
        super().__init__(self._categorical.batch_shape, (k,), validate_args)

    def _check_parameters(self):
        check(type(self).__name__, "temperature", self.temperature, self.temperature > 0,
              "positive")

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.logits)
        u = st.clamp(u, max=1 - float(np.finfo(u.dtype.np).eps))
        scores = (self.logits - st.log(-st.log(u))) / self.temperature
        return scores - st.logsumexp(scores, -1, keepdim=True)

    def log_prob(self, value):
        value = self._validate_sample(value)
        k = self._event_shape[0]
        t = self.temperature
        score = self.logits - value * t.unsqueeze(-1) if t.ndim else self.logits - value * t
        score = (score - st.logsumexp(score, -1, keepdim=True)).sum(-1)
        return score + math.lgamma(k) + (k - 1) * st.log(t)


class RelaxedOneHotCategorical(TransformedDistribution):
    """Gumbel-softmax draws on the simplex: softmax((logits + Gumbel noise) / temperature).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.RelaxedOneHotCategorical(st.tensor(0.5),
        ...                                              probs=st.tensor([0.2, 0.8]))
        >>> x = d.rsample()
        >>> x.shape, round(x.sum().item(), 5)
        ((2,), 1.0)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def probs(self):
        return self.base_dist.probs

    @property
    def logits(self):
        return self.base_dist.logits


class ContinuousBernoulli(Distribution):
    """The continuous Bernoulli distribution on [0, 1]: density C(p) p^x (1 - p)^(1 - x)
    (Loaiza-Ganem and Cunningham), reparameterised through its inverse cdf.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.ContinuousBernoulli(probs=st.tensor(0.5))
        >>> round(d.log_prob(st.tensor(0.3)).item(), 4), round(d.mean.item(), 4)
        (0.0, 0.5)
    """

    has_rsample = True
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _param_names = ("probs", "logits")
    _lims = (0.49, 0.51)

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        _one_of("ContinuousBernoulli", probs, logits)
        (p,) = broadcast_all("ContinuousBernoulli", probs if probs is not None else logits)
        if probs is not None:
            self.probs, self._given = p, "probs"
        else:
            self.logits, self._given = p, "logits"
        self._lims = tuple(lims)
        super().__init__(tuple(p.shape), (), validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = st.sigmoid(self.__dict__["logits"])
            return self.probs
        if name == "logits":
            self.logits = _probs_to_logits(self.__dict__["probs"], True)
            return self.logits
        raise AttributeError(name)

    def _check_parameters(self):
        if self._given == "probs":
            check("ContinuousBernoulli", "probs", self.probs,
                  (self.probs >= 0) & (self.probs <= 1), "in [0, 1]")

    def _outside(self):
        p = self.probs
        return (p < self._lims[0]) | (p > self._lims[1])

    def _safe_probs(self):
        return st.where(self._outside(), self.probs, self._lims[0])

    def _log_norm(self):
        # log C(p), C(p) = 2 atanh(1 - 2p) / (1 - 2p); a Taylor series near p = 1/2
        out = self._outside()
        ps = self._safe_probs()
        e = float(np.finfo(ps.dtype.np).eps)
        ps = st.clamp(ps, e, 1 - e)
        exact = st.log((st.log1p(-ps) - st.log(ps)).abs()) - st.log((1 - 2 * ps).abs())
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return st.where(out, exact, taylor)

    @property
    def mean(self):
        out = self._outside()
        ps = self._safe_probs()
        exact = ps / (2 * ps - 1) + 1 / (st.log1p(-ps) - st.log(ps))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x ** 2) * x
        return st.where(out, exact, taylor)

    @property
    def variance(self):
        out = self._outside()
        ps = self._safe_probs()
        exact = ps * (ps - 1) / (1 - 2 * ps) ** 2 + 1 / (st.log1p(-ps) - st.log(ps)) ** 2
        x = (self.probs - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return st.where(out, exact, taylor)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.probs)
        return self.icdf(u)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lg = self.logits
        return -(value * st.softplus(-lg) + (1 - value) * st.softplus(lg)) + self._log_norm()

    def cdf(self, value):
        ps = self._safe_probs()
        exact = (ps ** value * (1 - ps) ** (1 - value) + ps - 1) / (2 * ps - 1)
        out = st.where(self._outside(), exact, value)
        return st.clamp(out, 0.0, 1.0)

    def icdf(self, value):
        ps = self._safe_probs()
        e = float(np.finfo(ps.dtype.np).eps)
        ps = st.clamp(ps, e, 1 - e)
        exact = ((st.log1p(-ps + value * (2 * ps - 1)) - st.log1p(-ps))
                 / (st.log(ps) - st.log1p(-ps)))
        return st.where(self._outside(), exact, value)

    def entropy(self):
        lp, l1p = st.log(st.clamp(self.probs, min=1e-300)), st.log1p(-self.probs)
        m = self.mean
        return -(m * (lp - l1p) + l1p) - self._log_norm()
