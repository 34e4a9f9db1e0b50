"""3-d convolution, 1-d and 3-d transposed convolution, 3-d batch normalisation, 3-d adaptive
and power-average pooling and max unpooling layers, and the lazy forms of the 3-d and
transposed convolutions and of batch and instance normalisation (PyTorch names, arguments and
initialisation)."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .conv_layers import ConvTranspose2d, _BatchNorm, _check_channels, _ConvNd
from .module import Module
from .more_layers import (
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _feature_size,
    _LazyBatchNorm,
    _LazyConv,
    _LazyModule,
    _positive_int,
)
from .pooling_layers import AdaptiveMaxPool1d, _LPPoolNd


def _ntuple(v, n: int) -> tuple:
    if isinstance(v, (list, tuple)):
        return tuple(v) if len(v) != 1 else tuple(v) * n
    return (v,) * n


def _check_kernel(layer: str, kernel: tuple, stride: tuple, n: int) -> None:
    for name, v in (("kernel_size", kernel), ("stride", stride)):
        if len(v) != n:
            raise ValueError(f"{layer}: {name} must be an int or {n} ints, got {v}")
    if any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in kernel):
        raise ValueError(f"{layer}: kernel_size must be positive ints, got {kernel}")
    if any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in stride):
        raise ValueError(f"{layer}: stride must be positive ints, got {stride}")


_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class Conv3d(_ConvNd):
    """3-d convolution layer over (N, C, D, H, W) or (C, D, H, W); padding may be an int, a
    triple, "valid" or "same".

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.Conv3d(2, 4, 3, padding=1)(st.randn(1, 2, 4, 5, 6)).shape
        (1, 4, 4, 5, 6)
    """

    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        _check_channels("Conv3d", in_channels, out_channels, groups)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"Conv3d: padding_mode must be one of {sorted(_PADDING_MODES)}, "
                             f"got {padding_mode!r}")
        self.padding_mode = padding_mode
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, 3), _ntuple(stride, 3)
        _check_kernel("Conv3d", self.kernel_size, self.stride, 3)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, 3)
        self.dilation = _ntuple(dilation, 3)
        kd, kh, kw = self.kernel_size
        self._init_params((out_channels, in_channels // groups, kd, kh, kw),
                          in_channels // groups * kd * kh * kw, bias, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode != "zeros" and not isinstance(self.padding, str):
            # the other modes pad first (last dim first, as F.pad reads them), then convolve
            amounts = tuple(p for p in reversed(self.padding) for _ in (0, 1))
            return F.conv3d(F.pad(input, amounts, mode=self.padding_mode), self.weight,
                            self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class _ConvTransposeNd(_ConvNd):
    transposed = True
    _n = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1, device=None,
                 dtype=None):
        super().__init__()
        name, n = type(self).__name__, self._n
        _check_channels(name, in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        _check_kernel(name, self.kernel_size, self.stride, n)
        self.padding, self.output_padding = _ntuple(padding, n), _ntuple(output_padding, n)
        self.dilation = _ntuple(dilation, n)
        size = 1
        for k in self.kernel_size:
            size *= k
        # as PyTorch: the fan-in of a transposed convolution is read from weight dim 1
        self._init_params((in_channels, out_channels // groups) + self.kernel_size,
                          out_channels // groups * size, bias, device, dtype)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        fn = F.conv_transpose1d if self._n == 1 else F.conv_transpose3d
        return fn(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                  self.groups, self.dilation)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        n, name = self._n, type(self).__name__
        want = tuple(output_size)[-n:]
        sizes = input.shape[-n:]
        pads = []
        for a in range(n):
            least = ((sizes[a] - 1) * self.stride[a] - 2 * self.padding[a]
                     + self.dilation[a] * (self.kernel_size[a] - 1) + 1)
            extra = want[a] - least
            if not 0 <= extra < max(self.stride[a], self.dilation[a]):
                raise ValueError(f"{name}: output_size {tuple(want)} is not reachable from an "
                                 f"input of size {tuple(sizes)}")
            pads.append(extra)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution layer; weight (in_channels, out_channels/groups, k).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConvTranspose1d(4, 2, 2, stride=2)(st.randn(3, 4, 5)).shape
        (3, 2, 10)
    """

    _n = 1


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-d convolution layer; weight (in_channels, out_channels/groups, kd, kh,
    kw).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.ConvTranspose3d(2, 3, 2, stride=2)(st.randn(1, 2, 2, 3, 2)).shape
        (1, 3, 4, 6, 4)
    """

    _n = 3


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W); eval mode uses the running statistics.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.BatchNorm3d(2)(st.randn(3, 2, 2, 2, 2)).shape
        (3, 2, 2, 2, 2)
    """

    _dims = (5,)


class AdaptiveAvgPool3d(Module):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to output_size (None keeps a
    size).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveAvgPool3d((1, None, 2))(st.randn(2, 3, 4, 5, 6)).shape
        (2, 3, 1, 5, 2)
    """

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) to output_size; with return_indices,
    also each maximum's flat position in D*H*W.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.AdaptiveMaxPool3d(1)(st.arange(8.0).reshape(1, 1, 2, 2, 2)).tolist()
        [[[[[7.0]]]]]
    """

    _fn = "adaptive_max_pool3d"


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.LPPool3d(1, 2)(st.ones(1, 1, 2, 2, 2)).tolist()
        [[[[[8.0]]]]]
    """

    _fn = "lp_pool3d"


class _MaxUnpoolNd(Module):
    _fn = ""
    _n = 1

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._n)
        self.padding = _ntuple(padding, self._n)
        _check_kernel(type(self).__name__, self.kernel_size, self.stride, self._n)

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return getattr(F, self._fn)(input, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d: each value goes to its index in a zero output.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> v, i = nn.MaxPool1d(2, return_indices=True)(st.tensor([[[1.0, 3.0, 4.0, 2.0]]]))
        >>> nn.MaxUnpool1d(2)(v, i).tolist()
        [[[0.0, 3.0, 4.0, 0.0]]]
    """

    _fn, _n = "max_unpool1d", 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> v, i = nn.MaxPool2d(2, return_indices=True)(st.arange(16.0).reshape(1, 1, 4, 4))
        >>> nn.MaxUnpool2d(2)(v, i).shape
        (1, 1, 4, 4)
    """

    _fn, _n = "max_unpool2d", 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> x = st.randn(1, 2, 4, 4, 4)
        >>> v, i = nn.MaxPool3d(2, return_indices=True)(x)
        >>> nn.MaxUnpool3d(2)(v, i).shape
        (1, 2, 4, 4, 4)
    """

    _fn, _n = "max_unpool3d", 3


class _FractionalMaxPoolNd(Module):
    _fn = ""

    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples=None) -> None:
        super().__init__()
        name = type(self).__name__
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{name}: give exactly one of output_size and output_ratio")
        if output_ratio is not None:
            ratios = output_ratio if isinstance(output_ratio, (list, tuple)) else [output_ratio]
            if any(not 0 < float(r) < 1 for r in ratios):
                raise ValueError(f"{name}: output_ratio must be in (0, 1), got "
                                 f"{output_ratio!r}")
        self.kernel_size, self.output_size, self.output_ratio = (kernel_size, output_size,
                                                                 output_ratio)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples, persistent=False)

    def forward(self, input: Tensor):
        return getattr(F, self._fn)(input, self.kernel_size, self.output_size,
                                    self.output_ratio, self.return_indices,
                                    self._random_samples)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, output_size={self.output_size}, "
                f"output_ratio={self.output_ratio}")


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, H, W) or (C, H, W), with new pseudo-random
    windows at each call (drawn from the default generator) unless _random_samples is
    given.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.FractionalMaxPool2d(3, output_ratio=0.5)(st.randn(1, 2, 10, 8)).shape
        (1, 2, 5, 4)
    """

    _fn = "fractional_max_pool2d"


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.FractionalMaxPool3d(2, output_size=(2, 3, 3))(st.randn(1, 1, 4, 5, 6)).shape
        (1, 1, 2, 3, 3)
    """

    _fn = "fractional_max_pool3d"


# ---- lazy forms ----------------------------------------------------------------------------------


class LazyConv3d(_LazyConv):
    """A Conv3d whose in_channels is read from the first input, (N, C, D, H, W) or
    (C, D, H, W).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConv3d(4, 2)
        >>> conv(st.randn(1, 3, 3, 3, 3)).shape, conv.weight.shape
        ((1, 4, 2, 2, 2), (4, 3, 2, 2, 2))
    """

    _eager = Conv3d
    _channel_dim = -4


class _LazyConvTranspose(_LazyModule):
    _eager: type = ConvTranspose1d
    _channel_dim = -2

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_channels = 0
        self.out_channels = _positive_int(type(self).__name__, "out_channels", out_channels)
        self._options = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                             output_padding=output_padding, groups=groups, bias=bias,
                             dilation=dilation)
        self._init_lazy(dtype, device, {"weight": True, "bias": bias})

    def _built(self, input: Tensor) -> Module:
        dtype, device = self._dtype_device()
        c = _feature_size(type(self).__name__, input, self._channel_dim, -self._channel_dim)
        return self._eager(c, self.out_channels, device=device, dtype=dtype, **self._options)


class LazyConvTranspose1d(_LazyConvTranspose):
    """A ConvTranspose1d whose in_channels is read from the first input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConvTranspose1d(2, 3)
        >>> conv(st.randn(1, 5, 4)).shape, conv.weight.shape
        ((1, 2, 6), (5, 2, 3))
    """

    _eager, _channel_dim = ConvTranspose1d, -2


class LazyConvTranspose2d(_LazyConvTranspose):
    """A ConvTranspose2d whose in_channels is read from the first input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConvTranspose2d(2, 2, stride=2)
        >>> conv(st.randn(1, 3, 4, 4)).shape, conv.in_channels
        ((1, 2, 8, 8), 3)
    """

    _eager, _channel_dim = ConvTranspose2d, -3


class LazyConvTranspose3d(_LazyConvTranspose):
    """A ConvTranspose3d whose in_channels is read from the first input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> conv = nn.LazyConvTranspose3d(1, 2)
        >>> conv(st.randn(1, 2, 2, 2, 2)).shape
        (1, 1, 3, 3, 3)
    """

    _eager, _channel_dim = ConvTranspose3d, -4


class LazyBatchNorm3d(_LazyBatchNorm):
    """A BatchNorm3d whose num_features is read from the first input's dim 1.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bn = nn.LazyBatchNorm3d()
        >>> bn(st.randn(2, 3, 2, 2, 2)).shape, bn.num_features
        ((2, 3, 2, 2, 2), 3)
    """

    _eager = BatchNorm3d


class _LazyInstanceNorm(_LazyBatchNorm):
    _batched = 3

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None) -> None:
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)

    def _built(self, input: Tensor) -> Module:
        dtype, device = self._dtype_device()
        name = type(self).__name__
        if input.ndim not in (self._batched - 1, self._batched):
            raise ValueError(f"{name}: expected a {self._batched - 1}-d (unbatched) or "
                             f"{self._batched}-d input, got shape {tuple(input.shape)}")
        c = input.shape[1 if input.ndim == self._batched else 0]
        return self._eager(c, self.eps, self.momentum, self.affine, self.track_running_stats,
                           device=device, dtype=dtype)


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """An InstanceNorm1d whose num_features is read from the first input's channel dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.LazyInstanceNorm1d(affine=True)
        >>> m(st.randn(2, 3, 5)).shape, m.weight.shape
        ((2, 3, 5), (3,))
    """

    _eager, _batched = InstanceNorm1d, 3


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """An InstanceNorm2d whose num_features is read from the first input's channel dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.LazyInstanceNorm2d()
        >>> m(st.randn(3, 4, 4)).shape, m.num_features
        ((3, 4, 4), 3)
    """

    _eager, _batched = InstanceNorm2d, 4


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """An InstanceNorm3d whose num_features is read from the first input's channel dim.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.LazyInstanceNorm3d(track_running_stats=True)
        >>> m(st.randn(1, 2, 2, 3, 3)).shape, m.running_mean.shape
        ((1, 2, 2, 3, 3), (2,))
    """

    _eager, _batched = InstanceNorm3d, 5


__all__ = [
    "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "BatchNorm3d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose3d", "FractionalMaxPool2d", "FractionalMaxPool3d", "LPPool3d",
    "LazyBatchNorm3d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
    "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
    "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
]
