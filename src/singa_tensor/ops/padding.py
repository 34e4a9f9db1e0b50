"""Padding: constant (negative pads crop), reflect, replicate and circular, with PyTorch's
pad order (last dimension first).

Constant padding writes the input into the interior of a filled tensor; the other modes are
an index gather along each padded dimension, whose backward is the matching index-add.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import (
    REGISTRY,
    OpSpec,
    apply,
    contiguous,
    copy_into,
    expect_tensor,
    kernel,
    ptr,
    register,
    traced,
)
from .layout import clone
from .shape import Slice, _composite, _ints, _rand

_x234 = _rand(2, 3, 4)

# ---- pad ---------------------------------------------------------------------------------------


def _outer_inner(shape: tuple, dim: int) -> tuple:
    return math.prod(shape[:dim]), math.prod(shape[dim + 1:])


@register
class PadConstant(OpSpec):
    """x written into the interior of a tensor filled with value; pads are (before, after)
    per dimension, all non-negative."""

    name = "_pad_constant"
    onnx = "Pad"

    @staticmethod
    def forward(ctx, x, pads, value):
        ctx.in_shape, ctx.pads = x._shape, pads
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x._shape, pads))
        out = creation.full(shape, value, dtype=x.dtype, device=x._device)
        if x.numel():
            off = sum(lo * s for (lo, _), s in zip(pads, out._strides))
            copy_into(x, out._view(x._shape, out._strides, off))
        return out

    @staticmethod
    def backward(ctx, g):
        for d, ((lo, hi), n) in enumerate(zip(ctx.pads, ctx.in_shape)):
            if lo or hi:
                g = apply(Slice, g, d, lo, lo + n, 1)
        return (g,)

    @staticmethod
    def reference(x, pads, value):
        return np.pad(x, pads, constant_values=value)

    @staticmethod
    def samples():
        return [((_rand(2, 3), ((1, 0), (2, 1)), 0.5), {})]


PadConstant.fn = staticmethod(lambda x, pads, value: apply(PadConstant, x, pads, value))


def _gather_dim(x: Tensor, idx: Tensor, dim: int, out_n: int, op: str) -> Tensor:
    """out[o, j, i] = x[o, idx[j], i] ("index_select") or out[o, idx[j], i] += x[o, j, i]
    ("index_add") with x seen as [outer, n, inner] around dim."""
    shape = x._shape[:dim] + (out_n,) + x._shape[dim + 1:]
    if op == "index_select":
        out = Tensor._empty(shape, x.dtype, x._device, x._be)
    else:
        out = creation.zeros(shape, dtype=x.dtype, device=x._device)
    if out.numel() and x.numel():
        outer, inner = _outer_inner(x._shape, dim)
        n = x._shape[dim] if op == "index_select" else out_n
        kernel(x, op)(ptr(contiguous(x)), ptr(idx), ptr(out), outer, n, idx.numel(), inner)
    return out


@register
class PadGather(OpSpec):
    """Pick positions idx along dim: how reflect/replicate/circular padding reads x."""

    name = "_pad_gather"
    onnx = "Gather"

    @staticmethod
    def forward(ctx, x, idx, dim):
        ctx.idx, ctx.dim, ctx.n = idx, dim, x._shape[dim]
        return _gather_dim(x, idx, dim, idx.numel(), "index_select")

    @staticmethod
    def backward(ctx, g):
        return (apply(PadScatter, g, ctx.idx, ctx.dim, ctx.n), None, None)

    @staticmethod
    def reference(x, idx, dim):
        return np.take(x, idx, axis=dim)

    @staticmethod
    def samples():
        return [((_rand(3, 4), np.array([1, 0, 1, 2, 3, 2], dtype=np.int64), 1), {})]


@register
class PadScatter(OpSpec):
    """The gradient of _pad_gather: add g's entries back at positions idx along dim."""

    name = "_pad_scatter"
    onnx = None

    @staticmethod
    def forward(ctx, g, idx, dim, n):
        ctx.idx, ctx.dim = idx, dim
        return _gather_dim(g, idx, dim, n, "index_add")

    @staticmethod
    def backward(ctx, gg):
        return (apply(PadGather, gg, ctx.idx, ctx.dim), None, None, None)

    @staticmethod
    def reference(g, idx, dim, n):
        shape = list(g.shape)
        shape[dim] = n
        out = np.zeros(shape, dtype=g.dtype)
        np.add.at(np.moveaxis(out, dim, 0), idx, np.moveaxis(g, dim, 0))
        return out

    @staticmethod
    def samples():
        return [((_rand(3, 6), np.array([1, 0, 1, 2, 3, 2], dtype=np.int64), 1, 4), {})]


PadGather.fn = staticmethod(lambda x, idx, dim: apply(PadGather, x, idx, dim))
PadScatter.fn = staticmethod(lambda g, idx, dim, n: apply(PadScatter, g, idx, dim, n))

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    """For each output position along a padded dim, the input position it reads."""
    p = np.arange(-lo, n + hi, dtype=np.int64)
    if mode == "reflect":
        p = np.abs(p)
        return np.where(p >= n, 2 * (n - 1) - p, p)
    if mode == "replicate":
        return np.clip(p, 0, n - 1)
    return p % n


@traced("pad")
def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad (or, with negative amounts, crop) x. `pad` lists (before, after) pairs starting
    from the LAST dimension, as in PyTorch: (left, right, top, bottom, ...). Modes: constant
    (fill with value), reflect (mirror without repeating the edge), replicate (repeat the
    edge), circular (wrap around).

    Example:
        >>> import singa_tensor as st
        >>> st.pad(st.tensor([1.0, 2.0, 3.0]), (2, 1), mode="reflect").tolist()
        [3.0, 2.0, 1.0, 2.0, 3.0, 2.0]
    """
    expect_tensor("pad", x)
    p = _ints("pad", (tuple(pad),), "pad amounts")
    if len(p) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(p)} ({p})")
    if len(p) // 2 > x.ndim:
        raise ValueError(f"pad: padding {p} covers {len(p) // 2} dimensions but the input has "
                         f"shape {x._shape}")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    if mode != "constant" and value not in (0, None):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take a value argument")
    pairs = [(0, 0)] * x.ndim
    for i in range(len(p) // 2):
        pairs[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
    for d, ((lo, hi), n) in enumerate(zip(pairs, x._shape)):
        if n + lo + hi < 0:
            raise ValueError(f"pad: padding ({lo}, {hi}) of dimension {d} (size {n}) gives a "
                             "negative size")
        if mode == "reflect" and (lo >= n or hi >= n) and (lo > 0 or hi > 0):
            raise ValueError(f"pad: padding size should be less than the corresponding input "
                             f"dimension in reflect mode, got ({lo}, {hi}) for dimension {d} "
                             f"of size {n}")
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(f"pad: circular padding ({lo}, {hi}) of dimension {d} (size {n}) "
                             "would wrap around more than once")
        if mode == "replicate" and n == 0 and (lo > 0 or hi > 0):
            raise ValueError(f"pad: replicate padding needs a non-empty dimension {d}, got "
                             f"shape {x._shape}")
    if mode == "constant":
        y = x
        for d, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                y = apply(Slice, y, d, max(-lo, 0), y._shape[d] - max(-hi, 0), 1)
        grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
        return apply(PadConstant, y, grow, 0.0 if value is None else value)
    y = x
    for d, (lo, hi) in enumerate(pairs):
        if lo or hi:
            src = _pad_source(mode, x._shape[d], lo, hi)
            idx = creation.tensor(src, dtype=_dt.int64, device=x._device)
            y = apply(PadGather, y, idx, d)
    return clone(x) if y is x else y


def _pad_reference(x, pad, mode="constant", value=0.0):
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, grow, mode=np_mode, **kw)
    crop = tuple(slice(max(-lo, 0), y.shape[d] - max(-hi, 0)) for d, (lo, hi) in
                 enumerate(pairs))
    return y[crop].copy()


_composite("pad", "Pad", pad, _pad_reference,
           lambda: [((_x234, (1, 2)), {}), ((_x234, (1, 0, -1, 2), "constant", 1.5), {}),
                    ((_x234, (2, 1, 1, 1)), {"mode": "reflect"}),
                    ((_x234, (2, 3, 0, 1)), {"mode": "replicate"}),
                    ((_x234, (3, 1, -1, 2)), {"mode": "circular"}),
                    ((_rand(5), (-1, -2)), {})])


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------

# ONNX Pad's modes; "wrap" (circular) only from opset 19
_ONNX_MODES = {"constant": ("constant", 11), "reflect": ("reflect", 11),
               "replicate": ("edge", 11), "circular": ("wrap", 19)}


def onnx_pad(b, x: Tensor, pairs, mode: str, value, outs) -> None:
    """One Pad node (opset 11+: pads and the fill value are inputs); pairs are (before, after)
    per dim of x, negative amounts crop."""
    pads = [lo for lo, _ in pairs] + [hi for _, hi in pairs]
    ins = [b.value(x), b.ints(pads)]
    if mode == "constant" and value:
        ins.append(b.scalar(value, x))
    b.node("Pad", ins, outputs=outs, mode=mode)


def _pad_onnx(cls, b, args, attrs, outs):
    x, p, mode = args["x"], tuple(args["pad"]), args["mode"]
    onnx_mode, since = _ONNX_MODES[mode]
    if b.opset < since:
        return NotImplemented  # circular before 19: the index gathers it runs
    pairs = [(0, 0)] * x.ndim
    for i in range(len(p) // 2):
        pairs[x.ndim - 1 - i] = (int(p[2 * i]), int(p[2 * i + 1]))
    if mode != "constant" and any(lo < 0 or hi < 0 for lo, hi in pairs):
        return NotImplemented
    value = args["value"]
    onnx_pad(b, x, pairs, onnx_mode, 0.0 if value is None else value, outs)


def _pad_constant_onnx(cls, b, args, attrs, outs):
    x, pairs, value = args
    onnx_pad(b, x, pairs, "constant", value, outs)


def _pad_gather_onnx(cls, b, args, attrs, outs):
    x, idx, dim = args
    b.node("Gather", [b.value(x), b.value(idx)], outputs=outs, axis=int(dim))


REGISTRY["pad"].onnx_export = classmethod(_pad_onnx)
PadConstant.onnx_export = classmethod(_pad_constant_onnx)
PadGather.onnx_export = classmethod(_pad_gather_onnx)

__all__ = ["pad"]
