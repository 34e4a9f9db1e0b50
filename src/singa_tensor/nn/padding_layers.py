"""Padding modules: ReflectionPad, ReplicationPad, CircularPad, ZeroPad and ConstantPad in
1, 2 and 3 dimensions, each F.pad with a fixed mode and padding (PyTorch names and shapes).

An int pads every side by the same amount; a tuple gives (left, right[, top, bottom[, front,
back]]), the last dimension first, as F.pad takes it.
"""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


def _padding(op: str, padding, n: int) -> tuple:
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * (2 * n)
    if isinstance(padding, (list, tuple)) and len(padding) == 2 * n and all(
            isinstance(p, int) and not isinstance(p, bool) for p in padding):
        return tuple(padding)
    raise ValueError(f"{op}: padding must be an int or a tuple of {2 * n} ints, got {padding!r}")


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._dims)

    def _check(self, input: Tensor) -> None:
        F._tensor(type(self).__name__, input)
        ok = (self._dims + 1, self._dims + 2)
        if input.ndim not in ok:
            raise ValueError(f"{type(self).__name__}: expected a {ok[0]}D or {ok[1]}D input, "
                             f"got a {input.ndim}D input of shape {input.shape}")

    def forward(self, input: Tensor) -> Tensor:
        self._check(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def _check(self, input: Tensor) -> None:
        # constant padding works on any input with the padded dimensions, as in PyTorch
        F._tensor(type(self).__name__, input)
        if input.ndim < self._dims:
            raise ValueError(f"{type(self).__name__}: expected an input with at least "
                             f"{self._dims} dimensions, got shape {input.shape}")

    def forward(self, input: Tensor) -> Tensor:
        self._check(input)
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ReflectionPad1d(_PadNd):
    """Pad the last dimension of (C, W) or (N, C, W) by mirroring, without repeating the edge.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReflectionPad1d((2, 1))(st.tensor([[1.0, 2.0, 3.0]])).tolist()
        [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    """

    _mode, _dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pad the last two dimensions of (C, H, W) or (N, C, H, W) by mirroring.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReflectionPad2d(1)(st.ones(1, 1, 2, 2)).shape
        (1, 1, 4, 4)
    """

    _mode, _dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pad the last three dimensions of (C, D, H, W) or (N, C, D, H, W) by mirroring.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReflectionPad3d(1)(st.ones(1, 1, 2, 2, 2)).shape
        (1, 1, 4, 4, 4)
    """

    _mode, _dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pad the last dimension of (C, W) or (N, C, W) by repeating the edge value.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReplicationPad1d((2, 1))(st.tensor([[1.0, 2.0]])).tolist()
        [[1.0, 1.0, 1.0, 2.0, 2.0]]
    """

    _mode, _dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pad the last two dimensions of (C, H, W) or (N, C, H, W) by repeating the edges.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReplicationPad2d((1, 0, 0, 1))(st.ones(1, 2, 2)).shape
        (1, 3, 3)
    """

    _mode, _dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pad the last three dimensions of (C, D, H, W) or (N, C, D, H, W) by repeating the
    edges.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ReplicationPad3d(1)(st.ones(1, 1, 1, 1)).shape
        (1, 3, 3, 3)
    """

    _mode, _dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Pad the last dimension of (C, W) or (N, C, W) by wrapping around.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.CircularPad1d((1, 2))(st.tensor([[1.0, 2.0, 3.0]])).tolist()
        [[3.0, 1.0, 2.0, 3.0, 1.0, 2.0]]
    """

    _mode, _dims = "circular", 1


class CircularPad2d(_PadNd):
    """Pad the last two dimensions of (C, H, W) or (N, C, H, W) by wrapping around.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.CircularPad2d(1)(st.ones(1, 1, 2, 2)).shape
        (1, 1, 4, 4)
    """

    _mode, _dims = "circular", 2


class CircularPad3d(_PadNd):
    """Pad the last three dimensions of (C, D, H, W) or (N, C, D, H, W) by wrapping around.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.CircularPad3d(1)(st.ones(1, 2, 2, 2)).shape
        (1, 4, 4, 4)
    """

    _mode, _dims = "circular", 3


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with value.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConstantPad1d((1, 2), 3.5)(st.tensor([[1.0]])).tolist()
        [[3.5, 1.0, 3.5, 3.5]]
    """

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with value.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConstantPad2d(1, -1.0)(st.ones(1, 1, 1)).tolist()
        [[[-1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, -1.0]]]
    """

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dimensions with value.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConstantPad3d(1, 0.5)(st.ones(1, 1, 1, 1)).shape
        (1, 3, 3, 3)
    """

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ZeroPad1d(1)(st.tensor([[1.0]])).tolist()
        [[0.0, 1.0, 0.0]]
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    """Pad the last two dimensions with zeros.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ZeroPad2d((1, 0, 0, 0))(st.ones(1, 1, 1)).tolist()
        [[[0.0, 1.0]]]
    """

    _dims = 2


class ZeroPad3d(ZeroPad1d):
    """Pad the last three dimensions with zeros.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ZeroPad3d(1)(st.ones(1, 1, 1)).shape
        (3, 3, 3)
    """

    _dims = 3


__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]
