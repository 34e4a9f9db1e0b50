"""KL divergence KL(p || q) between distributions, dispatched on the pair of types."""

from __future__ import annotations

import math
from typing import Callable

import singa_tensor as st

from ._special import digamma, lbeta, lgamma
from .continuous import Exponential, Laplace, Normal, Uniform
from .discrete import Bernoulli, Categorical, Poisson
from .distribution import Distribution, _broadcast
from .gamma import Beta, Dirichlet, Gamma
from .multivariate_normal import MultivariateNormal, _half_log_det, _mahalanobis

_KL: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q (subclasses
    included; the most specific registered pair wins).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Normal, register_kl
        >>> class Unit(Normal):
        ...     pass
        >>> @register_kl(Unit, Unit)
        ... def _kl_unit(p, q):
        ...     return (p.loc - q.loc) ** 2 / 2
        >>> st.distributions.kl_divergence(Unit(1.0, 1.0), Unit(0.0, 1.0)).item()
        0.5
    """
    for t in (type_p, type_q):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"register_kl: expected Distribution subclasses, got {t!r}")

    def decorate(fn: Callable) -> Callable:
        _KL[(type_p, type_q)] = fn
        return fn

    return decorate


def _lookup(tp: type, tq: type):
    best = None
    for (a, b), fn in _KL.items():
        if issubclass(tp, a) and issubclass(tq, b):
            rank = (tp.__mro__.index(a), tq.__mro__.index(b))
            if best is None or rank < best[0]:
                best = (rank, fn)
    return best[1] if best else None


def kl_divergence(p: Distribution, q: Distribution):
    """KL(p || q), batched over the two distributions' (broadcast) batch shapes.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions import Normal, kl_divergence
        >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 2.0)).item(), 4)
        0.4431
    """
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"kl_divergence: no KL divergence is registered for "
                                  f"{type(p).__name__} and {type(q).__name__}")
    return fn(p, q)


def _inf_where(cond, value):
    return st.where(cond, math.inf, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    ratio = (p.scale / q.scale) ** 2
    return 0.5 * (ratio + ((p.loc - q.loc) / q.scale) ** 2 - 1 - st.log(ratio))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    lp, lq = p.logits, q.logits
    return p.probs * (st.softplus(-lq) - st.softplus(-lp)) + (1 - p.probs) * (
        st.softplus(lq) - st.softplus(lp))


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = st.where(p.probs == 0, 0.0, t)
    t = _inf_where((q.probs == 0) & (p.probs > 0), t)
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    out = st.log((q.high - q.low) / (p.high - p.low))
    return _inf_where((q.low > p.low) | (q.high < p.high), out)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - st.log(ratio)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    d = (p.loc - q.loc).abs()
    return -st.log(ratio) + d / q.scale + ratio * st.exp(-d / p.scale) - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (st.log(p.rate) - st.log(q.rate)) - (p.rate - q.rate)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    ap, bp, aq, bq = p.concentration, p.rate, q.concentration, q.rate
    return ((ap - aq) * digamma(ap) - lgamma(ap) + lgamma(aq)
            + aq * (st.log(bp) - st.log(bq)) + ap * (bq - bp) / bp)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    ap, bp = p.concentration1, p.concentration0
    aq, bq = q.concentration1, q.concentration0
    return (lbeta(aq, bq) - lbeta(ap, bp) + (ap - aq) * digamma(ap) + (bp - bq) * digamma(bp)
            + (aq - ap + bq - bp) * digamma(ap + bp))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    sp = cp.sum(-1)
    return (lgamma(sp) - lgamma(cq.sum(-1)) - (lgamma(cp) - lgamma(cq)).sum(-1)
            + ((cp - cq) * (digamma(cp) - digamma(sp).unsqueeze(-1))).sum(-1))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(f"kl_divergence: MultivariateNormals of different event shapes "
                         f"{p.event_shape} and {q.event_shape}")
    n = p.event_shape[0]
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    batch = _broadcast(tuple(p.batch_shape), tuple(q.batch_shape))
    a = st.linalg.solve_triangular(lq.expand(*(batch + (n, n))), lp.expand(*(batch + (n, n))),
                                   upper=False)
    trace = (a ** 2).sum((-2, -1))
    m = _mahalanobis(lq, q.loc - p.loc)
    return 0.5 * (trace + m - n) + _half_log_det(lq) - _half_log_det(lp)
