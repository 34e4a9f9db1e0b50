"""Pointwise composites: log-sum-exp of pairs, sinc, xlogy, the fused multiply-adds
(addcmul, addcdiv, lerp), heaviside, angle conversion, nan_to_num, sign-bit and infinity tests
and float_power. Each is a composition of kernel ops, so autograd, every device and graph mode
come from its parts.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor
from ._lowp import rounds_once
from ._registry import composite, expect_tensor
from .elementwise import (
    _operands,
    abs,
    copysign,
    eq,
    exp,
    exp2,
    gt,
    isinf,
    isnan,
    log,
    log1p,
    logical_and,
    logical_not,
    lt,
    maximum,
    pow,
    sin,
    where,
)
from .layout import cast

_LN2 = math.log(2.0)


@composite("logaddexp", np.logaddexp, kind="binary", domain=(-10.0, 10.0), method=True)
@rounds_once
def logaddexp(input, other) -> Tensor:
    """log(exp(input) + exp(other)), without overflow.

    Example:
        >>> import singa_tensor as st
        >>> y = st.logaddexp(st.tensor([0.0, 1000.0]), st.tensor([0.0, 1000.0]))
        >>> [round(v, 4) for v in y.tolist()]
        [0.6931, 1000.6932]
    """
    a, b = _operands("logaddexp", input, other, float_only=True)
    out = maximum(a, b) + log1p(exp(-abs(a - b)))
    # equal infinities, where a - b is NaN; finite ties keep the formula, whose gradient
    # splits evenly between the two
    return where(logical_and(eq(a, b), isinf(a)), a, out)


@composite("logaddexp2", np.logaddexp2, kind="binary", domain=(-10.0, 10.0), method=True)
@rounds_once
def logaddexp2(input, other) -> Tensor:
    """log2(2^input + 2^other), without overflow.

    Example:
        >>> import singa_tensor as st
        >>> st.logaddexp2(st.tensor([1.0, 3.0]), st.tensor([1.0, 3.0])).tolist()
        [2.0, 4.0]
    """
    a, b = _operands("logaddexp2", input, other, float_only=True)
    out = maximum(a, b) + log1p(exp2(-abs(a - b))) * (1.0 / _LN2)
    return where(logical_and(eq(a, b), isinf(a)), a, out)


def _float_input(op: str, x) -> Tensor:
    x = expect_tensor(op, x)
    return x if x.dtype.is_floating_point else cast(x, _dt.float32)


@composite("sinc", np.sinc, kind="unary", method=True, inplace=True)
@rounds_once
def sinc(input) -> Tensor:
    """The normalised sinc, sin(pi x) / (pi x), 1 at 0.

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.sinc(st.tensor([0.0, 0.5, 1.5])).tolist()]
        [1.0, 0.6366, -0.2122]
    """
    x = _float_input("sinc", input)
    zero = eq(x, 0.0)
    px = where(zero, 1.0, x) * math.pi  # a safe divisor, so the gradient at 0 stays finite
    return where(zero, 1.0, sin(px) / px)


def _xlogy_np(x, y):
    with np.errstate(all="ignore"):
        v = np.where(x == 0, 0.0, x * np.log(y))
    return np.where(np.isnan(y), np.nan, v).astype(np.result_type(x, y))


@composite("xlogy", _xlogy_np, kind="binary", domain=(0.1, 3.0), method=True, inplace=True)
@rounds_once
def xlogy(input, other) -> Tensor:
    """input * log(other), 0 where input is 0 (unless other is NaN).

    Example:
        >>> import singa_tensor as st
        >>> st.xlogy(st.tensor([0.0, 2.0]), st.tensor([0.0, 1.0])).tolist()
        [0.0, 0.0]
    """
    a, b = _operands("xlogy", input, other, float_only=True)
    keep0 = logical_and(eq(a, 0.0), logical_not(isnan(b)))
    return where(keep0, 0.0, a * log(where(keep0, 1.0, b)))



_REF = np.random.default_rng(11)


def _three(shape_a=(2, 3), shape_b=(3,), shape_c=(2, 1)):
    return (_REF.standard_normal(shape_a), _REF.standard_normal(shape_b),
            _REF.standard_normal(shape_c))


def _check_value(op: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: value must be a number, got {type(value).__name__}")
    return value


@composite("addcmul", lambda x, a, b, value=1.0: x + value * a * b,
           samples=lambda: [(_three(), {}), (_three((3,), (2, 3), (2, 1)), {"value": 0.5})],
           method=True, inplace=True)
@rounds_once
def addcmul(input, tensor1, tensor2, *, value=1) -> Tensor:
    """input + value * tensor1 * tensor2, with broadcasting.

    Example:
        >>> import singa_tensor as st
        >>> st.addcmul(st.ones(2), st.tensor([1.0, 2.0]), st.tensor([3.0, 4.0]), value=0.5).tolist()
        [2.5, 5.0]
    """
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        expect_tensor("addcmul", t, name)
    v = _check_value("addcmul", value)
    prod = tensor1 * tensor2
    return input + (prod * v if v != 1 else prod)


def _positive_divisor():
    x, a, b = _three()
    return x, a, np.abs(b) + 0.5


@composite("addcdiv", lambda x, a, b, value=1.0: x + value * a / b,
           samples=lambda: [(_positive_divisor(), {}), (_positive_divisor(), {"value": -2.0})],
           method=True, inplace=True)
@rounds_once
def addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor:
    """input + value * tensor1 / tensor2, with broadcasting (true division).

    Example:
        >>> import singa_tensor as st
        >>> st.addcdiv(st.ones(2), st.tensor([1.0, 2.0]), st.tensor([4.0, 4.0]), value=2).tolist()
        [1.5, 2.0]
    """
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        expect_tensor("addcdiv", t, name)
    v = _check_value("addcdiv", value)
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise TypeError("addcdiv: integer division of tensor1 by tensor2 is not supported; use "
                        "floating-point tensors")
    q = tensor1 / tensor2
    return input + (q * v if v != 1 else q)


def _lerp_np(start, end, weight):
    return start + weight * (end - start)


@composite("lerp", _lerp_np,
           samples=lambda: [(_three((2, 3), (2, 3), (3,)), {}),
                            ((_REF.standard_normal((2, 3)), _REF.standard_normal((3,)), 0.25),
                             {}),
                            ((_REF.standard_normal((3,)), _REF.standard_normal((3,)), 0.75), {})],
           method=True, inplace=True)
@rounds_once
def lerp(input, end, weight) -> Tensor:
    """input + weight * (end - input); weight a number or a tensor, all broadcast. Weights of
    0.5 and above are computed from the end, end - (end - input) * (1 - weight), which is exact
    at weight 1.

    Example:
        >>> import singa_tensor as st
        >>> st.lerp(st.tensor([0.0, 10.0]), st.tensor([10.0, 20.0]), 0.5).tolist()
        [5.0, 15.0]
    """
    expect_tensor("lerp", input)
    expect_tensor("lerp", end, "end")
    if not input.dtype.is_floating_point:
        raise TypeError(f"lerp: expected a floating-point input, got {input.dtype.name}")
    d = end - input
    if isinstance(weight, Tensor):
        small = lt(abs(weight), 0.5)
        return where(small, input + weight * d, end - d * (1.0 - weight))
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise TypeError(f"lerp: weight must be a number or a Tensor, got "
                        f"{type(weight).__name__}")
    if math.fabs(weight) < 0.5:
        return input + d * float(weight)
    return end - d * (1.0 - float(weight))


def _scalar(v, like: Tensor) -> Tensor:
    from .. import creation

    return creation.scalar_tensor(v, like.dtype, like.device)


@composite("heaviside", np.heaviside, kind="binary", differentiable=False, method=True,
           inplace=True)
@rounds_once
def heaviside(input, values) -> Tensor:
    """The step function: 0 below zero, 1 above, values where input is 0 (NaN stays NaN);
    values is a tensor of input's dtype (or a number).

    Example:
        >>> import singa_tensor as st
        >>> st.heaviside(st.tensor([-1.0, 0.0, 2.0]), st.tensor([0.5])).tolist()
        [0.0, 0.5, 1.0]
    """
    x = expect_tensor("heaviside", input)
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = _scalar(values, x)
    v = expect_tensor("heaviside", values, "values")
    if x.dtype is not v.dtype:
        raise TypeError(f"heaviside: input ({x.dtype.name}) and values ({v.dtype.name}) must "
                        f"have the same dtype")
    step = cast(gt(x, 0), x.dtype)
    out = where(eq(x, 0), v, step)
    return where(isnan(x), x, out) if x.dtype.is_floating_point else out


@composite("deg2rad", np.deg2rad, kind="unary", domain=(-360.0, 360.0), method=True,
           inplace=True)
@rounds_once
def deg2rad(input) -> Tensor:
    """Degrees to radians.

    Example:
        >>> import singa_tensor as st
        >>> round(st.deg2rad(st.tensor([180.0])).item(), 5)
        3.14159
    """
    return _float_input("deg2rad", input) * (math.pi / 180.0)


@composite("rad2deg", np.rad2deg, kind="unary", method=True, inplace=True)
@rounds_once
def rad2deg(input) -> Tensor:
    """Radians to degrees.

    Example:
        >>> import singa_tensor as st
        >>> st.rad2deg(st.tensor([math.pi / 2])).tolist()
        [90.0]
    """
    return _float_input("rad2deg", input) * (180.0 / math.pi)


# the largest finite value of each float dtype (bfloat16 keeps float32's exponent range)
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": float(np.finfo(np.float32).max),
              "float64": float(np.finfo(np.float64).max)}


def _nan_to_num_np(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _number_or_none(op: str, name: str, v):
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise TypeError(f"{op}: {name} must be a number or None, got {type(v).__name__}")
    return v


@composite("nan_to_num", _nan_to_num_np, kind="unary", method=True, inplace=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None) -> Tensor:
    """NaN replaced by nan, +inf by posinf and -inf by neginf (by default the dtype's largest
    and lowest finite values); integer tensors come back unchanged.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([float('nan'), float('inf'), -float('inf'), 1.0])
        >>> st.nan_to_num(x, posinf=9.0, neginf=-9.0).tolist()
        [0.0, 9.0, -9.0, 1.0]
    """
    x = expect_tensor("nan_to_num", input)
    for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        _number_or_none("nan_to_num", name, v)
    if not x.dtype.is_floating_point:
        return x.clone()
    big = _FLOAT_MAX[x.dtype.name]
    hi = big if posinf is None else float(posinf)
    lo = -big if neginf is None else float(neginf)
    out = where(isnan(x), float(0.0 if nan is None else nan), x)
    out = where(isposinf(x), hi, out)
    return where(isneginf(x), lo, out)  # selections: exact in every float dtype


@composite("isposinf", np.isposinf, kind="unary", differentiable=False, method=True)
def isposinf(input) -> Tensor:
    """Boolean mask of +inf elements.

    Example:
        >>> import singa_tensor as st
        >>> st.isposinf(st.tensor([1.0, float('inf'), -float('inf')])).tolist()
        [False, True, False]
    """
    x = expect_tensor("isposinf", input)
    return logical_and(isinf(x), gt(x, 0)) if x.dtype.is_floating_point else isinf(x)


@composite("isneginf", np.isneginf, kind="unary", differentiable=False, method=True)
def isneginf(input) -> Tensor:
    """Boolean mask of -inf elements.

    Example:
        >>> import singa_tensor as st
        >>> st.isneginf(st.tensor([1.0, float('inf'), -float('inf')])).tolist()
        [False, False, True]
    """
    x = expect_tensor("isneginf", input)
    return logical_and(isinf(x), lt(x, 0)) if x.dtype.is_floating_point else isinf(x)


@composite("signbit", np.signbit, kind="unary", differentiable=False, method=True)
def signbit(input) -> Tensor:
    """Boolean mask of elements whose sign bit is set (so -0.0 is True, 0.0 False).

    Example:
        >>> import singa_tensor as st
        >>> st.signbit(st.tensor([-1.0, -0.0, 0.0, 2.0])).tolist()
        [True, True, False, False]
    """
    x = expect_tensor("signbit", input)
    if not x.dtype.is_floating_point:
        return lt(x, 0)
    x = x if x.dtype in (_dt.float32, _dt.float64) else cast(x, _dt.float32)
    return lt(copysign(1.0, x), 0.0)


def _float_power_np(a, b):
    return np.float_power(a, b)


@composite("float_power", _float_power_np, kind="binary", domain=(0.2, 3.0), method=True)
def float_power(input, exponent) -> Tensor:
    """input ** exponent computed in float64 (the result is float64 whatever the inputs).

    Example:
        >>> import singa_tensor as st
        >>> y = st.float_power(st.tensor([2, 3]), 2)
        >>> y.dtype, y.tolist()
        (singa_tensor.float64, [4.0, 9.0])
    """
    def f64(v):
        if isinstance(v, Tensor):
            return v if v.dtype is _dt.float64 else cast(v, _dt.float64)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"float_power: unsupported operand of type {type(v).__name__}")
        return float(v)

    a, b = f64(input), f64(exponent)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("float_power: expected at least one Tensor")
    return pow(a, b)


__all__ = [
    "addcdiv", "addcmul", "deg2rad", "float_power", "heaviside", "isneginf", "isposinf",
    "lerp", "logaddexp", "logaddexp2", "nan_to_num", "rad2deg", "signbit", "sinc", "xlogy",
]
