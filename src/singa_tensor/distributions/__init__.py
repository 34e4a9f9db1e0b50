"""singa_tensor.distributions: PyTorch's torch.distributions for the common families.

Samples come from the library's generator, so st.manual_seed makes them reproducible;
rsample draws are differentiable with respect to the parameters (location-scale transforms,
and implicit reparameterisation for Gamma, Beta and Dirichlet). Bernoulli, Categorical and
Poisson have sample only. `constraints` holds the sets parameters and values live in
(arg_constraints and support of every family), `transforms` the bijections between them
(biject_to, transform_to) that TransformedDistribution pushes a base distribution through.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.distributions import Normal, kl_divergence
    >>> p, q = Normal(0.0, 1.0), Normal(0.0, 2.0)
    >>> round(kl_divergence(p, q).item(), 4)
    0.3181
"""

from __future__ import annotations

from . import constraints, transforms
from . import kl_more as _kl_more  # noqa: F401  (registers KL pairs)
from .continuous import Exponential, Laplace, Normal, Uniform
from .continuous_more import (Cauchy, Chi2, FisherSnedecor, GeneralizedPareto, Gumbel,
                              HalfCauchy, HalfNormal, InverseGamma, Kumaraswamy, LogisticNormal, LogNormal, Pareto,
                              StudentT, VonMises, Weibull)
from .discrete import Bernoulli, Categorical, Poisson
from .discrete_more import (Binomial, Geometric, Multinomial, NegativeBinomial,
                            OneHotCategorical, OneHotCategoricalStraightThrough)
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import ExponentialFamily, Independent
from .kl import kl_divergence, register_kl
from .mixture import LowRankMultivariateNormal, MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .relaxed import ContinuousBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed import TransformedDistribution
from .wishart import Wishart
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform,
                         CorrCholeskyTransform, CumulativeDistributionTransform, ExpTransform,
                         PositiveDefiniteTransform, IndependentTransform, LowerCholeskyTransform,
                         PowerTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform,
                         SoftplusTransform, StackTransform, StickBreakingTransform,
                         TanhTransform, Transform, biject_to, identity_transform, transform_to)

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "PositiveDefiniteTransform",
    "ExpTransform",
    "ExponentialFamily", "Independent", "IndependentTransform", "LowerCholeskyTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform",
    "Transform", "TransformedDistribution", "biject_to", "constraints", "identity_transform",
    "transform_to", "transforms",
    "Binomial", "Cauchy", "Chi2", "ContinuousBernoulli", "FisherSnedecor", "GeneralizedPareto",
    "Geometric",
    "Gumbel", "HalfCauchy", "HalfNormal", "InverseGamma", "Kumaraswamy", "LogNormal",
    "LogisticNormal", "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial",
    "NegativeBinomial", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "VonMises", "Weibull",
    "Wishart",
    "Bernoulli", "Beta", "Categorical", "Dirichlet", "Distribution", "Exponential", "Gamma",
    "Laplace", "MultivariateNormal", "Normal", "Poisson", "Uniform", "kl_divergence",
    "register_kl",
]
