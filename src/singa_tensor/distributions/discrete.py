"""Discrete distributions: Bernoulli, Categorical (both from probs or logits) and Poisson."""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st
from singa_tensor import Tensor

from . import constraints
from ._special import _lgam, gammainc, lgamma
from .distribution import Distribution, broadcast_all, check


def _one_of(name: str, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: pass exactly one of probs and logits")


def _eps(t: Tensor) -> float:
    return float(np.finfo(t.dtype.np).eps)


def _probs_to_logits(p: Tensor, binary: bool) -> Tensor:
    e = _eps(p)
    p = st.clamp(p, e, 1 - e)
    return st.log(p) - st.log1p(-p) if binary else st.log(p)


class Bernoulli(Distribution):
    """A coin that comes up 1 with probability probs (or sigmoid(logits)).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Bernoulli(probs=st.tensor([0.25]))
        >>> d.variance.item(), round(d.log_prob(st.tensor([1.0])).item(), 4)
        (0.1875, -1.3863)
    """

    _param_names = ("probs", "logits")
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    _support_name = "{0, 1}"

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all("Bernoulli", probs)
            self._given = "probs"
        else:
            (self.logits,) = broadcast_all("Bernoulli", logits)
            self._given = "logits"
        param = self.__dict__[self._given]
        super().__init__(tuple(param.shape), (), validate_args)

    def __getattr__(self, name):
        # the parameter not given is computed once, when first asked for
        if name == "probs":
            self.probs = st.sigmoid(self.__dict__["logits"])
            return self.probs
        if name == "logits":
            self.logits = _probs_to_logits(self.__dict__["probs"], True)
            return self.logits
        raise AttributeError(name)

    def _check_parameters(self):
        if self._given == "probs":
            check("Bernoulli", "probs", self.probs, (self.probs >= 0) & (self.probs <= 1),
                  "in [0, 1]")
        else:
            check("Bernoulli", "logits", self.logits, self.logits == self.logits, "real")

    def _support_ok(self, value):
        return (value == 0) | (value == 1)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return (self.probs > 0.5).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = self.probs.detach()
        with st.no_grad():
            return (st.rand(*shape, dtype=p.dtype, device=p.device) < p).to(p.dtype)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lg = self.logits
        return -(value * st.softplus(-lg) + (1 - value) * st.softplus(lg))

    def entropy(self):
        return st.softplus(self.logits) - self.probs * self.logits


class Categorical(Distribution):
    """A choice among K categories (the last dim of probs or logits); probs need not be
    normalised, logits are normalised with logsumexp. Values are int64 indices.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Categorical(probs=st.tensor([1.0, 3.0]))
        >>> d.probs.tolist(), round(d.log_prob(st.tensor(1)).item(), 4)
        ([0.25, 0.75], -0.2877)
    """

    _param_names = ("probs", "logits")
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Categorical", probs, logits)
        given = probs if probs is not None else logits
        (t,) = broadcast_all("Categorical", given)
        if t.ndim < 1:
            raise ValueError("Categorical: probs or logits must have at least one dimension")
        if probs is not None:
            self._given, self.probs = "probs", t / t.sum(-1, keepdim=True)
        else:
            self._given, self.logits = "logits", t - st.logsumexp(t, -1, keepdim=True)
        self._raw = t
        self._num_events = t.shape[-1]
        super().__init__(tuple(t.shape[:-1]), (), validate_args)

    def __getattr__(self, name):
        if name == "probs":
            self.probs = st.softmax(self.__dict__["logits"], -1)
            return self.probs
        if name == "logits":
            self.logits = _probs_to_logits(self.__dict__["probs"], False)
            return self.logits
        raise AttributeError(name)

    @property
    def param_shape(self) -> tuple:
        return self._batch_shape + (self._num_events,)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        k = self._num_events
        for name in ("probs", "logits", "_raw"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(*(new.batch_shape + (k,)))
        return new

    def _check_parameters(self):
        if self._given == "probs":
            check("Categorical", "probs", self._raw, self._raw >= 0, "non-negative")
            check("Categorical", "probs", self._raw, self._raw.sum(-1) > 0,
                  "a vector with a positive sum")
        else:
            check("Categorical", "logits", self._raw, self._raw == self._raw, "real")

    _support_name = "integers in [0, num categories)"

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    def _support_ok(self, value):
        return (value >= 0) & (value < self._num_events) & (value == value.floor()
                                                             if value.dtype.is_floating_point
                                                             else value == value)

    @property
    def mean(self):
        return st.full(self._batch_shape, float("nan"), dtype=self.probs.dtype,
                       device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = self.probs.detach()
        with st.no_grad():
            cdf = st.cumsum(p, -1)
            u = st.rand(*shape, 1, dtype=p.dtype, device=p.device) * cdf[..., -1:]
            idx = (cdf <= u).to(st.int64).sum(-1)
            return st.clamp(idx, max=self._num_events - 1)

    def log_prob(self, value):
        value = self._validate_sample(value)
        value = value.to(st.int64)
        k = self._num_events
        shape = tuple(np.broadcast_shapes(tuple(value.shape), self._batch_shape))
        lg = self.logits.expand(*(shape + (k,)))
        idx = value.expand(*shape).unsqueeze(-1)
        return st.gather(lg, -1, idx).squeeze(-1)

    def entropy(self):
        lo = float(np.finfo(self.logits.dtype.np).min)
        return -(self.probs * st.clamp(self.logits, min=lo)).sum(-1)


class Poisson(Distribution):
    """Counts with mean `rate`; draws by inversion of the distribution function on the host,
    from the library's uniforms (no reparameterised sampler).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Poisson(st.tensor([2.0]))
        >>> round(d.log_prob(st.tensor([3.0])).item(), 4)
        -1.7123
    """

    _param_names = ("rate",)
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _support_name = "non-negative integers"

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all("Poisson", rate)
        super().__init__(tuple(self.rate.shape), (), validate_args)

    def _check_parameters(self):
        check("Poisson", "rate", self.rate, self.rate >= 0, "non-negative")

    def _support_ok(self, value):
        return (value >= 0) & (value == value.floor())

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        lam = self.rate.detach().expand(*shape).numpy(force=True).astype(np.float64).ravel()
        u = st.rand(lam.size, dtype=st.float64, device=self.rate.device).numpy(force=True)
        out = _poisson_inverse(lam, u).reshape(shape)
        return st.tensor(out, dtype=self.rate.dtype, device=self.rate.device)

    def log_prob(self, value):
        value = self._validate_sample(value)
        rate = self.rate
        term = st.where(value == 0, 0.0, value * st.log(st.where(rate > 0, rate, 1.0)))
        term = st.where((rate == 0) & (value > 0), -math.inf, term)
        return term - rate - lgamma(value + 1)


def _poisson_inverse(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The smallest k with P(X <= k) >= u: start at floor(lam), whose distribution function
    is the incomplete gamma function Q(k + 1, lam), and walk down or up one count at a time
    (about a standard deviation of steps), finished elements leaving the working arrays."""
    k = np.floor(lam)
    with np.errstate(all="ignore"):
        pmf = np.exp(k * np.log(np.where(lam > 0, lam, 1.0)) - lam - _lgam(k + 1))
    pmf = np.where(lam > 0, pmf, 1.0)
    cdf = 1.0 - gammainc(k + 1, lam)
    cdf = np.where(lam > 0, cdf, 1.0)
    out = k.copy()
    # down: while P(X <= k - 1) >= u
    idx = np.nonzero((k > 0) & (cdf - pmf >= u))[0]
    kk, pp, cc = k[idx], pmf[idx], cdf[idx]
    while idx.size:
        cc = cc - pp
        pp = pp * kk / lam[idx]
        kk = kk - 1
        go = (kk > 0) & (cc - pp >= u[idx])
        out[idx[~go]] = kk[~go]
        idx, kk, pp, cc = idx[go], kk[go], pp[go], cc[go]
    # up: while P(X <= k) < u
    idx = np.nonzero(cdf < u)[0]
    kk, pp, cc = k[idx], pmf[idx], cdf[idx]
    for _ in range(1_000_000):
        if not idx.size:
            break
        kk = kk + 1
        pp = pp * lam[idx] / kk
        cc = cc + pp
        go = (cc < u[idx]) & (pp > 0)
        out[idx[~go]] = kk[~go]
        idx, kk, pp, cc = idx[go], kk[go], pp[go], cc[go]
    return out
