"""KL divergences for the wider families (registered with kl.register_kl on import)."""

from __future__ import annotations

import math

import singa_tensor as st

from ._special import lgamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .transformed import TransformedDistribution
from .transforms import _sum_rightmost


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("kl_divergence: Independent distributions with different "
                                  "reinterpreted_batch_ndims")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if len(p.transforms) != len(q.transforms) or any(
            a != b for a, b in zip(p.transforms, q.transforms)):
        raise NotImplementedError("kl_divergence: TransformedDistributions with different "
                                  "transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("kl_divergence: TransformedDistributions with different "
                                  "event shapes")
    extra = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra)

_EULER = 0.5772156649015329


def _families():
    from .continuous_more import Gumbel, HalfNormal, Pareto
    from .discrete_more import Binomial, Geometric, OneHotCategorical
    return Gumbel, HalfNormal, Pareto, Binomial, Geometric, OneHotCategorical


_Gumbel, _HalfNormal, _Pareto, _Binomial, _Geometric, _OneHot = _families()


@register_kl(_Gumbel, _Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -st.log(ct1) - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = st.exp(ct2 - ct3 + lgamma(ct1 + 1))
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(_HalfNormal, _HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    ratio = (p.scale / q.scale) ** 2
    return 0.5 * (ratio - 1 - st.log(ratio))


@register_kl(_Geometric, _Geometric)
def _kl_geometric_geometric(p, q):
    # -H(p) - E_p[X] log(1 - q) - log q
    return -p.entropy() - p.mean * st.log1p(-q.probs) - st.log(q.probs)


@register_kl(_Binomial, _Binomial)
def _kl_binomial_binomial(p, q):
    if not bool((p.total_count == q.total_count).all().item()):
        raise NotImplementedError("kl_divergence: Binomials with different total_count")
    n = p.total_count
    pp, lp, lq = p.probs, p.logits, q.logits
    # n [p (log p - log q) + (1 - p) (log(1 - p) - log(1 - q))] through the logits
    return n * (pp * (st.softplus(-lq) - st.softplus(-lp))
                + (1 - pp) * (st.softplus(lq) - st.softplus(lp)))


@register_kl(_OneHot, _OneHot)
def _kl_onehot_onehot(p, q):
    return kl_divergence(p._categorical, q._categorical)


@register_kl(_Pareto, _Pareto)
def _kl_pareto_pareto(p, q):
    sr = p.scale / q.scale
    ar = q.alpha / p.alpha
    out = q.alpha * st.log(sr) - st.log(ar) + ar - 1
    return st.where(p.scale < q.scale, math.inf, out)
