"""Special functions and samplers the distributions need: lgamma and digamma as compositions
of Tensor ops (so they are differentiable, twice), the regularised incomplete gamma function
on host arrays, and gamma draws with implicit reparameterisation gradients.

Random numbers come from the library's generator (st.rand, st.randn), so st.manual_seed makes
every draw reproducible; the rejection steps run on host arrays.
"""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st
from singa_tensor import Tensor

# Lanczos approximation, g = 7, nine terms: relative error about 1e-15 for x >= 0.5
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _lgamma_half_up(x: Tensor) -> Tensor:
    z = x - 1.0
    a = _LANCZOS[0] + sum(c / (z + float(i)) for i, c in enumerate(_LANCZOS[1:], start=1))
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * st.log(t) - t + st.log(a)


def lgamma(x: Tensor) -> Tensor:
    """log(Gamma(x)) for x > 0, element by element (below 0.5 through Gamma(x + 1) / x).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions._special import lgamma
        >>> round(lgamma(st.tensor([5.0], dtype=st.float64)).item(), 10)  # log(24)
        3.1780538303
    """
    small = x < 0.5
    safe = st.where(small, x + 1.0, x)  # both branches stay finite where they are not taken
    out = _lgamma_half_up(safe)
    return st.where(small, out - st.log(st.where(small, x, 1.0)), out)


def digamma(x: Tensor) -> Tensor:
    """The derivative of lgamma for x > 0: the recurrence up to x + 6, then the asymptotic
    series (absolute error below 1e-11).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.distributions._special import digamma
        >>> round(digamma(st.tensor([1.0], dtype=st.float64)).item(), 10)  # -Euler's gamma
        -0.5772156649
    """
    shift = 0.0
    for k in range(6):
        shift = shift + 1.0 / (x + float(k))
    y = x + 6.0
    y2 = 1.0 / (y * y)
    series = y2 * (1.0 / 12 - y2 * (1.0 / 120 - y2 * (1.0 / 252 - y2 * (
        1.0 / 240 - y2 * (1.0 / 132)))))
    return st.log(y) - 0.5 / y - series - shift


def lbeta(a: Tensor, b: Tensor) -> Tensor:
    """log(B(a, b)) = lgamma(a) + lgamma(b) - lgamma(a + b)."""
    return lgamma(a) + lgamma(b) - lgamma(a + b)


# ---- host-side incomplete gamma and gamma sampling ----------------------------------------------

_np_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _lgam(a: np.ndarray) -> np.ndarray:
    return _np_lgamma(a).astype(np.float64)


def _series_sum(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum_n x^n / (a (a + 1) ... (a + n)), each element iterated until its terms are
    negligible (finished elements leave the working arrays)."""
    out = np.empty(a.shape)
    idx = np.arange(a.size)
    term = 1.0 / a
    total = term.copy()
    n = a.copy()
    for _ in range(100_000):
        n = n + 1.0
        term = term * x / n
        total = total + term
        done = np.abs(term) <= np.abs(total) * 1e-16
        if done.any():
            out[idx[done]] = total[done]
            keep = ~done
            idx, term, total, n, x = idx[keep], term[keep], total[keep], n[keep], x[keep]
            if not idx.size:
                break
    out[idx] = total
    return out


def _continued_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of Gamma(a) Q(a, x) exp(x) x^-a (modified Lentz), for x >= a + 1,
    each element iterated until it settles."""
    tiny = 1e-300
    out = np.empty(a.shape)
    idx = np.arange(a.size)
    b = x + 1.0 - a
    c = np.full(a.shape, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, 100_000):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        done = np.abs(delta - 1.0) <= 4e-16
        if done.any():
            out[idx[done]] = h[done]
            keep = ~done
            idx, a, b, c, d, h = idx[keep], a[keep], b[keep], c[keep], d[keep], h[keep]
            if not idx.size:
                break
    out[idx] = h
    return out


def gammainc(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The regularised lower incomplete gamma function P(a, x) (a > 0, x >= 0), float64: the
    power series below x = a + 1, the continued fraction of Q = 1 - P above it."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.zeros(a.shape)
    with np.errstate(all="ignore"):
        lead = np.where(x > 0, a * np.log(np.where(x > 0, x, 1.0)) - x, -np.inf)
        ser = x < a + 1
        if ser.any():
            aa = a[ser]
            out[ser] = np.exp(lead[ser] - _lgam(aa)) * _series_sum(aa, x[ser])
        cf = ~ser
        if cf.any():
            aa = a[cf]
            out[cf] = 1.0 - np.exp(lead[cf] - _lgam(aa)) * _continued_fraction(aa, x[cf])
    return np.clip(out, 0.0, 1.0)


def _host_uniform(n: int, device) -> np.ndarray:
    return st.rand(n, dtype=st.float64, device=device).numpy(force=True)


def _host_normal(n: int, device) -> np.ndarray:
    return st.randn(n, dtype=st.float64, device=device).numpy(force=True)


def sample_standard_gamma(alpha: np.ndarray, device="cpu") -> np.ndarray:
    """Gamma(alpha, 1) draws by Marsaglia and Tsang's squeeze-free rejection method, alpha < 1
    boosted through Gamma(alpha + 1) * U ** (1 / alpha); uniforms and normals from the
    library's generator."""
    a = np.asarray(alpha, np.float64).ravel()
    boost = a < 1.0
    a1 = np.where(boost, a + 1.0, a)
    d = a1 - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty(a.shape)
    todo = np.arange(a.size)
    while todo.size:
        z, u = _host_normal(todo.size, device), _host_uniform(todo.size, device)
        v = (1.0 + c[todo] * z) ** 3
        with np.errstate(all="ignore"):
            ok = (v > 0) & (np.log(u) < 0.5 * z * z + d[todo] * (1.0 - v + np.log(v)))
        out[todo[ok]] = d[todo[ok]] * v[ok]
        todo = todo[~ok]
    if boost.any():
        u = _host_uniform(a.size, device)
        with np.errstate(all="ignore"):
            out = np.where(boost, out * u ** (1.0 / a), out)
    return np.maximum(out, np.finfo(np.float64).tiny).reshape(np.shape(alpha))


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dx/dalpha of a Gamma(alpha, 1) draw x held at a fixed quantile (implicit
    reparameterisation): -dP(alpha, x)/dalpha / p(x; alpha), the alpha-derivative by central
    differences of P. Above alpha = 1000, the normal limit's (x + alpha) / (2 alpha)."""
    a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    big = a > 1000.0
    h = 1e-5 * np.maximum(a, 1.0)
    h = np.minimum(h, 0.5 * a)
    dp = (gammainc(a + h, x) - gammainc(a - h, x)) / (2.0 * h)
    with np.errstate(all="ignore"):
        logpdf = (a - 1.0) * np.log(x) - x - _lgam(a)
        grad = -dp / np.exp(logpdf)
    grad = np.where(np.isfinite(grad), grad, 0.0)
    return np.where(big, (x + a) / (2.0 * a), grad)


def rsample_standard_gamma(alpha: Tensor, shape: tuple) -> Tensor:
    """Gamma(alpha, 1) draws of the given shape (alpha broadcast to it) whose gradient with
    respect to alpha is the implicit reparameterisation gradient."""
    a = alpha.expand(*shape) if tuple(alpha.shape) != tuple(shape) else alpha
    host_a = a.detach().numpy(force=True).astype(np.float64)
    x = np.maximum(sample_standard_gamma(host_a, a.device), np.finfo(a.dtype.np).tiny)
    value = st.tensor(x, dtype=a.dtype, device=a.device)  # no zeros in float32 either
    if not (a.requires_grad and st.is_grad_enabled()):
        return value
    grad = st.tensor(standard_gamma_grad(host_a, x), dtype=a.dtype, device=a.device)
    return value + (a - a.detach()) * grad  # the value of x, the gradient dx/dalpha
