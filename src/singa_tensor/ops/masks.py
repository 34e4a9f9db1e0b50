"""Ops built from index masks: the lower and upper triangles of matrices (tril, triu) and
one-hot encoding."""

from __future__ import annotations

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import apply, expect_tensor, tensor_method
from .elementwise import eq, ge, le, logical_not, masked_fill, sub
from .layout import cast, reshape
from .shape import Unsqueeze, _composite, _ints, _rand

_x234 = _rand(2, 3, 4)


def _triangle(op: str, x: Tensor, diagonal: int, lower: bool) -> Tensor:
    expect_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {x._shape}")
    (diagonal,) = _ints(op, (diagonal,), "diagonal")
    n, m = x._shape[-2:]
    rows = reshape(creation.arange(n, device=x._device), n, 1)
    offset = sub(creation.arange(m, device=x._device), rows)  # column - row, shape (n, m)
    keep = le(offset, diagonal) if lower else ge(offset, diagonal)
    return masked_fill(x, logical_not(keep), 0)


@tensor_method(inplace="tril_")
def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dimensions (elements with column - row <= diagonal);
    the rest is zero.

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, 2).tril().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
    """
    return _triangle("tril", x, diagonal, True)


@tensor_method(inplace="triu_")
def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dimensions (elements with column - row >= diagonal);
    the rest is zero.

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, 2).triu(1).tolist()
        [[0.0, 1.0], [0.0, 0.0]]
    """
    return _triangle("triu", x, diagonal, False)


def one_hot(indices: Tensor, num_classes: int = -1) -> Tensor:
    """int64 class indices to int64 one-hot vectors along a new last dimension
    (num_classes=-1: one more than the largest index).

    Example:
        >>> import singa_tensor as st
        >>> st.one_hot(st.tensor([0, 2]), 3).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    expect_tensor("one_hot", indices, "indices")
    if indices.dtype is not _dt.int64:
        raise TypeError(f"one_hot: indices must be an int64 tensor, got {indices.dtype.name}")
    (num_classes,) = _ints("one_hot", (num_classes,), "num_classes")
    values = np.asarray(indices)
    if num_classes == -1:
        if values.size == 0:
            raise ValueError("one_hot: can not infer the number of classes from an empty tensor; "
                             "pass num_classes")
        num_classes = int(values.max()) + 1
    elif num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be -1 or non-negative, got {num_classes}")
    if values.size:
        lo, hi = int(values.min()), int(values.max())
        if lo < 0:
            raise ValueError(f"one_hot: class values must be non-negative, got {lo}")
        if hi >= num_classes:
            raise ValueError(f"one_hot: class value {hi} is too large for num_classes="
                             f"{num_classes}")
    classes = creation.arange(num_classes, device=indices._device)
    return cast(eq(apply(Unsqueeze, indices, indices.ndim), classes), _dt.int64)


def _one_hot_reference(indices, num_classes=-1):
    if num_classes == -1:
        num_classes = int(indices.max()) + 1
    return (indices[..., None] == np.arange(num_classes)).astype(np.int64)


_composite("tril", "Trilu", tril, lambda x, diagonal=0: np.tril(x, diagonal),
           lambda: [((_x234,), {}), ((_rand(3, 5), -1), {}), ((_rand(4, 2),), {"diagonal": 1})])
_composite("triu", "Trilu", triu, lambda x, diagonal=0: np.triu(x, diagonal),
           lambda: [((_x234,), {}), ((_rand(3, 5), 2), {}), ((_rand(4, 2),), {"diagonal": -1})])
_composite("one_hot", "OneHot", one_hot, _one_hot_reference,
           lambda: [((np.array([0, 3, 1], dtype=np.int64),), {}),
                    ((np.array([[0, 2], [1, 1]], dtype=np.int64), 4), {}),
                    ((np.array(2, dtype=np.int64), 3), {})],
           differentiable=False, dtypes=("int64",))
__all__ = ["one_hot", "tril", "triu"]
