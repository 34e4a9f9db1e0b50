"""Pooling in 1 and 3 dimensions, adaptive max pooling, power-average pooling and local
response normalisation (PyTorch names, arguments and output sizes).

One helper carries the windowed ones: the input's spatial positions are flattened, one fill
slot (-inf for max, 0 for sums) is appended for positions outside the input, and a single
gather by a table of window positions gives (N, C, *out, window) on which the reduction runs.
Gradients, to any order, come from gather and the reduction. The 1-d max and average pools
are the 2-d ones of ops/conv.py (their kernels) over a height of 1.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._geometry import at_least
from ._registry import REGISTRY, composite
from .conv import _adaptive_matrix, avg_pool2d, max_pool2d
from .elementwise import relu, sign
from .index import gather, index_select
from .padding import pad as _pad
from .reduce import _LOW, as_dtype, in_float
from .reduce import max as _max

# ---- geometry -----------------------------------------------------------------------------------


def _spatial(op: str, x, nsp: int) -> tuple:
    """x as (N, C, *spatial) with nsp spatial dims, and whether a batch dim was added."""
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim == nsp + 1:
        x, added = x.unsqueeze(0), True
    elif x.ndim == nsp + 2:
        added = False
    else:
        raise ValueError(f"{op}: expected a {nsp + 1}D or {nsp + 2}D input, got shape {x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    return x, added


def _tuple(op: str, v, n: int, name: str) -> tuple:
    vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) * n
    if len(vals) == 1 and n > 1:
        vals = vals * n
    if len(vals) != n or any(not isinstance(a, (int, np.integer)) or isinstance(a, bool)
                             for a in vals):
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(a) for a in vals)


def _geometry(op, sizes, kernel_size, stride, padding, dilation, ceil_mode) -> tuple:
    n = len(sizes)
    k = at_least(op, "kernel_size", _tuple(op, kernel_size, n, "kernel_size"), 1)
    s = at_least(op, "stride", _tuple(op, stride if stride is not None and stride != () else k,
                                      n, "stride"), 1)
    p = at_least(op, "padding", _tuple(op, padding, n, "padding"), 0)
    d = at_least(op, "dilation", _tuple(op, dilation, n, "dilation"), 1)
    if min(p) < 0 or any(pp > kk // 2 for pp, kk in zip(p, k)):
        raise ValueError(f"{op}: padding {p} should be at most half of the kernel size {k}")
    outs = []
    for size, kk, ss, pp, dd in zip(sizes, k, s, p, d):
        span = size + 2 * pp - dd * (kk - 1) - 1
        if span < 0:
            raise ValueError(f"{op}: kernel size {k} (dilation {d}) is too large for input "
                             f"size {tuple(sizes)} with padding {p}")
        o = (span + (ss - 1 if ceil_mode else 0)) // ss + 1
        if ceil_mode and (o - 1) * ss >= size + pp:  # the last window must start inside
            o -= 1
        outs.append(o)
    return k, s, p, d, tuple(outs)


def _axis_windows(size, k, s, p, d, o) -> np.ndarray:
    """(o, k) input positions of each window along one axis; -1 outside the input."""
    pos = np.arange(o)[:, None] * s - p + np.arange(k)[None, :] * d
    return np.where((pos >= 0) & (pos < size), pos, -1)


def _adaptive_windows(size: int, o: int) -> np.ndarray:
    starts = [(i * size) // o for i in range(o)]
    ends = [-((-(i + 1) * size) // o) for i in range(o)]
    width = max(e - b for b, e in zip(starts, ends))
    out = np.full((o, width), -1, dtype=np.int64)
    for i, (b, e) in enumerate(zip(starts, ends)):
        out[i, :e - b] = np.arange(b, e)
    return out


def _table(sizes, axes) -> np.ndarray:
    """Combine per-axis (o_a, k_a) windows into (prod o, prod k) flat positions; -1 outside."""
    table = np.zeros((1, 1), dtype=np.int64)
    valid = np.ones((1, 1), dtype=bool)
    for size, w in zip(sizes, axes):
        t = table[:, None, :, None] * size + w[None, :, None, :].clip(0)
        v = valid[:, None, :, None] & (w[None, :, None, :] >= 0)
        table = t.reshape(t.shape[0] * t.shape[1], -1)
        valid = v.reshape(table.shape)
    return np.where(valid, table, -1)


def _gather_windows(x: Tensor, table: np.ndarray, fill: float, outs: tuple) -> Tensor:
    """(N, C, *outs, window) values of x (N, C, *spatial) at table; -1 reads fill. float16 and
    bfloat16 windows come back in float32 (exactly), so that their sums accumulate there; the
    pools round their results to x's dtype once."""
    x = in_float(x)
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    slot = flat.shape[2]
    # the fill slot and the 1-d index hold no batch or channel size, so an exported graph
    # (Pad, Gather) follows the input's
    padded = _pad(flat, (0, 1), value=fill)
    index = creation.tensor(np.where(table >= 0, table, slot).reshape(-1), dtype=_dt.int64,
                            device=x.device)
    return index_select(padded, 2, index).reshape((n, c) + tuple(outs) + (table.shape[1],))


def _max_windows(x: Tensor, table: np.ndarray, outs: tuple, return_indices: bool, added: bool):
    win = _gather_windows(x, table, -math.inf, outs)
    values, arg = _max(win, dim=-1)
    values = as_dtype(values, x.dtype)
    if added:
        values = values.squeeze(0)
    if not return_indices:
        return values
    n, c = x.shape[:2]
    tab = creation.tensor(table.reshape(tuple(outs) + (table.shape[1],)), dtype=_dt.int64,
                          device=x.device).expand((n, c) + tuple(outs) + (table.shape[1],))
    indices = gather(tab, -1, arg.unsqueeze(-1)).squeeze(-1)
    return values, (indices.squeeze(0) if added else indices)


def _max_pool(op, nsp, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, added = _spatial(op, x, nsp)
    sizes = x.shape[2:]
    k, s, p, d, outs = _geometry(op, sizes, kernel_size, stride, padding, dilation, ceil_mode)
    axes = [_axis_windows(*a) for a in zip(sizes, k, s, p, d, outs)]
    return _max_windows(x, _table(sizes, axes), outs, return_indices, added)


def _avg_pool(op, nsp, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x, added = _spatial(op, x, nsp)
    sizes = x.shape[2:]
    k, s, p, _, outs = _geometry(op, sizes, kernel_size, stride, padding, 1, ceil_mode)
    axes = [_axis_windows(*a) for a in zip(sizes, k, s, p, (1,) * nsp, outs)]
    total = _gather_windows(x, _table(sizes, axes), 0.0, outs).sum(dim=-1)
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or \
                divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be a non-zero int, got "
                             f"{divisor_override!r}")
        out = total / float(divisor_override)
    else:
        div = np.ones((1,) * 0)
        for size, kk, ss, pp, o in zip(sizes, k, s, p, outs):
            start = np.arange(o) * ss - pp
            end = np.minimum(start + kk, size + pp)
            count = (end - start) if count_include_pad else (
                np.minimum(end, size) - np.maximum(start, 0))
            div = np.multiply.outer(div, count)
        out = total / creation.tensor(div, dtype=total.dtype, device=x.device)
    if x.dtype in _LOW:
        out = as_dtype(out, x.dtype)
    return out.squeeze(0) if added else out


# ---- numpy references (a plain loop over windows) ------------------------------------------------


def _pool_np(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             reduce="max", count_include_pad=True, unbatched=False):
    if unbatched:
        return _pool_np(x[None], kernel_size, stride, padding, dilation, ceil_mode, reduce,
                        count_include_pad)[0]
    nsp = x.ndim - 2
    k, s, p, d, outs = _geometry("ref", x.shape[2:], kernel_size, stride, padding, dilation,
                                 ceil_mode)
    out = np.zeros(x.shape[:2] + outs, dtype=x.dtype)
    for o in itertools.product(*[range(v) for v in outs]):
        vals, full = [], 1
        for j in itertools.product(*[range(v) for v in k]):
            pos = [o[a] * s[a] - p[a] + j[a] * d[a] for a in range(nsp)]
            if all(0 <= pos[a] < x.shape[2 + a] for a in range(nsp)):
                vals.append(x[(slice(None), slice(None)) + tuple(pos)])
        if reduce == "max":
            out[(slice(None), slice(None)) + o] = np.max(vals, axis=0)
        else:
            for a in range(nsp):
                start = o[a] * s[a] - p[a]
                full *= min(start + k[a], x.shape[2 + a] + p[a]) - start
            div = full if count_include_pad else len(vals)
            out[(slice(None), slice(None)) + o] = np.sum(vals, axis=0) / div
    return out


def _rng(seed):
    return np.random.default_rng(seed)


# ---- max and average pooling --------------------------------------------------------------------


def _max1d_samples():
    x = _rng(40).standard_normal((2, 3, 9))
    return [((x, 3), {}), ((x, 2), {"stride": 1, "padding": 1}),
            ((x, 3), {"stride": 2, "dilation": 2, "ceil_mode": True})]


@composite("max_pool1d", lambda x, k, **kw: _pool_np(x, k, **kw), samples=_max1d_samples)
def max_pool1d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over windows of (N, C, L) or (C, L); with return_indices, also each maximum's
    position in L.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.max_pool1d(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    op = "max_pool1d"
    x3, added = _spatial(op, x, 1)
    k, s, p, d, _ = _geometry(op, x3.shape[2:], kernel_size, stride, padding, dilation,
                              ceil_mode)
    # a 1-d pool is the 2-d kernel's pool over a height of 1 (its indices are then positions
    # in L)
    out = max_pool2d(x3.unsqueeze(2), (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]), ceil_mode,
                     return_indices)
    if return_indices:
        values, indices = out[0].squeeze(2), out[1].squeeze(2)
        return (values.squeeze(0), indices.squeeze(0)) if added else (values, indices)
    out = out.squeeze(2)
    return out.squeeze(0) if added else out


def _max3d_samples():
    x = _rng(41).standard_normal((1, 2, 4, 5, 4))
    return [((x, 2), {}), ((x, (3, 2, 2)), {"stride": (1, 2, 2), "padding": (1, 1, 0)}),
            ((x[0], 2), {"ceil_mode": True})]


def _max3d_np(x, k, **kw):
    return _pool_np(x, k, unbatched=x.ndim == 4, **kw)


@composite("max_pool3d", _max3d_np, samples=_max3d_samples)
def max_pool3d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over windows of (N, C, D, H, W) or (C, D, H, W); with return_indices, also each
    maximum's flat position in D*H*W.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.max_pool3d(st.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
        [[[[[7.0]]]]]
    """
    return _max_pool("max_pool3d", 3, x, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _avg1d_samples():
    x = _rng(42).standard_normal((2, 3, 8))
    return [((x, 3), {}), ((x, 3), {"stride": 2, "padding": 1}),
            ((x, 3), {"stride": 2, "padding": 1, "count_include_pad": False,
                      "ceil_mode": True})]


@composite("avg_pool1d", lambda x, k, **kw: _pool_np(x, k, reduce="mean", **kw),
           samples=_avg1d_samples)
def avg_pool1d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over windows of (N, C, L) or (C, L), with PyTorch's divisor rules.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.avg_pool1d(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    op = "avg_pool1d"
    x3, added = _spatial(op, x, 1)
    k, s, p, _, _ = _geometry(op, x3.shape[2:], kernel_size, stride, padding, 1, ceil_mode)
    out = avg_pool2d(x3.unsqueeze(2), (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode,
                     count_include_pad).squeeze(2)
    return out.squeeze(0) if added else out


def _avg3d_samples():
    x = _rng(43).standard_normal((1, 2, 4, 5, 4))
    return [((x, 2), {}), ((x, (3, 2, 2)), {"stride": 1, "padding": (1, 0, 1),
                                            "count_include_pad": False})]


@composite("avg_pool3d", lambda x, k, **kw: _pool_np(x, k, reduce="mean", **kw),
           samples=_avg3d_samples)
def avg_pool3d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over windows of (N, C, D, H, W) or (C, D, H, W), with PyTorch's divisor rules.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.avg_pool3d(st.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
        [[[[[3.5]]]]]
    """
    return _avg_pool("avg_pool3d", 3, x, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


# ---- adaptive pooling ---------------------------------------------------------------------------


def _output_size(op: str, output_size, sizes) -> tuple:
    n = len(sizes)
    vals = tuple(output_size) if isinstance(output_size, (list, tuple)) else (output_size,) * n
    if len(vals) != n:
        raise ValueError(f"{op}: output_size must be an int or a tuple of {n}, got "
                         f"{output_size!r}")
    vals = tuple(s if v is None else v for v, s in zip(vals, sizes))
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in vals):
        raise ValueError(f"{op}: output_size must be positive ints, got {output_size!r}")
    return tuple(int(v) for v in vals)


def _adaptive_np(x, output_size, reduce="max"):
    unbatched = x.ndim == 2 or (x.ndim == 3 and reduce == "max2d")
    if unbatched:
        x = x[None]
    sizes = x.shape[2:]
    outs = _output_size("ref", output_size, sizes)
    out = np.zeros(x.shape[:2] + outs, dtype=x.dtype)
    for o in itertools.product(*[range(v) for v in outs]):
        sl = tuple(slice((o[a] * sizes[a]) // outs[a], -((-(o[a] + 1) * sizes[a]) // outs[a]))
                   for a in range(len(sizes)))
        win = x[(slice(None), slice(None)) + sl]
        axes = tuple(range(2, x.ndim))
        out[(slice(None), slice(None)) + o] = win.mean(axes) if reduce == "mean" else win.max(
            axes)
    return out[0] if unbatched else out


def _adaptive_1d_samples():
    x = _rng(44).standard_normal((2, 3, 7))
    return [((x, 3), {}), ((x, 7), {}), ((x[0], 4), {})]


@composite("adaptive_avg_pool1d", lambda x, o: _adaptive_np(x, o, "mean"),
           samples=_adaptive_1d_samples)
def adaptive_avg_pool1d(x: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, L) or (C, L) to output_size positions (PyTorch's windows).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.adaptive_avg_pool1d(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    op = "adaptive_avg_pool1d"
    x3, added = _spatial(op, x, 1)
    (o,) = _output_size(op, output_size, x3.shape[2:])
    m = creation.tensor(_adaptive_matrix(x3.shape[2], o), dtype=x3.dtype, device=x3.device)
    out = x3 @ m.t()
    return out.squeeze(0) if added else out


def _adaptive_max(op, nsp, x, output_size, return_indices):
    x, added = _spatial(op, x, nsp)
    sizes = x.shape[2:]
    outs = _output_size(op, output_size, sizes)
    axes = [_adaptive_windows(s, o) for s, o in zip(sizes, outs)]
    return _max_windows(x, _table(sizes, axes), outs, return_indices, added)


@composite("adaptive_max_pool1d", lambda x, o: _adaptive_np(x, o), samples=_adaptive_1d_samples)
def adaptive_max_pool1d(x: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, L) or (C, L) to output_size positions; with return_indices, also
    each maximum's position in L.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.adaptive_max_pool1d(st.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    return _adaptive_max("adaptive_max_pool1d", 1, x, output_size, return_indices)


def _adaptive_2d_samples():
    x = _rng(45).standard_normal((2, 2, 5, 7))
    return [((x, 3), {}), ((x, (2, None)), {}), ((x[0], (4, 3)), {})]


@composite("adaptive_max_pool2d", lambda x, o: _adaptive_np(x, o, "max2d"),
           samples=_adaptive_2d_samples)
def adaptive_max_pool2d(x: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, H, W) or (C, H, W) to output_size (an int, or a pair in which
    None keeps that size); with return_indices, also each maximum's flat position in H*W.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.adaptive_max_pool2d(st.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _adaptive_max("adaptive_max_pool2d", 2, x, output_size, return_indices)


# ---- power-average pooling and local response normalisation -------------------------------------


def _lp_np(x, norm_type, kernel_size, stride=None, ceil_mode=False):
    k = _tuple("ref", kernel_size, x.ndim - 2, "k")
    mean = _pool_np(x ** norm_type, kernel_size, stride, 0, 1, ceil_mode, reduce="mean")
    return (np.maximum(mean, 0) * math.prod(k)) ** (1.0 / norm_type)


def _lp_samples_1d():
    x = _rng(46).uniform(0.2, 2.0, (2, 3, 8))
    return [((x, 2.0, 3), {}), ((x, 3.0, 2), {"stride": 3})]


def _lp_samples_2d():
    x = _rng(47).uniform(0.2, 2.0, (1, 2, 5, 6))
    return [((x, 2.0, 2), {}), ((x, 1.5, (3, 2)), {"stride": (1, 2)})]


def _lp_pool(op, nsp, x, norm_type, kernel_size, stride, ceil_mode):
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or norm_type == 0:
        raise ValueError(f"{op}: norm_type must be a non-zero number, got {norm_type!r}")
    x, added = _spatial(op, x, nsp)
    k = at_least(op, "kernel_size", _tuple(op, kernel_size, nsp, "kernel_size"), 1)
    if stride is not None and stride != ():
        at_least(op, "stride", _tuple(op, stride, nsp, "stride"), 1)
    if any(kk > n for kk, n in zip(k, x.shape[2:])):
        raise ValueError(f"{op}: kernel_size {k} is too large for input size "
                         f"{tuple(x.shape[2:])}")
    if nsp == 2:
        mean = avg_pool2d(x ** float(norm_type), k, stride, 0, ceil_mode)
    else:
        mean = _avg_pool(op, nsp, x ** float(norm_type), k, stride, 0, ceil_mode, True, None)
    # as PyTorch: the window sum (mean times the window size), negative sums clipped to 0
    out = (sign(mean) * relu(mean.abs()) * float(math.prod(k))) ** (1.0 / norm_type)
    return out.squeeze(0) if added else out


@composite("lp_pool1d", _lp_np, samples=_lp_samples_1d)
def lp_pool1d(x: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, L) or (C, L): (sum of x**p over each window)**(1/p).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.lp_pool1d(st.tensor([[[3.0, 4.0]]]), 2, 2).tolist()
        [[[5.0]]]
    """
    return _lp_pool("lp_pool1d", 1, x, norm_type, kernel_size, stride, ceil_mode)


@composite("lp_pool2d", _lp_np, samples=_lp_samples_2d)
def lp_pool2d(x: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, H, W) or (C, H, W): (window sum of x**p)**(1/p).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.lp_pool2d(st.ones(1, 1, 2, 2), 1, 2).tolist()
        [[[[4.0]]]]
    """
    return _lp_pool("lp_pool2d", 2, x, norm_type, kernel_size, stride, ceil_mode)


def _lrn_np(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x * x
    out = np.empty_like(x)
    for i in range(c):
        lo, hi = max(0, i - size // 2), min(c, i + (size - 1) // 2 + 1)
        out[:, i] = x[:, i] / (k + alpha / size * sq[:, lo:hi].sum(1)) ** beta
    return out


def _lrn_samples():
    r = _rng(48)
    return [((r.standard_normal((2, 5, 3)), 3), {}),
            ((r.standard_normal((1, 4, 2, 3)), 2), {"alpha": 0.5, "beta": 0.6, "k": 2.0})]


@composite("local_response_norm", _lrn_np, onnx="LRN", samples=_lrn_samples)
def local_response_norm(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Normalise each channel by the squares of its `size` neighbouring channels:
    x / (k + alpha / size * sum of x**2 over the window) ** beta.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.local_response_norm(st.ones(1, 2, 1), 2, alpha=1.0, beta=1.0).tolist()
        [[[0.6666666865348816], [0.5]]]
    """
    op = "local_response_norm"
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim < 3:
        raise ValueError(f"{op}: expected a 3D or higher input (N, C, ...), got shape {x.shape}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{op}: size must be a positive int, got {size!r}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    c = x.shape[1]
    # zeros before and after the channels: a pad, not a zeros tensor of x's shape (an ONNX
    # export of these ops would hold that tensor's traced batch)
    padded = _pad(x * x, [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2])
    total = padded[:, 0:c]
    for j in range(1, size):
        total = total + padded[:, j:j + c]
    return x / (total * (float(alpha) / size) + float(k)) ** float(beta)




# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _lrn_onnx(cls, b, args, attrs, outs):
    """LRN for an odd size (its window is centred on the channel, as ours is; for an even size
    ONNX puts the extra channel after, PyTorch before, so that size exports as the ops it
    runs). onnxruntime computes LRN on 4-d input only: other ranks go through (N, C, -1, 1)."""
    x, size = args["x"], args["size"]
    if size % 2 == 0:
        return NotImplemented
    name = b.value(x)
    kw = dict(size=int(size), alpha=float(args["alpha"]), beta=float(args["beta"]),
              bias=float(args["k"]))
    if x.ndim == 4:
        b.node("LRN", [name], outputs=outs, **kw)
        return None
    (flat,) = b.node("Reshape", [name, b.ints([0, 0, -1, 1])])
    (y,) = b.node("LRN", [flat], **kw)
    (shape,) = b.node("Shape", [name])
    b.node("Reshape", [y, shape], outputs=outs)
    return None


REGISTRY["local_response_norm"].onnx_export = classmethod(_lrn_onnx)

__all__: list[str] = []
