"""nn.functional's 3-d convolutions and pools, transposed and unpooling forms, the
*_with_indices pools, pdist, the deprecated upsample aliases of interpolate, and relu_.

The computing ones are ops of ops/conv3d.py and ops/pooling.py; this module names them as
PyTorch's nn.functional does.
"""

from __future__ import annotations

import warnings

from .. import ops as _ops
from ..ops import pooling as _pool

# by its dotted path: the package attribute `ops.conv3d` is the function of that name
from ..ops.conv3d import (  # noqa: F401
    adaptive_avg_pool3d,
    adaptive_max_pool3d,
    conv3d,
    conv_transpose1d,
    conv_transpose3d,
    fractional_max_pool2d,
    fractional_max_pool3d,
    lp_pool3d,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
    pdist,
)
from ..tensor import Tensor


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """max_pool1d that always returns (values, indices).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.max_pool1d_with_indices(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2)[1].tolist()
        [[[1, 2]]]
    """
    return _pool.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """max_pool2d that always returns (values, indices in each H*W plane).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.max_pool2d_with_indices(x, 2)[1].tolist()
        [[[[5, 7], [13, 15]]]]
    """
    return _ops.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """max_pool3d that always returns (values, indices in each D*H*W volume).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.max_pool3d_with_indices(st.arange(8.0).reshape(1, 1, 2, 2, 2), 2)[1].tolist()
        [[[[[7]]]]]
    """
    return _pool.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool1d that always returns (values, indices).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([[[1.0, 3.0, 2.0, 0.0]]])
        >>> F.adaptive_max_pool1d_with_indices(x, 2)[1].tolist()
        [[[1, 2]]]
    """
    return _pool.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool2d that always returns (values, indices in each H*W plane).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.adaptive_max_pool2d_with_indices(x, 1)[1].tolist()
        [[[[15]]]]
    """
    return _pool.adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = True):
    """adaptive_max_pool3d that always returns (values, indices in each D*H*W volume).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> F.adaptive_max_pool3d_with_indices(x, 1)[1].tolist()
        [[[[[7]]]]]
    """
    return adaptive_max_pool3d(input, output_size, True)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None,
                                       output_ratio=None, return_indices: bool = True,
                                       _random_samples=None):
    """fractional_max_pool2d that always returns (values, indices in each H*W plane).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> v, i = F.fractional_max_pool2d_with_indices(st.randn(1, 1, 5, 5), 2, 3)
        >>> v.shape, i.dtype == st.int64
        ((1, 1, 3, 3), True)
    """
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None,
                                       output_ratio=None, return_indices: bool = True,
                                       _random_samples=None):
    """fractional_max_pool3d that always returns (values, indices in each D*H*W volume).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> v, i = F.fractional_max_pool3d_with_indices(st.randn(1, 1, 4, 4, 4), 2, 2)
        >>> v.shape
        (1, 1, 2, 2, 2)
    """
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def _interpolate(*args, **kwargs):
    from . import functional as F  # nn.functional's interpolate (the one layers use)

    return F.interpolate(*args, **kwargs)


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated: interpolate under its old name (warns, then resizes the same way).

    Example:
        >>> import warnings
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample(st.ones(1, 1, 2, 2), scale_factor=2).shape
        (1, 1, 4, 4)
    """
    warnings.warn("nn.functional.upsample is deprecated; use nn.functional.interpolate",
                  stacklevel=2)
    return _interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(input, size, scale_factor, mode="nearest").

    Example:
        >>> import warnings
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample_nearest(st.tensor([[[[1.0, 2.0]]]]), scale_factor=2).tolist()
        [[[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0]]]]
    """
    warnings.warn("nn.functional.upsample_nearest is deprecated; use "
                  "nn.functional.interpolate", stacklevel=2)
    return _interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(input, size, scale_factor, mode="bilinear",
    align_corners=True).

    Example:
        >>> import warnings
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     F.upsample_bilinear(st.tensor([[[[0.0, 2.0]]]]), size=(1, 3)).tolist()
        [[[[0.0, 1.0, 2.0]]]]
    """
    warnings.warn("nn.functional.upsample_bilinear is deprecated; use "
                  "nn.functional.interpolate", stacklevel=2)
    return _interpolate(input, size, scale_factor, "bilinear", True)


def relu_(input: Tensor) -> Tensor:
    """relu in place: input becomes max(input, 0) and is returned.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([-1.0, 2.0])
        >>> F.relu_(x) is x, x.tolist()
        (True, [0.0, 2.0])
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"relu_: input must be a Tensor, got {type(input).__name__}")
    return input.relu_()


__all__ = [
    "adaptive_avg_pool3d", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices", "conv3d", "conv_transpose1d", "conv_transpose3d",
    "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices", "lp_pool3d", "max_pool1d_with_indices",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d",
    "max_unpool3d", "pdist", "relu_", "upsample", "upsample_bilinear", "upsample_nearest",
]
