"""The scaled-and-added matrix products after addmm: baddbmm, addbmm, addmv and addr, each
beta * input + alpha * (product), composed from bmm, mv and outer.

As in addmm, beta == 0 ignores input (NaN in it does not propagate), and input must broadcast
to the product's shape.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._registry import broadcast_shapes, composite
from .elementwise import add, mul
from .linalg import bmm, mv, outer, result_dtype
from .reduce import sum as _sum


def _scaled_sum(op: str, input, product: Tensor, beta, alpha) -> Tensor:
    for name, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    out = product if alpha == 1 else mul(product, alpha)
    if input.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if broadcast_shapes(input.shape, out.shape, op=op) != out.shape:
        raise ValueError(f"{op}: input of shape {input.shape} does not broadcast to the "
                         f"product's shape {out.shape}")
    if beta == 0:
        return result_dtype(out, product, product)
    return result_dtype(add(out, input if beta == 1 else mul(input, beta)), product, input)


def _rand(*shape, seed=7):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


@composite("baddbmm", lambda i, a, b, beta=1.0, alpha=1.0: beta * i + alpha * (a @ b),
           samples=lambda: [((_rand(2, 3, 5), _rand(2, 3, 4), _rand(2, 4, 5)), {}),
                            ((_rand(5), _rand(2, 3, 4), _rand(2, 4, 5)),
                             {"beta": 0.5, "alpha": -2.0})],
           method=True, inplace=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2): (B, n, m) @ (B, m, p), input broadcast to
    (B, n, p).

    Example:
        >>> import singa_tensor as st
        >>> y = st.baddbmm(st.ones(2, 1, 1), st.ones(2, 1, 3), st.ones(2, 3, 1), beta=2)
        >>> y.flatten().tolist()
        [5.0, 5.0]
    """
    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@composite("addbmm",
           lambda i, a, b, beta=1.0, alpha=1.0: beta * i + alpha * (a @ b).sum(axis=0),
           samples=lambda: [((_rand(3, 5), _rand(2, 3, 4), _rand(2, 4, 5)), {}),
                            ((_rand(1, 5), _rand(2, 3, 4), _rand(2, 4, 5)),
                             {"beta": 0.5, "alpha": 3.0})],
           method=True, inplace=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (the sum over the batch of batch1[i] @ batch2[i]), a matrix.

    Example:
        >>> import singa_tensor as st
        >>> st.addbmm(st.zeros(1, 1), st.ones(4, 1, 3), st.ones(4, 3, 1)).tolist()
        [[12.0]]
    """
    return _scaled_sum("addbmm", input, _sum(bmm(batch1, batch2), dim=0), beta, alpha)


@composite("addmv", lambda i, m, v, beta=1.0, alpha=1.0: beta * i + alpha * (m @ v),
           samples=lambda: [((_rand(3), _rand(3, 4), _rand(4)), {}),
                            ((_rand(1), _rand(3, 4), _rand(4)), {"beta": 2.0, "alpha": 0.5})],
           method=True, inplace=True)
def addmv(input, mat, vec, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * mv(mat, vec).

    Example:
        >>> import singa_tensor as st
        >>> st.addmv(st.ones(2), st.eye(2), st.tensor([2.0, 3.0]), alpha=2).tolist()
        [5.0, 7.0]
    """
    return _scaled_sum("addmv", input, mv(mat, vec), beta, alpha)


@composite("addr", lambda i, a, b, beta=1.0, alpha=1.0: beta * i + alpha * np.outer(a, b),
           samples=lambda: [((_rand(3, 4), _rand(3), _rand(4)), {}),
                            ((_rand(4), _rand(3), _rand(4)), {"beta": -1.0, "alpha": 2.0})],
           method=True, inplace=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2).

    Example:
        >>> import singa_tensor as st
        >>> st.addr(st.zeros(2, 2), st.tensor([1.0, 2.0]), st.tensor([1.0, 3.0])).tolist()
        [[1.0, 3.0], [2.0, 6.0]]
    """
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


__all__ = ["addbmm", "addmv", "addr", "baddbmm"]
