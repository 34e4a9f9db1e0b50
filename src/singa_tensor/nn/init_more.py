"""More initialisers: Dirac delta and identity kernels, sparse columns and the truncated
normal (PyTorch's names and arguments), in place and without recording gradients.

The random ones draw from `generator`, or from the default generator that `st.manual_seed`
seeds. They run once per parameter outside any graph, so each builds its values on the host
and copies them in.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from .init import _check, _fill_from


def _put(tensor: Tensor, values: np.ndarray) -> Tensor:
    return _fill_from(tensor, creation.tensor(values, dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """A convolution kernel (3-, 4- or 5-d) that passes its input through: in each of the
    groups, output channel i reads input channel i at the kernel's centre; the rest is 0.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.dirac_(st.empty(2, 2, 3))
        >>> w[:, :, 1].tolist(), float(w.abs().sum().item())
        ([[1.0, 0.0], [0.0, 1.0]], 2.0)
    """
    _check("dirac_", tensor)
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4 or 5 dimensions are supported, got "
                         f"shape {tuple(tensor.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or (
            tensor.shape[0] % groups):
        raise ValueError(f"dirac_: groups={groups!r} must be a positive divisor of the "
                         f"{tensor.shape[0]} output channels")
    out_per_group = tensor.shape[0] // groups
    values = np.zeros(tensor.shape)
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, tensor.shape[1])):
            values[(g * out_per_group + d, d) + centre] = 1.0
    return _put(tensor, values)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the diagonal of a 2-d tensor, zeros elsewhere).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.init.eye_(st.empty(2, 3)).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    _check("eye_", tensor)
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-d tensors are supported, got shape "
                         f"{tuple(tensor.shape)}")
    return _put(tensor, np.eye(*tensor.shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-d matrix of N(0, std**2) values in which ceil(sparsity * rows) entries of each
    column, chosen at random, are zero.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.sparse_(st.empty(10, 4), 0.3)
        >>> [int((w[:, j] == 0).sum().item()) for j in range(4)]
        [3, 3, 3, 3]
    """
    _check("sparse_", tensor)
    if tensor.ndim != 2:
        raise ValueError(f"sparse_: only 2-d tensors are supported, got shape "
                         f"{tuple(tensor.shape)}")
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or not (
            0.0 <= sparsity <= 1.0):
        raise ValueError(f"sparse_: sparsity must be in [0, 1], got {sparsity!r}")
    if std < 0:
        raise ValueError(f"sparse_: std must be non-negative, got {std}")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    values = creation.randn(rows, cols, generator=generator,
                            dtype=_dt.float64).numpy(force=True) * std
    for j in range(cols):
        perm = creation.randperm(rows, generator=generator).numpy(force=True)
        values[perm[:zeros], j] = 0.0
    return _put(tensor, values)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with samples from N(mean, std**2) conditioned on [a, b] (a and b are values,
    not multiples of std): values outside are drawn again until they fall inside.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.trunc_normal_(st.empty(1000), std=2.0, a=-1.0, b=1.5)
        >>> bool((w >= -1.0).all()) and bool((w <= 1.5).all())
        True
    """
    _check("trunc_normal_", tensor)
    if std < 0:
        raise ValueError(f"trunc_normal_: std must be non-negative, got {std}")
    if a > b:
        raise ValueError(f"trunc_normal_: expects a <= b, got a={a} and b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("trunc_normal_: mean is more than 2 std from [a, b]; the values may "
                      "be far from a truncated normal", stacklevel=2)
    n = tensor.numel()
    values = np.full(n, np.nan)
    todo = np.arange(n)
    for _ in range(200):
        if todo.size == 0 or std == 0:
            break
        draw = mean + std * creation.randn(todo.size, generator=generator,
                                           dtype=_dt.float64).numpy(force=True)
        inside = (draw >= a) & (draw <= b)
        values[todo[inside]] = draw[inside]
        todo = todo[~inside]
    if std == 0:
        values[:] = mean
    # a band far in the tail (where redrawing rarely lands) ends at its nearest edge
    values = np.clip(np.where(np.isnan(values), mean, values), a, b)
    return _put(tensor, values.reshape(tensor.shape))


__all__ = ["dirac_", "eye_", "sparse_", "trunc_normal_"]
