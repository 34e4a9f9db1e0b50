"""Ops that move elements between channels and space: pixel_shuffle, pixel_unshuffle,
channel_shuffle (reshape and permute), and unfold/fold, the public forms of the im2col and
col2im primitives that convolution runs on (PyTorch names, arguments and shapes)."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._geometry import at_least
from ._registry import REGISTRY, apply, composite, expect_tensor
from .conv import Col2im, Im2col, _col2im_np, _im2col_np, _out_size, _pair
from .layout import permute, reshape


def _factor(op: str, v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{op}: {name} must be a positive int, got {v!r}")
    return int(v)


def _rng(seed):
    return np.random.default_rng(seed)


# ---- pixel and channel shuffles -----------------------------------------------------------------


def _pixel_shuffle_np(x, upscale_factor):
    r = upscale_factor
    *b, c, h, w = x.shape
    y = x.reshape(*b, c // (r * r), r, r, h, w)
    nb = len(b)
    y = y.transpose(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    return y.reshape(*b, c // (r * r), h * r, w * r)


def _pixel_unshuffle_np(x, downscale_factor):
    r = downscale_factor
    *b, c, h, w = x.shape
    y = x.reshape(*b, c, h // r, r, w // r, r)
    nb = len(b)
    y = y.transpose(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    return y.reshape(*b, c * r * r, h // r, w // r)


@composite("pixel_shuffle", _pixel_shuffle_np, samples=lambda: [
    ((_rng(50).standard_normal((2, 8, 3, 2)), 2), {}),
    ((_rng(51).standard_normal((9, 2, 1)), 3), {})])
def pixel_shuffle(x: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): each group of r * r channels becomes an
    r by r block of pixels.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.pixel_shuffle(st.arange(4.0).reshape(1, 4, 1, 1), 2).tolist()
        [[[[0.0, 1.0], [2.0, 3.0]]]]
    """
    op = "pixel_shuffle"
    expect_tensor(op, x)
    r = _factor(op, upscale_factor, "upscale_factor")
    if x.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dimensions, got shape "
                         f"{x.shape}")
    *b, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"{op}: the channel dimension ({c}) must be divisible by the square "
                         f"of upscale_factor ({r * r})")
    nb = len(b)
    y = reshape(x, (*b, c // (r * r), r, r, h, w))
    y = permute(y, (*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2))
    return reshape(y, (*b, c // (r * r), h * r, w * r))


@composite("pixel_unshuffle", _pixel_unshuffle_np, samples=lambda: [
    ((_rng(52).standard_normal((2, 2, 4, 6)), 2), {}),
    ((_rng(53).standard_normal((1, 3, 3)), 3), {})])
def pixel_unshuffle(x: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), the inverse of pixel_shuffle.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.pixel_unshuffle(st.arange(4.0).reshape(1, 1, 2, 2), 2).flatten().tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    op = "pixel_unshuffle"
    expect_tensor(op, x)
    r = _factor(op, downscale_factor, "downscale_factor")
    if x.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dimensions, got shape "
                         f"{x.shape}")
    *b, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"{op}: height ({h}) and width ({w}) must be divisible by "
                         f"downscale_factor ({r})")
    nb = len(b)
    y = reshape(x, (*b, c, h // r, r, w // r, r))
    y = permute(y, (*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3))
    return reshape(y, (*b, c * r * r, h // r, w // r))


def _channel_shuffle_np(x, groups):
    n, c = x.shape[:2]
    y = x.reshape(n, groups, c // groups, *x.shape[2:]).swapaxes(1, 2)
    return y.reshape(x.shape)


@composite("channel_shuffle", _channel_shuffle_np, samples=lambda: [
    ((_rng(54).standard_normal((2, 6, 3)), 3), {}),
    ((_rng(55).standard_normal((1, 4, 2, 2)), 2), {})])
def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    """Interleave the channels (dimension 1) of (N, C, *) from `groups` groups:
    (N, g, C / g, *) transposed to (N, C / g, g, *).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.channel_shuffle(st.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
        [0.0, 2.0, 1.0, 3.0]
    """
    op = "channel_shuffle"
    expect_tensor(op, x)
    g = _factor(op, groups, "groups")
    if x.ndim < 3:
        raise ValueError(f"{op}: expected an input with at least 3 dimensions (N, C, *), got "
                         f"shape {x.shape}")
    n, c = x.shape[:2]
    if c % g:
        raise ValueError(f"{op}: the number of channels ({c}) must be divisible by groups ({g})")
    rest = tuple(x.shape[2:])
    y = reshape(x, (n, g, c // g) + rest)
    y = permute(y, (0, 2, 1) + tuple(range(3, y.ndim)))
    return reshape(y, tuple(x.shape))


# ---- unfold and fold ----------------------------------------------------------------------------


def _geometry(op, size, kernel_size, dilation, padding, stride) -> tuple:
    k = at_least(op, "kernel_size", _pair(op, kernel_size, "kernel_size"), 1)
    d = at_least(op, "dilation", _pair(op, dilation, "dilation"), 1)
    p = at_least(op, "padding", _pair(op, padding, "padding"), 0)
    s = at_least(op, "stride", _pair(op, stride, "stride"), 1)
    oh = _out_size(op, size[0], k[0], s[0], p[0], p[0], d[0])
    ow = _out_size(op, size[1], k[1], s[1], p[1], p[1], d[1])
    return (k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], oh, ow)


def _unfold_np(x, kernel_size, dilation=1, padding=0, stride=1):
    if x.ndim == 3:
        return _unfold_np(x[None], kernel_size, dilation, padding, stride)[0]
    return _im2col_np(x, _geometry("ref", x.shape[2:], kernel_size, dilation, padding, stride))


@composite("unfold", _unfold_np, onnx="Conv", samples=lambda: [
    ((_rng(56).standard_normal((2, 3, 5, 4)), 2), {}),
    ((_rng(57).standard_normal((2, 5, 6)), (2, 3)), {"dilation": (2, 1), "padding": 1,
                                                     "stride": 2})])
def unfold(x: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding blocks of (N, C, H, W) (or (C, H, W)) as columns:
    (N, C * kh * kw, L), L the number of block positions.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.unfold(st.arange(9.0).reshape(1, 1, 3, 3), 2).tolist()[0][0]
        [0.0, 1.0, 3.0, 4.0]
    """
    op = "unfold"
    expect_tensor(op, x)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: expected a 3D (C, H, W) or 4D (N, C, H, W) input, got shape "
                         f"{x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    x4 = x.unsqueeze(0) if x.ndim == 3 else x
    geo = _geometry(op, x4.shape[2:], kernel_size, dilation, padding, stride)
    out = apply(Im2col, x4, geo)
    return out.squeeze(0) if x.ndim == 3 else out


def _fold_np(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if x.ndim == 2:
        return _fold_np(x[None], output_size, kernel_size, dilation, padding, stride)[0]
    size = _pair("ref", output_size, "output_size")
    geo = _geometry("ref", size, kernel_size, dilation, padding, stride)
    c = x.shape[1] // (geo[0] * geo[1])
    return _col2im_np(x, geo, (x.shape[0], c) + size)


@composite("fold", _fold_np, onnx="Col2Im", samples=lambda: [
    ((_rng(58).standard_normal((2, 12, 12)), (5, 4), 2), {}),
    ((_rng(59).standard_normal((6, 9)), (4, 5), (2, 3)), {"padding": 1, "stride": 2})])
def fold(x: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The adjoint of unfold: sum columns (N, C * kh * kw, L) (or (C * kh * kw, L)) back into
    an (N, C, *output_size) image, overlapping blocks adding up.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.fold(st.ones(1, 4, 4), (3, 3), 2).tolist()[0][0]
        [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    op = "fold"
    expect_tensor(op, x)
    if x.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2D (C * kh * kw, L) or 3D (N, C * kh * kw, L) "
                         f"input, got shape {x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    x3 = x.unsqueeze(0) if x.ndim == 2 else x
    size = at_least(op, "output_size", _pair(op, output_size, "output_size"), 1)
    geo = _geometry(op, size, kernel_size, dilation, padding, stride)
    block = geo[0] * geo[1]
    n, ck, blocks = x3.shape
    if ck % block:
        raise ValueError(f"{op}: input dimension 1 ({ck}) must be divisible by the product of "
                         f"kernel_size ({block})")
    if blocks != geo[8] * geo[9]:
        raise ValueError(f"{op}: input has {blocks} blocks but output_size {size} with these "
                         f"kernel_size, dilation, padding and stride gives "
                         f"{geo[8] * geo[9]} ({geo[8]} x {geo[9]})")
    out = apply(Col2im, x3, geo, (n, ck // block) + size)
    return out.squeeze(0) if x.ndim == 2 else out


__all__ = ["channel_shuffle", "pixel_shuffle", "pixel_unshuffle"]


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _one_hot_blocks(channels: int, kh: int, kw: int, dtype) -> np.ndarray:
    """The (C * kh * kw, 1, kh, kw) weight of a convolution with groups=C whose output channel
    c * kh * kw + i * kw + j copies window position (i, j) of channel c: im2col's order."""
    eye = np.eye(kh * kw, dtype=np.dtype(dtype.name)).reshape(kh * kw, 1, kh, kw)
    return np.tile(eye, (channels, 1, 1, 1))


def _unfold_onnx(cls, b, args, attrs, outs):
    """unfold as a grouped Conv with one-hot weights, then Reshape to (N, C * kh * kw, L)."""
    from .shape import onnx_axes_node

    x = args["x"]
    kh, kw, sh, sw, ph, pw, dh, dw, _, _ = _geometry(
        cls.name, x.shape[-2:], args["kernel_size"], args["dilation"], args["padding"],
        args["stride"])
    c = x.shape[-3]
    name = b.value(x)
    if x.ndim == 3:
        name = onnx_axes_node(b, "Unsqueeze", name, [0])
    (y,) = b.node("Conv", [name, b.const(_one_hot_blocks(c, kh, kw, x.dtype))],
                  kernel_shape=[kh, kw], strides=[sh, sw], pads=[ph, pw, ph, pw],
                  dilations=[dh, dw], group=c)
    b.node("Reshape", [y, b.ints([c * kh * kw, -1] if x.ndim == 3 else [0, 0, -1])],
           outputs=outs)


def _fold_onnx(cls, b, args, attrs, outs):
    """fold as Col2Im (opset 18); below 18 as the adjoint of unfold's form: a grouped
    ConvTranspose with the same one-hot weights, output_padding reaching the far rows and
    columns that no block covers."""
    from .shape import onnx_axes_node

    x = args["x"]
    size = _pair(cls.name, args["output_size"], "output_size")
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = _geometry(
        cls.name, size, args["kernel_size"], args["dilation"], args["padding"], args["stride"])
    name = b.value(x)
    if x.ndim == 2:
        name = onnx_axes_node(b, "Unsqueeze", name, [0])
    if b.opset >= 18:
        (y,) = b.node("Col2Im", [name, b.ints(size), b.ints([kh, kw])], dilations=[dh, dw],
                      pads=[ph, pw, ph, pw], strides=[sh, sw])
    else:
        c = x.shape[-2] // (kh * kw)
        (grid,) = b.node("Reshape", [name, b.ints([0, 0, oh, ow])])
        covered = [(o - 1) * s - 2 * p + d * (k - 1) + 1 for o, s, p, d, k in
                   ((oh, sh, ph, dh, kh), (ow, sw, pw, dw, kw))]
        extra = [n - m for n, m in zip(size, covered)]
        (y,) = b.node("ConvTranspose", [grid, b.const(_one_hot_blocks(c, kh, kw, x.dtype))],
                      kernel_shape=[kh, kw], strides=[sh, sw], pads=[ph, pw, ph, pw],
                      dilations=[dh, dw], group=c, output_padding=extra if any(extra) else None)
    if x.ndim == 2:
        onnx_axes_node(b, "Squeeze", y, [0], outs)
    else:
        b.node("Identity", [y], outputs=outs)


REGISTRY["unfold"].onnx_export = classmethod(_unfold_onnx)
REGISTRY["fold"].onnx_export = classmethod(_fold_onnx)
