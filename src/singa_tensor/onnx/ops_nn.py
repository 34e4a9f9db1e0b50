"""ONNX import handlers for the neural-network ops: convolution, pooling, normalisation,
resizing and the classification losses.

Every handler computes with our differentiable ops, so an imported network trains. The window
geometry of ONNX (per-axis kernel, strides, dilations, begin/end pads, auto_pad, ceil_mode) is
resolved here in Python; 2-d work runs on `conv2d`/`conv_transpose2d`, 1-d is 2-d with a unit
height, and 3-d is composed from 2-d slices. Pooling and Col2Im of any rank gather or scatter
kernel windows with index maps built in numpy (pure metadata, no gradient, cached per
geometry); a 2-d AveragePool whose pads F.avg_pool2d can express runs on that instead. GridSample,
RoiAlign and DeformConv read their sampling positions (grid, boxes, offsets) as such metadata
too: gradients reach the sampled image and the weights, not the positions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..nn import functional as F
from ..ops.elementwise import where
from ..ops.shape import cat, stack
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
    pads that count towards the divisor are materialised as zeros first.

    MaxPool stays on the window gather: index_select + amax measured faster than the
    max_pool2d kernel (index search, then a gather) at every shape tried, and it keeps the
    gradient of tied maxima split as before."""
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


@handler("MaxPool")
def max_pool(node, inputs, attrs):
    x = inputs[0]
    xf = _float(x)
    win, (spatial, kernel, strides, dil, pb, _, pe_all, out) = _pool_windows(
        node, xf, attrs, -math.inf)
    n, c = x.shape[:2]
    y = win.amax(dim=2).reshape(n, c, *out)
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
        return _float(x).amax(dim=dims, keepdim=True).to(x.dtype)
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


# ---- resizing ------------------------------------------------------------------------------------


def _coeffs(mode, ratio, scale, attrs):
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        if ratio == 1.0:
            return np.array([0.0, 1.0])
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
              "floor": False, "ceil": True}.get(nm)
        if up is None:
            raise ValueError(f"nearest_mode {nm!r}")
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])
    antialias = attrs.get("antialias", 0) and scale < 1
    if mode == "linear":
        if not antialias:
            return np.array([1 - ratio, ratio])
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()
    a = attrs.get("cubic_coeff_a", -0.75)

    def kern(t):
        t = abs(t)
        if t <= 1:
            return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0

    if antialias:
        start = int(np.floor(-2 / scale) + 1)
        c = np.array([kern(scale * (i - ratio)) for i in range(start, 2 - start)])
        return c / c.sum()
    return np.array([kern(ratio + 1), kern(ratio), kern(1 - ratio), kern(2 - ratio)])


def _resize_matrix(n_in, n_out, scale, roi, mode, attrs):
    """(n_out, n_in) weights of one axis, and the rows that take the extrapolation value."""
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    width = scale * n_in  # ONNX measures the output in unrounded units here
    m = np.zeros((n_out, n_in))
    extra = np.zeros(n_out, dtype=bool)
    for i in range(n_out):
        if ctm == "align_corners":
            x = 0.0 if width == 1 else i * (n_in - 1) / (width - 1)
        elif ctm == "asymmetric":
            x = i / scale
        elif ctm == "tf_crop_and_resize":
            lo, hi = roi
            x = (hi - lo) * (n_in - 1) / 2 if width == 1 else i * (hi - lo) * (n_in - 1) / (
                width - 1)
            x += lo * (n_in - 1)
            if x < 0 or x > n_in - 1:
                extra[i] = True
                continue
        elif ctm == "pytorch_half_pixel":
            x = -0.5 if width == 1 else (i + 0.5) / scale - 0.5
        elif ctm == "half_pixel":
            x = (i + 0.5) / scale - 0.5
        elif ctm == "half_pixel_symmetric":
            adjust = n_out / (scale * n_in)
            x = n_in / 2 * (1 - adjust) + (i + 0.5) / scale - 0.5
        else:
            raise ValueError(f"coordinate_transformation_mode {ctm!r}")
        fl = math.floor(x)
        ratio = 1.0 if x == fl else x - fl
        c = _coeffs(mode, ratio, scale, attrs)
        start = math.ceil(x) - len(c) // 2
        taps = np.arange(start, start + len(c))
        if attrs.get("exclude_outside", 0):
            c = np.where((taps < 0) | (taps >= n_in), 0.0, c)
            c = c / (c.sum() or 1.0)
        np.add.at(m[i], np.clip(taps, 0, n_in - 1), c)
    return m, extra


def _resize(node, x, scales, sizes, roi, attrs, mode):
    r = x.ndim
    axes = list(attrs.get("axes") or range(r))
    axes = [a + r if a < 0 else a for a in axes]
    full_scale = [1.0] * r
    out = list(x.shape)
    if sizes is not None:
        if len(sizes) != len(axes):
            raise node.fail(f"sizes {sizes} must have one entry per axis {axes}")
        ratios = [s / x.shape[a] for s, a in zip(sizes, axes)]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            k = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [k] * len(axes)
            sizes = [int(k * x.shape[a] + 0.5) for a in axes]
        for a, s, q in zip(axes, sizes, ratios):
            out[a], full_scale[a] = s, q
    else:
        if len(scales) != len(axes):
            raise node.fail(f"scales {scales} must have one entry per axis {axes}")
        for a, s in zip(axes, scales):
            if s <= 0:
                raise node.fail(f"scales must be positive, got {scales}")
            out[a], full_scale[a] = int(math.floor(x.shape[a] * s)), s
    full_roi = None
    if roi is not None and len(roi):
        full_roi = [(0.0, 1.0)] * r
        for i, a in enumerate(axes):
            full_roi[a] = (roi[i], roi[len(axes) + i])
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    extrap = attrs.get("extrapolation_value", 0.0)
    y = x
    for a in range(r):
        same = out[a] == x.shape[a] and math.isclose(full_scale[a], 1.0)
        if same and (ctm != "tf_crop_and_resize" or full_roi is None or full_roi[a] == (0, 1)):
            continue
        try:
            m, extra = _resize_matrix(x.shape[a], out[a], full_scale[a],
                                      full_roi[a] if full_roi else (0.0, 1.0), mode, attrs)
        except ValueError as e:
            raise node.fail(f"unsupported {e}") from None
        y = y.movedim(a, -1)
        if mode == "nearest" and not extra.any():
            pick = creation.tensor(m.argmax(1), device=x.device)
            y = y.index_select(y.ndim - 1, pick)
        else:
            yf = _float(y)
            y = yf @ creation.tensor(m.T.copy(), dtype=yf.dtype, device=x.device)
            if extra.any():
                y = y + creation.tensor(extra * extrap, dtype=y.dtype, device=x.device)
            y = y.to(x.dtype)
        y = y.movedim(-1, a)
    return y


def _floats(t):
    if t is None:
        return None
    return [float(v) for v in np.asarray(t.detach().cpu().numpy()).reshape(-1)]


@handler("Resize")
def resize(node, inputs, attrs):
    x = inputs[0]
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise node.fail(f"mode {mode!r} is not nearest, linear or cubic")
    if node.opset < 11:
        attrs = dict(attrs, coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        scales, sizes, roi = _floats(inputs[1]), None, None
    else:
        roi = _floats(inputs[1]) if len(inputs) > 1 else None
        scales = _floats(inputs[2]) if len(inputs) > 2 else None
        sizes = ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        if scales is not None and not scales:
            scales = None
    if (scales is None) == (sizes is None):
        raise node.fail("exactly one of scales and sizes must be given")
    return _resize(node, x, scales, sizes, roi, attrs, mode)


@handler("Upsample")
def upsample(node, inputs, attrs):
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise node.fail(f"mode {mode!r} is not nearest or linear")
    scales = attrs.get("scales") if node.opset < 9 else _floats(inputs[1])
    attrs = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return _resize(node, inputs[0], list(scales), None, None, attrs,
                   "linear" if mode == "bilinear" else mode)



# ---- sampling grids ------------------------------------------------------------------------------


@handler("AffineGrid")
def affine_grid(node, inputs, attrs):
    theta, size = inputs[0], ints(inputs[1])
    r = len(size) - 2
    if r not in (2, 3) or theta.shape != (size[0], r, r + 1):
        raise node.fail(f"theta {theta.shape} must be (N, {r}, {r + 1}) for size {size}")
    axes = []
    for d in reversed(size[2:]):  # the grid lists x (width) first
        if attrs.get("align_corners", 0):
            axes.append(np.linspace(-1.0, 1.0, d) if d > 1 else np.zeros(1))
        else:
            axes.append((np.arange(d) * 2 + 1) / d - 1)
    mesh = list(np.meshgrid(*axes[::-1], indexing="ij"))[::-1]
    base = np.stack(mesh + [np.ones_like(mesh[0])], -1).reshape(-1, r + 1)
    base_t = creation.tensor(base, dtype=theta.dtype, device=theta.device)
    grid = base_t @ theta.transpose(1, 2)  # (N, P, r)
    return grid.reshape(size[0], *size[2:], r)


def _reflect(v, lo, hi):
    rng = hi - lo
    below, above = v < lo, v > hi
    dx = np.where(below, lo - v, v - hi)
    n = np.floor(dx / rng) if rng > 0 else np.zeros_like(dx)
    rem = dx - n * rng
    even = n % 2 == 0
    out = np.where(below, np.where(even, lo + rem, hi - rem), v)
    return np.where(above, np.where(even, hi - rem, lo + rem), out)


def _grid_taps(x, d, mode, padding, align):
    """Per output point: tap indices (T, P) into an axis of size d and their weights."""
    lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
    if mode == "nearest":
        x = np.rint(x)
    outside = (x < lo) | (x > hi)
    if padding == "border":
        x = np.where(outside, np.clip(x, 0, d - 1), x)
    elif padding == "reflection":
        x = np.where(outside, _reflect(x, lo, hi), x)
    if mode == "nearest":
        taps, w = x[None].astype(np.int64), np.ones((1,) + x.shape)
    else:
        x0 = np.floor(x)
        t = x - x0
        if mode == "linear":
            taps = np.stack([x0, x0 + 1]).astype(np.int64)
            w = np.stack([1 - t, t])
        else:
            a = -0.75
            taps = np.stack([x0 - 1, x0, x0 + 1, x0 + 2]).astype(np.int64)
            w = np.stack([((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                          ((a + 2) * t - (a + 3)) * t * t + 1,
                          ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                          ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a])
    if padding == "zeros":
        w = w * ((taps >= 0) & (taps < d))
    elif padding == "border":
        pass
    else:
        taps = np.trunc(_reflect(taps.astype(np.float64), lo, hi)).astype(np.int64)
    return np.clip(taps, 0, d - 1), w


@handler("GridSample")
def grid_sample(node, inputs, attrs):
    x, grid = inputs
    r = x.ndim - 2
    if r < 1 or grid.ndim != x.ndim or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
        raise node.fail(f"grid {grid.shape} must be (N, *out, {r}) for input {x.shape}")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(attrs.get("mode", "linear"),
                                                         attrs.get("mode", "linear"))
    if node.opset < 20 and "mode" not in attrs:
        mode = "linear"
    padding = attrs.get("padding_mode", "zeros")
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border",
                                                                     "reflection"):
        raise node.fail(f"mode {mode!r} / padding_mode {padding!r} is not supported")
    align = bool(attrs.get("align_corners", 0))
    n, c = x.shape[:2]
    spatial = list(x.shape[2:])
    out = list(grid.shape[1:-1])
    # the sample positions are read from the grid as metadata: the gradient flows to the
    # input image, not to the grid
    g = np.asarray(grid.detach().cpu().numpy(), dtype=np.float64).reshape(n, -1, r)
    idx, wts = None, None
    for i, d in enumerate(spatial):
        v = g[..., r - 1 - i]
        v = (v + 1) / 2 * (d - 1) if align else ((v + 1) * d - 1) / 2
        taps, w = _grid_taps(v, d, mode, padding, align)  # (T, N, P)
        if idx is None:
            idx, wts = taps, w
        else:
            idx = (idx[:, None] * d + taps[None]).reshape(-1, *taps.shape[1:])
            wts = (wts[:, None] * w[None]).reshape(-1, *w.shape[1:])
    t, p = idx.shape[0], idx.shape[2]
    flat_idx = creation.tensor(idx.transpose(1, 0, 2).reshape(n, 1, t * p), device=x.device)
    picked = x.reshape(n, c, -1).gather(2, flat_idx.expand(n, c, t * p)).reshape(n, c, t, p)
    w_t = creation.tensor(wts.transpose(1, 0, 2)[:, None], dtype=x.dtype, device=x.device)
    return (picked * w_t).sum(dim=2).reshape(n, c, *out)


def _roi_samples(box, h, w, ph, pw, ratio, half_pixel):
    """Bilinear taps (4, S) and weights (4, S) of the sampling points of one RoI, S = the
    ph*pw bins times the g samples of each bin, bin-major."""
    off = 0.5 if half_pixel else 0.0
    x1, y1, x2, y2 = box
    sw, sh, rw, rh = x1 - off, y1 - off, x2 - x1, y2 - y1
    if not half_pixel:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / ph, rw / pw
    gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
    gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
    yy = sh + np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh
    xx = sw + np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw
    y = np.broadcast_to(yy[:, None, :, None], (ph, pw, gh, gw)).reshape(-1)
    x = np.broadcast_to(xx[None, :, None, :], (ph, pw, gh, gw)).reshape(-1)
    outside = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    y, x = np.maximum(y, 0), np.maximum(x, 0)
    y0, x0 = np.floor(y).astype(np.int64), np.floor(x).astype(np.int64)
    y = np.where(y0 >= h - 1, h - 1, y)
    x = np.where(x0 >= w - 1, w - 1, x)
    y0, x0 = np.minimum(y0, h - 1), np.minimum(x0, w - 1)
    y1_, x1_ = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    idx = np.stack([y0 * w + x0, y0 * w + x1_, y1_ * w + x0, y1_ * w + x1_])
    wts = np.stack([hy * hx, hy * lx, ly * hx, ly * lx]) * ~outside
    return idx, wts, gh * gw


@handler("RoiAlign")
def roi_align(node, inputs, attrs):
    x, rois, batch = inputs
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
        raise node.fail(f"expected X (N, C, H, W) and rois (R, 4), got {x.shape} and "
                        f"{rois.shape}")
    n, c, h, w = x.shape
    ph, pw = attrs.get("output_height", 1), attrs.get("output_width", 1)
    scale = attrs.get("spatial_scale", 1.0)
    half = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    mode = attrs.get("mode", "avg")
    # boxes and batch indices are sampling metadata: the gradient flows to X
    boxes = np.asarray(rois.detach().cpu().numpy(), dtype=np.float64) * scale
    b_idx = ints(batch)
    if len(b_idx) != boxes.shape[0] or any(not 0 <= b < n for b in b_idx):
        raise node.fail(f"batch_indices {b_idx} must give one image in [0, {n}) per RoI")
    outs = []
    planes = x.reshape(n, c, h * w)
    for box, b in zip(boxes, b_idx):
        idx, wts, count = _roi_samples(box, h, w, ph, pw, attrs.get("sampling_ratio", 0), half)
        s = idx.shape[1]
        picked = planes[b].index_select(1, creation.tensor(idx.reshape(-1), device=x.device))
        vals = picked.reshape(c, 4, s) * creation.tensor(wts, dtype=x.dtype, device=x.device)
        vals = vals.reshape(c, 4, ph * pw, s // (ph * pw))
        if mode == "avg":
            outs.append(vals.sum(dim=(1, 3)) / max(count, 1))
        else:
            outs.append(vals.amax(dim=1).amax(dim=2))
    if not outs:
        return creation.zeros(0, c, ph, pw, dtype=x.dtype, device=x.device)
    return stack(outs, 0).reshape(len(outs), c, ph, pw)


@handler("DeformConv")
def deform_conv(node, inputs, attrs):
    x, w, offset = inputs[:3]
    b = inputs[3] if len(inputs) > 3 else None
    mask = inputs[4] if len(inputs) > 4 else None
    if x.ndim != 4 or w.ndim != 4:
        raise node.fail(f"only 2-d deformable convolution is supported, got input {x.shape}")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    group, og = attrs.get("group", 1), attrs.get("offset_group", 1)
    k = kh * kw
    if c != cg * group or o % group or c % og or offset.shape[:2] != (n, og * k * 2):
        raise node.fail(f"input {x.shape}, weight {w.shape}, offset {offset.shape} do not agree "
                        f"with group={group}, offset_group={og}")
    strides, dil, pb, _, out = _geometry(node, attrs, (h, wd), (kh, kw))
    if list(offset.shape[2:]) != out:
        raise node.fail(f"offset spatial shape {offset.shape[2:]} must be the output {out}")
    p = out[0] * out[1]
    # sampling positions are metadata read from offset: gradients reach x, w, bias and mask
    off = np.asarray(offset.detach().cpu().numpy(), np.float64).reshape(n, og, k, 2, p)
    ki, kj = np.meshgrid(np.arange(kh) * dil[0], np.arange(kw) * dil[1], indexing="ij")
    oi, oj = np.meshgrid(np.arange(out[0]) * strides[0] - pb[0],
                         np.arange(out[1]) * strides[1] - pb[1], indexing="ij")
    base_h = ki.reshape(-1, 1) + oi.reshape(1, -1)
    base_w = kj.reshape(-1, 1) + oj.reshape(1, -1)
    th, wh = _grid_taps(base_h + off[:, :, :, 0], h, "linear", "zeros", True)
    tw, ww = _grid_taps(base_w + off[:, :, :, 1], wd, "linear", "zeros", True)
    idx = (th[:, None] * wd + tw[None]).reshape(4, n, og, k * p)
    wts = (wh[:, None] * ww[None]).reshape(4, n, og, k, p)
    idx_t = creation.tensor(idx.transpose(1, 2, 0, 3).reshape(n, og, 1, 4 * k * p),
                            device=x.device)
    xg = x.reshape(n, og, c // og, h * wd)
    picked = xg.gather(3, idx_t.expand(n, og, c // og, 4 * k * p)).reshape(
        n, og, c // og, 4, k, p)
    w_t = creation.tensor(wts.transpose(1, 2, 0, 3, 4)[:, :, None], dtype=x.dtype,
                          device=x.device)
    cols = (picked * w_t).sum(dim=3)  # (n, og, c/og, k, p)
    if mask is not None:
        cols = cols * mask.reshape(n, og, 1, k, p)
    cols = cols.reshape(n, group, cg * k, p)
    y = (w.reshape(group, o // group, cg * k) @ cols).reshape(n, o, *out)
    return y if b is None else y + b.reshape(1, o, 1, 1)
