"""Floating-point helpers built from existing ops: the modified Bessel function i0 (its
power series, summed to convergence) and frexp (mantissa and binary exponent)."""

from __future__ import annotations

import math

import numpy as np

from .. import dtype as _dt
from ..tensor import Tensor
from . import elementwise as _el
from . import reduce as _re
from ._lowp import rounds_once
from ._registry import composite, expect_tensor
from .layout import cast


def _i0_ref(x):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isinf(x), np.inf, np.i0(x)).astype(x.dtype)  # numpy: nan at inf


@composite("i0", _i0_ref, kind="unary", domain=(-6.0, 6.0), method=True, inplace=True)
@rounds_once
def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order zero, elementwise.

    Its power series sum_k ((x/2)^(2k) / (k!)^2) has positive terms, so summing it until the
    terms fall below the precision (about abs(x) + 30 terms) loses nothing to cancellation.

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.i0(st.tensor([0.0, 1.0, -2.0])).tolist()]
        [1.0, 1.2661, 2.2796]
    """
    expect_tensor("i0", input)
    x = input if input.dtype.is_floating_point else cast(input, _dt.float32)
    if x.numel() == 0:
        return x * 1.0
    # past `limit` i0 overflows the dtype (i0(714) > 1.8e308, i0(92) > 3.4e38): those lanes
    # are inf, like the infinities, and the series runs on the rest
    limit = 720.0 if x.dtype is _dt.float64 else 100.0
    a = _el.abs(x)
    inside = a <= limit  # False for nan and inf
    xf = x if bool(_re.all(inside).item()) else _el.where(inside, x, 0.0)
    big = float(_re.max(_el.abs(xf)).item())
    q = xf * xf * 0.25
    term = q * 0.0 + 1.0
    total = term
    for k in range(1, int(big) + 30):
        term = term * q / float(k * k)
        total = total + term
    # i0 is even and grows without bound: inf past the limit, nan stays nan
    return total if xf is x else _el.where(inside, total, a * math.inf)


def i0_(input: Tensor) -> Tensor:
    """In-place `i0`.

    Example:
        >>> import singa_tensor as st
        >>> st.i0_(st.tensor([0.0])).tolist()
        [1.0]
    """
    return input.i0_()


def _scale_down(x: Tensor, e: Tensor) -> Tensor:
    """x / 2 ** e for integer e, dividing by two halves in turn so that no power of two
    overflows (the exponents of the largest and the subnormal numbers)."""
    half = _el.floor_divide(e, 2)
    return x / _el.pow(2.0, cast(half, x.dtype)) / _el.pow(2.0, cast(e - half, x.dtype))


def _frexp_samples():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)) * np.exp2(rng.integers(-30, 30, (3, 4)))
    edges = np.array([0.0, -0.0, 1.0, 0.5, -2.0, 1e-40, np.inf, -np.inf, np.nan, 3.0e38])
    return [((x,), {}), ((edges,), {})]


@composite("frexp", lambda x: tuple(np.frexp(x)), differentiable=False, method=True,
           samples=_frexp_samples)
def frexp(input: Tensor) -> tuple:
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, 0.5 <= abs(mantissa) < 1
    (0, inf and nan come back as the mantissa, with exponent 0); the exponent is int32.

    Example:
        >>> import singa_tensor as st
        >>> m, e = st.frexp(st.tensor([8.0, -0.375, 0.0]))
        >>> m.tolist(), e.tolist()
        ([0.5, -0.75, 0.0], [4, -1, 0])
    """
    expect_tensor("frexp", input)
    if not input.dtype.is_floating_point:
        raise TypeError(f"frexp: only supports floating-point dtypes, got {input.dtype.name}")
    x = input
    a = _el.abs(x)
    regular = _el.isfinite(x) & (a > 0)
    safe = _el.where(regular, a, a * 0.0 + 1.0)
    e = cast(_el.floor(_el.log(safe) * (1.0 / math.log(2.0))), _dt.int64) + 1
    m = _scale_down(safe, e)
    # the logarithm may be one off near powers of two: correct into [0.5, 1)
    up = m >= 1.0
    e, m = _el.where(up, e + 1, e), _el.where(up, m * 0.5, m)
    down = m < 0.5
    e, m = _el.where(down, e - 1, e), _el.where(down, m * 2.0, m)
    mantissa = _el.where(regular, m * _el.sign(x), x)
    exponent = _el.where(regular, e, e * 0)
    return mantissa, cast(exponent, _dt.int32)


__all__ = ["i0", "i0_", "frexp"]
