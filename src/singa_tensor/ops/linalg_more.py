"""More of torch.linalg, composed of the registered decompositions and products: the matrix
exponential, condition numbers, tensor inverses and solves, Vandermonde matrices, Householder
products, and the `_ex` variants that report singular inputs instead of raising."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import composite
from .linalg import matmul
from .linalg_compose import matrix_norm
from .linalg_decomp import _check_matrix, _eye, _rng, _wellcond, inv, solve, svdvals

# ---- matrix_exp ----------------------------------------------------------------------------------

_TAYLOR_TERMS = 18  # after scaling to a norm <= 1/2: the remainder is below 2**-18 / 18! ~ 6e-22


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential exp(A) = I + A + A^2/2! + ..., batched over leading dims, by
    scaling and squaring: A / 2^s with a norm at most 1/2 through a Taylor series, then squared
    s times. Differentiable (autograd runs through the products).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.matrix_exp(st.tensor([[0.0, 1.0], [0.0, 0.0]])).tolist()
        [[1.0, 1.0], [0.0, 1.0]]
    """
    _check_matrix("linalg.matrix_exp", A)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    norm1 = float(A.detach().abs().sum(-2).amax().item())  # the largest column sum
    if not math.isfinite(norm1):
        raise ValueError("linalg.matrix_exp: the input has inf or nan values")
    s = max(0, math.ceil(math.log2(norm1 / 0.5))) if norm1 > 0.5 else 0
    x = A / float(2 ** s) if s else A
    eye = _eye(n, A)
    out = eye + x
    term = x
    for k in range(2, _TAYLOR_TERMS + 1):
        term = matmul(term, x) / float(k)
        out = out + term
    for _ in range(s):
        out = matmul(out, out)
    return out


def _expm_reference(a):
    a = np.asarray(a, dtype=np.float64)
    if np.allclose(a, np.swapaxes(a, -1, -2)):
        w, v = np.linalg.eigh(a)
        return (v * np.exp(w)[..., None, :]) @ np.swapaxes(v, -1, -2)
    # nilpotent strictly upper-triangular samples: the series ends
    out, term = np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy(), a.copy()
    for k in range(2, a.shape[-1] + 2):
        out = out + term
        term = term @ a / k
    return out


def _sym(r, *shape):
    b = 0.6 * r.standard_normal(shape)
    return (b + np.swapaxes(b, -1, -2)) / 2


composite("linalg_matrix_exp", _expm_reference, samples=lambda: [
    ((_sym(_rng(40), 3, 3),), {}), ((_sym(_rng(41), 2, 2, 2) * 3,), {}),
    ((np.triu(_rng(42).standard_normal((3, 3)), 1),), {})])(matrix_exp)


# ---- cond ----------------------------------------------------------------------------------------


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number of A in the norm p: with p None, 2 or -2, the ratio of its largest
    and smallest singular values (or their inverse for -2); with 'fro', 'nuc', inf, -inf, 1 or
    -1, matrix_norm(A, p) * matrix_norm(inv(A), p) (A square and invertible).

    Example:
        >>> import singa_tensor as st
        >>> round(st.linalg.cond(st.tensor([[2.0, 0.0], [0.0, 0.5]])).item(), 4)
        4.0
    """
    if p is None or p in (2, -2):
        _check_matrix("linalg.cond", A, square=False)
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return small / big if p == -2 else big / small
    if p not in ("fro", "nuc", math.inf, -math.inf, 1, -1):
        raise ValueError(f"linalg.cond: p must be None, 2, -2, 'fro', 'nuc', inf, -inf, 1 or -1, "
                         f"got {p!r}")
    _check_matrix("linalg.cond", A)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def _cond_reference(a, p=None):
    return np.linalg.cond(a, p)


composite("linalg_cond", _cond_reference, samples=lambda: [
    ((_wellcond(_rng(43), 3, 3),), {}), ((_wellcond(_rng(44), 2, 3, 3), "fro"), {}),
    ((_wellcond(_rng(45), 3, 3), 1), {}), ((_wellcond(_rng(46), 3, 3), -2), {})])(cond)


# ---- tensorinv, tensorsolve ---------------------------------------------------------------------


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of A seen as a linear map from its first `ind` dims to the rest: the result
    X, of shape A.shape[ind:] + A.shape[:ind], satisfies tensordot(X, A, ind) = identity.

    Example:
        >>> import singa_tensor as st
        >>> a = st.eye(4).reshape(4, 2, 2)
        >>> st.linalg.tensorinv(a, ind=1).shape
        (2, 2, 4)
    """
    if A.__class__ is not Tensor:
        raise TypeError(f"linalg.tensorinv: A must be a Tensor, got {type(A).__name__}")
    if isinstance(ind, bool) or not isinstance(ind, int) or ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive int, got {ind!r}")
    out_shape, in_shape = A.shape[:ind], A.shape[ind:]
    rows, cols = math.prod(out_shape), math.prod(in_shape)
    if rows != cols:
        raise ValueError(f"linalg.tensorinv: the product of the first {ind} dims "
                         f"({rows}) must equal the product of the others ({cols})")
    return inv(A.reshape(rows, cols)).reshape(*in_shape, *out_shape)


composite("linalg_tensorinv", lambda a, ind=2: np.linalg.tensorinv(a, ind), samples=lambda: [
    ((_wellcond(_rng(47), 4, 4).reshape(4, 2, 2), 1), {}),
    ((_wellcond(_rng(48), 6, 6).reshape(2, 3, 6),), {})])(tensorinv)


def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B: the dims `dims` of A are moved to the end first, and
    A's leading dims (those of B's shape) index the equations.

    Example:
        >>> import singa_tensor as st
        >>> a = st.eye(6).reshape(6, 2, 3)
        >>> st.linalg.tensorsolve(a, st.ones(6)).shape
        (2, 3)
    """
    if A.__class__ is not Tensor or B.__class__ is not Tensor:
        raise TypeError("linalg.tensorsolve: A and B must be Tensors")
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        rest = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*rest, *dims)
    x_shape = A.shape[B.ndim:]
    if tuple(A.shape[:B.ndim]) != tuple(B.shape):
        raise ValueError(f"linalg.tensorsolve: A's leading dims {tuple(A.shape[:B.ndim])} "
                         f"must equal B's shape {tuple(B.shape)}")
    rows, cols = math.prod(B.shape), math.prod(x_shape)
    if rows != cols:
        raise ValueError(f"linalg.tensorsolve: {rows} equations for {cols} unknowns; A must "
                         f"be square as a map")
    return solve(A.reshape(rows, cols), B.reshape(rows, 1)).reshape(*x_shape)


composite("linalg_tensorsolve", lambda a, b, dims=None: np.linalg.tensorsolve(a, b, dims),
          samples=lambda: [((_wellcond(_rng(49), 6, 6).reshape(6, 2, 3),
                             _rng(50).standard_normal(6)), {})])(tensorsolve)


# ---- vander, householder_product --------------------------------------------------------------


def vander(x: Tensor, N: int | None = None) -> Tensor:
    """The Vandermonde matrix of the last dim of x with increasing powers: column j is x**j,
    for j < N (default: x's length), as torch.linalg.vander.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.vander(st.tensor([1.0, 2.0, 3.0])).tolist()
        [[1.0, 1.0, 1.0], [1.0, 2.0, 4.0], [1.0, 3.0, 9.0]]
    """
    if x.__class__ is not Tensor:
        raise TypeError(f"linalg.vander: x must be a Tensor, got {type(x).__name__}")
    if x.ndim < 1:
        raise ValueError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"linalg.vander: N must be a non-negative int, got {N!r}")
    if n == 0:
        return _cr.zeros(*x.shape, 0, dtype=x.dtype, device=x.device)
    cols = [x * 0 + 1]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    from .shape import stack

    return stack(cols, -1)


composite("linalg_vander", lambda x, N=None: np.vander(x, N, increasing=True)
          if np.ndim(x) == 1 else np.stack([np.vander(r, N, increasing=True) for r in x]),
          samples=lambda: [((_rng(51).standard_normal(4),), {}),
                           ((_rng(52).standard_normal((2, 3)), 5), {})])(vander)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^T, where v_i is column i
    of A below the diagonal with an implicit 1 on it (LAPACK's orgqr; A is m x n, m >= n >= k).

    Example:
        >>> import singa_tensor as st
        >>> q = st.linalg.householder_product(st.zeros(3, 2), st.zeros(2))
        >>> q.tolist()
        [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    """
    _check_matrix("linalg.householder_product", A, square=False)
    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if m < n or n < k:
        raise ValueError(f"linalg.householder_product: expected rows >= columns >= len(tau), "
                         f"got A of shape {A.shape} and tau of shape {tau.shape}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ValueError(f"linalg.householder_product: tau's batch dims {tau.shape[:-1]} "
                         f"must equal A's {A.shape[:-2]}")
    rows = _cr.arange(m, device=A.device).reshape(m, 1)
    cols = _cr.arange(n, device=A.device).reshape(1, n)
    below = (rows > cols).to(A.dtype)
    on = (rows == cols).to(A.dtype)
    v_all = A * below + on  # the reflectors' vectors as columns
    q = _eye(m, A)[:, :n]
    q = q.expand(*A.shape[:-2], m, n) if A.ndim > 2 else q
    for i in reversed(range(k)):
        v = v_all[..., :, i:i + 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        q = q - t * matmul(v, matmul(v.mT, q))
    return q


def _orgqr_reference(a, tau):
    a = np.asarray(a, dtype=np.float64)
    m, n = a.shape[-2:]
    q = np.eye(m)[:, :n]
    for i in reversed(range(tau.shape[-1])):
        v = np.zeros(m)
        v[i] = 1.0
        v[i + 1:] = a[i + 1:, i]
        q = q - tau[i] * np.outer(v, v @ q)
    return q


composite("linalg_householder_product", _orgqr_reference, samples=lambda: [
    ((_rng(53).standard_normal((4, 3)), _rng(54).uniform(0.5, 1.5, 3)), {}),
    ((_rng(55).standard_normal((3, 3)), _rng(56).uniform(0.5, 1.5, 2)), {})],
    twice_differentiable=True)(householder_product)


# ---- the _ex variants -------------------------------------------------------------------------


class InvEx(NamedTuple):
    inverse: Tensor
    info: Tensor


class SolveEx(NamedTuple):
    result: Tensor
    info: Tensor


def _info(op: str, A: Tensor, check_errors: bool) -> Tensor:
    """Per matrix: 0 where A is invertible, else the (1-based) order of its first zero pivot
    (its numerical rank + 1, as LAPACK's getrf reports)."""
    a = A.detach().cpu().to(_dt.float64).numpy().reshape(-1, A.shape[-2], A.shape[-1])
    info = np.zeros(len(a), dtype=np.int32)
    for i, m in enumerate(a):
        rank = np.linalg.matrix_rank(m) if np.isfinite(m).all() else 0
        if rank < m.shape[-1]:
            info[i] = rank + 1
    if check_errors and info.any():
        raise RuntimeError(f"{op}: the input is singular (info = {int(info.max())})")
    return _cr.tensor(info.reshape(A.shape[:-2]), dtype=_dt.int32, device=A.device)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvEx:
    """(inverse, info): the inverse where info is 0; for a singular matrix info > 0 and its
    inverse is not meaningful (check_errors=True raises instead).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.inv_ex(st.zeros(2, 2)).info.item()
        1
    """
    _check_matrix("linalg.inv_ex", A)
    info = _info("linalg.inv_ex", A, check_errors)
    if bool(info.any().item()):
        nan = _cr.full(tuple(A.shape), float("nan"), dtype=A.dtype, device=A.device)
        ok = (info == 0).reshape(*info.shape, 1, 1)
        safe = A * ok.to(A.dtype) + _eye(A.shape[-1], A) * (~ok).to(A.dtype)
        from .elementwise import where

        return InvEx(where(ok, inv(safe), nan), info)
    return InvEx(inv(A), info)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> SolveEx:
    """(result, info) of solve(A, B): info > 0 marks a singular A, whose result is NaN
    (check_errors=True raises instead).

    Example:
        >>> import singa_tensor as st
        >>> r = st.linalg.solve_ex(2 * st.eye(2), st.ones(2))
        >>> r.result.tolist(), r.info.item()
        ([0.5, 0.5], 0)
    """
    _check_matrix("linalg.solve_ex", A)
    info = _info("linalg.solve_ex", A, check_errors)
    if bool(info.any().item()):
        ok = (info == 0).reshape(*info.shape, 1, 1)
        safe = A * ok.to(A.dtype) + _eye(A.shape[-1], A) * (~ok).to(A.dtype)
        result = solve(safe, B, left=left)
        keep = (info == 0).reshape(*info.shape, *([1] * (result.ndim - info.ndim)))
        from .elementwise import where

        return SolveEx(where(keep, result, result * float("nan")), info)
    return SolveEx(solve(A, B, left=left), info)


__all__: list[str] = []  # reached as st.linalg.<name> (singa_tensor/linalg.py)
