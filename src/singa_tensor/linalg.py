"""singa_tensor.linalg: PyTorch's torch.linalg namespace.

The functions compute in float32 or float64 over leading batch dimensions and are
differentiable. Decompositions run LAPACK through numpy.linalg on the host: tensors on another
device are copied to the host and their results copied back (see ops/linalg_decomp.py for the
gradients and their conditions).

Example:
    >>> import singa_tensor as st
    >>> A = st.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=st.float64)
    >>> round(st.linalg.det(A).item(), 6), st.linalg.norm(st.tensor([3.0, 4.0])).item()
    (8.0, 5.0)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import singa_tensor as st

from .ops.linalg import matmul
from .ops.linalg_compose import (
    Lstsq,
    cross,
    lstsq,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    vector_norm,
)
from .ops.linalg_decomp import (
    QR,
    SVD,
    Eigh,
    LinAlgError,
    SignLogAbsDet,
    _check_matrix,
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
    svdvals,
)
from .ops.linalg_more import (
    InvEx,
    SolveEx,
    cond,
    householder_product,
    inv_ex,
    matrix_exp,
    solve_ex,
    tensorinv,
    tensorsolve,
    vander,
)
from .tensor import Tensor


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """A vector or matrix norm, as PyTorch decides: an int dim (or a 1-D input with ord and
    no dim) gives vector_norm, a 2-tuple dim (or a 2-D input with ord and no dim) gives
    matrix_norm; with neither ord nor dim, the 2-norm of all elements.

    Example:
        >>> import singa_tensor as st
        >>> A = st.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> round(st.linalg.norm(A).item(), 4), st.linalg.norm(A, 1).item()
        (5.4772, 6.0)
    """
    if A.__class__ is not Tensor:
        raise TypeError(f"linalg.norm: input must be a Tensor, got {type(A).__name__}")
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) != 1:
            raise ValueError(f"linalg.norm: dim must be an int or a tuple of 1 or 2 ints, "
                             f"got {dim!r}")
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    raise ValueError(f"linalg.norm: with ord and no dim the input must be 1-D or 2-D, got "
                     f"shape {A.shape}")


class CholeskyEx(NamedTuple):
    """What cholesky_ex returns: the factor and, per matrix, 0 or the order of the first
    leading minor that is not positive-definite."""

    L: Tensor
    info: Tensor


def _first_bad_minor(a: np.ndarray) -> int:
    for k in range(1, a.shape[-1] + 1):
        try:
            np.linalg.cholesky(np.tril(a[:k, :k]))
        except np.linalg.LinAlgError:
            return k
    return 0


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyEx:
    """cholesky that reports failure instead of raising (unless check_errors): info is int32
    of A's batch shape; where it is non-zero, L holds the identity.

    Example:
        >>> import singa_tensor as st
        >>> L, info = st.linalg.cholesky_ex(st.tensor([[[4.0]], [[-1.0]]]))
        >>> L.flatten().tolist(), info.tolist()
        ([2.0, 1.0], [0, 1])
    """
    _check_matrix("linalg.cholesky_ex", A)
    host = A.detach().numpy(force=True)
    if upper:
        host = np.swapaxes(host, -1, -2)
    flat = host.reshape((-1,) + host.shape[-2:])
    info = np.array([_first_bad_minor(m) for m in flat], dtype=np.int32).reshape(
        host.shape[:-2])
    if check_errors and info.any():
        raise LinAlgError(f"linalg.cholesky_ex: the input is not positive-definite (the "
                          f"leading minor of order {int(info[info > 0].flat[0])} is not)")
    ok = st.tensor(info == 0, device=A.device).unsqueeze(-1).unsqueeze(-1)
    eye = st.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    low = cholesky(st.where(ok, A, eye), upper=upper)
    return CholeskyEx(low, st.tensor(info, dtype=st.int32, device=A.device))


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices in A (st.diagonal with matrix-first defaults).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.diagonal(st.eye(2).expand(3, 2, 2)).shape
        (3, 2)
    """
    return st.diagonal(A, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of x and y along dim (the two broadcast).

    Example:
        >>> import singa_tensor as st
        >>> st.linalg.vecdot(st.tensor([1.0, 2.0]), st.tensor([3.0, 4.0])).item()
        11.0
    """
    return (x * y).sum(dim)


__all__ = [
    "CholeskyEx", "LinAlgError", "QR", "SVD", "Eigh", "Lstsq", "SignLogAbsDet", "cholesky",
    "cholesky_ex", "diagonal", "cross", "det",
    "eigh", "eigvalsh", "inv", "lstsq", "matmul", "matrix_norm", "matrix_power",
    "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular",
    "svd", "svdvals", "vecdot", "vector_norm", "InvEx", "SolveEx", "cond",
    "householder_product", "inv_ex", "matrix_exp", "solve_ex", "tensorinv", "tensorsolve",
    "vander",
]
