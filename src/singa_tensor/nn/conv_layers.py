"""Convolution, pooling, normalisation and resizing layers (modules over the ops of the same
names), initialised as PyTorch initialises them."""

from __future__ import annotations

import math

from .. import creation
from .. import ops as _ops
from ..ops._geometry import at_least
from ..tensor import Tensor
from . import init
from .module import Module, Parameter


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def _kernel(layer: str, v, n: int) -> tuple:
    """kernel_size as n positive ints (the weight's shape is made from it at construction)."""
    vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) * n
    if len(vals) == 1:
        vals *= n
    if len(vals) != n or any(not isinstance(a, int) or isinstance(a, bool) for a in vals):
        raise ValueError(f"{layer}: kernel_size must be an int or a tuple of {n} ints, got "
                         f"{v!r}")
    return at_least(layer, "kernel_size", vals, 1, v)


def _check_channels(layer: str, in_ch, out_ch, groups) -> None:
    for name, v in (("in_channels", in_ch), ("out_channels", out_ch), ("groups", groups)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
    if in_ch % groups or out_ch % groups:
        raise ValueError(f"{layer}: in_channels {in_ch} and out_channels {out_ch} must be "
                         f"divisible by groups={groups}")


class _ConvNd(Module):
    def _init_params(self, weight_shape, fan_in: int, bias: bool, device, dtype) -> None:
        self.weight = Parameter(creation.empty(*weight_shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(self.out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self._fan_in = fan_in
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self._fan_in) if self._fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding not in (0, (0, 0), (0,)):
            s += f", padding={self.padding}"
        if self.dilation not in (1, (1, 1), (1,)):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-d convolution layer; padding may be an int, a pair, "valid" or "same".

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Conv2d(3, 8, 3, padding=1)(st.randn(2, 3, 16, 16)).shape
        (2, 8, 16, 16)
    """

    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, device=None, dtype=None):
        super().__init__()
        _check_channels("Conv2d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _kernel("Conv2d", kernel_size, 2), _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        kh, kw = self.kernel_size
        self._init_params((out_channels, in_channels // groups, kh, kw),
                          in_channels // groups * kh * kw, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return _ops.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                           self.groups)


class Conv1d(_ConvNd):
    """1-d convolution layer over (N, C, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Conv1d(2, 4, 3)(st.randn(5, 2, 10)).shape
        (5, 4, 8)
    """

    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding=0, dilation: int = 1, groups: int = 1, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        _check_channels("Conv1d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding, self.dilation = (
            _kernel("Conv1d", kernel_size, 1), (stride,),
            padding if isinstance(padding, str) else (padding,), (dilation,))
        (k,) = self.kernel_size
        self._init_params((out_channels, in_channels // groups, k),
                          in_channels // groups * k, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        pad = self.padding if isinstance(self.padding, str) else self.padding[0]
        return _ops.conv1d(x, self.weight, self.bias, self.stride[0], pad, self.dilation[0],
                           self.groups)


class ConvTranspose2d(_ConvNd):
    """Transposed 2-d convolution layer; weight (in_channels, out_channels/groups, kh, kw).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConvTranspose2d(4, 2, 2, stride=2)(st.randn(1, 4, 5, 5)).shape
        (1, 2, 10, 10)
    """

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1, device=None,
                 dtype=None):
        super().__init__()
        _check_channels("ConvTranspose2d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _kernel("ConvTranspose2d", kernel_size, 2)
        self.stride = _pair(stride)
        self.padding, self.output_padding = _pair(padding), _pair(output_padding)
        self.dilation = _pair(dilation)
        kh, kw = self.kernel_size
        # PyTorch computes fan-in from weight dim 1 for transposed convolutions
        self._init_params((in_channels, out_channels // groups, kh, kw),
                          out_channels // groups * kh * kw, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return _ops.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                     self.output_padding, self.groups, self.dilation)


class MaxPool2d(Module):
    """Max pooling.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.MaxPool2d(2)(st.randn(1, 3, 8, 8)).shape
        (1, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor):
        return _ops.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                               self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}, "
                f"padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Average pooling (count_include_pad and ceil_mode as PyTorch).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AvgPool2d(2)(st.ones(1, 1, 4, 4)).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return _ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                               self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}, "
                f"padding={self.padding}")


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveAvgPool2d((1, 1))(st.randn(2, 5, 7, 7)).shape
        (2, 5, 1, 1)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return _ops.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Upsample(Module):
    """Resize by "nearest" or "bilinear" sampling.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Upsample(scale_factor=2)(st.ones(1, 1, 2, 2)).shape
        (1, 1, 4, 4)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners = align_corners

    def forward(self, x: Tensor) -> Tensor:
        return _ops.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self) -> str:
        return f"size={self.size}, scale_factor={self.scale_factor}, mode={self.mode!r}"


def init_norm_state(m: Module, num_features: int, eps: float, momentum, affine: bool,
                    track_running_stats: bool, device, dtype) -> None:
    """The state every per-channel normalisation layer keeps (batch and instance norm): the
    settings, weight and bias when affine, and the running statistics when tracked (None
    otherwise, so state_dict and `to` see them as PyTorch's layers have them)."""
    m.num_features, m.eps, m.momentum = num_features, eps, momentum
    m.affine, m.track_running_stats = affine, track_running_stats
    if affine:
        m.weight = Parameter(creation.ones(num_features, dtype=dtype, device=device))
        m.bias = Parameter(creation.zeros(num_features, dtype=dtype, device=device))
    else:
        m.register_parameter("weight", None)
        m.register_parameter("bias", None)
    if track_running_stats:
        m.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype,
                                                         device=device))
        m.register_buffer("running_var", creation.ones(num_features, dtype=dtype, device=device))
        m.register_buffer("num_batches_tracked", creation.zeros((), dtype="int64",
                                                                device=device))
    else:
        m.register_buffer("running_mean", None)
        m.register_buffer("running_var", None)
        m.register_buffer("num_batches_tracked", None)


class _BatchNorm(Module):
    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None):
        super().__init__()
        name = type(self).__name__
        if not isinstance(num_features, int) or num_features < 1:
            raise ValueError(f"{name}: num_features must be a positive int, got {num_features!r}")
        init_norm_state(self, num_features, eps, momentum, affine, track_running_stats, device,
                        dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self._dims:
            dims = " or ".join(map(str, self._dims))
            raise ValueError(f"{type(self).__name__}: expected a {dims}-d input, got shape "
                             f"{x.shape}")
        momentum = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or not self.track_running_stats
        return _ops.batch_norm(x, self.running_mean if self.track_running_stats else None,
                               self.running_var if self.track_running_stats else None,
                               self.weight, self.bias, use_batch, momentum or 0.0, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.BatchNorm1d(3)(st.randn(8, 3)).shape
        (8, 3)
    """

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W); eval mode uses the running statistics.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bn = nn.BatchNorm2d(3)
        >>> _ = bn(st.randn(4, 3, 5, 5)); bn.eval()(st.randn(1, 3, 5, 5)).shape
        (1, 3, 5, 5)
    """

    _dims = (4,)


class LayerNorm(Module):
    """Normalisation over the trailing normalized_shape dims, with an elementwise affine map.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LayerNorm(16)(st.randn(2, 5, 16)).shape
        (2, 5, 16)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(creation.zeros(*shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return _ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalisation over groups of channels.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.GroupNorm(2, 4)(st.randn(3, 4, 5)).shape
        (3, 4, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None):
        super().__init__()
        if not isinstance(num_groups, int) or num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_groups={num_groups!r} must be a positive divisor "
                             f"of num_channels={num_channels}")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                    eps, affine)
        if affine:
            self.weight = Parameter(creation.ones(num_channels, dtype=dtype, device=device))
            self.bias = Parameter(creation.zeros(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return _ops.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d",
           "ConvTranspose2d", "GroupNorm", "LayerNorm", "MaxPool2d", "Upsample"]
