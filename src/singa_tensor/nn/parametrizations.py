"""`nn.utils.parametrizations`: weight_norm, spectral_norm and orthogonal built on
`nn.utils.parametrize` (PyTorch's names, arguments and state_dict keys).

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import nn
    >>> from singa_tensor.nn.utils.parametrizations import weight_norm
    >>> m = weight_norm(nn.Linear(3, 2))
    >>> sorted(k for k in m.state_dict() if "original" in k)
    ['parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import creation as _cr
from .. import dtype as _dt
from ..ops import mv
from ..tensor import Tensor
from .module import Module
from .parametrize import register_parametrization

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---- shared math (also used by the hook-based nn.utils.weight_norm / spectral_norm) -----------


def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of v over every dimension but dim, keeping dims (size 1 except dim); dim=-1
    means over all of v (a 0-d result), as PyTorch's weight norm reads it."""
    if dim == -1:
        return (v * v).sum().sqrt()
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:
        return v.abs()
    return (v * v).sum(dim=others, keepdim=True).sqrt()


def weight_norm_dim(op: str, v: Tensor, dim: int | None) -> int:
    if dim is None or dim == -1:
        return -1
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int or None, got {type(dim).__name__}")
    if not -v.ndim <= dim < v.ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a weight of {v.ndim} dimensions")
    return dim % v.ndim


def normalize(x: Tensor, eps: float) -> Tensor:
    """x / max(||x||, eps) for a vector."""
    return x / (x * x).sum().sqrt().clamp(min=eps)


def spectral_dim(module: Module, dim: int | None) -> int:
    if dim is not None:
        return dim
    return 1 if type(module).__name__.startswith("ConvTranspose") else 0


def reshape_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """weight with dimension dim first, flattened to a matrix of that many rows."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def _check_module(op: str, module, name: str) -> Tensor:
    if not isinstance(module, Module):
        raise TypeError(f"{op}: module must be an nn.Module, got {type(module).__name__}")
    w = getattr(module, name, None)
    if not isinstance(w, Tensor):
        raise ValueError(f"{op}: module '{type(module).__name__}' has no parameter or buffer "
                         f"with name '{name}'")
    return w


# ---- weight norm ------------------------------------------------------------------------------


class _WeightNorm(Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize module.<name> as g * v / ||v|| with the norm over every dimension but dim
    (dim=None: over the whole tensor). g is `parametrizations.<name>.original0`, v is
    `original1`. Returns module.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = weight_norm(nn.Linear(3, 2))
        >>> m.parametrizations.weight.original0.shape
        (2, 1)
    """
    w = _check_module("weight_norm", module, name)
    register_parametrization(module, name, _WeightNorm(weight_norm_dim("weight_norm", w, dim)),
                             unsafe=True)
    return module


# ---- spectral norm ----------------------------------------------------------------------------


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int, dim: int, eps: float) -> None:
        super().__init__()
        ndim = weight.ndim
        if not -max(ndim, 1) <= dim < max(ndim, 1):
            raise IndexError(f"spectral_norm: dim {dim} is out of range for a weight of {ndim} "
                             f"dimensions")
        if not isinstance(n_power_iterations, int) or n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim % max(ndim, 1)
        self.eps = eps
        self.n_power_iterations = n_power_iterations
        if ndim > 1:
            with _ag.no_grad():
                mat = reshape_to_matrix(weight, self.dim)
                h, w = mat.shape
                kw = dict(dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", normalize(_cr.randn(h, **kw), eps))
                self.register_buffer("_v", normalize(_cr.randn(w, **kw), eps))
                self._power_method(mat, 15)

    def _power_method(self, mat: Tensor, n: int) -> None:
        with _ag.no_grad():
            for _ in range(n):
                self._u.copy_(normalize(mv(mat, self._v), self.eps))
                self._v.copy_(normalize(mv(mat.T, self._u), self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, self.eps)
        mat = reshape_to_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * mv(mat, v)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value  # the value is taken to be normalized already, as in PyTorch


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Reparametrize module.<name> as W / sigma(W), sigma the largest singular value estimated
    by power iteration (n_power_iterations steps per read in training mode, updating the
    buffers `_u` and `_v`; none in eval mode). dim defaults to 0, or 1 for ConvTranspose.

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = spectral_norm(nn.Linear(4, 3))
        >>> round(float(np.linalg.svd(m.weight.detach().numpy())[1][0]), 3)
        1.0
    """
    w = _check_module("spectral_norm", module, name)
    register_parametrization(module, name, _SpectralNorm(w, n_power_iterations,
                                                         spectral_dim(module, dim), eps))
    return module


# ---- orthogonal -------------------------------------------------------------------------------


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H_0 H_1 ... H_{k-1}, H_i = I - tau_i v_i v_i^T with v_i the i-th
    column of a (strictly lower triangular) plus e_i: written with differentiable ops."""
    n, k = a.shape
    eye = _cr.eye(n, k, dtype=a.dtype, device=a.device)
    vs = a + eye
    q = eye
    for i in reversed(range(k)):
        v = vs[:, i]
        q = q - tau[i] * v.reshape(n, 1) * (v.reshape(1, n) @ q)
    return q


def _make_orthogonal(q: np.ndarray) -> np.ndarray:
    """The Q of the QR decomposition of q whose R has a positive diagonal."""
    qq, r = np.linalg.qr(q)
    sign = np.sign(np.diagonal(r))
    return qq * np.where(sign == 0, 1.0, sign)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, use_trivialization: bool) -> None:
        super().__init__()
        if weight.ndim != 2:
            raise ValueError(f"orthogonal: expected a matrix (2-D weight), got a tensor of "
                             f"shape {tuple(weight.shape)}")
        if not weight.dtype.is_floating_point:
            raise TypeError(f"orthogonal: expected a floating point weight, got "
                            f"{weight.dtype.name}")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.use_trivialization = use_trivialization

    def forward(self, x: Tensor) -> Tensor:
        transpose = x.shape[0] < x.shape[1]
        if transpose:
            x = x.T
        a = x.tril(-1)
        tau = 2.0 / (1.0 + (a * a).sum(dim=0))
        q = _householder_product(a, tau)
        # the diagonal of x holds the signs +-1; they take no gradient
        q = q * x.diagonal().detach().to(_dt.int32).to(x.dtype).reshape(1, -1)
        if self.use_trivialization:
            q = self.base @ q
        return q.T if transpose else q

    def right_inverse(self, q_init: Tensor) -> Tensor:
        if tuple(q_init.shape) != self.shape:
            raise ValueError(f"orthogonal: expected a matrix of shape {self.shape}, got "
                             f"{tuple(q_init.shape)}")
        transpose = q_init.shape[0] < q_init.shape[1]
        q = q_init.detach().to(_dt.float64).cpu().numpy()
        q = q.T if transpose else q
        n, k = q.shape
        kw = dict(dtype=q_init.dtype, device=q_init.device)
        if self.use_trivialization:
            if n != k:  # complete q to an n x n orthogonal basis
                rest = _cr.randn(n, n - k, dtype=_dt.float64, device="cpu").numpy()
                q = np.concatenate([q, rest], axis=1)
            if not np.allclose(q.T @ q, np.eye(n), atol=10 * np.finfo(np.float32).eps):
                q = _make_orthogonal(q)
            base = _cr.tensor(np.ascontiguousarray(q), **kw)
            if "base" in self._buffers:
                self.base.copy_(base)
            else:
                self.register_buffer("base", base)
            neg_id = np.zeros(self.shape)
            np.fill_diagonal(neg_id, -1.0)
            return _cr.tensor(neg_id, **kw)
        h, tau = np.linalg.qr(q, mode="raw")
        a = np.ascontiguousarray(h.T)  # the reflectors below the diagonal, R on and above it
        d = np.sign(np.diagonal(a)).copy()
        d[tau == 0] *= -1
        d[d == 0] = 1.0
        np.fill_diagonal(a, d)
        return _cr.tensor(np.ascontiguousarray(a.T if transpose else a), **kw)


_MAPS = ("matrix_exp", "cayley", "householder")


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain the matrix module.<name> to have orthonormal rows or columns (whichever are
    fewer). The weight is orthogonalized on registration (a QR decomposition); the stored
    original parametrizes it through a product of Householder reflections (and, with
    use_trivialization, a fixed `base` buffer). Only the "householder" map is implemented:
    it is the default here (PyTorch picks "matrix_exp" for square matrices).

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = orthogonal(nn.Linear(3, 5))
        >>> w = m.weight.detach().numpy()
        >>> bool(np.allclose(w.T @ w, np.eye(3), atol=1e-5))
        True
    """
    op = "orthogonal"
    w = _check_module(op, module, name)
    orthogonal_map = "householder" if orthogonal_map is None else orthogonal_map
    if orthogonal_map not in _MAPS:
        raise ValueError(f"{op}: orthogonal_map has to be one of {', '.join(_MAPS)}, got "
                         f"{orthogonal_map!r}")
    if orthogonal_map != "householder":
        raise NotImplementedError(f"{op}: orthogonal_map={orthogonal_map!r} needs the matrix "
                                  f"exponential or a linear solve, which are not available; use "
                                  f"'householder'")
    register_parametrization(module, name, _Orthogonal(w, orthogonal_map, use_trivialization),
                             unsafe=True)
    return module
