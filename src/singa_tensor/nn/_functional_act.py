"""nn.functional's further activations, the channel-wise and alpha dropouts and the pooling
and rearranging functions of ops/pooling.py and ops/rearrange.py (PyTorch names).

The activations are registry ops of ops/activation.py; these wrappers add PyTorch's
`inplace=` (written back with an in-place copy, which keeps autograd right) and the implicit
dim of softmin. The dropouts draw like F.dropout: one uniform draw per kept unit, from
`generator` when given.
"""

from __future__ import annotations

import math
import warnings

from .. import creation
from ..ops import activation as _act
from ..ops import pooling as _pool
from ..ops import rearrange as _rearrange
from ..tensor import Tensor
from .functional import _check_p, _operand, _softmax_dim, _tensor, _write_back


def _in_place(fn, input: Tensor, inplace: bool, *args) -> Tensor:
    return _write_back(input, fn(_operand(input, inplace), *args), inplace)


# ---- activations -------------------------------------------------------------------------------


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clipped to [min_val, max_val].

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardtanh(st.tensor([-2.0, 0.5]), -0.5, 0.5).tolist()
        [-0.5, 0.5]
    """
    return _in_place(_act.hardtanh, input, inplace, min_val, max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.relu6(st.tensor([7.0])).tolist()
        [6.0]
    """
    return _in_place(_act.relu6, input, inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with the self-normalising constants.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.selu(st.tensor([0.0])).tolist()
        [0.0]
    """
    return _in_place(_act.selu, input, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.celu(st.tensor([2.0])).tolist()
        [2.0]
    """
    return _in_place(_act.celu, input, inplace, alpha)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """Piecewise-linear sigmoid: clamp(x / 6 + 1/2, 0, 1).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardsigmoid(st.tensor([3.0])).tolist()
        [1.0]
    """
    return _in_place(_act.hardsigmoid, input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardswish(st.tensor([3.0])).tolist()
        [3.0]
    """
    return _in_place(_act.hardswish, input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.mish(st.tensor([0.0])).tolist()
        [0.0]
    """
    return _in_place(_act.mish, input, inplace)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, value elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.threshold(st.tensor([0.5, 2.0]), 1.0, 0.0).tolist()
        [0.0, 2.0]
    """
    return _in_place(_act.threshold, input, inplace, threshold, value)


def rrelu(input: Tensor, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: random negative slopes in [lower, upper] when training, their
    mean otherwise.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.rrelu(st.tensor([-3.0]), 0.1, 0.3).tolist()
        [-0.6000000238418579]
    """
    return _in_place(_act.rrelu, input, inplace, lower, upper, training)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along dim.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.softmin(st.zeros(1, 2), dim=1).tolist()
        [[0.5, 0.5]]
    """
    _tensor("softmin", input)
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim)
    return _act.softmin(input, dim, dtype=dtype)


def _underscore(fn, name: str):
    def inplace_fn(input: Tensor, *args, **kwargs) -> Tensor:
        return fn(input, *args, inplace=True, **kwargs)

    inplace_fn.__name__ = inplace_fn.__qualname__ = name
    inplace_fn.__doc__ = (
        f"In-place {fn.__name__}: {name}(x, ...) is {fn.__name__}(x, ..., inplace=True).\n\n"
        f"    Example:\n        >>> import singa_tensor as st\n"
        f"        >>> import singa_tensor.nn.functional as F\n"
        f"        >>> x = st.tensor([-9.0, 0.0])\n        >>> F.{name}(x) is x\n        True\n")
    return inplace_fn


def _from_functional(name: str):
    from . import functional  # the module importing this one: its names exist by now

    return getattr(functional, name)


celu_ = _underscore(celu, "celu_")
elu_ = _underscore(_from_functional("elu"), "elu_")
hardtanh_ = _underscore(hardtanh, "hardtanh_")
leaky_relu_ = _underscore(_from_functional("leaky_relu"), "leaky_relu_")
rrelu_ = _underscore(rrelu, "rrelu_")
selu_ = _underscore(selu, "selu_")


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place threshold.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([0.5, 2.0])
        >>> F.threshold_(x, 1.0, 0.0) is x, x.tolist()
        (True, [0.0, 2.0])
    """
    return globals()["threshold"](input, threshold, value, inplace=True)


glu = _act.glu
hardshrink = _act.hardshrink
logsigmoid = _act.logsigmoid
prelu = _act.prelu
softshrink = _act.softshrink
softsign = _act.softsign
tanhshrink = _act.tanhshrink


# ---- channel-wise and alpha dropout ----------------------------------------------------------

# SELU's saturation value -scale * alpha, which alpha dropout drops to
_ALPHA_PRIME = -1.7580993408473766


def _keep_mask(input: Tensor, p: float, shape: tuple, generator) -> Tensor:
    draw = creation.rand(*shape, generator=generator, dtype=input.dtype, device=input.device)
    return (draw >= p).to(input.dtype)


def _channel_shape(input: Tensor, batched: int) -> tuple:
    """The mask shape of channel-wise dropout: one draw per (sample, channel), or per channel
    for an unbatched input (batched - 1 dims)."""
    if input.ndim == batched:
        return tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return (input.shape[0],) + (1,) * (input.ndim - 1)


def _dropout_like(op: str, input: Tensor, p, training: bool, inplace: bool, shape, generator,
                  alpha: bool) -> Tensor:
    _tensor(op, input)
    p = _check_p(op, p)
    if not training or p == 0.0:
        return input
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if p == 1.0:
        return _write_back(input, input * 0.0, inplace)
    keep = _keep_mask(input, p, shape if shape is not None else tuple(input.shape), generator)
    src = _operand(input, inplace)
    if not alpha:
        return _write_back(input, src * (keep * (1.0 / (1.0 - p))), inplace)
    # dropped units go to alpha'; a and b bring the mean and variance back to those of the input
    a = 1.0 / math.sqrt((1.0 - p) * (1.0 + p * _ALPHA_PRIME ** 2))
    b = -a * _ALPHA_PRIME * p
    out = src * (keep * a) + ((1.0 - keep) * (a * _ALPHA_PRIME) + b)
    return _write_back(input, out, inplace)


def _feature_dims(op: str, input: Tensor, dims: tuple, name: str) -> None:
    _tensor(op, input)
    if input.ndim not in dims:
        raise ValueError(f"{op}: expected {' or '.join(f'{d}D' for d in dims)} input {name}, "
                         f"but received a {input.ndim}D input of shape {input.shape}")


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) with probability p, scaling the rest by
    1 / (1 - p), when training.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> y = F.dropout1d(st.ones(2, 8, 5), 0.5)
        >>> all(len(set(row)) == 1 for s in y.tolist() for row in s)
        True
    """
    _feature_dims("dropout1d", input, (2, 3), "(N, C, L) or (C, L)")
    return _dropout_like("dropout1d", input, p, training, inplace,
                         _channel_shape(input, 3), generator, False)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Zero whole channels of (N, C, H, W) with probability p, scaling the rest by 1 / (1 - p),
    when training. A 3-D input is taken as (N, C, L), as PyTorch does, with a warning.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.dropout2d(st.ones(1, 2, 3, 3), 0.5, training=False).shape
        (1, 2, 3, 3)
    """
    _tensor("dropout2d", input)
    if input.ndim < 2:
        raise ValueError(f"dropout2d: expected a 4D (N, C, H, W) input, but received a "
                         f"{input.ndim}D input of shape {input.shape}")
    if input.ndim != 4:
        warnings.warn(f"dropout2d: received a {input.ndim}D input; channel-wise dropout is "
                      "applied over its first two dimensions (N, C)", stacklevel=2)
    return _dropout_like("dropout2d", input, p, training, inplace,
                         _channel_shape(input, input.ndim), generator, False)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
              generator=None) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p, scaling the
    rest by 1 / (1 - p), when training.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.dropout3d(st.ones(2, 1, 1, 1), 0.0).tolist()
        [[[[1.0]]], [[[1.0]]]]
    """
    _feature_dims("dropout3d", input, (4, 5), "(N, C, D, H, W) or (C, D, H, W)")
    return _dropout_like("dropout3d", input, p, training, inplace,
                         _channel_shape(input, 5), generator, False)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False,
                  generator=None) -> Tensor:
    """Dropout for SELU networks: dropped elements are set to SELU's saturation value and an
    affine map keeps the mean and variance, when training.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.randn(20000)
        >>> y = F.alpha_dropout(x, 0.2, training=True)
        >>> abs(y.mean().item()) < 0.05, abs(y.std().item() - 1.0) < 0.05
        (True, True)
    """
    return _dropout_like("alpha_dropout", input, p, training, inplace, None, generator, True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False, generator=None) -> Tensor:
    """Alpha dropout of whole channels (dimension 1 of a batched input).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.feature_alpha_dropout(st.ones(2, 3, 4), 0.5).tolist() == st.ones(2, 3, 4).tolist()
        True
    """
    _tensor("feature_alpha_dropout", input)
    if input.ndim < 2:
        raise ValueError(f"feature_alpha_dropout: expected an input with a channel dimension "
                         f"(at least 2D), got shape {input.shape}")
    return _dropout_like("feature_alpha_dropout", input, p, training, inplace,
                         _channel_shape(input, input.ndim), generator,
                         True)


# ---- pooling (ops/pooling.py) ------------------------------------------------------------------

_POOLS = ["adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
          "avg_pool3d", "local_response_norm", "lp_pool1d", "lp_pool2d", "max_pool1d",
          "max_pool3d"]
globals().update({_n: getattr(_pool, _n) for _n in _POOLS})

# ---- rearranging (ops/rearrange.py) -------------------------------------------------------------

_REARRANGE = ["channel_shuffle", "fold", "pixel_shuffle", "pixel_unshuffle", "unfold"]
globals().update({_n: getattr(_rearrange, _n) for _n in _REARRANGE})

__all__ = _POOLS + _REARRANGE + [
    "alpha_dropout", "celu", "celu_", "elu_", "hardtanh_", "leaky_relu_", "rrelu_", "selu_",
    "threshold_", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
    "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid", "mish", "prelu",
    "relu6", "rrelu", "selu", "softmin", "softshrink", "softsign", "tanhshrink", "threshold",
]
