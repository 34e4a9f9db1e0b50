"""More shape functions of PyTorch's surface, compositions of existing ops so they run on
every backend and take their gradients from the parts: diagonals (diag, diag_embed,
diagflat, tril/triu_indices), products (tensordot, kron, cdist, cross, meshgrid,
cartesian_prod, combinations, block_diag), at-least-n-d views and the h/v/d/column stacks,
tensor_split, hsplit/vsplit/dsplit, fliplr/flipud, rot90, Tensor.unfold, broadcast_tensors /
broadcast_shapes, and the Tensor aliases ndimension and nelement.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import (
    bind_method,
    check_same_device,
    composite,
    expect_tensor,
)
from ._registry import (
    broadcast_shapes as _bshapes,
)
from .elementwise import where
from .index import index_select, nonzero, scatter
from .layout import cast, expand, permute
from .padding import pad
from .shape import cat, flip, movedim, narrow, stack


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + 7 * len(shape)).standard_normal(shape)


def _int(op: str, v, what: str) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__}")
    return int(v)


def _arange(n: int, like: Tensor) -> Tensor:
    return creation.arange(n, device=like._device)


def _seq_composite(name: str, reference, samples, differentiable: bool = True):
    """Register fn(tensors) under `name` with the registry's calling convention fn(*tensors)
    (the tests pass tensors positionally); returns fn itself."""
    def declare(fn):
        def call(*tensors, **kw):
            return fn(list(tensors), **kw)

        call.__name__, call.__doc__ = fn.__name__, fn.__doc__
        composite(name, reference, samples=samples, differentiable=differentiable)(call)
        return fn

    return declare


def _tensors(op: str, tensors) -> list:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    for i, t in enumerate(tensors):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__} at position {i}")
    check_same_device(op, *tensors)
    return list(tensors)


# ---- diagonals ---------------------------------------------------------------------------------


def _diag_embed_ref(x, offset=0, dim1=-2, dim2=-1):
    n = x.shape[-1]
    m = n + abs(offset)
    out = np.zeros(x.shape[:-1] + (m, m), x.dtype)
    r, c = np.arange(n) + max(-offset, 0), np.arange(n) + max(offset, 0)
    out[..., r, c] = x
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


@composite("diag_embed", _diag_embed_ref, method=True, samples=lambda: [
    ((_rand(2, 3),), {}), ((_rand(3),), {"offset": 1}),
    ((_rand(2, 3),), {"offset": -2, "dim1": 0, "dim2": 2}), ((_rand(2, 3),), {"dim1": -1,
                                                                              "dim2": 0})])
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose 2-d planes (dims dim1, dim2) hold input's last dimension on the diagonal
    `offset` (above the main one when positive), zeros elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> st.diag_embed(st.tensor([[1, 2]])).tolist()
        [[[1, 0], [0, 2]]]
    """
    expect_tensor("diag_embed", input)
    offset = _int("diag_embed", offset, "offset")
    x = input.reshape(1) if input.ndim == 0 else input
    nd = x.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd, "diag_embed"), _wrap_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ValueError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = x._shape[-1]
    m = n + abs(offset)
    p = _arange(n, x)
    pos = (p + max(-offset, 0)) * m + (p + max(offset, 0))
    flat = creation.zeros(x._shape[:-1] + (m * m,), dtype=x.dtype, device=x._device)
    out = scatter(flat, -1, expand(pos, *x._shape), x).reshape(*x._shape[:-1], m, m)
    return movedim(out, (nd - 2, nd - 1), (d1, d2))


def _diag_ref(x, diagonal=0):
    return np.diag(x, diagonal).copy()


@composite("diag", _diag_ref, method=True, dtypes=("float32", "float64", "int64"),
           samples=lambda: [((_rand(3),), {}), ((_rand(3),), {"diagonal": -2}),
                            ((_rand(3, 4),), {}), ((_rand(3, 4),), {"diagonal": 2}),
                            ((_rand(3, 4),), {"diagonal": -5})])
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-d input: the square matrix with input on diagonal `diagonal`; 2-d input: a copy of
    that diagonal as a 1-d tensor.

    Example:
        >>> import singa_tensor as st
        >>> st.diag(st.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
        >>> st.diag(st.tensor([[1, 2], [3, 4]]), 1).tolist()
        [2]
    """
    expect_tensor("diag", input)
    diagonal = _int("diag", diagonal, "diagonal")
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        n, m = input._shape
        if (diagonal >= 0 and diagonal >= m) or (diagonal < 0 and -diagonal >= n):
            return creation.zeros(0, dtype=input.dtype, device=input._device)
        return input.diagonal(diagonal).clone()
    raise ValueError(f"diag: expected a 1-d or 2-d tensor, got shape {input._shape}")


@composite("diagflat", lambda x, offset=0: np.diagflat(x, offset), method=True,
           samples=lambda: [((_rand(2, 2),), {}), ((_rand(3),), {"offset": 1})])
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The square matrix with the flattened input on diagonal `offset`.

    Example:
        >>> import singa_tensor as st
        >>> st.diagflat(st.tensor([[1], [2]])).tolist()
        [[1, 0], [0, 2]]
    """
    expect_tensor("diagflat", input)
    return diag_embed(input.reshape(-1), offset)


def _tri_indices(op: str, row, col, offset, dtype, device, lower: bool) -> Tensor:
    row, col = _int(op, row, "row"), _int(op, col, "col")
    offset = _int(op, offset, "offset")
    if row < 0 or col < 0:
        raise ValueError(f"{op}: row and col must be non-negative, got {row} and {col}")
    dev = creation._device(device)
    rows = creation.arange(row, device=dev).reshape(row, 1)
    diff = creation.arange(col, device=dev) - rows
    keep = diff <= offset if lower else diff >= offset
    out = nonzero(keep).t().contiguous()
    return out if dtype is None or dtype is _dt.int64 else out.to(dtype)


@composite("tril_indices", lambda r, c, offset=0: np.stack(np.tril_indices(r, offset, c)),
           differentiable=False, samples=lambda: [((3, 3), {}), ((3, 4, 1), {}),
                                                  ((4, 3, -1), {}), ((0, 2), {})])
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle (col - row <= offset) of a row x col
    matrix, row by row.

    Example:
        >>> import singa_tensor as st
        >>> st.tril_indices(2, 2).tolist()
        [[0, 1, 1], [0, 0, 1]]
    """
    return _tri_indices("tril_indices", row, col, offset, dtype, device, True)


@composite("triu_indices", lambda r, c, offset=0: np.stack(np.triu_indices(r, offset, c)),
           differentiable=False, samples=lambda: [((3, 3), {}), ((3, 4, 1), {}),
                                                  ((4, 3, -1), {})])
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle (col - row >= offset) of a row x col
    matrix, row by row.

    Example:
        >>> import singa_tensor as st
        >>> st.triu_indices(2, 2).tolist()
        [[0, 0, 1], [0, 1, 1]]
    """
    return _tri_indices("triu_indices", row, col, offset, dtype, device, False)


# ---- products ----------------------------------------------------------------------------------


def _cdist_ref(x1, x2, p=2.0):
    d = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(x1.dtype)
    if math.isinf(p):
        return d.max(-1)
    return (d ** p).sum(-1) ** (1.0 / p)


@composite("cdist", _cdist_ref, samples=lambda: [
    ((_rand(3, 2), _rand(4, 2, seed=1)), {}), ((_rand(2, 3, 2), _rand(2, 4, 2, seed=1)), {}),
    ((_rand(3, 2), _rand(4, 2, seed=1)), {"p": 1.0}),
    ((_rand(3, 2), _rand(4, 2, seed=1)), {"p": 3.0}),
    ((_rand(3, 2), _rand(4, 2, seed=1)), {"p": math.inf})])
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """p-norm distances between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    a (..., P, R) tensor; batch dims broadcast. p=0 counts differing coordinates, p=inf
    takes the largest difference.

    Example:
        >>> import singa_tensor as st
        >>> st.cdist(st.tensor([[0.0, 0.0]]), st.tensor([[3.0, 4.0], [1.0, 0.0]])).tolist()
        [[5.0, 1.0]]
    """
    expect_tensor("cdist", x1, "x1")
    expect_tensor("cdist", x2, "x2")
    check_same_device("cdist", x1, x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"cdist: x1 and x2 must have at least 2 dimensions, got shapes "
                         f"{x1._shape} and {x2._shape}")
    if x1._shape[-1] != x2._shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must have the same number of columns, got "
                         f"{x1._shape[-1]} and {x2._shape[-1]}")
    if not isinstance(p, (int, float)) or p < 0:
        raise ValueError(f"cdist: only supports non-negative p values, got {p}")
    if not (x1.dtype.is_floating_point and x2.dtype.is_floating_point):
        raise TypeError(f"cdist: expected floating point inputs, got {x1.dtype.name} and "
                        f"{x2.dtype.name}")
    d = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 0:
        return cast(d != 0, d.dtype).sum(-1)
    if math.isinf(p):
        return d.abs().amax(-1)
    if p == 1:
        return d.abs().sum(-1)
    s = (d * d).sum(-1) if p == 2 else (d.abs() ** float(p)).sum(-1)
    # the root's derivative is infinite at distance 0, where PyTorch's gradient is 0: take
    # the root of 1 there, so that the masked-out branch carries no inf * 0 = nan
    pos = s > 0
    safe = where(pos, s, 1.0)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(pos, root, 0.0)


def _tensordot_dims(op: str, a: Tensor, b: Tensor, dims) -> tuple:
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ValueError(f"{op}: dims must be in [0, {min(a.ndim, b.ndim)}], got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(int(dims)))
    elif not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise TypeError(f"{op}: dims must be an int or a pair of lists of dims, got {dims!r}")
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise ValueError(f"{op}: both dim lists should have the same length, got {da} and {db}")
    da = [_wrap_dim(d, a.ndim, op) for d in da]
    db = [_wrap_dim(d, b.ndim, op) for d in db]
    for i, j in zip(da, db):
        if a._shape[i] != b._shape[j]:
            raise ValueError(f"{op}: contracted dimensions need to match, but first has size "
                             f"{a._shape[i]} in dim {i} and second has size {b._shape[j]} in "
                             f"dim {j}")
    return da, db


@composite("tensordot", lambda a, b, dims=2: np.tensordot(a, b, dims), samples=lambda: [
    ((_rand(2, 3, 4), _rand(3, 4, 5, seed=1)), {}), ((_rand(2, 3), _rand(3, 2, seed=1), 1), {}),
    ((_rand(2, 3, 4), _rand(4, 2, 3, seed=1)), {"dims": ([1, 2], [2, 0])}),
    ((_rand(2), _rand(3, seed=1), 0), {})])
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Sum of products over dims of a and b: an int n contracts a's last n dims with b's
    first n; a pair of lists names the dims of each.

    Example:
        >>> import singa_tensor as st
        >>> st.tensordot(st.ones(2, 3), st.ones(3, 4), dims=1).shape
        (2, 4)
    """
    expect_tensor("tensordot", a, "a")
    expect_tensor("tensordot", b, "b")
    check_same_device("tensordot", a, b)
    da, db = _tensordot_dims("tensordot", a, b, dims)
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [i for i in range(b.ndim) if i not in db]
    k = math.prod(a._shape[i] for i in da)
    sa, sb = [a._shape[i] for i in fa], [b._shape[i] for i in fb]
    am = permute(a, *(fa + da)).reshape(math.prod(sa), k)
    bm = permute(b, *(db + fb)).reshape(k, math.prod(sb))
    return (am @ bm).reshape(*(sa + sb))


@composite("kron", np.kron, method=True, samples=lambda: [
    ((_rand(2, 3), _rand(2, 2, seed=1)), {}), ((_rand(3), _rand(2, 2, seed=1)), {})])
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: every element of input times the whole of other, laid out
    block by block (shapes multiply dim by dim, the shorter padded with leading 1s).

    Example:
        >>> import singa_tensor as st
        >>> st.kron(st.tensor([1, 2]), st.tensor([1, 10])).tolist()
        [1, 10, 2, 20]
    """
    expect_tensor("kron", input)
    expect_tensor("kron", other, "other")
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + input._shape
    sb = (1,) * (nd - other.ndim) + other._shape
    a = input.reshape(*itertools.chain.from_iterable((n, 1) for n in sa))
    b = other.reshape(*itertools.chain.from_iterable((1, n) for n in sb))
    return (a * b).reshape(*(x * y for x, y in zip(sa, sb)))


def _cross_ref(a, b, dim=None):
    if dim is None:
        dim = next(i for i, n in enumerate(np.broadcast_shapes(a.shape, b.shape)) if n == 3)
    return np.cross(a, b, axis=dim)


@composite("cross", _cross_ref, method=True, samples=lambda: [
    ((_rand(4, 3), _rand(4, 3, seed=1)), {}), ((_rand(3, 2), _rand(3, 1, seed=1)), {"dim": 0}),
    ((_rand(3), _rand(2, 3, seed=1)), {"dim": -1})])
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along dim (broadcast); dim=None takes the first
    dimension of size 3 (linalg.cross's default is dim=-1).

    Example:
        >>> import singa_tensor as st
        >>> st.cross(st.tensor([1, 0, 0]), st.tensor([0, 1, 0])).tolist()
        [0, 0, 1]
    """
    expect_tensor("cross", input)
    expect_tensor("cross", other, "other")
    check_same_device("cross", input, other)
    shape = _bshapes(input._shape, other._shape, op="cross")
    if dim is None:
        d = next((i for i, n in enumerate(shape) if n == 3), None)
        if d is None:
            raise ValueError(f"cross: no dimension of size 3 in input {shape}")
    else:
        d = _wrap_dim(dim, len(shape), "cross")
    if not shape or shape[d] != 3:
        raise ValueError(f"cross: inputs dimension {dim} must have length 3, got shapes "
                         f"{input._shape} and {other._shape}")
    a, b = expand(input, *shape), expand(other, *shape)
    return a.roll(-1, d) * b.roll(-2, d) - a.roll(-2, d) * b.roll(-1, d)


def _grid_ref(*xs, indexing="ij"):
    return tuple(np.meshgrid(*xs, indexing=indexing))


@composite("meshgrid", _grid_ref, samples=lambda: [
    ((_rand(2), _rand(3, seed=1)), {}), ((_rand(2), _rand(3, seed=1)), {"indexing": "xy"}),
    ((_rand(2), _rand(3, seed=1), _rand(4, seed=2)), {"indexing": "xy"})])
def meshgrid(*tensors: Tensor, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-d tensors: output k repeats tensors[k] along dim k ("ij"), or
    with the first two dims swapped ("xy", as in numpy and MATLAB).

    Example:
        >>> import singa_tensor as st
        >>> gx, gy = st.meshgrid(st.tensor([1, 2]), st.tensor([3, 4, 5]))
        >>> gx.shape, gy[0].tolist()
        ((2, 3), [3, 4, 5])
    """
    ts = _tensors("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in ts:
        if t.ndim > 1:
            raise ValueError(f"meshgrid: expects 0-d or 1-d tensors, got shape {t._shape}")
    ts = [t.reshape(-1) for t in ts]
    shape = tuple(t._shape[0] for t in ts)
    n = len(ts)
    out = [expand(t.reshape(*[-1 if j == i else 1 for j in range(n)]), *shape)
           for i, t in enumerate(ts)]
    if indexing == "xy" and n >= 2:
        out = [o.transpose(0, 1) for o in out]
    return tuple(out)


@_seq_composite("cartesian_prod", lambda *xs: np.stack(
    [g.reshape(-1) for g in np.meshgrid(*xs, indexing="ij")], 1) if len(xs) > 1 else xs[0],
    lambda: [((_rand(2), _rand(3, seed=1)), {}), ((_rand(3),), {}),
             ((_rand(2), _rand(2, seed=1), _rand(2, seed=2)), {})])
def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All tuples of one element from each 1-d tensor, as the rows of an (N, len(tensors))
    tensor in lexicographic order (a single tensor is returned as is).

    Example:
        >>> import singa_tensor as st
        >>> st.cartesian_prod(st.tensor([1, 2]), st.tensor([3, 4])).tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    ts = _tensors("cartesian_prod", tensors)
    if not ts:
        raise ValueError("cartesian_prod: expected at least one tensor")
    for t in ts:
        if t.ndim != 1:
            raise ValueError(f"cartesian_prod: expects 1-d tensors, got shape {t._shape}")
    if len(ts) == 1:
        return ts[0]
    return stack([g.reshape(-1) for g in meshgrid(*ts)], 1)


def _combinations_ref(x, r=2, with_replacement=False):
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.array(list(pick(range(len(x)), r)), np.int64).reshape(-1, r)
    return x[idx]


@composite("combinations", _combinations_ref, samples=lambda: [
    ((_rand(4),), {}), ((_rand(4),), {"r": 3}), ((_rand(3),), {"with_replacement": True}),
    ((_rand(2),), {"r": 3})])
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of a 1-d tensor's elements (itertools order), as the rows
    of an (N, r) tensor.

    Example:
        >>> import singa_tensor as st
        >>> st.combinations(st.tensor([1, 2, 3])).tolist()
        [[1, 2], [1, 3], [2, 3]]
    """
    expect_tensor("combinations", input)
    r = _int("combinations", r, "r")
    if input.ndim != 1:
        raise ValueError(f"combinations: expects a 1-d tensor, got shape {input._shape}")
    if r < 0:
        raise ValueError(f"combinations: r must be non-negative, got {r}")
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.array(list(pick(range(input._shape[0]), r)), np.int64).reshape(-1)
    sel = creation.tensor(idx, dtype=_dt.int64, device=input._device)
    return index_select(input, 0, sel).reshape(-1, r)


@_seq_composite("block_diag", lambda *xs: _block_diag_ref(xs), lambda: [
    ((_rand(2, 2), _rand(1, 3, seed=1)), {}), ((_rand(2), _rand(), _rand(2, 1, seed=2)), {})])
def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix with the given tensors (0-d, 1-d as a row, or 2-d) as blocks.

    Example:
        >>> import singa_tensor as st
        >>> st.block_diag(st.tensor([[1]]), st.tensor([[2, 3]])).tolist()
        [[1, 0, 0], [0, 2, 3]]
    """
    ts = _tensors("block_diag", tensors)
    if not ts:
        return creation.zeros(1, 0)
    blocks = []
    for t in ts:
        if t.ndim > 2:
            raise ValueError(f"block_diag: input tensors must have 2 or fewer dimensions, got "
                             f"shape {t._shape}")
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    dt = blocks[0].dtype
    for b in blocks[1:]:
        dt = _dt.promote(dt, b.dtype)
    cols = sum(b._shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        b = b if b.dtype is dt else cast(b, dt)
        right = cols - left - b._shape[1]
        rows.append(pad(b, (left, right)) if cols else b)
        left += b._shape[1]
    return cat(rows, 0)


def _block_diag_ref(xs):
    blocks = [np.atleast_2d(x) for x in xs]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)),
                   np.result_type(*blocks))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


# ---- at least n dims, stacking, splitting ------------------------------------------------------


def _atleast(op: str, tensors, fix) -> Tensor | tuple:
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = tuple(fix(t) for t in _tensors(op, tensors))
    return out[0] if single else out


def atleast_1d(*tensors: Tensor):
    """Each tensor with at least 1 dimension (a 0-d one becomes shape (1,)); one tensor in,
    one out, otherwise a tuple.

    Example:
        >>> import singa_tensor as st
        >>> st.atleast_1d(st.tensor(3)).shape
        (1,)
    """
    return _atleast("atleast_1d", tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors: Tensor):
    """Each tensor with at least 2 dimensions (leading 1s added).

    Example:
        >>> import singa_tensor as st
        >>> st.atleast_2d(st.tensor([1, 2])).shape
        (1, 2)
    """
    return _atleast("atleast_2d", tensors, lambda t: t.reshape(1, -1) if t.ndim < 2 else t)


def _3d(t: Tensor) -> Tensor:
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, -1, 1)
    return t.unsqueeze(-1) if t.ndim == 2 else t


def atleast_3d(*tensors: Tensor):
    """Each tensor with at least 3 dimensions: (n,) becomes (1, n, 1), (m, n) becomes
    (m, n, 1).

    Example:
        >>> import singa_tensor as st
        >>> st.atleast_3d(st.ones(2, 3)).shape
        (2, 3, 1)
    """
    return _atleast("atleast_3d", tensors, _3d)


def _stack_list(op: str, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of Tensors, got "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of Tensors")
    return _tensors(op, tensors)


_two = lambda: [((_rand(2, 3), _rand(2, 3, seed=1)), {}), ((_rand(3), _rand(2, seed=1)), {})]  # noqa: E731


@_seq_composite("hstack", lambda *xs: np.hstack(xs), _two)
def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join along dim 1 (dim 0 for 1-d tensors).

    Example:
        >>> import singa_tensor as st
        >>> st.hstack([st.tensor([1, 2]), st.tensor([3])]).tolist()
        [1, 2, 3]
    """
    ts = atleast_1d(*_stack_list("hstack", tensors))
    return cat(list(ts), 0 if ts[0].ndim == 1 else 1)


@_seq_composite("vstack", lambda *xs: np.vstack(xs), lambda: [
    ((_rand(2, 3), _rand(1, 3, seed=1)), {}), ((_rand(3), _rand(3, seed=1)), {})])
def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join along dim 0, 1-d tensors taken as rows (row_stack is the same).

    Example:
        >>> import singa_tensor as st
        >>> st.vstack([st.tensor([1, 2]), st.tensor([3, 4])]).tolist()
        [[1, 2], [3, 4]]
    """
    return cat(list(atleast_2d(*_stack_list("vstack", tensors))), 0)


row_stack = vstack


@_seq_composite("dstack", lambda *xs: np.dstack(xs), lambda: [
    ((_rand(2, 3), _rand(2, 3, seed=1)), {}), ((_rand(3), _rand(3, seed=1)), {})])
def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Join along dim 2, after making each tensor at least 3-d.

    Example:
        >>> import singa_tensor as st
        >>> st.dstack([st.tensor([1, 2]), st.tensor([3, 4])]).shape
        (1, 2, 2)
    """
    return cat(list(atleast_3d(*_stack_list("dstack", tensors))), 2)


@_seq_composite("column_stack", lambda *xs: np.column_stack(xs), lambda: [
    ((_rand(3), _rand(3, 2, seed=1)), {}), ((_rand(3), _rand(3, seed=1)), {})])
def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Join along dim 1, 0-d and 1-d tensors taken as columns.

    Example:
        >>> import singa_tensor as st
        >>> st.column_stack([st.tensor([1, 2]), st.tensor([3, 4])]).tolist()
        [[1, 3], [2, 4]]
    """
    ts = _stack_list("column_stack", tensors)
    return cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in ts], 1)


def _tensor_split_ref(x, indices_or_sections, dim=0):
    return tuple(a.copy() for a in np.array_split(x, indices_or_sections, axis=dim))


@composite("tensor_split", _tensor_split_ref, method=True, samples=lambda: [
    ((_rand(7, 2), 3), {}), ((_rand(2, 5), [1, 3], 1), {}), ((_rand(4), [3, 1, 6]), {}),
    ((_rand(2, 3), 4, -1), {})])
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Views of input along dim: an int n makes n parts whose sizes differ by at most one
    (the first ones larger); a list of indices splits before each index.

    Example:
        >>> import singa_tensor as st
        >>> [t.tolist() for t in st.tensor_split(st.arange(5), 2)]
        [[0, 1, 2], [3, 4]]
    """
    expect_tensor("tensor_split", input)
    if input.ndim == 0:
        raise ValueError("tensor_split: expected at least a 1-dimensional tensor")
    d = _wrap_dim(dim, input.ndim, "tensor_split")
    n = input._shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype.is_floating_point or spec.ndim > 1:
            raise TypeError("tensor_split: indices_or_sections must be a 0-d or 1-d integer "
                            f"tensor, got {spec.dtype.name} of shape {spec._shape}")
        spec = spec.item() if spec.ndim == 0 else spec.tolist()
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec <= 0:
            raise ValueError(f"tensor_split: number of sections must be larger than 0, got "
                             f"{spec}")
        q, r = divmod(n, int(spec))
        bounds = list(itertools.accumulate([q + 1] * r + [q] * (int(spec) - r), initial=0))
    elif isinstance(spec, (list, tuple)):
        idx = [_int("tensor_split", i, "indices") for i in spec]
        bounds = [0] + [min(max(i if i >= 0 else i + n, 0), n) for i in idx] + [n]
    else:
        raise TypeError(f"tensor_split: indices_or_sections must be an int or a list of ints, "
                        f"got {type(spec).__name__}")
    return tuple(narrow(input, d, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))



def _np_nsplit(fn):
    return lambda x, sections: tuple(a.copy() for a in fn(x, sections))


def _nsplit(op: str, input: Tensor, sections, dim: int, min_dims: int) -> tuple:
    expect_tensor(op, input)
    if input.ndim < min_dims:
        raise ValueError(f"{op}: requires a tensor with at least {min_dims} dimension(s), got "
                         f"shape {input._shape}")
    if isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        if sections <= 0 or input._shape[dim] % sections:
            raise ValueError(f"{op}: dimension {dim} of size {input._shape[dim]} is not "
                             f"divisible by the split_size {sections}")
    return tensor_split(input, sections, dim)


@composite("hsplit", _np_nsplit(np.hsplit), method=True, samples=lambda: [
    ((_rand(2, 4), 2), {}), ((_rand(6), [1, 4]), {})])
def hsplit(input: Tensor, sections) -> tuple:
    """tensor_split along dim 1 (dim 0 for a 1-d tensor); an int must divide that size.

    Example:
        >>> import singa_tensor as st
        >>> [t.shape for t in st.hsplit(st.ones(2, 4), 2)]
        [(2, 2), (2, 2)]
    """
    d = 0 if isinstance(input, Tensor) and input.ndim == 1 else 1
    return _nsplit("hsplit", input, sections, d, 1)


@composite("vsplit", _np_nsplit(np.vsplit), method=True, samples=lambda: [
    ((_rand(4, 2), 2), {}), ((_rand(4, 3), [1]), {})])
def vsplit(input: Tensor, sections) -> tuple:
    """tensor_split along dim 0 of a tensor with at least 2 dims; an int must divide it.

    Example:
        >>> import singa_tensor as st
        >>> [t.shape for t in st.vsplit(st.ones(4, 2), [1])]
        [(1, 2), (3, 2)]
    """
    return _nsplit("vsplit", input, sections, 0, 2)


@composite("dsplit", _np_nsplit(np.dsplit), method=True, samples=lambda: [
    ((_rand(2, 2, 4), 2), {})])
def dsplit(input: Tensor, sections) -> tuple:
    """tensor_split along dim 2 of a tensor with at least 3 dims; an int must divide it.

    Example:
        >>> import singa_tensor as st
        >>> [t.shape for t in st.dsplit(st.ones(1, 2, 4), 2)]
        [(1, 2, 2), (1, 2, 2)]
    """
    return _nsplit("dsplit", input, sections, 2, 3)


def _flip_dim(op: str, input: Tensor, dim: int, min_dims: int) -> Tensor:
    expect_tensor(op, input)
    if input.ndim < min_dims:
        raise ValueError(f"{op}: input must be >= {min_dims}-d, got shape {input._shape}")
    return flip(input, [dim])


@composite("fliplr", np.fliplr, method=True, samples=lambda: [((_rand(2, 3),), {})])
def fliplr(input: Tensor) -> Tensor:
    """input with the order of dim 1 reversed (left and right swapped).

    Example:
        >>> import singa_tensor as st
        >>> st.fliplr(st.tensor([[1, 2, 3]])).tolist()
        [[3, 2, 1]]
    """
    return _flip_dim("fliplr", input, 1, 2)


@composite("flipud", np.flipud, method=True, samples=lambda: [((_rand(2, 3),), {})])
def flipud(input: Tensor) -> Tensor:
    """input with the order of dim 0 reversed (up and down swapped).

    Example:
        >>> import singa_tensor as st
        >>> st.flipud(st.tensor([1, 2, 3])).tolist()
        [3, 2, 1]
    """
    return _flip_dim("flipud", input, 0, 1)


@composite("narrow_copy", lambda x, dim, start, length: np.take(
    x, np.arange(start % x.shape[dim], start % x.shape[dim] + length), axis=dim),
    method=True, samples=lambda: [((_rand(3, 4), 1, 1, 2), {}), ((_rand(3, 4), 0, -2, 2), {})])
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A copy (not a view) of narrow(input, dim, start, length).

    Example:
        >>> import singa_tensor as st
        >>> st.narrow_copy(st.arange(5), 0, 1, 2).tolist()
        [1, 2]
    """
    return narrow(input, dim, start, length).clone()

# ---- broadcasting -----------------------------------------------------------------------------


def broadcast_shapes(*shapes) -> tuple:
    """The shape that tensors of the given shapes (tuples or ints) broadcast to.

    Example:
        >>> import singa_tensor as st
        >>> st.broadcast_shapes((2, 1), (3,))
        (2, 3)
    """
    norm = []
    for s in shapes:
        s = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
        for n in s:
            if not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"broadcast_shapes: sizes must be non-negative ints, got {s}")
        norm.append(tuple(int(n) for n in s))
    return _bshapes(*norm, op="broadcast_shapes") if norm else ()


@composite("broadcast_tensors", lambda *xs: tuple(a.copy() for a in np.broadcast_arrays(*xs)),
           samples=lambda: [((_rand(2, 1), _rand(3, seed=1)), {}),
                            ((_rand(), _rand(2, 2, seed=1), _rand(1, 2, seed=2)), {})])
def broadcast_tensors(*tensors: Tensor) -> tuple:
    """The tensors expanded (as views) to their common broadcast shape.

    Example:
        >>> import singa_tensor as st
        >>> [t.shape for t in st.broadcast_tensors(st.ones(2, 1), st.ones(3))]
        [(2, 3), (2, 3)]
    """
    ts = _tensors("broadcast_tensors", tensors)
    shape = _bshapes(*(t._shape for t in ts), op="broadcast_tensors")
    return tuple(expand(t, *shape) for t in ts)


def _rot90_ref(x, k=1, dims=(0, 1)):
    return np.rot90(x, k, dims).copy()


@composite("rot90", _rot90_ref, method=True, samples=lambda: [
    ((_rand(2, 3),), {}), ((_rand(2, 3, 4),), {"k": 2, "dims": [1, 2]}),
    ((_rand(2, 3),), {"k": -1}), ((_rand(2, 3),), {"k": 3, "dims": [1, 0]})])
def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """input rotated by 90 degrees k times in the plane of dims, from the first dim towards
    the second.

    Example:
        >>> import singa_tensor as st
        >>> st.rot90(st.tensor([[1, 2], [3, 4]])).tolist()
        [[2, 4], [1, 3]]
    """
    expect_tensor("rot90", input)
    k = _int("rot90", k, "k")
    if len(dims) != 2:
        raise ValueError(f"rot90: expected total rotation dims == 2, got {len(dims)}")
    if input.ndim < 2:
        raise ValueError(f"rot90: expected total dims >= 2, got {input.ndim}")
    d0, d1 = (_wrap_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90: rotation dims must be different, got {list(dims)}")
    k %= 4
    if k == 0:
        return input.clone()
    if k == 2:
        return flip(input, [d0, d1])
    return flip(input, [d1 if k == 1 else d0]).transpose(d0, d1)


def _unfold_ref(x, dimension, size, step):
    x = x.reshape(1) if x.ndim == 0 else x
    d = dimension % x.ndim
    n = (x.shape[d] - size) // step + 1
    parts = [np.take(x, np.arange(i * step, i * step + size), axis=d) for i in range(n)]
    return np.moveaxis(np.stack(parts, d), d + 1, -1)


@composite("tensor_unfold", _unfold_ref, method="unfold", samples=lambda: [
    ((_rand(7), 0, 2, 2), {}), ((_rand(3, 5), 1, 3, 1), {}), ((_rand(4, 2), 0, 4, 3), {})])
def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """All windows of `size` elements along dimension, `step` apart: that dimension becomes
    the number of windows and a new last dimension of length size holds each window.

    Example:
        >>> import singa_tensor as st
        >>> st.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
    """
    expect_tensor("unfold", input)
    size, step = _int("unfold", size, "size"), _int("unfold", step, "step")
    d = _wrap_dim(dimension, input.ndim, "unfold")
    x = input.reshape(1) if input.ndim == 0 else input
    n = x._shape[d]
    if size < 0 or size > n:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size "
                           f"is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    count = (n - size) // step + 1
    idx = (_arange(count, x) * step).reshape(count, 1) + _arange(size, x)
    y = index_select(x, d, idx.reshape(-1))
    y = y.reshape(*x._shape[:d], count, size, *x._shape[d + 1:])
    y = movedim(y, d + 1, -1)
    return y.reshape(size) if input.ndim == 0 else y


# ---- Tensor aliases ----------------------------------------------------------------------------


def _ndimension(self: Tensor) -> int:
    """The number of dimensions (an alias of dim()).

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, 3).ndimension()
        2
    """
    return self.ndim


def _nelement(self: Tensor) -> int:
    """The number of elements (an alias of numel()).

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, 3).nelement()
        6
    """
    return self.numel()


bind_method(_ndimension, "ndimension")
bind_method(_nelement, "nelement")


__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes",
    "broadcast_tensors", "cartesian_prod", "cdist", "column_stack", "combinations", "cross",
    "diag", "diag_embed", "diagflat", "dsplit", "dstack", "fliplr", "flipud", "hsplit",
    "hstack", "kron", "meshgrid", "narrow_copy", "rot90", "row_stack", "tensor_split",
    "tensordot", "tril_indices", "triu_indices", "vsplit", "vstack",
]
