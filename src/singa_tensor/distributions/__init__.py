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
from .continuous_more import (
                              Cauchy,
                              Chi2,
                              FisherSnedecor,
                              GeneralizedPareto,
                              Gumbel,
                              HalfCauchy,
                              HalfNormal,
                              InverseGamma,
                              Kumaraswamy,
                              LogisticNormal,
                              LogNormal,
                              Pareto,
                              StudentT,
                              VonMises,
                              Weibull,
)
from .discrete import Bernoulli, Categorical, Poisson
from .discrete_more import (
                              Binomial,
                              Geometric,
                              Multinomial,
                              NegativeBinomial,
                              OneHotCategorical,
                              OneHotCategoricalStraightThrough,
)
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import ExponentialFamily, Independent
from .kl import kl_divergence, register_kl
from .lkj import LKJCholesky
from .mixture import LowRankMultivariateNormal, MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .relaxed import ContinuousBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed import TransformedDistribution
from .transforms import (
                              AbsTransform,
                              AffineTransform,
                              CatTransform,
                              ComposeTransform,
                              CorrCholeskyTransform,
                              CumulativeDistributionTransform,
                              ExpTransform,
                              IndependentTransform,
                              LowerCholeskyTransform,
                              PositiveDefiniteTransform,
                              PowerTransform,
                              ReshapeTransform,
                              SigmoidTransform,
                              SoftmaxTransform,
                              SoftplusTransform,
                              StackTransform,
                              StickBreakingTransform,
                              TanhTransform,
                              Transform,
                              biject_to,
                              identity_transform,
                              transform_to,
)
from .wishart import Wishart

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform",
    "Categorical", "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "Dirichlet", "Distribution",
    "ExpTransform", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
    "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent",
    "IndependentTransform", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace",
    "LogNormal", "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform",
    "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
    "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
    "PositiveDefiniteTransform", "PowerTransform", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT",
    "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "VonMises", "Weibull",
    "Wishart", "biject_to", "constraints", "identity_transform", "kl_divergence", "register_kl",
    "transform_to", "transforms",
]
