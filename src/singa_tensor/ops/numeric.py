"""Small numerical composites from PyTorch's top level: differences, trapezoid integration,
covariance and correlation, logit, membership tests, Vandermonde matrices, matrix chains.

Each is a composition of existing ops, so autograd, every device and the registry tests come
from those; the numpy references are numpy's own functions where numpy has them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from . import elementwise as _el
from . import reduce as _re
from . import shape as _sh
from ._lowp import rounds_once
from ._registry import composite, expect_tensor
from .layout import cast
from .linalg import matmul


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + 11 * len(shape)).standard_normal(shape)


# ---- differences and integration -------------------------------------------------------------
def _diff_ref(a, n=1, dim=-1, prepend=None, append=None):
    extra = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return np.diff(a, n=n, axis=dim, **extra)


@composite("diff", _diff_ref, method=True, samples=lambda: [
    ((_rand(5),), {}), ((_rand(3, 4),), {"n": 2, "dim": 0}),
    ((_rand(3, 4), 1, -1, _rand(3, 1), _rand(3, 2, seed=1)), {}),
    ((_rand(2, 4),), {"n": 0})])
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along dim, after prepending/appending the given tensors.

    Example:
        >>> import singa_tensor as st
        >>> st.diff(st.tensor([1.0, 4.0, 9.0, 16.0])).tolist()
        [3.0, 5.0, 7.0]
        >>> st.diff(st.tensor([1.0, 4.0, 9.0, 16.0]), n=2).tolist()
        [2.0, 2.0]
    """
    expect_tensor("diff", input)
    if input.ndim == 0:
        raise ValueError("diff: expects input to be at least one-dimensional")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"diff: order must be a non-negative int, got {n!r}")
    d = _wrap_dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    for p in parts:
        expect_tensor("diff", p)
        if p.ndim != input.ndim:
            raise ValueError(f"diff: prepend/append must have {input.ndim} dimensions like "
                             f"input, got shape {p.shape}")
    x = _sh.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = _sh.narrow(x, d, 1, m - 1), _sh.narrow(x, d, 0, m - 1)
        x = _el.ne(hi, lo) if x.dtype is _dt.bool_ else hi - lo
    return x


def _spacing(y: Tensor, x, dx, d: int, op: str):
    """The widths of the intervals along dim d (a tensor broadcastable to them, or a number)."""
    if x is not None and dx is not None:
        raise TypeError(f"{op}: pass either x or dx, not both")
    if x is None:
        return 1.0 if dx is None else dx
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: x must be a Tensor, got {type(x).__name__}")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ValueError(f"{op}: x has {x.shape[0]} points but y has {y.shape[d]} along "
                             f"dim {d}")
        x = x.reshape(*([1] * d), x.shape[0], *([1] * (y.ndim - d - 1)))
        return diff(x, dim=d)
    return diff(x, dim=d - y.ndim if x.ndim < y.ndim else d)


def _trapezoids(y: Tensor, x, dx, dim: int, op: str) -> tuple:
    expect_tensor(op, y)
    if y.ndim == 0:
        raise ValueError(f"{op}: y must be at least one-dimensional")
    d = _wrap_dim(dim, y.ndim, op)
    m = y.shape[d]
    w = _spacing(y, x, dx, d, op)
    if m == 0:
        return None, d
    mid = (_sh.narrow(y, d, 1, m - 1) + _sh.narrow(y, d, 0, m - 1)) * 0.5
    return mid * w, d


def _trapezoid_ref(y, x=None, *, dx=None, dim=-1):
    if x is not None:
        return np.trapezoid(y, x=x, axis=dim)
    return np.trapezoid(y, dx=1.0 if dx is None else dx, axis=dim)


@composite("trapezoid", _trapezoid_ref, samples=lambda: [
    ((_rand(5),), {}), ((_rand(3, 4),), {"dx": 0.5, "dim": 0}),
    ((_rand(3, 4), np.sort(_rand(4))), {}), ((_rand(3, 4), _rand(3, 4, seed=2)), {})])
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """Integral of y along dim by the trapezoidal rule, at points x (or a spacing dx, 1 by
    default).

    Example:
        >>> import singa_tensor as st
        >>> st.trapezoid(st.tensor([1.0, 2.0, 3.0])).item()
        4.0
        >>> st.trapezoid(st.tensor([1.0, 2.0, 3.0]), st.tensor([0.0, 1.0, 3.0])).item()
        6.5
    """
    areas, d = _trapezoids(y, x, dx, dim, "trapezoid")
    if areas is None:
        return _re.sum(y, d)
    return _re.sum(areas, d)


def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
          dim: int = -1) -> Tensor:
    """The older name of `trapezoid`.

    Example:
        >>> import singa_tensor as st
        >>> st.trapz(st.tensor([1.0, 2.0, 3.0]), dx=2.0).item()
        8.0
    """
    return trapezoid(y, x, dx=dx, dim=dim)


def _cumulative_trapezoid_ref(y, x=None, *, dx=None, dim=-1):
    y = np.moveaxis(np.asarray(y), dim, -1)
    mid = (y[..., 1:] + y[..., :-1]) / 2
    if x is not None:
        x = np.asarray(x)
        w = np.diff(x) if x.ndim == 1 else np.diff(np.moveaxis(x, dim, -1), axis=-1)
    else:
        w = 1.0 if dx is None else dx
    return np.moveaxis(np.cumsum(mid * w, axis=-1), -1, dim)


@composite("cumulative_trapezoid", _cumulative_trapezoid_ref, samples=lambda: [
    ((_rand(5),), {}), ((_rand(3, 4),), {"dx": 0.5, "dim": 0}),
    ((_rand(3, 4), np.sort(_rand(4))), {})])
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The running trapezoidal integral of y along dim (one element fewer than y there).

    Example:
        >>> import singa_tensor as st
        >>> st.cumulative_trapezoid(st.tensor([1.0, 2.0, 3.0])).tolist()
        [1.5, 4.0]
    """
    areas, d = _trapezoids(y, x, dx, dim, "cumulative_trapezoid")
    if areas is None:
        return y
    from .reduce_ext import cumsum

    return cumsum(areas, d)


# ---- statistics ------------------------------------------------------------------------------
def _cov_ref(x, *, correction=1, fweights=None, aweights=None):
    return np.cov(x, ddof=correction, fweights=fweights, aweights=aweights)


@composite("cov", _cov_ref, method=True, samples=lambda: [
    ((_rand(3, 5),), {}), ((_rand(6),), {}), ((_rand(2, 5),), {"correction": 0})])
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance matrix of the variables in input's rows (observations in its columns), with
    optional integer frequency weights and real observation weights.

    Example:
        >>> import singa_tensor as st
        >>> st.cov(st.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    expect_tensor("cov", input)
    if input.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dimensions, got {input.ndim}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = cast(x, creation.get_default_dtype())
    nobs = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        expect_tensor("cov", wt)
        if wt.ndim != 1 or wt.shape[0] != nobs:
            raise ValueError(f"cov: expected {name} to be a 1-D tensor of {nobs} observations, "
                             f"got shape {wt.shape}")
        if name == "fweights" and wt.dtype.is_floating_point:
            raise TypeError("cov: expected fweights to have an integral dtype")
        if name == "aweights" and not wt.dtype.is_floating_point:
            raise TypeError("cov: expected aweights to have a floating point dtype")
        wt = cast(wt, x.dtype)
        w = wt if w is None else w * wt
    if w is None:
        avg = _re.mean(x, 1, keepdim=True)
        norm = nobs - correction
    else:
        wsum = _re.sum(w)
        avg = _re.sum(x * w, 1, keepdim=True) / wsum
        if aweights is None or correction == 0:
            norm = wsum - correction
        else:
            norm = wsum - correction * _re.sum(w * cast(aweights, x.dtype)) / wsum
    xc = x - avg
    xw = xc if w is None else xc * w
    c = matmul(xw, xc.transpose(0, 1)) / norm
    return c.reshape(()) if input.ndim < 2 else c


def _corrcoef_ref(x):
    return np.clip(np.corrcoef(x), -1.0, 1.0)


@composite("corrcoef", _corrcoef_ref, method=True,
           samples=lambda: [((_rand(3, 6),), {}), ((_rand(2, 4, seed=3),), {})])
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in input's rows, clipped to [-1, 1].

    Example:
        >>> import singa_tensor as st
        >>> st.corrcoef(st.tensor([[0.0, 1.0, 2.0], [4.0, 2.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    from .linalg import diagonal

    s = _el.sqrt(diagonal(c))
    c = c / s.reshape(-1, 1) / s.reshape(1, -1)
    return _el.clamp(c, min=-1.0, max=1.0)


def _logit_ref(x, eps=None):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


@composite("logit", _logit_ref, kind="unary", domain=(0.05, 0.95), method=True, inplace=True)
@rounds_once
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), the inverse of sigmoid; with eps, p is first clamped to
    [eps, 1 - eps].

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.logit(st.tensor([0.5, 0.75, 1.0]), eps=1e-3).tolist()]
        [0.0, 1.0986, 6.9068]
    """
    expect_tensor("logit", input)
    x = input if input.dtype.is_floating_point else cast(input, _dt.float32)
    if eps is not None:
        x = _el.clamp(x, min=eps, max=1.0 - eps)
    return _el.log(x / (1.0 - x))


def logit_(input: Tensor, eps: float | None = None) -> Tensor:
    """In-place `logit`.

    Example:
        >>> import singa_tensor as st
        >>> st.logit_(st.tensor([0.5])).tolist()
        [0.0]
    """
    return input.logit_(eps)


def _isin_ref(elements, test_elements, *, assume_unique=False, invert=False):
    return np.isin(elements, test_elements, invert=invert)


@composite("isin", _isin_ref, differentiable=False, dtypes=("int64", "float32"),
           samples=lambda: [((np.array([[1, 2], [3, 4]]), np.array([2, 3, 9])), {}),
                            ((np.array([1, 5, 2]), np.array([5])), {"invert": True})])
def isin(elements, test_elements, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element of elements occurs in test_elements (a bool tensor of elements'
    shape); invert=True asks the opposite. Either may be a number.

    Example:
        >>> import singa_tensor as st
        >>> st.isin(st.tensor([1, 2, 3]), st.tensor([2, 9])).tolist()
        [False, True, False]
    """
    if elements.__class__ is not Tensor and test_elements.__class__ is not Tensor:
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")
    like = elements if elements.__class__ is Tensor else test_elements
    if elements.__class__ is not Tensor:
        elements = creation.tensor(elements, device=like.device)
    if test_elements.__class__ is not Tensor:
        test_elements = creation.tensor(test_elements, device=like.device)
    hit = _re.any(_el.eq(elements.unsqueeze(-1), test_elements.reshape(-1)), -1)
    return _el.logical_not(hit) if invert else hit


def _vander_ref(x, N=None, increasing=False):
    return np.vander(x, N=N, increasing=increasing)


@composite("vander", _vander_ref, samples=lambda: [
    ((_rand(4),), {}), ((_rand(3),), {"N": 5, "increasing": True}), ((_rand(3),), {"N": 1})])
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D x: columns are powers of x, falling from N - 1
    (N defaults to len(x)) unless increasing.

    Example:
        >>> import singa_tensor as st
        >>> st.vander(st.tensor([1, 2, 3]), N=3).tolist()
        [[1, 1, 1], [4, 2, 1], [9, 3, 1]]
    """
    expect_tensor("vander", x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional tensor, got shape {x.shape}")
    n = x.shape[0] if N is None else N
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"vander: N must be a non-negative int, got {N!r}")
    if n == 0:
        return creation.empty((x.shape[0], 0), dtype=x.dtype, device=x.device)
    if x.dtype is _dt.bool_:
        x = cast(x, _dt.int64)
    ones = creation.ones((x.shape[0], 1), dtype=x.dtype, device=x.device)
    cols = [ones] + [x.unsqueeze(1)] * (n - 1)
    from .reduce_ext import cumprod

    powers = cumprod(_sh.cat(cols, 1), 1)
    return powers if increasing else powers.flip(1)


def _chain_ref(*matrices):
    return np.linalg.multi_dot(matrices) if len(matrices) > 1 else matrices[0]


@composite("chain_matmul", _chain_ref, samples=lambda: [
    ((_rand(2, 3), _rand(3, 4), _rand(4, 2)), {}), ((_rand(3, 3),), {})])
def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of 2-D matrices, left to right.

    Example:
        >>> import singa_tensor as st
        >>> st.chain_matmul(st.eye(2), st.ones(2, 3), st.ones(3, 1)).tolist()
        [[3.0], [3.0]]
    """
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise ValueError("chain_matmul: expected one or more matrices")
    for m in matrices:
        expect_tensor("chain_matmul", m)
        if m.ndim != 2:
            raise ValueError(f"chain_matmul: expected 2-D matrices, got shape {m.shape}")
    out = matrices[0]
    for m in matrices[1:]:
        out = matmul(out, m)
    return out


def _int_pair(op: str, a, b) -> tuple:
    if a.__class__ is not Tensor and b.__class__ is not Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(a).__name__}")
    like = a if a.__class__ is Tensor else b
    a = a if a.__class__ is Tensor else creation.tensor(a, dtype=like.dtype, device=like.device)
    b = b if b.__class__ is Tensor else creation.tensor(b, dtype=like.dtype, device=like.device)
    for t in (a, b):
        if t.dtype.is_floating_point or t.dtype is _dt.bool_:
            raise TypeError(f"{op}: expected integer tensors, got {t.dtype.name}")
    return a, b


def _gcd_pair(a: Tensor, b: Tensor) -> Tensor:
    # Euclid's algorithm on magnitudes; a lane whose divisor reached 0 holds its gcd in a
    a, b = _el.abs(a), _el.abs(b)
    a, b = a + b * 0, b + a * 0  # broadcast both to the result's shape
    while bool(_re.any(b != 0).item()):
        done = b == 0
        r = _el.remainder(a, _el.where(done, b + 1, b))
        a, b = _el.where(done, a, b), _el.where(done, b, r)
    return a


@composite("gcd", np.gcd, differentiable=False, dtypes=("int64",), method=True, inplace=True,
           samples=lambda: [((np.array([12, -18, 0, 7, 0]), np.array([8, 12, 5, 0, 0])), {}),
                            ((np.array([[4], [9]]), np.array([6, 15, -27])), {})])
def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor of each pair of integers (non-negative; gcd(0, 0) = 0).

    Example:
        >>> import singa_tensor as st
        >>> st.gcd(st.tensor([12, -18, 0]), st.tensor([8, 12, 5])).tolist()
        [4, 6, 5]
    """
    return _gcd_pair(*_int_pair("gcd", input, other))


@composite("lcm", np.lcm, differentiable=False, dtypes=("int64",), method=True, inplace=True,
           samples=lambda: [((np.array([4, -6, 0, 7]), np.array([6, 4, 5, 3])), {}),
                            ((np.array([[2], [3]]), np.array([5, 9])), {})])
def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple of each pair of integers (non-negative; 0 if either is 0).

    Example:
        >>> import singa_tensor as st
        >>> st.lcm(st.tensor([4, -6, 0]), st.tensor([6, 4, 5])).tolist()
        [12, 12, 0]
    """
    a, b = _int_pair("lcm", input, other)
    g = _gcd_pair(a, b)
    zero = g == 0
    return _el.abs(_el.floor_divide(a, _el.where(zero, g + 1, g)) * b) * _el.logical_not(
        zero).to(g.dtype)


@composite("bitwise_not", np.invert, differentiable=False, dtypes=("int64",), method=True,
           inplace=True, samples=lambda: [((np.array([0, 5, -3, 2**40]),), {})])
def bitwise_not(input: Tensor) -> Tensor:
    """Each integer with its bits flipped (-x - 1 in two's complement); logical not for bool.

    Example:
        >>> import singa_tensor as st
        >>> st.bitwise_not(st.tensor([0, 5, -3])).tolist(), st.bitwise_not(st.tensor([True]))
        ([-1, -6, 2], tensor([False]))
    """
    expect_tensor("bitwise_not", input)
    if input.dtype is _dt.bool_:
        return _el.logical_not(input)
    if input.dtype.is_floating_point:
        raise TypeError(f"bitwise_not: expected an integer or bool tensor, got "
                        f"{input.dtype.name}")
    return -input - 1


def _diagonal_scatter_ref(a, src, offset=0, dim1=0, dim2=1):
    out = a.copy()
    planes = np.moveaxis(out, (dim1, dim2), (-2, -1))  # a writable view of out
    k = np.arange(src.shape[-1])
    planes[..., k + max(-offset, 0), k + max(offset, 0)] = src
    return out


@composite("diagonal_scatter", _diagonal_scatter_ref, method=True, samples=lambda: [
    ((_rand(3, 3), _rand(3)), {}), ((_rand(3, 4), _rand(3, seed=1)), {"offset": 1}),
    ((_rand(2, 3, 4), _rand(2, 2, seed=2)), {"offset": -1, "dim1": 1, "dim2": 2})])
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """A copy of input with src on the diagonal `diagonal(input, offset, dim1, dim2)` picks.

    Example:
        >>> import singa_tensor as st
        >>> st.diagonal_scatter(st.zeros(2, 2), st.tensor([1.0, 2.0])).tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    from .linalg import diagonal, diagonal_backward

    expect_tensor("diagonal_scatter", input)
    expect_tensor("diagonal_scatter", src, "src")
    want = diagonal(input, offset, dim1, dim2).shape
    if src.shape != want:
        raise ValueError(f"diagonal_scatter: src must have shape {want} (the diagonal's), got "
                         f"{src.shape}")
    src = cast(src, input.dtype) if src.dtype is not input.dtype else src
    ones = creation.ones(want, dtype=input.dtype, device=input.device)
    mask = diagonal_backward(ones, input.shape, offset, dim1, dim2) != 0
    return _el.where(mask, diagonal_backward(src, input.shape, offset, dim1, dim2), input)


@composite("ldexp", lambda a, b: a * np.power(2.0, b), method=True, inplace=True,
           samples=lambda: [((_rand(4), np.array([0.0, 1.0, -2.0, 3.0])), {}),
                            ((_rand(2, 3), np.array([1.0, -1.0, 2.0])), {})])
@rounds_once
def ldexp(input: Tensor, other) -> Tensor:
    """input * 2 ** other.

    Example:
        >>> import singa_tensor as st
        >>> st.ldexp(st.tensor([1.0, 3.0]), st.tensor([2, -1])).tolist()
        [4.0, 1.5]
    """
    expect_tensor("ldexp", input)
    x = input if input.dtype.is_floating_point else cast(input, _dt.float32)
    e = other if other.__class__ is Tensor else creation.tensor(other, device=x.device)
    if not e.dtype.is_floating_point:
        e = cast(e, x.dtype)
    return x * _el.pow(2.0, e)


def _lower(n, seed=0):
    return np.tril(_rand(n, n, seed=seed)) + 3.0 * np.eye(n)


def _chol_factor(L, upper):
    T = np.triu(L) if upper else np.tril(L)
    return T.T @ T if upper else T @ T.T


@composite("cholesky_solve",
           lambda B, L, upper=False: np.linalg.solve(_chol_factor(L, upper), B), method=True,
           samples=lambda: [((_rand(3, 2), _lower(3)), {}),
                            ((_rand(3, 1), _lower(3, seed=1).T), {"upper": True})])
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """X with A X = B, A given by its Cholesky factor: A = L L^T (or U^T U when upper).

    Example:
        >>> import singa_tensor as st
        >>> L = st.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> st.cholesky_solve(st.tensor([[4.0], [3.0]]), L).tolist()
        [[0.5], [1.0]]
    """
    from .linalg_decomp import solve_triangular

    expect_tensor("cholesky_solve", B)
    expect_tensor("cholesky_solve", L, "L")
    if L.ndim < 2 or L.shape[-1] != L.shape[-2]:
        raise ValueError(f"cholesky_solve: L must be a batch of square matrices, got shape "
                         f"{L.shape}")
    Lt = L.transpose(-2, -1)
    first, second = (Lt, L) if upper else (L, Lt)
    y = solve_triangular(first, B, upper=False)
    return solve_triangular(second, y, upper=True)


@composite("cholesky_inverse",
           lambda L, upper=False: np.linalg.inv(_chol_factor(L, upper)), method=True,
           samples=lambda: [((_lower(3),), {}), ((_lower(2, seed=2).T,), {"upper": True})])
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of A = L L^T (or U^T U when upper), from its Cholesky factor.

    Example:
        >>> import singa_tensor as st
        >>> st.cholesky_inverse(st.tensor([[2.0, 0.0], [0.0, 0.5]])).tolist()
        [[0.25, 0.0], [0.0, 4.0]]
    """
    expect_tensor("cholesky_inverse", L, "L")
    n = L.shape[-1] if L.ndim else 0
    eye = creation.eye(n, dtype=L.dtype, device=L.device)
    return cholesky_solve(eye, L, upper)


def _triangular_solve_ref(b, A, upper=True, transpose=False, unitriangular=False):
    T = np.triu(A) if upper else np.tril(A)
    if unitriangular:
        T = T - np.diag(np.diag(T)) + np.eye(T.shape[-1])
    return np.linalg.solve(T.T if transpose else T, b), A


@composite("triangular_solve", _triangular_solve_ref, method=True, samples=lambda: [
    ((_rand(3, 2), _lower(3).T), {}), ((_rand(3, 2), _lower(3)), {"upper": False}),
    ((_rand(3, 1), _lower(3, seed=3).T), {"transpose": True, "unitriangular": True})])
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> tuple:
    """(X, A) with T X = b, T the upper (or lower) triangle of A, transposed when asked,
    with a unit diagonal when unitriangular. PyTorch's older form of
    `linalg.solve_triangular`.

    Example:
        >>> import singa_tensor as st
        >>> x, _ = st.triangular_solve(st.tensor([[3.0], [2.0]]),
        ...                            st.tensor([[1.0, 1.0], [0.0, 2.0]]))
        >>> x.tolist()
        [[2.0], [1.0]]
    """
    from .linalg_decomp import solve_triangular

    expect_tensor("triangular_solve", b)
    expect_tensor("triangular_solve", A, "A")
    T = A.transpose(-2, -1) if transpose else A
    x = solve_triangular(T, b, upper=upper != transpose, unitriangular=unitriangular)
    return x, A.clone()


def gcd_(input: Tensor, other: Tensor) -> Tensor:
    """In-place `gcd`.

    Example:
        >>> import singa_tensor as st
        >>> st.gcd_(st.tensor([12]), st.tensor([8])).tolist()
        [4]
    """
    return input.gcd_(other)


def lcm_(input: Tensor, other: Tensor) -> Tensor:
    """In-place `lcm`.

    Example:
        >>> import singa_tensor as st
        >>> st.lcm_(st.tensor([4]), st.tensor([6])).tolist()
        [12]
    """
    return input.lcm_(other)


def ldexp_(input: Tensor, other) -> Tensor:
    """In-place `ldexp`.

    Example:
        >>> import singa_tensor as st
        >>> st.ldexp_(st.tensor([3.0]), st.tensor([1])).tolist()
        [6.0]
    """
    return input.ldexp_(other)


def _gradient_ref(f, *, spacing=1.0, dim=None, edge_order=1):
    dims = tuple(range(f.ndim)) if dim is None else ((dim,) if isinstance(dim, int)
                                                    else tuple(dim))
    sp = spacing if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    out = np.gradient(f, *sp, axis=dims, edge_order=edge_order)
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


@composite("gradient", _gradient_ref, samples=lambda: [
    ((_rand(5),), {}), ((_rand(4, 5),), {"spacing": 0.5, "dim": 1}),
    ((_rand(4, 5),), {"edge_order": 2}), ((_rand(3, 4),), {"spacing": [2.0, 0.5]})])
def gradient(input: Tensor, *, spacing=1.0, dim=None, edge_order: int = 1) -> tuple:
    """Derivative estimates of input along each of dim (all dims by default) by central
    differences inside and one-sided differences of order edge_order (1 or 2) at the ends.
    spacing is one number for all dims, one per dim, or per dim a 1-D tensor of coordinates.

    Example:
        >>> import singa_tensor as st
        >>> [g.tolist() for g in st.gradient(st.tensor([1.0, 4.0, 9.0, 16.0]))]
        [[3.0, 4.0, 6.0, 7.0]]
    """
    expect_tensor("gradient", input)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    dims = (tuple(range(input.ndim)) if dim is None else
            (dim,) if isinstance(dim, int) else tuple(dim))
    dims = tuple(_wrap_dim(d, input.ndim, "gradient") for d in dims)
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise ValueError(f"gradient: expected spacing to be a number or {len(dims)} "
                             f"values (one per dim), got {len(spacing)}")
        sp = list(spacing)
    else:
        sp = [spacing] * len(dims)
    x = input if input.dtype.is_floating_point else cast(input, creation.get_default_dtype())
    return tuple(_gradient_1d(x, d, h, edge_order) for d, h in zip(dims, sp))


def _gradient_1d(f: Tensor, d: int, h, edge_order: int) -> Tensor:
    n = f.shape[d]
    if n < edge_order + 1:
        raise ValueError(f"gradient: each dimension must have at least edge_order + 1 = "
                         f"{edge_order + 1} elements, dim {d} has {n}")

    def at(start: int, length: int) -> Tensor:
        return _sh.narrow(f, d, start, length)

    if isinstance(h, Tensor):
        if h.ndim != 1 or h.shape[0] != n:
            raise ValueError(f"gradient: coordinates for dim {d} must be a 1-D tensor of {n} "
                             f"values, got shape {h.shape}")
        x = cast(h, f.dtype).reshape(*([1] * d), n, *([1] * (f.ndim - d - 1)))
        dx = diff(x, dim=d)
    else:
        dx = None
    if dx is None:
        mid = (at(2, n - 2) - at(0, n - 2)) / (2.0 * h) if n > 2 else None
        if edge_order == 1:
            first = (at(1, 1) - at(0, 1)) / h
            last = (at(n - 1, 1) - at(n - 2, 1)) / h
        else:
            first = (at(0, 1) * -3.0 + at(1, 1) * 4.0 - at(2, 1)) / (2.0 * h)
            last = (at(n - 1, 1) * 3.0 - at(n - 2, 1) * 4.0 + at(n - 3, 1)) / (2.0 * h)
    else:
        def w(start: int, length: int = 1) -> Tensor:
            return _sh.narrow(dx, d, start, length)

        mid = None
        if n > 2:
            hs, hd = w(0, n - 2), w(1, n - 2)
            mid = (hs * hs * at(2, n - 2) + (hd * hd - hs * hs) * at(1, n - 2)
                   - hd * hd * at(0, n - 2)) / (hs * hd * (hd + hs))
        if edge_order == 1:
            first = (at(1, 1) - at(0, 1)) / w(0)
            last = (at(n - 1, 1) - at(n - 2, 1)) / w(n - 2)
        else:
            a1, a2 = w(0), w(1)
            first = (at(0, 1) * (-(2.0 * a1 + a2) / (a1 * (a1 + a2)))
                     + at(1, 1) * ((a1 + a2) / (a1 * a2)) + at(2, 1) * (-a1 / (a2 * (a1 + a2))))
            b1, b2 = w(n - 3), w(n - 2)
            last = (at(n - 3, 1) * (b2 / (b1 * (b1 + b2)))
                    + at(n - 2, 1) * (-(b2 + b1) / (b1 * b2))
                    + at(n - 1, 1) * ((2.0 * b2 + b1) / (b2 * (b1 + b2))))
    return _sh.cat([first] + ([mid] if mid is not None else []) + [last], d)


def unravel_index(indices, shape: int | Sequence[int]) -> tuple:
    """The coordinates, in a tensor of the given shape, of flat indices (a tuple of int64
    tensors of indices' shape, one per dimension).

    Example:
        >>> import singa_tensor as st
        >>> [c.tolist() for c in st.unravel_index(st.tensor([5, 1]), (2, 3))]
        [[1, 0], [2, 1]]
    """
    if indices.__class__ is not Tensor:
        indices = creation.tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype is _dt.bool_:
        raise TypeError(f"unravel_index: expected an integer indices tensor, got "
                        f"{indices.dtype.name}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError(f"unravel_index: shape must be non-negative ints, got {shape}")
    total = 1
    for s in shape:
        total *= s
    if indices.numel():
        lo, hi = int(_re.min(indices).item()), int(_re.max(indices).item())
        if lo < -total or hi >= total:
            raise ValueError(f"unravel_index: index out of range for shape {shape}: "
                             f"values span [{lo}, {hi}]")
    idx = cast(indices, _dt.int64)
    idx = _el.where(idx < 0, idx + total, idx)
    out = []
    for s in reversed(shape):
        out.append(_el.remainder(idx, s))
        idx = _el.floor_divide(idx, s)
    return tuple(reversed(out))


__all__ = ["diff", "trapezoid", "trapz", "cumulative_trapezoid", "cov", "corrcoef", "logit",
           "logit_", "isin", "vander", "chain_matmul", "unravel_index", "gcd", "lcm", "bitwise_not",
           "diagonal_scatter", "ldexp", "cholesky_solve", "cholesky_inverse",
           "triangular_solve", "gcd_", "lcm_", "ldexp_", "gradient"]
