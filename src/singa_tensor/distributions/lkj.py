"""The LKJ distribution over Cholesky factors of correlation matrices."""

from __future__ import annotations

import math
import numbers

import numpy as np

import singa_tensor as st

from . import constraints
from ._special import lgamma
from .distribution import Distribution, broadcast_all, check
from .gamma import Beta


class LKJCholesky(Distribution):
    """The LKJ distribution on lower Cholesky factors L of dim x dim correlation matrices:
    the density of C = L L^T is proportional to det(C)^(concentration - 1). Draws by the
    onion method: row r of L is a uniform direction in its first r entries scaled by the
    square root of a Beta(r / 2, concentration + (dim - 1 - r) / 2) draw.

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.LKJCholesky(3, 2.0)
        >>> low = d.sample()
        >>> low.shape, [round(v, 6) for v in (low @ low.T).diagonal().tolist()]
        ((3, 3), [1.0, 1.0, 1.0])
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky
    _param_names = ("concentration",)

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 2:
            raise ValueError(f"LKJCholesky: dim must be an int of at least 2, got {dim!r}")
        self.dim = int(dim)
        (self.concentration,) = broadcast_all("LKJCholesky", concentration)
        super().__init__(tuple(self.concentration.shape), (self.dim, self.dim), validate_args)

    def _check_parameters(self):
        check("LKJCholesky", "concentration", self.concentration, self.concentration > 0,
              "positive")

    def expand(self, batch_shape, _instance=None):
        return LKJCholesky(self.dim, self.concentration.expand(*tuple(batch_shape)),
                           validate_args=False)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        d, eta = self.dim, self.concentration.detach()
        with st.no_grad():
            r = st.arange(1, d, dtype=eta.dtype, device=eta.device)
            beta = Beta(r / 2, eta.unsqueeze(-1) + (d - 1 - r) / 2, validate_args=False)
            y = beta.sample(tuple(shape[:-2 - len(self._batch_shape)])
                            if isinstance(sample_shape, tuple) else sample_shape)
            y = y.reshape(*(tuple(shape[:-2]) + (d - 1,)))
            z = st.randn(*(tuple(shape[:-2]) + (d - 1, d)), dtype=eta.dtype,
                         device=eta.device).tril(0)  # row r - 1 uses its first r entries
            z = z / (z * z).sum(-1, keepdim=True).sqrt()
            w = z * y.sqrt().unsqueeze(-1)
            w = st.cat([st.zeros(*(tuple(shape[:-2]) + (1, d)), dtype=eta.dtype,
                                 device=eta.device), w], -2)
            diag = st.clamp(1 - (w * w).sum(-1), min=float(np.finfo(eta.dtype.np).tiny)).sqrt()
            return w + st.diag_embed(diag)

    def log_prob(self, value):
        value = self._validate_sample(value)
        d, eta = self.dim, self.concentration
        diag = st.diagonal(value, 0, -2, -1)[..., 1:]
        i = st.arange(1, d, dtype=value.dtype, device=value.device)  # 0-indexed rows 1..d-1
        expo = 2 * (eta.unsqueeze(-1) - 1) + (d - 1 - i)
        unnorm = (expo * st.log(diag)).sum(-1)
        # normaliser: the product over rows r of the integrals of
        # (1 - |x|^2)^(expo / 2) over the unit r-ball
        log_norm = 0.0
        for r in range(1, d):
            a = eta + (d - 1 - r) / 2  # Beta(r / 2, a) for the squared row norm
            log_norm = log_norm + (r / 2 * math.log(math.pi) + lgamma(a) - lgamma(a + r / 2))
        return unnorm - log_norm
