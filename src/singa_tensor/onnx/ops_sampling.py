"""ONNX import handlers for resizing and sampling: Resize, Upsample, AffineGrid, GridSample,
RoiAlign and DeformConv.

Resize builds one interpolation matrix per axis in numpy and applies it with a matmul, so the
image keeps its gradient. AffineGrid, and GridSample in 2-D with linear or nearest
sampling, are nn.functional's affine_grid and grid_sample (differentiable in the grid too).
The other GridSample forms, RoiAlign and DeformConv read their sampling positions (grid,
boxes, offsets) on the host as metadata: gradients reach the sampled image and the weights,
not the positions.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import creation
from ..ops.more_sampling import affine_grid as _affine_grid
from ..ops.more_sampling import grid_sample as _grid_sample
from ..ops.shape import stack
from ._graph import ints
from ._handlers import handler
from .ops_nn import _float, _geometry

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


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _check_resize_size(node, x, out: list) -> None:
    """Refuse an output (or a per-axis interpolation matrix) larger than this machine's
    memory before building anything: huge scales would otherwise spend minutes in the
    matrix loop on the way to a MemoryError."""
    if any(o < 0 for o in out):
        raise node.fail(f"output shape {out} has a negative size")
    total = math.prod(out) * max(x.dtype.itemsize, 4)
    widest = max((o * n * 8 for o, n in zip(out, x.shape)), default=0)
    limit = _memory_bytes()
    if max(total, widest) > limit:
        raise node.fail(f"output shape {out} from input {list(x.shape)} needs "
                        f"{max(total, widest) / 2**30:.1f} GiB, more than this machine's "
                        f"{limit / 2**30:.1f} GiB of memory")


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
    _check_resize_size(node, x, out)
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
    return _affine_grid(theta, size, align_corners=bool(attrs.get("align_corners", 0)))


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
    if r == 2 and mode in ("linear", "nearest"):  # nn.functional's, differentiable in grid
        # (cubic stays below: PyTorch's bicubic pads each of the 4x4 taps, and with border
        # padding ONNX's cubic gives other values near the edges)
        return _grid_sample(x, grid, "bilinear" if mode == "linear" else "nearest", padding,
                            align)
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
