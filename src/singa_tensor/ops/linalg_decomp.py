"""Matrix decompositions: inv, det, slogdet, solve, cholesky, qr, eigh, svd and pinv are
primitives (solve_triangular and logdet compose them); ops/linalg_compose.py builds norms,
lstsq, matrix_rank, matrix_power, cross and multi_dot on them. `singa_tensor.linalg` is their
public namespace.

The factorisations are LAPACK's, reached through numpy.linalg on host arrays: a tensor on
another device is copied to the host, factorised there and its results copied back (there
are no device kernels for them). Every op takes leading batch dimensions and computes in
float32 or float64.

Backward formulas are written with Tensor ops, so they are differentiable again. Those of eigh
and svd divide by differences of eigenvalues (singular values): they hold for distinct values
and are infinite or NaN otherwise. cholesky and eigh read one triangle of their input (as
LAPACK does), and their gradient is that of the function they compute: it lies in the
triangle that was read. For an input built symmetric (B + B.mT, B @ B.mT) the gradient that
reaches B is the same as that of the symmetric convention.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import (
    OpSpec,
    apply,
    bind_method,
    broadcast_shapes,
    check_same_device,
    composite,
    register,
)
from .elementwise import eq, log, reciprocal, where
from .layout import sum_to, transpose
from .linalg import matmul
from .masks import tril, triu
from .shape import cat, narrow, squeeze, unsqueeze


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (a singular matrix, a matrix that is not
    positive-definite, an iteration that did not converge).

    Example:
        >>> import singa_tensor as st
        >>> try:
        ...     st.linalg.inv(st.zeros(2, 2))
        ... except st.linalg.LinAlgError as e:
        ...     print(e)
        linalg.inv: the input is singular (a zero pivot in its LU factorisation)
    """


# ---- checks and host transfer --------------------------------------------------------------------


def _check_matrix(op: str, a, name: str = "A", square: bool = True) -> Tensor:
    if a.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(a).__name__}")
    if a.dtype is not _dt.float32 and a.dtype is not _dt.float64:
        raise TypeError(f"{op}: expected a float32 or float64 tensor as {name}, got "
                        f"{a.dtype.name}")
    if a.ndim < 2:
        raise ValueError(f"{op}: {name} must have at least 2 dimensions, got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: {name} must be batches of square matrices, but they are "
                         f"{a.shape[-2]} by {a.shape[-1]} matrices (shape {a.shape})")
    return a


def _host(x: Tensor) -> np.ndarray:
    """x's values on the host (a view on the CPU, a copy from another device)."""
    return x._numpy()


def _back(a: np.ndarray, like: Tensor, dtype=None) -> Tensor:
    """Host array a as a new tensor on like's device, in like's dtype unless told."""
    dtype = dtype or like.dtype
    return _cr.tensor(np.array(a, dtype=dtype.np, order="C"), dtype=dtype,
                      device=like._device)


def _lapack(op: str, what: str, fn, *args, **kwargs):
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{op}: {what}") from None


def _mT(x: Tensor) -> Tensor:
    return transpose(x, -2, -1)


def _eye(n: int, like: Tensor) -> Tensor:
    return _cr.eye(n, dtype=like.dtype, device=like._device)


def _diag_embed(v: Tensor) -> Tensor:
    return unsqueeze(v, -1) * _eye(v.shape[-1], v)


def _diag_part(x: Tensor) -> Tensor:
    """x with everything off its main diagonal zeroed."""
    return x * _eye(x.shape[-1], x)


def _triangle_grad(s: Tensor, upper: bool = False) -> Tensor:
    """The gradient of a function of the symmetric matrix read from A's lower (upper)
    triangle, given s, the function's gradient at that symmetric matrix."""
    return (triu if upper else tril)(s + _mT(s)) - _diag_part(s)


def _symmetric(a: Tensor, upper: bool = False) -> Tensor:
    """The symmetric matrix that A's lower (upper) triangle stands for."""
    t = triu(a) if upper else tril(a)
    return t + _mT(t) - _diag_part(t)


def _safe_reciprocal(e: Tensor) -> Tensor:
    """1 / e where e != 0, else 0 (the diagonal of the eigenvalue-difference matrices)."""
    return reciprocal(where(eq(e, 0.0), math.inf, e))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _spd(r: np.random.Generator, *shape) -> np.ndarray:
    """A well-conditioned symmetric positive-definite batch of n x n matrices."""
    n = shape[-1]
    b = r.standard_normal(shape)
    return b @ np.swapaxes(b, -1, -2) / n + np.eye(n)


def _wellcond(r: np.random.Generator, *shape) -> np.ndarray:
    """A well-conditioned square batch (the identity plus a small random part)."""
    return np.eye(shape[-1]) * 2.0 + 0.5 * r.standard_normal(shape)


# ---- inv, det, slogdet ---------------------------------------------------------------------------


@register
class Inv(OpSpec):
    name = "linalg_inv"

    @staticmethod
    def forward(ctx, a):
        y = _back(_lapack("linalg.inv", "the input is singular (a zero pivot in its LU "
                          "factorisation)", np.linalg.inv, _host(a)), a)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        yt = _mT(y)
        return (-matmul(matmul(yt, g), yt),)

    @staticmethod
    def reference(a):
        return np.linalg.inv(a)

    @staticmethod
    def samples():
        r = _rng(20)
        return [((_wellcond(r, 3, 3),), {}), ((_wellcond(r, 2, 2, 2),), {})]


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix in A (shape (..., n, n)); LinAlgError if one is
    singular.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.inv(st.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    return apply(Inv, _check_matrix("linalg.inv", A))


Inv.fn = staticmethod(inv)


@register
class Det(OpSpec):
    name = "linalg_det"

    @staticmethod
    def forward(ctx, a):
        d = _back(np.linalg.det(_host(a)), a)
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved_tensors  # d * inv(A)^T: A must be invertible where it is asked
        return (unsqueeze(unsqueeze(g * d, -1), -1) * _mT(inv(a)),)

    @staticmethod
    def reference(a):
        return np.linalg.det(a)

    @staticmethod
    def samples():
        r = _rng(21)
        return [((_wellcond(r, 3, 3),), {}), ((_wellcond(r, 2, 2, 2),), {})]


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix in A (shape (..., n, n) -> (*)).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.det(st.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
        -2.0
    """
    return apply(Det, _check_matrix("linalg.det", A))


Det.fn = staticmethod(det)


class SignLogAbsDet(NamedTuple):
    """What slogdet returns: the sign of the determinant and the log of its absolute value."""

    sign: Tensor
    logabsdet: Tensor


@register
class Slogdet(OpSpec):
    name = "linalg_slogdet"

    @staticmethod
    def forward(ctx, a):
        sign, logabs = np.linalg.slogdet(_host(a))
        sign, logabs = _back(sign, a), _back(logabs, a)
        ctx.mark_non_differentiable(sign)
        ctx.save_for_backward(a)
        return sign, logabs

    @staticmethod
    def backward(ctx, _g_sign, g):
        (a,) = ctx.saved_tensors
        return (unsqueeze(unsqueeze(g, -1), -1) * _mT(inv(a)),)

    @staticmethod
    def reference(a):
        return tuple(np.linalg.slogdet(a))

    @staticmethod
    def samples():
        r = _rng(22)
        return [((_wellcond(r, 3, 3),), {}), ((-_wellcond(r, 2, 3, 3),), {})]


def slogdet(A: Tensor) -> SignLogAbsDet:
    """(sign, logabsdet) of the determinant of each square matrix in A: accurate where det
    itself would over- or underflow. The gradient flows through logabsdet.

    Example:
        >>> import singa_tensor as st
        >>> s = st.linalg.slogdet(st.tensor([[-2.0, 0.0], [0.0, 3.0]]))
        >>> s.sign.item(), round(s.logabsdet.item(), 4)
        (-1.0, 1.7918)
    """
    return SignLogAbsDet(*apply(Slogdet, _check_matrix("linalg.slogdet", A)))


Slogdet.fn = staticmethod(slogdet)


def logdet(A: Tensor) -> Tensor:
    """log(det(A)) for each square matrix: NaN where the determinant is negative, -inf where
    it is zero.

    Example:
        >>> import singa_tensor as st
        >>> round(st.logdet(st.tensor([[2.0, 0.0], [0.0, 3.0]])).item(), 4)
        1.7918
    """
    sign, logabs = slogdet(_check_matrix("logdet", A))
    return logabs + log(sign)


# ---- solve ---------------------------------------------------------------------------------------


@register
class Solve(OpSpec):
    """X with A @ X = B for matrices B (batch dims broadcast); the public function also takes
    vectors."""

    name = "linalg_solve"

    @staticmethod
    def forward(ctx, a, b):
        x = _back(_lapack("linalg.solve", "the input is singular (a zero pivot in its LU "
                          "factorisation)", np.linalg.solve, _host(a), _host(b)), a)
        ctx.save_for_backward(a, x)
        ctx.shapes = a._shape, b._shape
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        sa, sb = ctx.shapes
        gb = solve(_mT(a), g)
        ga = -matmul(gb, _mT(x))
        return sum_to(ga, sa), sum_to(gb, sb)

    @staticmethod
    def reference(a, b, left=True):
        if not left:
            return np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)),
                               -1, -2)
        if b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]):
            return np.linalg.solve(a, b[..., None])[..., 0]
        return np.linalg.solve(a, b)

    @staticmethod
    def samples():
        r = _rng(23)
        n = r.standard_normal
        return [((_wellcond(r, 3, 3), n((3, 2))), {}),
                ((_wellcond(r, 3, 3), n((3,))), {}),
                ((_wellcond(r, 2, 3, 3), n((2, 3))), {}),
                ((_wellcond(r, 2, 1, 3, 3), n((4, 3, 1))), {}),
                ((_wellcond(r, 3, 3), n((2, 3))), {"left": False})]


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution X of A @ X = B (left=False: X @ A = B) for square, invertible A (shape
    (..., n, n)); B is (..., n, k), or (..., n) and then a batch of vectors. Batch dims broadcast;
    LinAlgError if A is singular.

    Example:
        >>> import singa_tensor as st
        >>> A = st.tensor([[3.0, 1.0], [1.0, 2.0]])
        >>> st.linalg.solve(A, st.tensor([9.0, 8.0])).tolist()
        [2.0, 3.0]
    """
    op = "linalg.solve"
    _check_matrix(op, A)
    if B.__class__ is not Tensor:
        raise TypeError(f"{op}: B must be a Tensor, got {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise TypeError(f"{op}: A and B must have the same dtype, got {A.dtype.name} and "
                        f"{B.dtype.name}")
    check_same_device(op, A, B)
    n = A.shape[-1]
    if not left:
        if B.ndim < 2 or B.shape[-1] != n:
            raise ValueError(f"{op}: with left=False, B must be (..., k, {n}) for A of shape "
                             f"{A.shape}, got {B.shape}")
        return _mT(solve(_mT(A), _mT(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if B.ndim < 1 or (B.shape[-1] if vector else B.shape[-2]) != n:
        raise ValueError(f"{op}: A of shape {A.shape} and B of shape {B.shape} do not match: "
                         f"B must have {n} rows")
    b = unsqueeze(B, -1) if vector else B
    broadcast_shapes(A.shape[:-2], b.shape[:-2], op=op)
    x = apply(Solve, A, b)
    return squeeze(x, -1) if vector else x


Solve.fn = staticmethod(solve)


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """The solution X of A @ X = B (left=False: X @ A = B) for triangular A: only A's upper
    (upper=True) or lower triangle is read, and with unitriangular its diagonal is taken as
    ones. B is (..., n, k); batch dims broadcast.

    Example:
        >>> import singa_tensor as st
        >>> A = st.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> st.linalg.solve_triangular(A, st.tensor([[2.0], [3.0]]), upper=False).tolist()
        [[1.0], [2.0]]
    """
    op = "linalg.solve_triangular"
    _check_matrix(op, A)
    if B.__class__ is not Tensor:
        raise TypeError(f"{op}: B must be a Tensor, got {type(B).__name__}")
    if B.ndim < 2:
        raise ValueError(f"{op}: B must have at least 2 dimensions, got shape {B.shape}")
    t = triu(A) if upper else tril(A)
    if unitriangular:
        t = t - _diag_part(t) + _eye(A.shape[-1], A)
    return solve(t, B, left=left)


def _solve_triangular_reference(a, b, upper, left=True, unitriangular=False):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t - t * np.eye(a.shape[-1]) + np.eye(a.shape[-1])
    return Solve.reference(t, b, left=left)


def _solve_triangular_samples():
    r = _rng(24)
    a, b = _wellcond(r, 3, 3), r.standard_normal((3, 2))
    return [((a, b), {"upper": True}), ((a, b), {"upper": False}),
            ((a, r.standard_normal((2, 3))), {"upper": True, "left": False}),
            ((_wellcond(r, 2, 3, 3), b), {"upper": False, "unitriangular": True})]


composite("linalg_solve_triangular", _solve_triangular_reference,
          samples=_solve_triangular_samples)(solve_triangular)


# ---- cholesky ------------------------------------------------------------------------------------


@register
class Cholesky(OpSpec):
    """The lower factor L of A = L @ L.mT, reading A's lower triangle."""

    name = "linalg_cholesky"

    @staticmethod
    def forward(ctx, a):
        low = _lapack("linalg.cholesky", "the input is not positive-definite", np.linalg.cholesky,
                      np.tril(_host(a)))
        out = _back(low, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (low,) = ctx.saved_tensors
        p = tril(matmul(_mT(low), g))
        p = p - 0.5 * _diag_part(p)
        li = inv(low)
        return (_triangle_grad(matmul(matmul(_mT(li), p), li)),)

    @staticmethod
    def reference(a, upper=False):
        if upper:
            return np.swapaxes(np.linalg.cholesky(np.swapaxes(np.triu(a), -1, -2)), -1, -2)
        return np.linalg.cholesky(np.tril(a))

    @staticmethod
    def samples():
        r = _rng(25)
        return [((_spd(r, 3, 3),), {}), ((_spd(r, 2, 3, 3),), {"upper": True})]


def cholesky(A: Tensor, upper: bool = False) -> Tensor:
    """The Cholesky factor of each symmetric positive-definite matrix in A: lower L with
    A = L @ L.mT, or with upper=True upper U with A = U.mT @ U. Only that triangle of A is
    read; LinAlgError if A is not positive-definite. Also st.cholesky and Tensor.cholesky.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.cholesky(st.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    _check_matrix("linalg.cholesky", A)
    if upper:
        return _mT(apply(Cholesky, _mT(A)))
    return apply(Cholesky, A)


Cholesky.fn = staticmethod(cholesky)


# ---- qr ------------------------------------------------------------------------------------------


class QR(NamedTuple):
    """What qr returns."""

    Q: Tensor
    R: Tensor


def _qr_grad_tall(q: Tensor, r: Tensor, gq: Tensor, gr: Tensor) -> Tensor:
    """The gradient of A = Q R for m >= n (reduced factors)."""
    qdq = matmul(_mT(q), gq)
    rdr = matmul(r, _mT(gr))
    m = tril(qdq - _mT(qdq) + rdr - _mT(rdr))
    rit = _mT(inv(r))
    return matmul(q, gr + matmul(m, rit)) + matmul(gq - matmul(q, qdq), rit)


@register
class Qr(OpSpec):
    name = "linalg_qr"

    @staticmethod
    def forward(ctx, a, mode):
        q, r = np.linalg.qr(_host(a), mode="complete" if mode == "complete" else "reduced")
        q, r = _back(q, a), _back(r, a)
        ctx.mode, ctx.rows, ctx.cols = mode, a.shape[-2], a.shape[-1]
        ctx.save_for_backward(a, q, r)
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        a, q, r = ctx.saved_tensors
        m, n = ctx.rows, ctx.cols
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr: the derivative depends on Q, which mode='r' does "
                               "not return; use mode='reduced' to differentiate")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: the derivative of mode='complete' is not defined "
                               "when A has more rows than columns")
        if m >= n:
            return (_qr_grad_tall(q, r, gq, gr),)
        y = narrow(a, -1, m, n - m)
        u, gu = narrow(r, -1, 0, m), narrow(gr, -1, 0, m)
        gv = narrow(gr, -1, m, n - m)
        gx = _qr_grad_tall(q, u, gq + matmul(y, _mT(gv)), gu)
        return (cat([gx, matmul(q, gv)], -1),)

    @staticmethod
    def reference(a, mode="reduced"):
        q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
        return (np.zeros((0,), a.dtype) if mode == "r" else q), r

    @staticmethod
    def samples():
        r = _rng(26)
        n = r.standard_normal
        return [((n((4, 3)),), {}), ((n((2, 3, 3)),), {}), ((n((2, 4)),), {}),
                ((n((3, 3)),), {"mode": "complete"}), ((n((2, 4)),), {"mode": "complete"})]


def qr(A: Tensor, mode: str = "reduced") -> QR:
    """The QR factorisation A = Q @ R of each (m x n) matrix in A, Q with orthonormal columns
    and R upper triangular. mode: "reduced" (Q is m x k, R k x n, k = min(m, n)), "complete"
    (Q is m x m) or "r" (R only; Q is empty).

    Example:
        >>> import singa_tensor as st
        >>> q, r = st.linalg.qr(st.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> [round(v, 4) for v in r.abs().diagonal().tolist()]
        [5.0, 0.4]
    """
    _check_matrix("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = apply(Qr, A, mode)
    if mode == "r":
        q = _cr.zeros(0, dtype=A.dtype, device=A._device)
    return QR(q, r)


Qr.fn = staticmethod(qr)


# ---- eigh ----------------------------------------------------------------------------------------


class Eigh(NamedTuple):
    """What eigh returns: ascending eigenvalues and the eigenvectors as columns."""

    eigenvalues: Tensor
    eigenvectors: Tensor


@register
class EighSpec(OpSpec):
    """Eigenvalues and eigenvectors of the symmetric matrix read from A's lower triangle."""

    name = "linalg_eigh"

    @staticmethod
    def forward(ctx, a, uplo):
        w, v = _lapack("linalg.eigh", "the eigenvalue iteration did not converge",
                       np.linalg.eigh, _host(a), UPLO=uplo)
        w, v = _back(w, a), _back(v, a)
        ctx.upper = uplo == "U"
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        w, v = ctx.saved_tensors
        x = matmul(_mT(v), gv)
        f = _safe_reciprocal(unsqueeze(w, -2) - unsqueeze(w, -1))  # 1 / (w_j - w_i)
        inner = (x - _mT(x)) * 0.5 * f + _diag_embed(gw)
        return (_triangle_grad(matmul(matmul(v, inner), _mT(v)), ctx.upper),)

    @staticmethod
    def reference(a, UPLO="L"):
        return tuple(np.linalg.eigh(a, UPLO=UPLO))

    @staticmethod
    def samples():
        r = _rng(27)
        return [((_spd(r, 3, 3),), {}), ((_spd(r, 2, 3, 3),), {"UPLO": "U"})]


def _check_uplo(op: str, uplo) -> None:
    if uplo not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {uplo!r}")


def eigh(A: Tensor, UPLO: str = "L") -> Eigh:
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of each symmetric matrix
    in A, read from its lower (UPLO="L") or upper ("U") triangle. Gradients hold for distinct
    eigenvalues.

    Example:
        >>> import singa_tensor as st
        >>> w, v = st.linalg.eigh(st.tensor([[2.0, 1.0], [1.0, 2.0]]))
        >>> [round(x, 4) for x in w.tolist()]
        [1.0, 3.0]
    """
    _check_matrix("linalg.eigh", A)
    _check_uplo("linalg.eigh", UPLO)
    return Eigh(*apply(EighSpec, A, UPLO))


EighSpec.fn = staticmethod(eigh)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of each symmetric matrix in A, as in eigh.

    Example:
        >>> import singa_tensor as st
        >>> [round(x, 4) for x in st.linalg.eigvalsh(st.tensor([[2.0, 1.0], [1.0, 2.0]])).tolist()]
        [1.0, 3.0]
    """
    _check_matrix("linalg.eigvalsh", A)
    _check_uplo("linalg.eigvalsh", UPLO)
    return eigh(A, UPLO).eigenvalues


# ---- svd -----------------------------------------------------------------------------------------


class SVD(NamedTuple):
    """What svd returns: A = U @ diag(S) @ Vh, S descending."""

    U: Tensor
    S: Tensor
    Vh: Tensor


@register
class Svd(OpSpec):
    name = "linalg_svd"

    @staticmethod
    def forward(ctx, a, full_matrices):
        u, s, vh = _lapack("linalg.svd", "the SVD iteration did not converge", np.linalg.svd,
                           _host(a), full_matrices=full_matrices)
        u, s, vh = _back(u, a), _back(s, a), _back(vh, a)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        if u.shape[-1] != k:  # full_matrices: the extra columns do not reach A's gradient
            u, gu = narrow(u, -1, 0, k), narrow(gu, -1, 0, k)
        if vh.shape[-2] != k:
            vh, gvh = narrow(vh, -2, 0, k), narrow(gvh, -2, 0, k)
        v, gv = _mT(vh), _mT(gvh)
        s2 = s * s
        f = _safe_reciprocal(unsqueeze(s2, -2) - unsqueeze(s2, -1))  # 1 / (s_j^2 - s_i^2)
        utgu, vtgv = matmul(_mT(u), gu), matmul(_mT(v), gv)
        j = f * (utgu - _mT(utgu)) * unsqueeze(s, -2)
        kk = unsqueeze(s, -1) * (f * (vtgv - _mT(vtgv)))
        inner = j + kk + _diag_embed(gs)
        out = matmul(matmul(u, inner), vh)
        sinv = reciprocal(s)
        out = out + matmul((gu - matmul(u, utgu)) * unsqueeze(sinv, -2), vh)
        out = out + matmul(u, (gvh - matmul(matmul(gvh, v), vh)) * unsqueeze(sinv, -1))
        return (out,)

    @staticmethod
    def reference(a, full_matrices=True):
        return tuple(np.linalg.svd(a, full_matrices=full_matrices))

    @staticmethod
    def samples():
        r = _rng(28)
        n = r.standard_normal
        return [((n((4, 3)),), {"full_matrices": False}), ((n((2, 3, 3)),), {}),
                ((n((2, 4)),), {"full_matrices": False})]


def svd(A: Tensor, full_matrices: bool = True) -> SVD:
    """The singular value decomposition A = U @ diag(S) @ Vh of each (m x n) matrix in A, S
    descending. full_matrices=False gives the reduced U (m x k) and Vh (k x n), k = min(m, n).
    Gradients hold for distinct, non-zero singular values; with full_matrices the extra
    columns of U and rows of Vh get none.

    Example:
        >>> import singa_tensor as st
        >>> u, s, vh = st.linalg.svd(st.tensor([[3.0, 0.0], [0.0, -4.0]]))
        >>> s.tolist()
        [4.0, 3.0]
    """
    _check_matrix("linalg.svd", A, square=False)
    return SVD(*apply(Svd, A, bool(full_matrices)))


Svd.fn = staticmethod(svd)


def svdvals(A: Tensor) -> Tensor:
    """The singular values of each matrix in A, descending.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.svdvals(st.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
        [2.0, 1.0]
    """
    _check_matrix("linalg.svdvals", A, square=False)
    return apply(Svd, A, False)[1]


# ---- pinv, matrix_rank ---------------------------------------------------------------------------


def _tolerances(op: str, a: Tensor, atol, rtol):
    """PyTorch's defaults: rtol = eps * max(m, n) unless atol > 0 is given alone."""
    for name, v in (("atol", atol), ("rtol", rtol)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"{op}: {name} must be a number or None, got {type(v).__name__}")
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else (
            float(np.finfo(a.dtype.np).eps) * max(a.shape[-2], a.shape[-1]))
    return float(atol or 0.0), float(rtol)


def _np_pinv(a: np.ndarray, atol: float, rtol: float, hermitian: bool) -> np.ndarray:
    if hermitian:
        w, v = np.linalg.eigh(a)
        cut = np.maximum(atol, rtol * np.abs(w).max(-1, initial=0.0))[..., None]
        winv = np.where(np.abs(w) > cut, 1.0 / np.where(w == 0, 1, w), 0.0)
        return (v * winv[..., None, :]) @ np.swapaxes(v, -1, -2)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    cut = np.maximum(atol, rtol * s.max(-1, initial=0.0))[..., None]
    sinv = np.where(s > cut, 1.0 / np.where(s == 0, 1, s), 0.0)
    return (np.swapaxes(vh, -1, -2) * sinv[..., None, :]) @ np.swapaxes(u, -1, -2)


@register
class Pinv(OpSpec):
    """The pseudo-inverse; its gradient is that at constant rank."""

    name = "linalg_pinv"

    @staticmethod
    def forward(ctx, a, atol, rtol, hermitian):
        x = _back(_lapack("linalg.pinv", "the SVD iteration did not converge", _np_pinv,
                          _host(a), atol, rtol, hermitian), a)
        ctx.hermitian = hermitian
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        if ctx.hermitian:  # eigh read the lower triangle: differentiate at that matrix
            a = _symmetric(a)
        m, n = a.shape[-2], a.shape[-1]
        xt, gt = _mT(x), _mT(g)
        p = _eye(m, a) - matmul(a, x)  # I - A A+
        q = _eye(n, a) - matmul(x, a)  # I - A+ A
        ga = (-matmul(matmul(xt, g), xt) + matmul(matmul(p, gt), matmul(x, xt))
              + matmul(matmul(xt, x), matmul(gt, q)))
        return (_triangle_grad(ga) if ctx.hermitian else ga,)

    @staticmethod
    def reference(a, *, atol=None, rtol=None, hermitian=False):
        eps = np.finfo(a.dtype).eps * max(a.shape[-2:])
        rtol = rtol if rtol is not None else (0.0 if atol else eps)
        return _np_pinv(a, atol or 0.0, rtol, hermitian)

    @staticmethod
    def samples():
        r = _rng(29)
        n = r.standard_normal
        return [((n((4, 3)),), {}), ((n((2, 2, 4)),), {}), ((_spd(r, 3, 3),), {"hermitian": True})]


def pinv(A: Tensor, *, atol: float | None = None, rtol: float | None = None,
         hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix in A; singular values at or below
    max(atol, rtol * largest) count as zero (rtol defaults to eps * max(m, n) unless atol is
    given). hermitian=True reads A as symmetric and uses its eigendecomposition.

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.pinv(st.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    _check_matrix("linalg.pinv", A, square=hermitian)
    atol, rtol = _tolerances("linalg.pinv", A, atol, rtol)
    return apply(Pinv, A, atol, rtol, bool(hermitian))


Pinv.fn = staticmethod(pinv)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """The pseudo-inverse, singular values below rcond times the largest taken as zero
    (linalg.pinv with rtol=rcond).

    Example:
        >>> import singa_tensor as st
        >>> st.pinverse(st.tensor([[4.0]])).tolist()
        [[0.25]]
    """
    return pinv(input, rtol=rcond)


# ---- top-level aliases and Tensor methods --------------------------------------------------------


def inverse(input: Tensor) -> Tensor:
    """The inverse of each square matrix (linalg.inv).

    Example:
        >>> import singa_tensor as st
        >>> st.inverse(st.tensor([[4.0]])).tolist()
        [[0.25]]
    """
    return inv(input)


for _fn in (det, inverse, logdet, slogdet, pinverse, cholesky):
    bind_method(_fn)

# the top-level names (st.det ...); the rest of the namespace is singa_tensor.linalg
__all__ = ["cholesky", "det", "inverse", "logdet", "pinverse", "slogdet"]
