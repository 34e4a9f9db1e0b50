"""The multivariate normal distribution, parameterised by its lower Cholesky factor."""

from __future__ import annotations

import math

import singa_tensor as st
from singa_tensor import Tensor, linalg

from . import constraints
from .distribution import Distribution, _broadcast, broadcast_all


def _half_log_det(scale_tril: Tensor) -> Tensor:
    return st.log(st.diagonal(scale_tril, 0, -2, -1)).sum(-1)


def _mahalanobis(scale_tril: Tensor, diff: Tensor) -> Tensor:
    """|L^-1 diff|^2 over the last dim (L and diff broadcast over their batch dims)."""
    n = diff.shape[-1]
    batch = _broadcast(tuple(scale_tril.shape[:-2]), tuple(diff.shape[:-1]))
    low = scale_tril.expand(*(batch + (n, n)))
    z = linalg.solve_triangular(low, diff.expand(*(batch + (n,))).unsqueeze(-1), upper=False)
    return (z.squeeze(-1) ** 2).sum(-1)


class MultivariateNormal(Distribution):
    """N(loc, Sigma) over vectors (the last dim of loc), Sigma given as exactly one of
    covariance_matrix, precision_matrix (its inverse) or scale_tril (its lower Cholesky
    factor, with a positive diagonal).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.MultivariateNormal(st.zeros(2), st.eye(2))
        >>> round(d.log_prob(st.zeros(2)).item(), 4), d.event_shape
        (-1.8379, (2,))
    """

    has_rsample = True
    _param_names = ("loc",)
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError("MultivariateNormal: pass exactly one of covariance_matrix, "
                             "precision_matrix and scale_tril")
        (loc,) = broadcast_all("MultivariateNormal", loc)
        if loc.ndim < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional")
        mat = next(m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None)
        if not isinstance(mat, Tensor) or mat.ndim < 2 or mat.shape[-1] != mat.shape[-2]:
            raise ValueError("MultivariateNormal: the covariance, precision or scale_tril "
                             "must be a batch of square matrices")
        n = loc.shape[-1]
        if mat.shape[-1] != n:
            raise ValueError(f"MultivariateNormal: loc has {n} dims but the matrix is "
                             f"{mat.shape[-1]} x {mat.shape[-1]}")
        mat = mat.to(loc.dtype)
        self._given = ("covariance_matrix", "precision_matrix", "scale_tril")[given.index(True)]
        self._raw = mat
        if self._given == "scale_tril":
            low = mat
        elif self._given == "covariance_matrix":
            low = self._cholesky(mat, "covariance_matrix")
        else:
            low = self._cholesky(linalg.inv(mat), "precision_matrix")
        batch = _broadcast(tuple(loc.shape[:-1]), tuple(mat.shape[:-2]))
        self.loc = loc.expand(*(batch + (n,)))
        self._unbroadcasted_scale_tril = low
        super().__init__(batch, (n,), validate_args)

    def _cholesky(self, mat: Tensor, name: str) -> Tensor:
        try:
            return linalg.cholesky(mat)
        except linalg.LinAlgError:
            raise ValueError(f"MultivariateNormal: expected parameter {name} to be "
                             f"positive-definite, but found invalid values") from None

    def _check_parameters(self):
        if self._given == "scale_tril":
            low = self._raw
            diag = st.diagonal(low, 0, -2, -1)
            ok = bool((diag > 0).all().item()) and bool((low.triu(1) == 0).all().item())
            if not ok:
                raise ValueError("MultivariateNormal: expected parameter scale_tril to be "
                                 "lower triangular with a positive diagonal, but found "
                                 "invalid values")
        elif self._given == "covariance_matrix" or self._given == "precision_matrix":
            m = self._raw
            if not bool(((m - m.transpose(-2, -1)).abs() <= 1e-6 * (1 + m.abs())).all().item()):
                raise ValueError(f"MultivariateNormal: expected parameter {self._given} to be "
                                 f"symmetric, but found invalid values")

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    @property
    def scale_tril(self) -> Tensor:
        n = self._event_shape[0]
        return self._unbroadcasted_scale_tril.expand(*(self._batch_shape + (n, n)))

    @property
    def covariance_matrix(self) -> Tensor:
        low = self.scale_tril
        return low @ low.transpose(-2, -1)

    @property
    def precision_matrix(self) -> Tensor:
        return linalg.inv(self.covariance_matrix)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        low = self._unbroadcasted_scale_tril
        return (low ** 2).sum(-1).expand(*(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = st.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        value = self._validate_sample(value)
        n = self._event_shape[0]
        m = _mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (n * math.log(2 * math.pi) + m) - _half_log_det(
            self._unbroadcasted_scale_tril)

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + _half_log_det(
            self._unbroadcasted_scale_tril)
        return h.expand(*self._batch_shape) if self._batch_shape else h
