"""Modules that rearrange or resize: PixelShuffle, PixelUnshuffle, ChannelShuffle, Unflatten,
Fold, Unfold, UpsamplingNearest2d and UpsamplingBilinear2d (PyTorch names and arguments)."""

from __future__ import annotations

from .. import ops as _ops
from ..tensor import Tensor
from . import functional as F
from .module import Module


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.PixelShuffle(3)(st.ones(1, 9, 4, 4)).shape
        (1, 1, 12, 12)
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.PixelUnshuffle(3)(st.ones(1, 1, 12, 12)).shape
        (1, 9, 4, 4)
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of (N, C, *) from `groups` groups.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ChannelShuffle(2)(st.arange(4.0).reshape(1, 4, 1)).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Unflatten(Module):
    """Split dimension dim into unflattened_size (one entry may be -1).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Unflatten(1, (2, -1))(st.zeros(3, 10)).shape
        (3, 2, 5)
    """

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, got {dim!r}")
        if not isinstance(unflattened_size, (list, tuple)) or not unflattened_size or any(
                isinstance(s, bool) or not isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a non-empty tuple of ints, "
                            f"got {unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        F._tensor("Unflatten", input)
        nd = input.ndim
        if not -nd <= self.dim < max(nd, 1):
            raise IndexError(f"Unflatten: dim {self.dim} is out of range for a {nd}-D input")
        d = self.dim % nd
        n = input.shape[d]
        sizes = list(self.unflattened_size)
        known = 1
        for s in sizes:
            if s != -1:
                known *= s
        if sizes.count(-1) > 1 or any(s < -1 for s in sizes) or (
                -1 in sizes and (known == 0 or n % known)) or (-1 not in sizes and known != n):
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} does not "
                             f"match dimension {d} of size {n} (input shape {input.shape})")
        if -1 in sizes:
            sizes[sizes.index(-1)] = n // known
        shape = tuple(input.shape[:d]) + tuple(sizes) + tuple(input.shape[d + 1:])
        return _ops.reshape(input, shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) as columns (N, C * kh * kw, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Unfold(kernel_size=(2, 3))(st.randn(2, 5, 3, 4)).shape
        (2, 30, 4)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Sum columns (N, C * kh * kw, L) back into an (N, C, *output_size) image.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(st.randn(1, 12, 12)).shape
        (1, 3, 4, 5)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class UpsamplingNearest2d(Module):
    """Nearest-neighbour upsampling of (N, C, H, W) to size or by scale_factor.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.UpsamplingNearest2d(scale_factor=2)(st.tensor([[[[1.0, 2.0]]]])).tolist()
        [[[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0]]]]
    """

    _mode, _align = "nearest", None

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__()
        self.size, self.scale_factor = size, scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self._mode, self._align)

    def extra_repr(self) -> str:
        return (f"size={self.size}" if self.size is not None else
                f"scale_factor={self.scale_factor}")


class UpsamplingBilinear2d(UpsamplingNearest2d):
    """Bilinear upsampling of (N, C, H, W) with align_corners=True, to size or by
    scale_factor.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.UpsamplingBilinear2d(size=(1, 3))(st.tensor([[[[0.0, 2.0]]]])).tolist()
        [[[[0.0, 1.0, 2.0]]]]
    """

    _mode, _align = "bilinear", True


__all__ = ["ChannelShuffle", "Fold", "PixelShuffle", "PixelUnshuffle", "Unflatten", "Unfold",
           "UpsamplingBilinear2d", "UpsamplingNearest2d"]
