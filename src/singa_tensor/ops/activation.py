"""The activation functions of nn.functional that compose other ops (hardtanh, selu, mish ...).

Each is a composite: a few existing ops, a numpy reference, no kernel and no backward of its
own, so gradients of every order come from the parts. Piecewise functions are built with
`where`/`clamp`, which pass the gradient of the branch taken. nn.functional re-exports them
(adding `inplace=` where PyTorch has it); the few that PyTorch also has at the top level
(torch.selu, torch.celu, torch.prelu, torch.rrelu, torch.hardshrink, torch.threshold) are in
`__all__` and so st.* names.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from ..tensor import Tensor
from ._lowp import rounds_once
from ._registry import composite
from .elementwise import abs, clamp, expm1, leaky_relu, sigmoid, softplus, tanh, where
from .layout import reshape
from .reduce_ext import softmax
from .shape import chunk

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _input(op: str, x, name: str = "input") -> Tensor:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point {name}, got {x.dtype.name}")
    return x


def _number(op: str, v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {v!r}")
    return float(v)


def _rng(seed: int):
    return np.random.default_rng(seed)


def _softplus_np(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x,
                    np.log1p(np.exp(np.minimum(x * beta, threshold))) / beta)


def _elu_np(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# ---- clipping and piecewise-linear ---------------------------------------------------------------


def _clip(x: Tensor, lo: float, hi: float) -> Tensor:
    # unlike clamp, no gradient at the bounds themselves (relu6 at exactly 0), as in PyTorch
    return where(x <= lo, lo, where(x >= hi, hi, x))


@composite("hardtanh", lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val),
           kind="unary", domain=(-3.0, 3.0))
@rounds_once
def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clipped to [min_val, max_val].

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardtanh(st.tensor([-2.0, 0.5, 3.0])).tolist()
        [-1.0, 0.5, 1.0]
    """
    _input("hardtanh", x)
    lo, hi = _number("hardtanh", min_val, "min_val"), _number("hardtanh", max_val, "max_val")
    if hi < lo:
        raise ValueError(f"hardtanh: max_val ({hi}) must be greater or equal to min_val ({lo})")
    return _clip(x, lo, hi)


@composite("relu6", lambda x: np.clip(x, 0.0, 6.0), kind="unary", domain=(-8.0, 8.0))
@rounds_once
def relu6(x: Tensor) -> Tensor:
    """min(max(x, 0), 6).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.relu6(st.tensor([-1.0, 3.0, 8.0])).tolist()
        [0.0, 3.0, 6.0]
    """
    _input("relu6", x)
    return _clip(x, 0.0, 6.0)


@composite("hardsigmoid", lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0), kind="unary",
           domain=(-5.0, 5.0))
@rounds_once
def hardsigmoid(x: Tensor) -> Tensor:
    """0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardsigmoid(st.tensor([-4.0, 0.0, 4.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    _input("hardsigmoid", x)
    return where(x <= -3.0, 0.0, where(x >= 3.0, 1.0, x * (1.0 / 6.0) + 0.5))


def _hardswish_np(x):
    return np.where(x <= -3.0, 0.0, np.where(x >= 3.0, x, x * (x + 3.0) / 6.0)).astype(x.dtype)


@composite("hardswish", _hardswish_np, kind="unary", domain=(-5.0, 5.0))
@rounds_once
def hardswish(x: Tensor) -> Tensor:
    """x * hardsigmoid(x): 0 for x <= -3, x for x >= 3, x (x + 3) / 6 between.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardswish(st.tensor([-4.0, 0.0, 4.0])).tolist()
        [0.0, 0.0, 4.0]
    """
    _input("hardswish", x)
    # branches by where, not x * hardsigmoid(x), so that -inf gives 0 rather than -inf * 0
    return where(x < -3.0, 0.0, where(x > 3.0, x, x * (x + 3.0) * (1.0 / 6.0)))


def _threshold_samples():
    r = _rng(11)
    return [((r.standard_normal((3, 4)), 0.1, 20.0), {}),
            ((r.standard_normal((2, 3)), -0.5, -2.0), {})]


@composite("threshold", lambda x, threshold, value: np.where(x > threshold, x, value),
           samples=_threshold_samples)
@rounds_once
def threshold(x: Tensor, threshold: float, value: float) -> Tensor:
    """x where x > threshold, value elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.threshold(st.tensor([-1.0, 0.5, 2.0]), 1.0, 9.0).tolist()
        [9.0, 9.0, 2.0]
    """
    _input("threshold", x)
    t = _number("threshold", threshold, "threshold")
    return where(x > t, x, _number("threshold", value, "value"))


def _check_lambd(op: str, lambd) -> float:
    lambd = _number(op, lambd, "lambd")
    if lambd < 0:
        raise ValueError(f"{op}: lambd must be greater or equal to 0, got {lambd}")
    return lambd


@composite("softshrink",
           lambda x, lambd=0.5: np.where(x > lambd, x - lambd,
                                         np.where(x < -lambd, x + lambd, 0.0)).astype(x.dtype),
           kind="unary")
@rounds_once
def softshrink(x: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.softshrink(st.tensor([-2.0, 0.25, 1.5])).tolist()
        [-1.5, 0.0, 1.0]
    """
    _input("softshrink", x)
    lambd = _check_lambd("softshrink", lambd)
    return where(x > lambd, x - lambd, where(x < -lambd, x + lambd, 0.0))


@composite("hardshrink",
           lambda x, lambd=0.5: np.where(np.abs(x) > lambd, x, 0.0).astype(x.dtype),
           kind="unary")
@rounds_once
def hardshrink(x: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, 0 elsewhere.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hardshrink(st.tensor([-2.0, 0.25, 1.5])).tolist()
        [-2.0, 0.0, 1.5]
    """
    _input("hardshrink", x)
    lambd = _check_lambd("hardshrink", lambd)
    return where(abs(x) > lambd, x, 0.0)


# ---- smooth -------------------------------------------------------------------------------------


def _elu(x: Tensor, alpha: float) -> Tensor:
    # expm1 keeps tiny negative inputs exact (exp(x) - 1 rounds them to 0); the clamp keeps the
    # branch not taken finite, so its zero gradient stays zero
    return where(x > 0.0, x, expm1(clamp(x, None, 0.0)) * alpha)


@composite("selu", lambda x: _SELU_SCALE * _elu_np(x, _SELU_ALPHA), kind="unary")
@rounds_once
def selu(x: Tensor) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (alpha ~1.6733, scale ~1.0507).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.selu(st.tensor([1.0])).item(), 4)
        1.0507
    """
    _input("selu", x)
    return _elu(x, _SELU_ALPHA) * _SELU_SCALE


@composite("celu", lambda x, alpha=1.0: alpha * _elu_np(x / alpha), kind="unary")
@rounds_once
def celu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.celu(st.tensor([-1.0]), alpha=2.0).item(), 4)
        -0.7869
    """
    _input("celu", x)
    alpha = _number("celu", alpha, "alpha")
    if alpha == 0.0:
        raise ValueError("celu: alpha must not be 0")
    return _elu(x * (1.0 / alpha), 1.0) * alpha


@composite("softsign", lambda x: x / (1.0 + np.abs(x)), kind="unary")
@rounds_once
def softsign(x: Tensor) -> Tensor:
    """x / (1 + |x|).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.softsign(st.tensor([1.0, -3.0])).tolist()
        [0.5, -0.75]
    """
    _input("softsign", x)
    return x / (abs(x) + 1.0)


@composite("mish", lambda x: x * np.tanh(_softplus_np(x)), kind="unary")
@rounds_once
def mish(x: Tensor) -> Tensor:
    """x * tanh(softplus(x)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.mish(st.tensor([1.0])).item(), 4)
        0.8651
    """
    _input("mish", x)
    return x * tanh(softplus(x))


@composite("logsigmoid", lambda x: -_softplus_np(-x), kind="unary", domain=(-10.0, 10.0))
@rounds_once
def logsigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.logsigmoid(st.tensor([0.0])).item(), 4)
        -0.6931
    """
    _input("logsigmoid", x)
    return -softplus(-x)


@composite("tanhshrink", lambda x: x - np.tanh(x), kind="unary")
@rounds_once
def tanhshrink(x: Tensor) -> Tensor:
    """x - tanh(x).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.tanhshrink(st.tensor([0.0])).tolist()
        [0.0]
    """
    _input("tanhshrink", x)
    return x - tanh(x)


# ---- with a dim, a weight or a draw -------------------------------------------------------------


def _glu_np(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a / (1.0 + np.exp(-b))


def _glu_samples():
    r = _rng(12)
    return [((r.standard_normal((3, 4)),), {}), ((r.standard_normal((4, 3, 2)),), {"dim": 0})]


@composite("glu", _glu_np, samples=_glu_samples)
@rounds_once
def glu(x: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: a * sigmoid(b), with a and b the two halves of x along dim.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.glu(st.tensor([2.0, 0.0])).tolist()
        [1.0]
    """
    _input("glu", x)
    if x.ndim == 0:
        raise ValueError("glu: does not support scalars because halving size must be even")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.ndim <= dim < x.ndim:
        raise IndexError(f"glu: dim {dim!r} is out of range for a {x.ndim}-D input")
    n = x.shape[dim]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {dim} is size {n}")
    a, b = chunk(x, 2, dim)
    return a * sigmoid(b)


def _softmin_samples():
    r = _rng(13)
    return [((r.standard_normal((3, 4)),), {"dim": 1}), ((r.standard_normal((2, 3, 2)),),
                                                         {"dim": 0})]


def _softmin_np(x, dim):
    e = np.exp(-x - np.max(-x, axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@composite("softmin", _softmin_np, samples=_softmin_samples)
def softmin(x: Tensor, dim: int, dtype=None) -> Tensor:
    """softmax(-x) along dim.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> [round(v, 4) for v in F.softmin(st.tensor([0.0, 1.0]), dim=0).tolist()]
        [0.7311, 0.2689]
    """
    _input("softmin", x)
    return softmax(-x, dim, dtype=dtype)


def _prelu_np(x, weight):
    w = weight.reshape((-1,) + (1,) * (x.ndim - 2)) if x.ndim >= 2 and weight.size > 1 else weight
    return np.where(x >= 0, x, w * x)


def _prelu_samples():
    r = _rng(14)
    return [((r.standard_normal((2, 3, 4)), r.uniform(0.1, 0.5, (3,))), {}),
            ((r.standard_normal((3, 4)), np.array([0.25])), {}),
            ((r.standard_normal((5,)), np.array([0.3])), {})]


@composite("prelu", _prelu_np, samples=_prelu_samples)
@rounds_once
def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, weight * x elsewhere; weight has one element or one per channel
    (dimension 1 of x; an input of fewer than 2 dims has one channel).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.prelu(st.tensor([[-1.0, 2.0]]), st.tensor([0.25])).tolist()
        [[-0.25, 2.0]]
    """
    _input("prelu", x)
    _input("prelu", weight, "weight")
    if weight.ndim > 1:
        raise ValueError(f"prelu: weight must be 1-D or a scalar, got shape {weight.shape}")
    n = weight.numel()
    if n != 1:
        channels = x.shape[1] if x.ndim >= 2 else 1  # below 2-D there is no channel dim
        if n != channels:
            raise ValueError(f"prelu: weight has {n} elements but the input has {channels} "
                             f"channels (dimension 1 of shape {x.shape}); give 1 or {channels}")
        if x.ndim >= 2:
            weight = reshape(weight, (n,) + (1,) * (x.ndim - 2))
    return where(x > 0.0, x, x * weight)


_RRELU_LOWER, _RRELU_UPPER = 1.0 / 8.0, 1.0 / 3.0


def _rrelu_np(x, lower=_RRELU_LOWER, upper=_RRELU_UPPER, training=False):
    return np.where(x >= 0, x, x * ((lower + upper) / 2.0))


def _rrelu_samples():
    r = _rng(15)
    return [((r.standard_normal((3, 4)),), {}),
            ((r.standard_normal((2, 5)),), {"lower": 0.1, "upper": 0.5, "training": False})]


@composite("rrelu", _rrelu_np, samples=_rrelu_samples)
@rounds_once
def rrelu(x: Tensor, lower: float = _RRELU_LOWER, upper: float = _RRELU_UPPER,
          training: bool = False, generator=None) -> Tensor:
    """Randomized leaky ReLU: when training, each negative element is scaled by a slope drawn
    uniformly from [lower, upper]; otherwise by their mean (lower + upper) / 2.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.rrelu(st.tensor([-1.0, 2.0]), 0.2, 0.4).tolist()
        [-0.30000001192092896, 2.0]
    """
    _input("rrelu", x)
    lo, hi = _number("rrelu", lower, "lower"), _number("rrelu", upper, "upper")
    if hi < lo:
        raise ValueError(f"rrelu: lower ({lo}) must be less than or equal to upper ({hi})")
    if not training:
        return leaky_relu(x, (lo + hi) / 2.0) if lo + hi >= 0.0 else where(
            x > 0.0, x, x * ((lo + hi) / 2.0))
    draw = creation.rand(*x.shape, generator=generator, dtype=x.dtype, device=x.device)
    return where(x > 0.0, x, x * (draw * (hi - lo) + lo))


__all__ = ["celu", "hardshrink", "prelu", "rrelu", "selu", "threshold"]
