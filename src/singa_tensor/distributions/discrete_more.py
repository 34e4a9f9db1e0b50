"""More discrete families: Geometric, Binomial, NegativeBinomial, Multinomial,
OneHotCategorical (and its straight-through variant)."""

from __future__ import annotations

import numpy as np

import singa_tensor as st

from . import constraints
from ._special import lgamma
from .discrete import Categorical, Poisson, _one_of, _probs_to_logits
from .distribution import Distribution, broadcast_all, check
from .gamma import Gamma


class _ProbsOrLogits(Distribution):
    """Shared handling of a binary probs / logits parameter (computed lazily from the
    other)."""

    _param_names: tuple = ("probs", "logits")

    def _set_param(self, name, probs, logits, *others):
        _one_of(name, probs, logits)
        given = probs if probs is not None else logits
        vals = broadcast_all(name, given, *others)
        if probs is not None:
            self.probs, self._given = vals[0], "probs"
        else:
            self.logits, self._given = vals[0], "logits"
        return vals

    def __getattr__(self, name):
        if name == "probs":
            self.probs = st.sigmoid(self.__dict__["logits"])
            return self.probs
        if name == "logits":
            self.logits = _probs_to_logits(self.__dict__["probs"], True)
            return self.logits
        raise AttributeError(name)

    @property
    def param_shape(self):
        return self._batch_shape


class Geometric(_ProbsOrLogits):
    """The number of failures before the first success of coins with success probability
    probs.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Geometric(probs=st.tensor(0.25))
        >>> d.mean.item(), round(d.log_prob(st.tensor(2.0)).item(), 4)
        (3.0, -1.9617)
    """

    arg_constraints = {"probs": constraints.interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        (p,) = self._set_param("Geometric", probs, logits)
        super().__init__(tuple(p.shape), (), validate_args)

    def _check_parameters(self):
        if self._given == "probs":
            check("Geometric", "probs", self.probs, (self.probs > 0) & (self.probs <= 1),
                  "in (0, 1]")
        else:
            check("Geometric", "logits", self.logits, self.logits == self.logits, "real")

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return st.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = self.probs.detach()
        with st.no_grad():
            u = st.rand(*shape, dtype=p.dtype, device=p.device)
            tiny = float(np.finfo(u.dtype.np).tiny)
            u = st.clamp(u, min=tiny)
            return (st.log(u) / st.log1p(-p)).floor().abs()  # abs: -0.0 where p is 1

    def log_prob(self, value):
        value = self._validate_sample(value)
        p = self.probs
        term = st.where((value == 0) & (p == 1), 0.0, value * st.log1p(-st.where(
            p == 1, 0.0, p)))
        return term + st.log(p)

    def entropy(self):
        lg = self.logits
        # (-(1 - p) log(1 - p) - p log p) / p through the logits
        return (st.softplus(lg) - self.probs * lg) / self.probs


class Binomial(_ProbsOrLogits):
    """The number of successes in total_count coin flips of success probability probs.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Binomial(10, probs=st.tensor(0.5))
        >>> d.mean.item(), round(d.log_prob(st.tensor(5.0)).item(), 4)
        (5.0, -1.402)
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    _param_names = ("total_count", "probs", "logits")

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        p, n = self._set_param("Binomial", probs, logits, total_count)
        self.total_count = n.to(p.dtype)
        super().__init__(tuple(p.shape), (), validate_args)

    def _check_parameters(self):
        n = self.total_count
        check("Binomial", "total_count", n, (n >= 0) & (n == n.floor()), "a non-negative integer")
        if self._given == "probs":
            check("Binomial", "probs", self.probs, (self.probs >= 0) & (self.probs <= 1),
                  "in [0, 1]")

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return st.minimum(((self.total_count + 1) * self.probs).floor(), self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = self.probs.detach().expand(*shape)
        n = self.total_count.detach().expand(*shape)
        nmax = int(n.max().item()) if n.numel() else 0
        with st.no_grad():
            out = st.zeros(*shape, dtype=p.dtype, device=p.device)
            done = 0
            while done < nmax:  # Bernoulli counts, in chunks of flips
                m = min(64, nmax - done)
                u = st.rand(*shape, m, dtype=p.dtype, device=p.device)
                idx = st.arange(done, done + m, dtype=p.dtype, device=p.device)
                hit = (u < p.unsqueeze(-1)) & (idx < n.unsqueeze(-1))
                out = out + hit.to(p.dtype).sum(-1)
                done += m
            return out

    def log_prob(self, value):
        value = self._validate_sample(value)
        n, lg = self.total_count, self.logits
        comb = lgamma(n + 1) - lgamma(value + 1) - lgamma(n - value + 1)
        return comb + value * lg - n * st.softplus(lg)

    def entropy(self):
        nmax = int(self.total_count.max().item())
        ks = st.arange(nmax + 1, dtype=self.probs.dtype, device=self.probs.device)
        ks = ks.reshape(*((nmax + 1,) + (1,) * len(self._batch_shape)))
        n = self.total_count
        inside = ks <= n
        lp = self.log_prob_unchecked(st.where(inside, ks, 0.0))
        return -st.where(inside, st.exp(lp) * lp, 0.0).sum(0)

    def log_prob_unchecked(self, value):
        n, lg = self.total_count, self.logits
        comb = lgamma(n + 1) - lgamma(value + 1) - lgamma(st.clamp(n - value, min=0.0) + 1)
        return comb + value * lg - n * st.softplus(lg)

    def enumerate_support(self, expand=True):
        n = self.total_count
        nmax = int(n.max().item())
        if not bool((n == nmax).all().item()):
            raise NotImplementedError("Binomial.enumerate_support: total_count must be the "
                                      "same for the whole batch")
        ks = st.arange(nmax + 1, dtype=self.probs.dtype, device=self.probs.device)
        ks = ks.reshape(*((nmax + 1,) + (1,) * len(self._batch_shape)))
        return ks.expand(*((nmax + 1,) + self._batch_shape)) if expand else ks


class NegativeBinomial(_ProbsOrLogits):
    """The number of successes (probability probs each) before total_count failures.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.NegativeBinomial(3.0, probs=st.tensor(0.5))
        >>> d.mean.item(), d.variance.item()
        (3.0, 6.0)
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer
    _param_names = ("total_count", "probs", "logits")

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        p, r = self._set_param("NegativeBinomial", probs, logits, total_count)
        self.total_count = r
        super().__init__(tuple(p.shape), (), validate_args)

    def _check_parameters(self):
        r = self.total_count
        check("NegativeBinomial", "total_count", r, r > 0, "positive")
        if self._given == "probs":
            check("NegativeBinomial", "probs", self.probs, (self.probs >= 0) & (self.probs < 1),
                  "in [0, 1)")

    @property
    def mean(self):
        return self.total_count * st.exp(self.logits)

    @property
    def mode(self):
        return st.clamp(((self.total_count - 1) * st.exp(self.logits)).floor(), min=0.0)

    @property
    def variance(self):
        return self.mean / st.sigmoid(-self.logits)

    def sample(self, sample_shape=()):
        with st.no_grad():
            rate = Gamma(self.total_count.detach(), st.exp(-self.logits.detach()),
                         validate_args=False).sample(sample_shape)
            return Poisson(rate, validate_args=False).sample()

    def log_prob(self, value):
        value = self._validate_sample(value)
        r, lg = self.total_count, self.logits
        comb = lgamma(value + r) - lgamma(value + 1) - lgamma(r)
        return comb - r * st.softplus(lg) - value * st.softplus(-lg)


class Multinomial(Distribution):
    """Counts of total_count draws among K categories (the last dim of probs or logits).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Multinomial(4, probs=st.tensor([0.5, 0.5]))
        >>> d.mean.tolist(), round(d.log_prob(st.tensor([2.0, 2.0])).item(), 4)
        ([2.0, 2.0], -0.9808)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    _param_names = ("probs", "logits")

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if isinstance(total_count, bool) or not isinstance(total_count, int):
            raise TypeError(f"Multinomial: total_count must be an int, got "
                            f"{type(total_count).__name__}")
        if total_count < 0:
            raise ValueError(f"Multinomial: total_count must be non-negative, got "
                             f"{total_count}")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=validate_args)
        k = self._categorical._num_events
        super().__init__(self._categorical.batch_shape, (k,), validate_args)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.total_count), 1)

    def _check_parameters(self):
        pass  # the Categorical checked its parameters

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(Multinomial)
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = tuple(batch_shape)
        return new

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        k = self._event_shape[0]
        with st.no_grad():
            idx = self._categorical.sample((self.total_count,) + tuple(shape[:-1]))
            ks = st.arange(k, dtype=st.int64, device=idx.device)
            counts = (idx.unsqueeze(-1) == ks).to(self.probs.dtype).sum(0)
            return counts.reshape(*shape)

    def log_prob(self, value):
        value = self._validate_sample(value)
        lg = self.logits
        lo = float(np.finfo(lg.dtype.np).min)
        term = st.where(value == 0, 0.0, value * st.clamp(lg, min=lo)).sum(-1)
        return lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1) + term

    def _support_ok(self, value):
        ok = ((value >= 0) & (value == value.floor())).all(-1)
        return ok & (value.sum(-1) == self.total_count)

    @property
    def _support_name(self):
        return f"non-negative integer vectors summing to {self.total_count}"


class OneHotCategorical(Distribution):
    """A Categorical whose values are one-hot vectors of length K.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.OneHotCategorical(probs=st.tensor([0.25, 0.75]))
        >>> round(d.log_prob(st.tensor([0.0, 1.0])).item(), 4), d.event_shape
        (-0.2877, (2,))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    _param_names = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=validate_args)
        k = self._categorical._num_events
        super().__init__(self._categorical.batch_shape, (k,), validate_args)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def _check_parameters(self):
        pass

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = tuple(batch_shape)
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        return (st.arange(p.shape[-1], device=p.device) == p.argmax(-1).unsqueeze(-1)).to(
            p.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        idx = self._categorical.sample(sample_shape)
        k = self._event_shape[0]
        p = self.probs
        with st.no_grad():
            return (idx.unsqueeze(-1) == st.arange(k, dtype=st.int64, device=p.device)).to(
                p.dtype)

    def log_prob(self, value):
        value = self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        k = self._event_shape[0]
        p = self.probs
        eye = st.eye(k, dtype=p.dtype, device=p.device)
        eye = eye.reshape(*((k,) + (1,) * len(self._batch_shape) + (k,)))
        return eye.expand(*((k,) + self._batch_shape + (k,))) if expand else eye


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with rsample: one-hot draws whose gradient is passed straight
    through to probs (value + probs - probs.detach()).

    Example:
        >>> import singa_tensor as st
        >>> p = st.tensor([0.25, 0.75], requires_grad=True)
        >>> d = st.distributions.OneHotCategoricalStraightThrough(probs=p)
        >>> d.rsample().sum().backward()
        >>> p.grad is not None
        True
    """

    has_rsample = True

    def rsample(self, sample_shape=()):
        x = self.sample(sample_shape)
        p = self.probs
        return x + (p - p.detach())

