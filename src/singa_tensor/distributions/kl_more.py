"""KL divergences for the wider families (registered with kl.register_kl on import)."""

from __future__ import annotations

import math

import singa_tensor as st

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
_ = math
