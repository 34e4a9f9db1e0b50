"""Functional forms of the layers: stateless functions over tensors, composed from st ops.

Example:
    >>> import singa_tensor as st
    >>> import singa_tensor.nn.functional as F
    >>> F.relu(st.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

import warnings

from .. import creation
from .. import ops as _ops

# linear and embedding are composite ops (one ONNX node each on export): defined in ops/dense.py
from ..ops.dense import embedding, linear
from ..ops.dense import padding_index as _padding_index  # noqa: F401 (nn.Embedding's check)
from ..tensor import Tensor


def _tensor(op: str, x, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _write_back(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    # in-place variants without a kernel of their own: the in-place copy keeps autograd right
    return input.copy_(out) if inplace else out


def _operand(input: Tensor, inplace: bool) -> Tensor:
    """What an in-place variant computes from: a copy of input when its graph would save
    input, which the write-back then overwrites (the backward would read the new values)."""
    return input.clone() if inplace and isinstance(input, Tensor) and input.requires_grad \
        else input


# ---- activations -------------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.relu(st.tensor([-1.0, 0.5])).tolist()
        [0.0, 0.5]
    """
    _tensor("relu", input)
    return input.relu_() if inplace else _ops.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x for x > 0, negative_slope * x otherwise.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.leaky_relu(st.tensor([-1.0, 2.0]), 0.5).tolist()
        [-0.5, 2.0]
    """
    _tensor("leaky_relu", input)
    return _write_back(input, _ops.leaky_relu(input, float(negative_slope)), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x for x > 0, alpha * (exp(x) - 1) otherwise.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.elu(st.tensor([1.0])).tolist()
        [1.0]
    """
    _tensor("elu", input)
    return _write_back(input, _ops.elu(input, float(alpha)), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (approximate="none") or its tanh approximation (approximate="tanh").

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.gelu(st.tensor([1.0])).item(), 4)
        0.8413
    """
    _tensor("gelu", input)
    return _ops.gelu(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.silu(st.tensor([0.0])).tolist()
        [0.0]
    """
    _tensor("silu", input)
    return _write_back(input, _ops.silu(_operand(input, inplace)), inplace)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.sigmoid(st.tensor([0.0])).tolist()
        [0.5]
    """
    _tensor("sigmoid", input)
    return _ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.tanh(st.tensor([0.0])).tolist()
        [0.0]
    """
    _tensor("tanh", input)
    return _ops.tanh(input)


def _softmax_dim(op: str, ndim: int) -> int:
    warnings.warn(f"{op}: implicit dimension choice is deprecated; pass dim", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.softmax(st.zeros(1, 4), dim=1).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """
    _tensor("softmax", input)
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return _ops.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """log(softmax(x)) along dim, computed stably.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.log_softmax(st.zeros(2), dim=0)[0].item(), 4)
        -0.6931
    """
    _tensor("log_softmax", input)
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return _ops.log_softmax(input, dim, dtype=dtype)


# ---- dropout -----------------------------------------------------------------------------------


def _check_p(op: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator=None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p) when training;
    the identity otherwise.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.ones(1000)
        >>> y = F.dropout(x, 0.5)
        >>> sorted(set(y.tolist()))
        [0.0, 2.0]
        >>> F.dropout(x, 0.5, training=False) is x
        True
    """
    _tensor("dropout", input)
    p = _check_p("dropout", p)
    if not training or p == 0.0:
        return input
    if not input.dtype.is_floating_point:
        raise TypeError(f"dropout: expected a floating point input, got {input.dtype.name}")
    if p == 1.0:
        return _write_back(input, input * 0.0, inplace)
    draw = creation.rand(*input.shape, generator=generator, dtype=input.dtype,
                         device=input.device)
    # keep with probability 1 - p; scaling the mask once keeps it to one multiply of the input
    scale = (draw >= p).to(input.dtype) * (1.0 / (1.0 - p))
    return _write_back(input, _operand(input, inplace) * scale, inplace)


__all__ = [
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "leaky_relu",
    "linear",
    "log_softmax",
    "relu",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]

# the image and normalisation ops are defined once, in ops/, and used here under their
# PyTorch names
conv1d = _ops.conv1d
conv2d = _ops.conv2d
conv_transpose2d = _ops.conv_transpose2d
max_pool2d = _ops.max_pool2d
avg_pool2d = _ops.avg_pool2d
adaptive_avg_pool2d = _ops.adaptive_avg_pool2d
interpolate = _ops.interpolate
batch_norm = _ops.batch_norm
layer_norm = _ops.layer_norm
group_norm = _ops.group_norm
pad = _ops.pad
one_hot = _ops.one_hot
softplus = _ops.softplus

__all__ += ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "conv1d", "conv2d",
            "conv_transpose2d", "group_norm", "interpolate", "layer_norm", "max_pool2d",
            "one_hot", "pad", "softplus"]

from ._functional_losses import *  # noqa: E402,F401,F403
from ._functional_losses import __all__ as _loss_names  # noqa: E402

__all__ += _loss_names

from ._functional_more import *  # noqa: E402,F401,F403  (more losses, distances, norms)
from ._functional_more import __all__ as _more_names  # noqa: E402

__all__ += _more_names

from ._functional_seq import *  # noqa: E402,F401,F403  (attention and recurrent functions)
from ._functional_seq import __all__ as _seq_names  # noqa: E402

__all__ += _seq_names

from ._functional_act import *  # noqa: E402,F401,F403  (more activations, channel dropouts)
from ._functional_act import __all__ as _act_names  # noqa: E402

__all__ += _act_names

from ._functional_3d import *  # noqa: E402,F401,F403  (3-d convolutions and pools, unpooling)
from ._functional_3d import __all__ as _3d_names  # noqa: E402

__all__ += _3d_names
