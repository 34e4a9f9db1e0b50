"""The Wishart distribution over positive definite matrices."""

from __future__ import annotations

import math

import singa_tensor as st
from singa_tensor import Tensor, linalg

from . import constraints
from ._special import digamma, lgamma, rsample_standard_gamma
from .distribution import Distribution, _broadcast, broadcast_all, check


def _mvlgamma(a: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function Gamma_p(a)."""
    out = p * (p - 1) / 4 * math.log(math.pi)
    for j in range(p):
        out = out + lgamma(a - j / 2)
    return out


class Wishart(Distribution):
    """The Wishart distribution W(df, Sigma) over p x p positive definite matrices (the
    scatter matrix of df draws of N(0, Sigma)), Sigma given as exactly one of
    covariance_matrix, precision_matrix or scale_tril; draws by the Bartlett decomposition,
    reparameterised (the chi-squared diagonal through implicit gamma gradients).

    Example:
        >>> import singa_tensor as st
        >>> d = st.distributions.Wishart(st.tensor(3.0), covariance_matrix=st.eye(2))
        >>> d.mean.tolist(), d.sample().shape
        ([[3.0, 0.0], [0.0, 3.0]], (2, 2))
    """

    has_rsample = True
    arg_constraints = {"df": constraints.greater_than(0),
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.positive_definite
    _param_names = ("df",)

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError("Wishart: pass exactly one of covariance_matrix, precision_matrix "
                             "and scale_tril")
        mat = next(m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None)
        if not isinstance(mat, Tensor) or mat.ndim < 2 or mat.shape[-1] != mat.shape[-2]:
            raise ValueError("Wishart: the covariance, precision or scale_tril must be a batch "
                             "of square matrices")
        (df,) = broadcast_all("Wishart", df)
        mat = mat.to(df.dtype) if mat.dtype.is_floating_point else mat.to(st.float32)
        df = df.to(mat.dtype)
        p = mat.shape[-1]
        name = ("covariance_matrix", "precision_matrix", "scale_tril")[given.index(True)]
        try:
            if name == "scale_tril":
                low = mat
            elif name == "covariance_matrix":
                low = linalg.cholesky(mat)
            else:
                low = linalg.cholesky(linalg.inv(mat))
        except linalg.LinAlgError:
            raise ValueError(f"Wishart: expected parameter {name} to be positive-definite, "
                             f"but found invalid values") from None
        batch = _broadcast(tuple(df.shape), tuple(mat.shape[:-2]))
        self.df = df.expand(*batch) if tuple(df.shape) != batch else df
        self._unbroadcasted_scale_tril = low
        self._given, self._raw = name, mat
        super().__init__(batch, (p, p), validate_args)

    def _check_parameters(self):
        p = self._event_shape[0]
        check("Wishart", "df", self.df, self.df > p - 1, f"greater than {p - 1}")
        if self._given == "scale_tril":
            c = constraints.lower_cholesky
            check("Wishart", "scale_tril", self._raw, c.check(self._raw),
                  "lower triangular with a positive diagonal")

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    @property
    def scale_tril(self):
        p = self._event_shape[0]
        return self._unbroadcasted_scale_tril.expand(*(self._batch_shape + (p, p)))

    @property
    def covariance_matrix(self):
        low = self.scale_tril
        return low @ low.transpose(-2, -1)

    @property
    def precision_matrix(self):
        return linalg.inv(self.covariance_matrix)

    def _df(self):
        return self.df.reshape(*(tuple(self.df.shape) + (1, 1)))

    @property
    def mean(self):
        return self._df() * self.covariance_matrix

    @property
    def mode(self):
        p = self._event_shape[0]
        return st.clamp(self._df() - p - 1, min=0.0) * self.covariance_matrix

    @property
    def variance(self):
        s = self.covariance_matrix
        diag = st.diagonal(s, 0, -2, -1)
        return self._df() * (s ** 2 + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        p = self._event_shape[0]
        lead = shape[:-2]
        i = st.arange(p, dtype=self.df.dtype, device=self.df.device)
        conc = (self.df.unsqueeze(-1) - i) / 2
        chi2 = 2 * rsample_standard_gamma(conc, lead + (p,))
        noise = st.randn(*shape, dtype=self.df.dtype, device=self.df.device).tril(-1)
        a = noise + st.diag_embed(st.sqrt(chi2))
        la = self._unbroadcasted_scale_tril @ a
        return la @ la.transpose(-2, -1)

    def log_prob(self, value):
        value = self._validate_sample(value)
        p = self._event_shape[0]
        nu = self.df
        chol = linalg.cholesky(value)
        logdet_x = 2 * st.log(st.diagonal(chol, 0, -2, -1)).sum(-1)
        low = self._unbroadcasted_scale_tril
        batch = _broadcast(tuple(low.shape[:-2]), tuple(chol.shape[:-2]))
        m = linalg.solve_triangular(low.expand(*(batch + (p, p))),
                                    chol.expand(*(batch + (p, p))), upper=False)
        trace = (m ** 2).sum((-2, -1))
        half_logdet_s = st.log(st.diagonal(low, 0, -2, -1)).sum(-1)
        return (0.5 * (nu - p - 1) * logdet_x - 0.5 * trace - 0.5 * nu * p * math.log(2)
                - nu * half_logdet_s - _mvlgamma(nu / 2, p))

    def entropy(self):
        p = self._event_shape[0]
        nu = self.df
        half_logdet_s = st.log(st.diagonal(self._unbroadcasted_scale_tril, 0, -2, -1)).sum(-1)
        psi = 0.0
        for j in range(p):
            psi = psi + digamma((nu - j) / 2)
        return ((p + 1) * half_logdet_s + 0.5 * p * (p + 1) * math.log(2)
                + _mvlgamma(nu / 2, p) - 0.5 * (nu - p - 1) * psi + 0.5 * nu * p)
