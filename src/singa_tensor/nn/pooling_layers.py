"""Pooling modules in 1 and 3 dimensions, adaptive max pooling, power-average pooling and
local response normalisation (PyTorch names, arguments and defaults); each holds its
arguments and calls its nn.functional form."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    _fn = ""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor):
        return getattr(F, self._fn)(input, self.kernel_size, self.stride, self.padding,
                                    self.dilation, self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max pooling over (N, C, L) or (C, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.MaxPool1d(2)(st.tensor([[[1.0, 3.0, 2.0, 0.0]]])).tolist()
        [[[3.0, 2.0]]]
    """

    _fn = "max_pool1d"


class MaxPool3d(_MaxPoolNd):
    """Max pooling over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.MaxPool3d(2)(st.randn(1, 2, 4, 4, 4)).shape
        (1, 2, 2, 2, 2)
    """

    _fn = "max_pool3d"


class AvgPool1d(Module):
    """Average pooling over (N, C, L) or (C, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AvgPool1d(2)(st.tensor([[[1.0, 3.0, 2.0, 0.0]]])).tolist()
        [[[2.0, 1.0]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, \
            count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(Module):
    """Average pooling over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AvgPool3d(2)(st.ones(1, 1, 2, 2, 2)).tolist()
        [[[[[1.0]]]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, \
            count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average pooling of (N, C, L) or (C, L) to output_size positions.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveAvgPool1d(1)(st.tensor([[[1.0, 3.0]]])).tolist()
        [[[2.0]]]
    """

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(Module):
    """Max pooling of (N, C, L) or (C, L) to output_size positions.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveMaxPool1d(1, return_indices=True)(st.tensor([[[1.0, 3.0]]]))[1].tolist()
        [[[1]]]
    """

    _fn = "adaptive_max_pool1d"

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor):
        return getattr(F, self._fn)(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """Max pooling of (N, C, H, W) or (C, H, W) to output_size (None keeps a size).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveMaxPool2d((1, None))(st.randn(2, 3, 5, 4)).shape
        (2, 3, 1, 4)
    """

    _fn = "adaptive_max_pool2d"


class _LPPoolNd(Module):
    _fn = ""

    def __init__(self, norm_type: float, kernel_size, stride=None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size, self.stride = norm_type, kernel_size, stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, float(self.norm_type), self.kernel_size,
                                    self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling over (N, C, L) or (C, L): (sum of x**p per window)**(1/p).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LPPool1d(2, 2)(st.tensor([[[3.0, 4.0]]])).tolist()
        [[[5.0]]]
    """

    _fn = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W) or (C, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LPPool2d(1, 2)(st.ones(1, 1, 2, 2)).tolist()
        [[[[4.0]]]]
    """

    _fn = "lp_pool2d"


class LocalResponseNorm(Module):
    """Normalise each channel by the squares of `size` neighbouring channels.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LocalResponseNorm(2)(st.ones(1, 3, 2, 2)).shape
        (1, 3, 2, 2)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"LocalResponseNorm: size must be a positive int, got {size!r}")
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool3d",
    "LPPool1d", "LPPool2d", "LocalResponseNorm", "MaxPool1d", "MaxPool3d",
]
