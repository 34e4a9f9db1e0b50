"""numpy references of the special functions that numpy lacks (scipy is not a dependency):
lgamma, digamma, polygamma and erfinv, computed in float64 and returned in the input's dtype.

They are written independently of the kernels in functors.h (other shifts, more series terms,
bisection-guarded Newton) so that the registry tests compare two derivations.
"""

from __future__ import annotations

import functools
import math

import numpy as np

# B2 .. B20
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330)


def _quiet(fn):
    """fn with numpy's warnings off: the masked-out lanes divide by zero on purpose."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return run


def _like(x, v):
    v = np.asarray(v, dtype=np.float64)
    return v.astype(x.dtype) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else v


def _lgamma1(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0 or a negative integer)
        return math.inf


_lgamma_v = np.vectorize(_lgamma1, otypes=[np.float64])


def lgamma(x):
    """log|Gamma(x)|, +inf at the poles.

    Example:
        >>> round(float(lgamma(np.array(5.0))), 6)
        3.178054
    """
    return _like(x, _lgamma_v(np.asarray(x, dtype=np.float64)))


def _is_pole(x):
    return (x <= 0) & (x == np.floor(x))


@_quiet
def digamma(x):
    """psi(x) = d/dx log Gamma(x): NaN at the negative integers and -inf, -inf at +0, +inf at
    -0.

    Example:
        >>> round(float(digamma(np.array(1.0))), 10)  # minus the Euler-Mascheroni constant
        -0.5772156649
    """
    x0 = np.asarray(x, dtype=np.float64)
    xs = np.where(np.isfinite(x0) & ~_is_pole(x0), x0, 1.0)
    neg = xs < 0
    # reflection through the distance to the nearest integer (exact), then shift above 20
    refl = np.where(neg, -np.pi / np.tan(np.pi * (xs - np.round(xs))), 0.0)
    v = np.where(neg, 1.0 - xs, xs)
    acc = np.zeros_like(v)
    for _ in range(20):
        small = v < 20.0
        acc = acc - np.where(small, 1.0 / v, 0.0)
        v = np.where(small, v + 1.0, v)
    z = 1.0 / (v * v)
    series = sum(b / (2 * k) * z ** k for k, b in enumerate(_BERNOULLI, start=1))
    out = refl + acc + np.log(v) - 0.5 / v - series
    out = np.where(x0 == np.inf, np.inf, out)
    out = np.where(np.isnan(x0) | (x0 == -np.inf) | (_is_pole(x0) & (x0 != 0)), np.nan, out)
    out = np.where(x0 == 0, np.where(np.signbit(x0), np.inf, -np.inf), out)
    return _like(x, out)


def _hurwitz_tail(s: float, v):
    """zeta(s, v) for v >= 30 by Euler-Maclaurin."""
    vs = v ** -s
    total = v * vs / (s - 1) + 0.5 * vs
    rising = s  # s (s+1) .. (s+2k-2)
    for k, b in enumerate(_BERNOULLI, start=1):
        total = total + b / math.factorial(2 * k) * rising * v ** (-s - 2 * k + 1)
        rising *= (s + 2 * k - 1) * (s + 2 * k)
    return total


@_quiet
def polygamma(x, n=1.0):
    """The n-th derivative of digamma, n a whole number >= 0 (n = 0 is digamma).

    Example:
        >>> round(float(polygamma(np.array(1.0), 1)), 10)  # pi^2 / 6
        1.6449340668
    """
    n = int(n)
    if n == 0:
        return digamma(x)
    x0 = np.asarray(x, dtype=np.float64)
    s = n + 1.0
    pole = _is_pole(x0)
    ok = np.isfinite(x0) & ~pole & (x0 >= -1e6)
    xs = np.where(ok, x0, 1.0)
    lead = np.zeros_like(xs)
    if n == 1:  # psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x)
        neg = xs < 0
        lead = np.where(neg, (np.pi / np.sin(np.pi * (xs - np.round(xs)))) ** 2, 0.0)
        xs = np.where(neg, 1.0 - xs, xs)
    acc = np.zeros_like(xs)
    steps = int(max(0.0, 30.0 - float(xs.min(initial=30.0))))
    v = xs
    for _ in range(steps + 1):
        small = v < 30.0
        acc = acc + np.where(small, v ** -s, 0.0)
        v = np.where(small, v + 1.0, v)
    z = acc + _hurwitz_tail(s, v)
    out = (-1.0) ** (n + 1) * math.factorial(n) * z
    out = np.where(lead != 0, lead - z, out)
    out = np.where(x0 == np.inf, 0.0, out)
    out = np.where(np.isnan(x0) | (x0 == -np.inf) | (~pole & ~ok & ~np.isinf(x0)), np.nan, out)
    out = np.where(pole & (x0 != -np.inf), np.inf if n % 2 else np.nan, out)
    return _like(x, out)


def _erfinv1(y: float) -> float:
    if math.isnan(y) or abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    if y == 0:
        return y
    # bisection to a bracket of width 1e-3, then Newton, which converges from there
    lo, hi = (0.0, 6.0) if y > 0 else (-6.0, 0.0)
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    v = 0.5 * (lo + hi)
    c = 1.0 - abs(y)  # exact for |y| >= 0.5, where the residual is taken from erfc
    for _ in range(8):
        d = 2.0 / math.sqrt(math.pi) * math.exp(-v * v)
        if d == 0:
            break
        r = (c - math.erfc(abs(v))) * (1.0 if v > 0 else -1.0) if c <= 0.5 else math.erf(v) - y
        v -= r / d
    return v


_erfinv_v = np.vectorize(_erfinv1, otypes=[np.float64])


def erfinv(x):
    """The inverse of erf on (-1, 1): +-inf at +-1, NaN outside.

    Example:
        >>> round(float(erfinv(np.array(0.5))), 10)
        0.4769362762
    """
    return _like(x, _erfinv_v(np.asarray(x, dtype=np.float64)))
