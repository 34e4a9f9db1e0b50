"""Linear-algebra functions composed of the decompositions in ops/linalg_decomp.py and of
matrix products: matrix_rank, lstsq, matrix_power, matrix_norm, vector_norm, cross and
multi_dot (their public namespace is `singa_tensor.linalg`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import broadcast_shapes, check_same_device, composite
from .elementwise import abs as _abs
from .layout import expand
from .linalg import matmul
from .linalg_decomp import (
    _back,
    _check_matrix,
    _eye,
    _host,
    _rng,
    _tolerances,
    _wellcond,
    inv,
    pinv,
    svdvals,
)
from .reduce import amax, amin
from .reduce import sum as _sum
from .reduce_ext import norm as _vnorm
from .shape import movedim, roll, squeeze, unsqueeze


def matrix_rank(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
                hermitian: bool = False) -> Tensor:
    """The number of singular values of each matrix above max(atol, rtol * largest), int64.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.matrix_rank(st.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        1
    """
    _check_matrix("linalg.matrix_rank", A, square=hermitian)
    atol, rtol = _tolerances("linalg.matrix_rank", A, atol, rtol)
    a = _host(A)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    cut = np.maximum(atol, rtol * s.max(-1, initial=0.0))[..., None]
    return _back(np.sum(s > cut, axis=-1), A, _dt.int64)


# ---- lstsq ---------------------------------------------------------------------------------------


class Lstsq(NamedTuple):
    """What lstsq returns (the fields a driver does not compute are empty)."""

    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None
          ) -> Lstsq:
    """The least-squares solution X minimising the 2-norm of A @ X - B, for A (..., m, n) and
    B (..., m, k) (the minimum-norm one where A is rank-deficient), through the
    pseudo-inverse, so it is differentiable. As PyTorch's CPU drivers: rank is computed
    except by "gels", residuals (squared residual norms, for m > n and full rank) except by
    "gelsy" (the default), and singular values by "gelsd" and "gelss".

    Example:
        >>> import singa_tensor as st
        >>> A = st.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> st.linalg.lstsq(A, st.tensor([[1.0], [2.0], [3.0]])).solution.tolist()
        [[1.0], [2.0]]
    """
    op = "linalg.lstsq"
    _check_matrix(op, A, square=False)
    _check_matrix(op, B, name="B", square=False)
    if B.dtype is not A.dtype:
        raise TypeError(f"{op}: A and B must have the same dtype, got {A.dtype.name} and "
                        f"{B.dtype.name}")
    check_same_device(op, A, B)
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise ValueError(f"{op}: driver must be one of {_DRIVERS}, got {driver!r}")
    m, n = A.shape[-2], A.shape[-1]
    if B.shape[-2] != m:
        raise ValueError(f"{op}: A of shape {A.shape} and B of shape {B.shape} do not match: "
                         f"B must have {m} rows")
    batch = broadcast_shapes(A.shape[:-2], B.shape[:-2], op=op)
    _, rtol = _tolerances(op, A, None, rcond)
    x = matmul(pinv(A, rtol=rtol), B)
    empty = _cr.zeros(0, dtype=A.dtype, device=A._device)
    rank = _cr.zeros(0, dtype=_dt.int64, device=A._device)
    if driver != "gels":
        rank = matrix_rank(expand(A, *batch, m, n), rtol=rtol)
    residuals = empty
    if driver != "gelsy" and m > n and bool((matrix_rank(A, rtol=rtol) == n).all().item()):
        residuals = _sum((matmul(A, x) - B) ** 2, -2)
    sv = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty
    return Lstsq(x, residuals, rank, sv)


# ---- matrix_power, norms, cross, multi_dot -------------------------------------------------------


def matrix_power(A: Tensor, n: int) -> Tensor:
    """A multiplied by itself n times (n = 0: the identity, n < 0: the inverse's power), by
    repeated squaring.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.matrix_power(st.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    _check_matrix("linalg.matrix_power", A)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        return expand(_eye(A.shape[-1], A), *A.shape)
    base = inv(A) if n < 0 else A
    n = abs(int(n))
    out = None
    while n:
        if n & 1:
            out = base if out is None else matmul(out, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return out


composite("linalg_matrix_power", np.linalg.matrix_power, samples=lambda: [
    ((_wellcond(_rng(30), 3, 3), 3), {}), ((_wellcond(_rng(31), 2, 2, 2), -2), {}),
    ((_wellcond(_rng(32), 2, 2), 0), {})])(matrix_power)


def _matrix_dims(op: str, a: Tensor, dim) -> tuple:
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{op}: dim must be a 2-tuple of ints, got {dim!r}")
    nd = a.ndim
    for d in dim:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not -nd <= d < nd:
            raise IndexError(f"{op}: dim {d!r} is out of range for a tensor of {nd} dims")
    d0, d1 = dim[0] % nd, dim[1] % nd
    if d0 == d1:
        raise ValueError(f"{op}: dims must be different, got {tuple(dim)}")
    return d0, d1


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """A matrix norm over the two dims `dim`: "fro" (Frobenius), "nuc" (nuclear: the sum of
    singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (max / min absolute
    column sum), inf / -inf (max / min absolute row sum).

    Example:
        >>> import singa_tensor as st
        >>> A = st.tensor([[1.0, -2.0], [3.0, 4.0]])
        >>> st.linalg.matrix_norm(A, 1).item(), st.linalg.matrix_norm(A, float("inf")).item()
        (6.0, 7.0)
    """
    op = "linalg.matrix_norm"
    if dtype is not None and A.__class__ is Tensor:
        A = A.to(_dt.as_dtype(dtype))
    _check_matrix(op, A, square=False)
    d0, d1 = _matrix_dims(op, A, dim)
    if ord == "fro":
        return _vnorm(A, 2, (d0, d1), keepdim)
    if ord == "nuc" or ord in (2, -2):
        s = svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = _sum(s, -1) if ord == "nuc" else (amax if ord == 2 else amin)(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        rows, cols = (d0, d1) if ord in (1, -1) else (d1, d0)
        pick = amax if ord > 0 else amin
        out = pick(_sum(_abs(A), rows, True), cols, True)
        return out if keepdim else squeeze(out, (d0, d1))
    raise ValueError(f"{op}: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")


def _matrix_norm_reference(a, ord="fro", dim=(-2, -1), keepdim=False):
    return np.linalg.norm(a, ord=ord, axis=tuple(dim), keepdims=keepdim)


def _matrix_norm_samples():
    r = _rng(33)
    x = r.standard_normal((2, 3, 4))
    return [((x,), {"ord": o}) for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)] + [
        ((x,), {"ord": "nuc", "dim": (0, 2), "keepdim": True}),
        ((x,), {"ord": 1, "dim": (2, 1), "keepdim": True})]


composite("linalg_matrix_norm", _matrix_norm_reference,
          samples=_matrix_norm_samples)(matrix_norm)


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector ord-norm of x over dim (all elements when dim is None): any number, inf and
    -inf (max / min of abs(x)), 0 (the count of non-zeros).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.vector_norm(st.tensor([[3.0, 4.0], [0.0, 0.0]])).item()
        5.0
    """
    op = "linalg.vector_norm"
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: ord must be a number, got {ord!r}")
    if not (x.dtype.is_floating_point or dtype is not None):
        raise TypeError(f"{op}: expected a floating point tensor, got {x.dtype.name}")
    return _vnorm(x, float(ord), dim, keepdim, dtype=dtype)


def _vector_norm_reference(x, ord=2, dim=None, keepdim=False):
    if dim is None:
        out = np.linalg.norm(x.ravel(), ord=ord)
        return np.reshape(out, (1,) * x.ndim) if keepdim else out
    return np.linalg.norm(x, ord=ord, axis=dim, keepdims=keepdim)


composite("linalg_vector_norm", _vector_norm_reference, samples=lambda: [
    ((_rng(34).standard_normal((2, 3)),), {"ord": o}) for o in (2, 1, 3, math.inf, -math.inf)
] + [((_rng(35).standard_normal((2, 3, 2)),), {"ord": 2, "dim": 1, "keepdim": True})]
)(vector_norm)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along dim (the two inputs broadcast).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.cross(st.tensor([1.0, 0.0, 0.0]), st.tensor([0.0, 1.0, 0.0])).tolist()
        [0.0, 0.0, 1.0]
    """
    op = "linalg.cross"
    for t in (input, other):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__}")
    check_same_device(op, input, other)
    shape = broadcast_shapes(input.shape, other.shape, op=op)
    nd = len(shape)
    if isinstance(dim, bool) or not isinstance(dim, int) or not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim!r} is out of range for {nd} dims")
    if shape[dim] != 3:
        raise ValueError(f"{op}: dimension {dim} must have size 3, got shapes {input.shape} "
                         f"and {other.shape}")
    a, b = expand(input, *shape), expand(other, *shape)
    return roll(a, -1, dim) * roll(b, -2, dim) - roll(a, -2, dim) * roll(b, -1, dim)


composite("linalg_cross", lambda a, b, dim=-1: np.cross(a, b, axis=dim), samples=lambda: [
    ((_rng(36).standard_normal((4, 3)), _rng(37).standard_normal((3,))), {}),
    ((_rng(38).standard_normal((3, 2)), _rng(39).standard_normal((3, 2))), {"dim": 0})]
)(cross)


def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices, in the order of fewest multiplications; the first
    may be a 1-D row vector and the last a 1-D column vector.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.multi_dot([st.ones(2), st.ones(2, 3), st.ones(3)]).item()
        6.0
    """
    op = "linalg.multi_dot"
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"{op}: expected at least 2 tensors, got {len(ts)}")
    for i, t in enumerate(ts):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: argument {i} must be a Tensor, got {type(t).__name__}")
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(ts) - 1)):
            raise ValueError(f"{op}: tensor {i} must be 2-D (only the first and last may be "
                             f"1-D), got shape {t.shape}")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    if first:
        ts[0] = unsqueeze(ts[0], 0)
    if last:
        ts[-1] = unsqueeze(ts[-1], 1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise ValueError(f"{op}: tensors {i} and {i + 1} cannot be multiplied (shapes "
                             f"{ts[i].shape} and {ts[i + 1].shape})")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    out = _chain(ts, dims, _chain_order(dims), 0, len(ts) - 1)
    if first:
        out = squeeze(out, 0)
    if last:
        out = squeeze(out, -1)
    return out


def _chain_order(dims: list) -> dict:
    """The split points of the cheapest parenthesisation (the matrix-chain recurrence)."""
    n = len(dims) - 1
    cost = {(i, i): 0 for i in range(n)}
    split = {}
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            best = None
            for k in range(i, j):
                c = cost[(i, k)] + cost[(k + 1, j)] + dims[i] * dims[k + 1] * dims[j + 1]
                if best is None or c < best:
                    best, split[(i, j)] = c, k
            cost[(i, j)] = best
    return split


def _chain(ts, dims, split, i, j):
    if i == j:
        return ts[i]
    k = split[(i, j)]
    return matmul(_chain(ts, dims, split, i, k), _chain(ts, dims, split, k + 1, j))
