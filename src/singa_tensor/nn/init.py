"""Parameter initialisation, in place and without recording gradients.

Every function draws from `generator`, or from the default generator that `st.manual_seed`
seeds, so a seeded script builds the same model every time.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import autograd as _ag
from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor


def _check(op: str, tensor) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point tensor, got {tensor.dtype.name}")


def _fill_from(tensor: Tensor, values: Tensor) -> Tensor:
    with _ag.no_grad():
        tensor.copy_(values)
    return tensor


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended scale of weights feeding a nonlinearity (PyTorch's table).

    Example:
        >>> from singa_tensor import nn
        >>> round(nn.init.calculate_gain("relu"), 4), nn.init.calculate_gain("tanh")
        (1.4142, 1.6666666666666667)
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(
            "fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
            f"(shape {tuple(tensor.shape)})"
        )
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of 'fan_in', 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from U(a, b).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.uniform_(st.empty(1000), -2.0, 2.0)
        >>> bool((w >= -2).all()) and bool((w < 2).all())
        True
    """
    _check("uniform_", tensor)
    if a > b:
        raise ValueError(f"uniform_: expects a <= b, got a={a} and b={b}")
    return _fill_from(tensor, creation.uniform(tensor.shape, a, b, generator=generator,
                                               dtype=tensor.dtype, device=tensor.device))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from N(mean, std²).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> abs(nn.init.normal_(st.empty(10000), 3.0, 0.5).mean().item() - 3.0) < 0.05
        True
    """
    _check("normal_", tensor)
    if std < 0:
        raise ValueError(f"normal_: std must be non-negative, got {std}")
    return _fill_from(tensor, creation.normal(mean, std, tensor.shape, generator=generator,
                                              dtype=tensor.dtype, device=tensor.device))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with val.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> nn.init.constant_(st.empty(2), 0.5).tolist()
        [0.5, 0.5]
    """
    _check("constant_", tensor)
    with _ag.no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.xavier_uniform_(st.empty(30, 20))
        >>> bool(w.abs().max().item() <= (6 / 50) ** 0.5)
        True
    """
    _check("xavier_uniform_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator=generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check("xavier_normal_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator=generator)


def _kaiming_std(op: str, tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    _check(op, tensor)
    if tensor.numel() == 0:
        warnings.warn(f"{op}: initializing a zero-element tensor is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain from `calculate_gain`.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> w = nn.init.kaiming_uniform_(st.empty(8, 50), nonlinearity="relu")
        >>> bool(w.abs().max().item() <= (6 / 50) ** 0.5)
        True
    """
    std = _kaiming_std("kaiming_uniform_", tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator=generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: N(0, std²) with std = gain / sqrt(fan)."""
    std = _kaiming_std("kaiming_normal_", tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator=generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, times gain;
    dimensions after the first are flattened.

    Example:
        >>> import numpy as np
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> q = nn.init.orthogonal_(st.empty(4, 4)).numpy()
        >>> bool(np.allclose(q @ q.T, np.eye(4), atol=1e-5))
        True
    """
    _check("orthogonal_", tensor)
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    g = creation.randn(rows, cols, generator=generator, dtype=_dt.float64).numpy(force=True)
    if rows < cols:
        g = g.T
    # The core has no QR op. Initialisation runs once per parameter, outside any graph, so the
    # host numpy QR is used here rather than adding a linear-algebra kernel for it; the draw
    # above still comes from the library's seeded generator.
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diag(r))  # the sign fix makes the result uniformly distributed
    if rows < cols:
        q = q.T
    values = creation.tensor(gain * q.reshape(tensor.shape), dtype=tensor.dtype,
                             device=tensor.device)
    return _fill_from(tensor, values)


__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

from .init_more import *  # noqa: E402,F401,F403  (dirac_, eye_, sparse_, trunc_normal_)
from .init_more import __all__ as _more_names  # noqa: E402

__all__ += _more_names
