"""ONNX import handlers for the neural-network ops: convolution, pooling, normalisation and
the classification losses (resizing and sampling live in ops_sampling.py).

Every handler computes with our differentiable ops, so an imported network trains. The window
geometry of ONNX (per-axis kernel, strides, dilations, begin/end pads, auto_pad, ceil_mode) is
resolved here in Python; 2-d work runs on `conv2d`/`conv_transpose2d`, 1-d is 2-d with a unit
height, and 3-d is composed from 2-d slices. Pooling and Col2Im of any rank gather or scatter
kernel windows with index maps built in numpy (pure metadata, no gradient, cached per
geometry); a 2-d AveragePool whose pads F.avg_pool2d can express runs on that instead.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..nn import functional as F
from ..ops.elementwise import where
from ..ops.shape import cat
from ._graph import ints
from ._handlers import handler

_HALF = (_dt.float16, _dt.bfloat16)

# ---- window geometry -----------------------------------------------------------------------------


def _geometry(node, attrs, spatial: tuple, kernel: tuple, ceil_mode: bool = False):
    """(strides, dilations, pads_begin, pads_end, out_sizes) for a sliding-window op."""
    r = len(spatial)
    strides = list(attrs.get("strides") or [1] * r)
    dil = list(attrs.get("dilations") or [1] * r)
    if len(strides) != r or len(dil) != r or len(kernel) != r:
        raise node.fail(f"kernel {list(kernel)}, strides {strides} and dilations {dil} must "
                        f"each have {r} entries for spatial shape {list(spatial)}")
    if min(strides + dil + list(kernel)) < 1:
        raise node.fail(f"kernel {list(kernel)}, strides {strides} and dilations {dil} must be "
                        "positive")
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe, out = [], [], []
        for n, k, s, d in zip(spatial, kernel, strides, dil):
            o = -(-n // s)
            total = max(0, (o - 1) * s + (k - 1) * d + 1 - n)
            small = total // 2
            pb.append(small if auto == "SAME_UPPER" else total - small)
            pe.append(total - pb[-1])
            out.append(o)
        return strides, dil, pb, pe, out
    if auto == "VALID":
        pb = pe = [0] * r
    elif auto in ("NOTSET", ""):
        pads = list(attrs.get("pads") or [0] * (2 * r))
        if len(pads) != 2 * r or min(pads) < 0:
            raise node.fail(f"pads {pads} must be {2 * r} non-negative ints")
        pb, pe = pads[:r], pads[r:]
    else:
        raise node.fail(f"auto_pad {auto!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    out = []
    for n, k, s, d, b, e in zip(spatial, kernel, strides, dil, pb, pe):
        span = n + b + e - (k - 1) * d - 1
        if span < 0:
            raise node.fail(f"kernel {list(kernel)} (dilations {dil}) does not fit spatial shape "
                            f"{list(spatial)} with pads {pb + pe}")
        o = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= n + b:  # the last window must start inside
            o -= 1
        out.append(o)
    return strides, dil, pb, pe, out


def _pad_spatial(x, pb, pe, value=0.0):
    """x (N, C, *spatial) padded per spatial axis (negative amounts crop)."""
    if not any(pb) and not any(pe):
        return x
    amounts = []
    for b, e in zip(reversed(pb), reversed(pe)):
        amounts += [b, e]
    return F.pad(x, amounts, value=value)


def _window_index(spatial, kernel, strides, dil, out) -> np.ndarray:
    """(K, P) flat positions in a (padded) spatial block of every kernel tap of every window
    (read-only: cached, a model asks for the same few geometries on every forward)."""
    return _window_index_cached(*(tuple(int(v) for v in a)
                                  for a in (spatial, kernel, strides, dil, out)))


@functools.lru_cache(maxsize=256)
def _window_index_cached(spatial, kernel, strides, dil, out) -> np.ndarray:
    taps = np.stack(np.meshgrid(*[np.arange(k) * d for k, d in zip(kernel, dil)],
                                indexing="ij"), -1).reshape(-1, len(kernel))
    starts = np.stack(np.meshgrid(*[np.arange(o) * s for o, s in zip(out, strides)],
                                  indexing="ij"), -1).reshape(-1, len(kernel))
    pos = taps[:, None, :] + starts[None, :, :]
    idx = np.ravel_multi_index(tuple(np.moveaxis(pos, -1, 0)), spatial)
    idx.flags.writeable = False
    return idx


def _windows(xp, kernel, strides, dil, out):
    """Windows of a padded (N, C, *spatial) tensor as (N, C, K, P)."""
    n, c = xp.shape[:2]
    spatial = xp.shape[2:]
    idx = _window_index(spatial, kernel, strides, dil, out)
    flat = xp.reshape(n, c, int(np.prod(spatial)))
    picked = flat.index_select(2, creation.tensor(idx.reshape(-1), device=xp.device))
    return picked.reshape(n, c, idx.shape[0], idx.shape[1])


def _end_fill(spatial, kernel, strides, dil, pb, pe, out):
    """Extra end padding so that every one of `out` windows lies inside the padded input."""
    return [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e))
            for n, k, s, d, b, e, o in zip(spatial, kernel, strides, dil, pb, pe, out)]


def _float(x):
    """Pooling needs a float tensor (an -inf pad); integer images are exact in float64."""
    return x if x.dtype.is_floating_point else x.to(_dt.float64)


# ---- convolution ---------------------------------------------------------------------------------


def _conv_nd(node, x, w, b, strides, dil, pb, pe, group):
    r = x.ndim - 2
    if r == 1:
        y = _conv_nd(node, x.unsqueeze(2), w.unsqueeze(2), b, [1] + strides, [1] + dil,
                     [0] + pb, [0] + pe, group)
        return y.squeeze(2)
    if r == 2:
        if pb == pe:
            return F.conv2d(x, w, b, tuple(strides), tuple(pb), tuple(dil), group)
        return F.conv2d(_pad_spatial(x, pb, pe), w, b, tuple(strides), 0, tuple(dil), group)
    if r != 3:
        raise node.fail(f"{r}-d convolution is not supported (input shape {x.shape})")
    # 3-d: one 2-d convolution of depth-sampled planes per kernel depth tap, summed
    xp = _pad_spatial(x, pb, pe)
    n, c, dp, hp, wp = xp.shape
    kd = w.shape[2]
    od = (dp - (kd - 1) * dil[0] - 1) // strides[0] + 1
    acc = None
    for i in range(kd):
        lo = i * dil[0]
        xs = xp[:, :, lo:lo + strides[0] * (od - 1) + 1:strides[0]]
        xs = xs.permute(0, 2, 1, 3, 4).reshape(n * od, c, hp, wp)
        y = F.conv2d(xs, w[:, :, i], None, tuple(strides[1:]), 0, tuple(dil[1:]), group)
        acc = y if acc is None else acc + y
    o, oh, ow = acc.shape[1:]
    out = acc.reshape(n, od, o, oh, ow).permute(0, 2, 1, 3, 4)
    if b is not None:
        out = out + b.reshape(1, o, 1, 1, 1)
    return out


@handler("Conv")
def conv(node, inputs, attrs):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if x.ndim < 3 or w.ndim != x.ndim:
        raise node.fail(f"expected input (N, C, ...) and weight of the same rank, got {x.shape} "
                        f"and {w.shape}")
    kernel = tuple(attrs.get("kernel_shape") or w.shape[2:])
    if tuple(kernel) != tuple(w.shape[2:]):
        raise node.fail(f"kernel_shape {list(kernel)} does not match weight shape {w.shape}")
    group = attrs.get("group", 1)
    if x.shape[1] != w.shape[1] * group:
        raise node.fail(f"input channels {x.shape[1]} != weight in-channels {w.shape[1]} x group "
                        f"{group}")
    strides, dil, pb, pe, _ = _geometry(node, attrs, x.shape[2:], kernel)
    half = x.dtype in _HALF
    if half:  # the CPU im2col has no 16-bit kernel: compute in float32
        x, w, b = (None if t is None else t.to(_dt.float32) for t in (x, w, b))
    y = _conv_nd(node, x, w, b, strides, dil, pb, pe, group)
    return y.to(inputs[0].dtype) if half else y


@handler("CausalConvWithState")
def causal_conv_with_state(node, inputs, attrs):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    past = inputs[3] if len(inputs) > 3 else None
    act = attrs.get("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise node.fail(f"activation {act!r} is not one of none, silu, swish")
    if x.ndim != 3 or w.ndim != 3 or w.shape[:2] != (x.shape[1], 1):
        raise node.fail(f"expected input (B, C, L) and weight (C, 1, k), got {x.shape} and "
                        f"{w.shape}")
    n, c = x.shape[:2]
    k = w.shape[2]
    if past is None:
        past = creation.zeros(n, c, k - 1, dtype=x.dtype, device=x.device)
    elif past.shape != (n, c, k - 1):
        raise node.fail(f"past_state shape {past.shape} must be {(n, c, k - 1)}")
    padded = cat([past, x], 2)
    y = conv(node, [padded, w, b], {"group": c})
    if act != "none":
        y = F.silu(y.to(_dt.float32)).to(x.dtype) if x.dtype in _HALF else F.silu(y)
    return (y, padded[:, :, padded.shape[2] - (k - 1):])


@handler("ConvInteger")
def conv_integer(node, inputs, attrs):
    x, w = inputs[0], inputs[1]
    xz = inputs[2] if len(inputs) > 2 else None
    wz = inputs[3] if len(inputs) > 3 else None
    # 8-bit products summed in float64 are exact far past any real kernel size
    xf = x.to(_dt.float64) - (xz.to(_dt.float64) if xz is not None else 0.0)
    wf = w.to(_dt.float64)
    if wz is not None:
        wf = wf - (wz.to(_dt.float64).reshape(-1, *([1] * (w.ndim - 1))) if wz.numel() > 1
                   else wz.to(_dt.float64))
    return conv(node, [xf, wf], attrs).round().to(_dt.int32)


def _conv_transpose_full(node, x, w, strides, dil, group):
    """The un-cropped transposed convolution, spatial size s*(n-1) + d*(k-1) + 1."""
    r = x.ndim - 2
    if r == 1:
        y = _conv_transpose_full(node, x.unsqueeze(2), w.unsqueeze(2), [1] + strides,
                                 [1] + dil, group)
        return y.squeeze(2)
    if r == 2:
        return F.conv_transpose2d(x, w, None, tuple(strides), 0, 0, group, tuple(dil))
    if r != 3:
        raise node.fail(f"{r}-d transposed convolution is not supported (input {x.shape})")
    # 3-d: each kernel depth tap is a 2-d transposed convolution of every input plane, added
    # into the output planes it reaches
    n, c, d, h, wd = x.shape
    kd = w.shape[2]
    planes = x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, wd)
    full_d = strides[0] * (d - 1) + dil[0] * (kd - 1) + 1
    out = None
    for i in range(kd):
        y = F.conv_transpose2d(planes, w[:, :, i], None, tuple(strides[1:]), 0, 0, group,
                               tuple(dil[1:]))
        o, oh, ow = y.shape[1:]
        y = y.reshape(n, d, o, oh, ow)
        pos = creation.tensor(np.arange(d) * strides[0] + i * dil[0], device=x.device)
        if out is None:
            out = creation.zeros(n, full_d, o, oh, ow, dtype=x.dtype, device=x.device)
        out = out.index_add(1, pos, y)
    return out.permute(0, 2, 1, 3, 4)


@handler("ConvTranspose")
def conv_transpose(node, inputs, attrs):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if x.ndim < 3 or w.ndim != x.ndim:
        raise node.fail(f"expected input (N, C, ...) and weight of the same rank, got {x.shape} "
                        f"and {w.shape}")
    r = x.ndim - 2
    group = attrs.get("group", 1)
    if w.shape[0] != x.shape[1]:
        raise node.fail(f"weight shape {w.shape} expects {w.shape[0]} input channels, the input "
                        f"has {x.shape[1]}")
    kernel = list(w.shape[2:])
    strides = list(attrs.get("strides") or [1] * r)
    dil = list(attrs.get("dilations") or [1] * r)
    opad = list(attrs.get("output_padding") or [0] * r)
    full = [s * (n - 1) + d * (k - 1) + 1 for n, k, s, d in zip(x.shape[2:], kernel, strides, dil)]
    auto = attrs.get("auto_pad", "NOTSET")
    out_shape = attrs.get("output_shape")
    if out_shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * s for n, s in zip(x.shape[2:], strides)]
    if out_shape is not None:
        out_shape = list(out_shape)[-r:]
        total = [f + p - o for f, p, o in zip(full, opad, out_shape)]
        if min(total) < 0:
            # a longer output than the full one is zero (bias) filled at the end
            pb = [0] * r
            pe = total
        elif auto == "SAME_LOWER":
            pb = [t - t // 2 for t in total]
            pe = [t // 2 for t in total]
        else:
            pb = [t // 2 for t in total]
            pe = [t - t // 2 for t in total]
    else:
        pads = list(attrs.get("pads") or [0] * (2 * r))
        if len(pads) != 2 * r:
            raise node.fail(f"pads {pads} must have {2 * r} entries")
        pb, pe = pads[:r], pads[r:]
    half = x.dtype in _HALF
    if half:
        x, w = x.to(_dt.float32), w.to(_dt.float32)
    y = _conv_transpose_full(node, x, w, strides, dil, group)
    y = _pad_spatial(y, [-p for p in pb], [p - e for p, e in zip(opad, pe)])
    if half:
        y = y.to(inputs[0].dtype)
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * r))
    return y


# ---- pooling -------------------------------------------------------------------------------------


def _pool_windows(node, x, attrs, fill):
    if x.ndim < 3:
        raise node.fail(f"expected an input (N, C, ...) with spatial dims, got shape {x.shape}")
    kernel = list(attrs.get("kernel_shape") or [])
    if len(kernel) != x.ndim - 2:
        raise node.fail(f"kernel_shape {kernel} must have one entry per spatial dim of {x.shape}")
    spatial = list(x.shape[2:])
    strides, dil, pb, pe, out = _geometry(node, attrs, spatial, kernel,
                                          bool(attrs.get("ceil_mode", 0)))
    extra = _end_fill(spatial, kernel, strides, dil, pb, pe, out)
    pe_all = [e + f for e, f in zip(pe, extra)]
    xp = _pad_spatial(x, pb, pe_all, fill)
    win = _windows(xp, kernel, strides, dil, out)
    return win, (spatial, kernel, strides, dil, pb, pe, pe_all, out)


def _kernel_out(n, k, s, p, ceil_mode):
    """Output length of F.avg_pool2d (PyTorch's rule) for symmetric padding p."""
    span = n + 2 * p - k
    o = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    return o


def _avg_pool2d_fast(node, x, attrs):
    """AveragePool of a 4-d float input on F.avg_pool2d, or None where its rules cannot give
    ONNX's exact result (the caller then gathers the windows itself). Asymmetric or oversized
    pads that count towards the divisor are materialised as zeros first."""
    if x.ndim != 4 or x.dtype not in (_dt.float32, _dt.float64):
        return None
    kernel = list(attrs.get("kernel_shape") or [])
    if len(kernel) != 2:
        return None  # the general path reports it
    ceil = bool(attrs.get("ceil_mode", 0))
    strides, dil, pb, pe, out = _geometry(node, attrs, x.shape[2:], kernel, ceil)
    count_pad = bool(attrs.get("count_include_pad", 0))
    if dil != [1, 1]:
        return None
    if pb == pe and all(2 * p <= k for p, k in zip(pb, kernel)):
        xp, pad = x, list(pb)
    elif count_pad:
        xp, pad = _pad_spatial(x, pb, pe), [0, 0]
    else:
        return None
    # the kernel drops a ceil_mode window that starts in the end padding: with pads
    # materialised that rule can keep one ONNX drops
    if [_kernel_out(n, k, s, p, ceil) for n, k, s, p in
            zip(xp.shape[2:], kernel, strides, pad)] != out:
        return None
    return F.avg_pool2d(xp, tuple(kernel), tuple(strides), tuple(pad), ceil, count_pad)


def _max_pool2d_fast(node, x, attrs):
    """MaxPool of a 4-d float input on F.max_pool2d (one kernel instead of gathering every
    window), or None where its rules cannot give the ONNX result: uneven pads, pads over half
    the kernel, or the indices output wanted."""
    kernel = list(attrs.get("kernel_shape") or [])
    if x.ndim != 4 or len(kernel) != 2 or x.dtype not in (_dt.float32, _dt.float64) or \
            node.wants(1):
        return None
    ceil = bool(attrs.get("ceil_mode", 0))
    strides, dil, pb, pe, out = _geometry(node, attrs, x.shape[2:], kernel, ceil)
    if pb != pe or any(p > k // 2 for p, k in zip(pb, kernel)):
        return None
    # one pass of the max pooling kernel (maxima and their indices together)
    y = F.max_pool2d(x, tuple(kernel), tuple(strides), tuple(pb), tuple(dil), ceil)
    return y if list(y.shape[2:]) == list(out) else None


@handler("MaxPool")
def max_pool(node, inputs, attrs):
    x = inputs[0]
    fast = _max_pool2d_fast(node, x, attrs)
    if fast is not None:
        return (fast, None)
    xf = _float(x)
    win, (spatial, kernel, strides, dil, pb, _, pe_all, out) = _pool_windows(
        node, xf, attrs, -math.inf)
    n, c = x.shape[:2]
    # max with its index, not amax: a tied maximum's gradient goes to its first tap, as in
    # nn.MaxPool2d (amax would share it evenly)
    y = win.max(dim=2)[0].reshape(n, c, *out)
    if xf is not x:
        y = y.to(x.dtype)
    if not node.wants(1):
        return (y, None)
    # indices into the flattened unpadded input, as ONNX counts them (row or column major)
    padded = [s + b + e for s, b, e in zip(spatial, pb, pe_all)]
    idx = _window_index(padded, kernel, strides, dil, out)
    coords = np.stack(np.unravel_index(idx, padded), -1) - np.array(pb)
    coords = np.clip(coords, 0, np.array(spatial) - 1)  # pad taps never win unless all are pad
    order = np.arange(len(spatial))[::-1] if attrs.get("storage_order", 0) else None
    if order is None:
        flat = np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), spatial)
    else:
        flat = np.ravel_multi_index(tuple(np.moveaxis(coords[..., order], -1, 0)),
                                    [spatial[i] for i in order])
    arg = win.argmax(dim=2, keepdim=True)  # (N, C, 1, P)
    table = creation.tensor(flat, device=x.device).reshape(1, 1, *flat.shape)
    table = table.expand(n, c, *flat.shape)
    where = table.gather(2, arg).reshape(n, c, *out)
    plane = int(np.prod(spatial))
    base = creation.tensor(np.arange(n * c).reshape(n, c, *([1] * len(out))) * plane,
                           device=x.device)
    return (y, where + base)


@handler("AveragePool")
def avg_pool(node, inputs, attrs):
    x = inputs[0]
    fast = _avg_pool2d_fast(node, x, attrs)
    if fast is not None:
        return fast
    win, (spatial, kernel, strides, dil, pb, pe, pe_all, out) = _pool_windows(node, x, attrs, 0.0)
    n, c = x.shape[:2]
    total = win.sum(dim=2)
    # the divisor: taps on the input, plus the explicit pads when count_include_pad, never the
    # extra ceil_mode overhang
    mask = np.pad(np.ones(spatial), list(zip(pb, pe)),
                  constant_values=1.0 if attrs.get("count_include_pad", 0) else 0.0)
    mask = np.pad(mask, [(0, a - e) for a, e in zip(pe_all, pe)])
    idx = _window_index(mask.shape, kernel, strides, dil, out)
    div = mask.reshape(-1)[idx].sum(0)
    y = total / creation.tensor(np.maximum(div, 1), dtype=x.dtype, device=x.device)
    return y.reshape(n, c, *out)


@handler("LpPool")
def lp_pool(node, inputs, attrs):
    x = inputs[0]
    p = float(attrs.get("p", 2))
    win, geo = _pool_windows(node, x, attrs, 0.0)
    y = (win.abs() ** p).sum(dim=2) ** (1.0 / p)
    return y.reshape(*x.shape[:2], *geo[-1])


@handler("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(node, inputs, attrs):
    x = inputs[0]
    if x.ndim < 3:
        raise node.fail(f"expected an input (N, C, ...) with spatial dims, got shape {x.shape}")
    dims = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return x.mean(dim=dims, keepdim=True)
    if node.op_type == "GlobalMaxPool":
        # the first of tied maxima takes the gradient, as in MaxPool
        xf = _float(x)
        flat = xf.reshape(*x.shape[:2], -1)
        return flat.max(dim=2)[0].reshape(*x.shape[:2], *([1] * len(dims))).to(x.dtype)
    p = float(attrs.get("p", 2))
    return (x.abs() ** p).sum(dim=dims, keepdim=True) ** (1.0 / p)


@handler("MaxUnpool")
def max_unpool(node, inputs, attrs):
    x, idx = inputs[0], inputs[1]
    shape = inputs[2] if len(inputs) > 2 else None
    r = x.ndim - 2
    kernel = list(attrs.get("kernel_shape") or [])
    strides = list(attrs.get("strides") or [1] * r)
    pads = list(attrs.get("pads") or [0] * (2 * r))
    if len(kernel) != r or idx.shape != x.shape:
        raise node.fail(f"kernel_shape {kernel} and indices {idx.shape} must match input "
                        f"{x.shape}")
    # the indices address the shape the pooling started from; a given output_shape only adds
    # zeros at the ends
    inferred = list(x.shape[:2]) + [(n - 1) * s - pads[i] - pads[i + r] + k for i, (n, k, s) in
                                    enumerate(zip(x.shape[2:], kernel, strides))]
    out = ints(shape) if shape is not None else inferred
    if len(out) != x.ndim or any(o < i for o, i in zip(out, inferred)):
        raise node.fail(f"output_shape {out} is smaller than the unpooled shape {inferred}")
    total = int(np.prod(inferred))
    flat = idx.reshape(-1)
    lo, hi = int(flat.amin().item()), int(flat.amax().item())
    if lo < 0 or hi >= total:
        raise node.fail(f"indices range [{lo}, {hi}] falls outside the output of size {total}")
    y = creation.zeros(total, dtype=x.dtype, device=x.device)
    y = y.scatter(0, flat, x.reshape(-1)).reshape(*inferred)
    return _pad_spatial(y, [0] * r, [o - i for o, i in zip(out[2:], inferred[2:])])


@handler("Col2Im")
def col2im(node, inputs, attrs):
    cols, image, block = inputs[0], ints(inputs[1]), ints(inputs[2])
    r = len(image)
    k = int(np.prod(block))
    if cols.ndim != 3 or cols.shape[1] % k or len(block) != r:
        raise node.fail(f"input {cols.shape} must be (N, C*{k}, L) for block_shape {block}")
    strides, dil, pb, pe, out = _geometry(node, attrs, image, block)
    if int(np.prod(out)) != cols.shape[2]:
        raise node.fail(f"input has {cols.shape[2]} blocks, the geometry gives {out}")
    n, c = cols.shape[0], cols.shape[1] // k
    padded = [s + b + e for s, b, e in zip(image, pb, pe)]
    idx = _window_index(padded, block, strides, dil, out).reshape(-1)
    y = creation.zeros(n, c, int(np.prod(padded)), dtype=cols.dtype, device=cols.device)
    y = y.index_add(2, creation.tensor(idx, device=cols.device), cols.reshape(n, c, -1))
    return _pad_spatial(y.reshape(n, c, *padded), [-b for b in pb], [-e for e in pe])


# ---- normalisation -------------------------------------------------------------------------------


def _chan(t, ndim):
    return t.reshape(1, -1, *([1] * (ndim - 2)))


@handler("BatchNormalization")
def batch_norm(node, inputs, attrs):
    x, scale, bias, mean, var = inputs[:5]
    eps = attrs.get("epsilon", 1e-5)
    # before opset 14 a node asking for the statistics outputs is a training node
    training = attrs.get("training_mode", 0) if node.opset >= 14 else (
        node.n_out > 1 and not attrs.get("is_test", 0))
    if not training:
        return (F.batch_norm(x, mean, var, scale, bias, False, 0.0, eps),) + (None,) * (
            node.n_out - 1)
    m = attrs.get("momentum", 0.9)
    dims = (0,) + tuple(range(2, x.ndim))
    bm = x.mean(dim=dims)
    bv = ((x - _chan(bm, x.ndim)) ** 2).mean(dim=dims)
    y = (x - _chan(bm, x.ndim)) * (_chan(bv, x.ndim) + eps).rsqrt()
    y = y * _chan(scale, x.ndim) + _chan(bias, x.ndim)
    run_mean = mean * m + bm * (1 - m)
    run_var = var * m + bv * (1 - m)
    outs = (y, run_mean, run_var, bm, bv)
    return outs[:max(node.n_out, 1)]


@handler("InstanceNormalization")
def instance_norm(node, inputs, attrs):
    x, scale, bias = inputs
    dims = tuple(range(2, x.ndim))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    y = (x - mean) * (var + attrs.get("epsilon", 1e-5)).rsqrt()
    return y * _chan(scale, x.ndim) + _chan(bias, x.ndim)


def _norm_axis(node, x, axis):
    a = axis + x.ndim if axis < 0 else axis
    if not 0 <= a < x.ndim:
        raise node.fail(f"axis {axis} is out of range for input of shape {x.shape}")
    return tuple(range(a, x.ndim))


@handler("LayerNormalization")
def layer_norm(node, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    dims = _norm_axis(node, x, attrs.get("axis", -1))
    xs = x.to(_dt.float32) if attrs.get("stash_type", 1) == 1 and x.dtype in (
        _dt.float16, _dt.bfloat16) else x
    mean = xs.mean(dim=dims, keepdim=True)
    var = ((xs - mean) ** 2).mean(dim=dims, keepdim=True)
    inv = (var + attrs.get("epsilon", 1e-5)).rsqrt()
    y = ((xs - mean) * inv).to(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return (y, mean, inv)


@handler("RMSNormalization")
def rms_norm(node, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    dims = _norm_axis(node, x, attrs.get("axis", -1))
    xs = x.to(_dt.float32) if x.dtype in (_dt.float16, _dt.bfloat16) else x
    inv = ((xs * xs).mean(dim=dims, keepdim=True) + attrs.get("epsilon", 1e-5)).rsqrt()
    return (xs * inv).to(x.dtype) * scale


@handler("GroupNormalization")
def group_norm(node, inputs, attrs):
    x, scale, bias = inputs
    g = attrs.get("num_groups")
    n, c = x.shape[:2]
    if not g or c % g:
        raise node.fail(f"num_groups {g} must divide the {c} channels")
    xs = x.reshape(n, g, -1)
    mean = xs.mean(dim=2, keepdim=True)
    var = ((xs - mean) ** 2).mean(dim=2, keepdim=True)
    y = ((xs - mean) * (var + attrs.get("epsilon", 1e-5)).rsqrt()).reshape(*x.shape)
    if scale.numel() == g and g != c:  # opset 18: one scale and bias per group
        scale = scale.reshape(g, 1).expand(g, c // g).reshape(c)
        bias = bias.reshape(g, 1).expand(g, c // g).reshape(c)
    return y * _chan(scale, x.ndim) + _chan(bias, x.ndim)


@handler("LRN")
def lrn(node, inputs, attrs):
    x = inputs[0]
    size = attrs.get("size")
    if not size or x.ndim < 3:
        raise node.fail(f"size {size!r} must be given and the input (N, C, ...) ({x.shape})")
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size // 2
    sq = F.pad(x * x, [0, 0] * (x.ndim - 2) + [lo, hi])
    s = sq[:, 0:c]
    for i in range(1, size):
        s = s + sq[:, i:i + c]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    return x / (s * (alpha / size) + bias) ** beta


@handler("LpNormalization")
def lp_normalization(node, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", -1)
    p = attrs.get("p", 2)
    if p not in (1, 2):
        raise node.fail(f"p must be 1 or 2, got {p}")
    norm = x.abs().sum(dim=axis, keepdim=True) if p == 1 else (x * x).sum(
        dim=axis, keepdim=True).sqrt()
    # a zero vector stays zero instead of 0/0
    return x / where(norm == 0, creation.ones_like(norm), norm)


@handler("MeanVarianceNormalization")
def mvn(node, inputs, attrs):
    x = inputs[0]
    dims = tuple(attrs.get("axes", [0, 2, 3]))
    mean = x.mean(dim=dims, keepdim=True)
    var = (x * x).mean(dim=dims, keepdim=True) - mean * mean
    return (x - mean) / (var.sqrt() + 1e-9)


# ---- losses --------------------------------------------------------------------------------------


def _nll(node, logp, target, weight, attrs):
    ignore = attrs.get("ignore_index")
    reduction = attrs.get("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise node.fail(f"reduction must be none, sum or mean, got {reduction!r}")
    if target.shape != (logp.shape[0],) + tuple(logp.shape[2:]):
        raise node.fail(f"target shape {target.shape} does not match input {logp.shape}")
    c = logp.shape[1]
    target = target.to(_dt.int64)
    keep = target != ignore if ignore is not None else None
    safe = target if keep is None else target * keep.to(_dt.int64)
    lo, hi = int(safe.amin().item()), int(safe.amax().item())
    if lo < 0 or hi >= c:
        raise node.fail(f"target values range [{lo}, {hi}] outside the {c} classes")
    picked = -logp.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = weight.index_select(0, safe.reshape(-1)).reshape(*safe.shape) if weight is not None \
        else creation.ones(*safe.shape, dtype=logp.dtype, device=logp.device)
    if keep is not None:
        w = w * keep.to(w.dtype)
    loss = picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


@handler("NegativeLogLikelihoodLoss")
def nll_loss(node, inputs, attrs):
    weight = inputs[2] if len(inputs) > 2 else None
    return _nll(node, inputs[0], inputs[1], weight, attrs)


@handler("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(node, inputs, attrs):
    scores, labels = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    if scores.ndim < 2:
        raise node.fail(f"scores must be (N, C, ...), got shape {scores.shape}")
    logp = F.log_softmax(scores, dim=1)
    loss = _nll(node, logp, labels, weight, attrs)
    return (loss, logp if node.wants(1) else None)
