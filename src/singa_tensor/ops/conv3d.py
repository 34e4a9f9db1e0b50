"""3-d convolution, 1-d and 3-d transposed convolution, 3-d adaptive and power-average
pooling, max unpooling and pairwise distances (PyTorch names, arguments and output sizes).

None of them has a kernel of its own. A 3-d convolution is a sum over the depth taps of 2-d
convolutions of depth slices (the 2-d im2col kernel does the rest); a 3-d transposed
convolution is a sum over the depth taps of 2-d transposed convolutions, each placed at its
strided depth offset; the 1-d forms are the 2-d ones over a height of 1. Max unpooling is a
scatter into a zero plane. Gradients, to any order, come from those pieces.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._geometry import at_least, kernel_of
from ._registry import REGISTRY, composite, expect_tensor
from .conv import (
    _adaptive_matrix,
    _conv_transpose_np,
    _conv_transpose_onnx,
    conv2d,
    conv_transpose2d,
)
from .index import gather, index_select, scatter
from .padding import pad as _pad
from .pooling import _adaptive_max, _lp_np, _lp_pool, _output_size, _spatial, _tuple
from .reduce import max as _max
from .reduce_ext import norm as _vnorm
from .shape import stack

# ---- argument handling ---------------------------------------------------------------------------


def _triple(op: str, v, name: str) -> tuple:
    vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) * 3
    if len(vals) != 3 or any(not isinstance(a, (int, np.integer)) or isinstance(a, bool)
                             for a in vals):
        raise TypeError(f"{op}: {name} must be an int or a tuple of 3 ints, got {v!r}")
    return tuple(int(a) for a in vals)


def _volume(op: str, x) -> tuple:
    """x as (N, C, D, H, W), and whether a batch dim was added."""
    expect_tensor(op, x)
    if x.ndim == 4:
        x, added = x.unsqueeze(0), True
    elif x.ndim == 5:
        added = False
    else:
        raise ValueError(f"{op}: expected a 4-d (C, D, H, W) or 5-d (N, C, D, H, W) input, got "
                         f"shape {x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    return x, added


def _groups(op: str, groups) -> int:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    return groups


def _same_pads(op, padding, kernel, dilation, stride) -> list:
    """[(lo, hi)] per spatial dim from an int, a tuple, "valid" or "same"."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * n
        if padding != "same":
            raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a tuple, got "
                             f"{padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                for k, d in zip(kernel, dilation)]
    p = _triple(op, padding, "padding")
    if min(p) < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
    return [(a, a) for a in p]


# ---- 3-d convolution -----------------------------------------------------------------------------


def _conv3d_np(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    unbatched = x.ndim == 4
    if unbatched:
        x = x[None]
    s, d = _triple("ref", stride, "s"), _triple("ref", dilation, "d")
    pads = _same_pads("ref", padding, w.shape[2:], d, s)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    outs = [(xp.shape[2 + a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(3)]
    out = np.zeros((n, o) + tuple(outs), dtype=x.dtype)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i, j, m in itertools.product(*[range(v) for v in k]):
            sl = tuple(slice(t * d[a], t * d[a] + s[a] * (outs[a] - 1) + 1, s[a])
                       for a, t in enumerate((i, j, m)))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            out[:, oc] += np.einsum("ncdhw,c->ndhw", patch, w[oc, :, i, j, m])
    if b is not None:
        out += b.reshape(1, -1, 1, 1, 1)
    return out[0] if unbatched else out


def _conv3d_samples():
    r = np.random.default_rng(60)
    x = r.standard_normal((2, 4, 4, 5, 4))
    return [((x, r.standard_normal((3, 4, 2, 3, 2)), r.standard_normal(3)), {}),
            ((x, r.standard_normal((4, 2, 2, 2, 3))), {"stride": (2, 1, 2), "padding": 1,
                                                       "groups": 2}),
            ((x[0], r.standard_normal((2, 4, 3, 2, 2))), {"padding": "same",
                                                          "dilation": (1, 2, 1)})]


@composite("conv3d", _conv3d_np, samples=_conv3d_samples)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-d convolution (cross-correlation, as PyTorch) of (N, C, D, H, W) or (C, D, H, W) with
    weight (O, C/groups, kd, kh, kw); padding is an int, a triple, "valid" or "same".

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.conv3d(st.ones(1, 1, 3, 3, 3), st.ones(1, 1, 2, 2, 2)).shape
        (1, 1, 2, 2, 2)
    """
    op = "conv3d"
    x, added = _volume(op, input)
    expect_tensor(op, weight, "weight")
    if weight.ndim != 5:
        raise ValueError(f"{op}: weight must be 5-d (out, in/groups, kd, kh, kw), got "
                         f"{weight.shape}")
    groups = _groups(op, groups)
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kd, kh, kw = kernel_of(op, weight)
    if c % groups or o % groups:
        raise ValueError(f"{op}: in channels {c} and out channels {o} must both be divisible by "
                         f"groups={groups}")
    if cg * groups != c:
        raise ValueError(f"{op}: weight of shape {weight.shape} expects {cg * groups} input "
                         f"channels (groups={groups}), but the input has {c} (shape "
                         f"{input.shape})")
    if weight.dtype is not x.dtype:
        raise TypeError(f"{op}: input is {x.dtype.name} but weight is {weight.dtype.name}")
    s = at_least(op, "stride", _triple(op, stride, "stride"), 1)
    d = at_least(op, "dilation", _triple(op, dilation, "dilation"), 1)
    pads = _same_pads(op, padding, (kd, kh, kw), d, s)
    if any(p != (0, 0) for p in pads):
        x = _pad(x, tuple(v for lo_hi in reversed(pads) for v in lo_hi))
    depth, h, w = x.shape[2:]
    outs = []
    for size, k, ss, dd in zip((depth, h, w), (kd, kh, kw), s, d):
        size_out = (size - dd * (k - 1) - 1) // ss + 1
        if size_out <= 0:
            raise ValueError(f"{op}: the kernel {(kd, kh, kw)} (dilation {d}) does not fit the "
                             f"padded input of spatial size {(depth, h, w)}")
        outs.append(size_out)
    od = outs[0]
    total = None
    for i in range(kd):
        start = i * d[0]
        sl = x[:, :, start:start + s[0] * (od - 1) + 1:s[0]]  # (n, c, od, h, w)
        planes = sl.transpose(1, 2).reshape(n * od, c, h, w)
        part = conv2d(planes, weight[:, :, i], None, s[1:], 0, d[1:], groups)
        total = part if total is None else total + part
    out = total.reshape(n, od, o, outs[1], outs[2]).transpose(1, 2)
    if bias is not None:
        expect_tensor(op, bias, "bias")
        if bias.shape != (o,):
            raise ValueError(f"{op}: bias must have shape ({o},), got {bias.shape}")
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if added else out


# ---- transposed convolution ----------------------------------------------------------------------


def _conv_transpose1d_samples():
    r = np.random.default_rng(61)
    x = r.standard_normal((2, 4, 5))
    return [((x, r.standard_normal((4, 3, 3)), r.standard_normal(3)), {}),
            ((x, r.standard_normal((4, 2, 2))), {"stride": 2, "padding": 1,
                                                 "output_padding": 1, "groups": 2}),
            ((x[0], r.standard_normal((4, 1, 3))), {"dilation": 2, "stride": 3})]


@composite("conv_transpose1d", _conv_transpose_np, onnx="ConvTranspose",
           samples=_conv_transpose1d_samples)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 1-d convolution (the gradient of conv1d with respect to its input) of
    (N, C_in, L) or (C_in, L) with weight (C_in, C_out/groups, k).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.conv_transpose1d(st.ones(1, 1, 2), st.ones(1, 1, 2), stride=2).tolist()
        [[[1.0, 1.0, 1.0, 1.0]]]
    """
    op = "conv_transpose1d"
    x, added = _spatial(op, input, 1)
    expect_tensor(op, weight, "weight")
    if bias is not None:
        expect_tensor(op, bias, "bias")
    if weight.ndim != 3:
        raise ValueError(f"{op}: weight must be 3-d (in, out/groups, k), got {weight.shape}")
    kernel_of(op, weight)
    (s,) = at_least(op, "stride", _tuple(op, stride, 1, "stride"), 1)
    (p,) = at_least(op, "padding", _tuple(op, padding, 1, "padding"), 0)
    (opd,) = at_least(op, "output_padding", _tuple(op, output_padding, 1, "output_padding"), 0)
    (d,) = at_least(op, "dilation", _tuple(op, dilation, 1, "dilation"), 1)
    if opd >= max(s, d):
        raise ValueError(f"{op}: output_padding {opd} must be smaller than stride {s} or "
                         f"dilation {d}")
    size = (x.shape[-1] - 1) * s - 2 * p + d * (weight.shape[-1] - 1) + opd + 1
    if size <= 0:
        raise ValueError(f"{op}: output size {size} is not positive")
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, opd),
                           _groups(op, groups), (1, d)).squeeze(2)
    return out.squeeze(0) if added else out


def _conv_transpose3d_samples():
    r = np.random.default_rng(62)
    x = r.standard_normal((2, 4, 3, 3, 2))
    return [((x, r.standard_normal((4, 3, 2, 2, 2)), r.standard_normal(3)), {}),
            ((x, r.standard_normal((4, 2, 3, 2, 2))), {"stride": (2, 1, 2), "padding": 1,
                                                       "output_padding": (1, 0, 1),
                                                       "groups": 2}),
            ((x[0], r.standard_normal((4, 1, 2, 2, 1))), {"dilation": (2, 1, 1),
                                                          "stride": (1, 2, 1)})]


@composite("conv_transpose3d", _conv_transpose_np, onnx="ConvTranspose",
           samples=_conv_transpose3d_samples)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 3-d convolution (the gradient of conv3d with respect to its input) of
    (N, C_in, D, H, W) or (C_in, D, H, W) with weight (C_in, C_out/groups, kd, kh, kw).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.conv_transpose3d(st.ones(1, 1, 2, 2, 2), st.ones(1, 1, 2, 2, 2), stride=2).shape
        (1, 1, 4, 4, 4)
    """
    op = "conv_transpose3d"
    x, added = _volume(op, input)
    expect_tensor(op, weight, "weight")
    if weight.ndim != 5:
        raise ValueError(f"{op}: weight must be 5-d (in, out/groups, kd, kh, kw), got "
                         f"{weight.shape}")
    n, c, depth, h, w = x.shape
    ci, og = weight.shape[:2]
    kd, kh, kw = kernel_of(op, weight)
    groups = _groups(op, groups)
    if c % groups:
        raise ValueError(f"{op}: groups={groups} must divide the {c} input channels")
    if ci != c:
        raise ValueError(f"{op}: weight of shape {weight.shape} expects {ci} input channels, "
                         f"the input has {c}")
    s = at_least(op, "stride", _triple(op, stride, "stride"), 1)
    p = at_least(op, "padding", _triple(op, padding, "padding"), 0)
    opd = at_least(op, "output_padding", _triple(op, output_padding, "output_padding"), 0)
    d = at_least(op, "dilation", _triple(op, dilation, "dilation"), 1)
    if any(a >= max(b, e) for a, b, e in zip(opd, s, d)):
        raise ValueError(f"{op}: output_padding {opd} must be smaller than stride or dilation "
                         f"{s}, {d}")
    full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1
    dout = full - 2 * p[0] + opd[0]
    if dout <= 0:
        raise ValueError(f"{op}: output depth {dout} is not positive")
    planes = x.transpose(1, 2).reshape(n * depth, c, h, w)
    spread = (depth - 1) * s[0] + 1
    total = None
    for i in range(kd):
        part = conv_transpose2d(planes, weight[:, :, i], None, s[1:], p[1:], opd[1:], groups,
                                d[1:])
        ho, wo = part.shape[2:]
        part = part.reshape(n, depth, og * groups, ho, wo).transpose(1, 2)
        if s[0] > 1:  # put the depth planes s[0] apart: interleave zeros, drop the tail
            zeros = creation.zeros(part.shape, dtype=part.dtype, device=part.device)
            part = stack([part] + [zeros] * (s[0] - 1), 3)
            part = part.reshape(n, og * groups, depth * s[0], ho, wo)[:, :, :spread]
        start = i * d[0]
        part = _pad(part, (0, 0, 0, 0, start, full - spread - start))
        total = part if total is None else total + part
    # crop the padding from both ends; output_padding adds zero planes past the end
    out = _pad(total, (0, 0, 0, 0, -p[0], opd[0] - p[0]))
    o = og * groups
    if bias is not None:
        expect_tensor(op, bias, "bias")
        if bias.shape != (o,):
            raise ValueError(f"{op}: bias must have shape ({o},), got {bias.shape}")
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if added else out


# ---- 3-d adaptive and power-average pooling ------------------------------------------------------


def _adaptive3d_np(x, output_size, reduce="mean"):
    unbatched = x.ndim == 4
    if unbatched:
        x = x[None]
    sizes = x.shape[2:]
    outs = _output_size("ref", output_size, sizes)
    out = np.zeros(x.shape[:2] + outs, dtype=x.dtype)
    for o in itertools.product(*[range(v) for v in outs]):
        sl = tuple(slice((o[a] * sizes[a]) // outs[a], -((-(o[a] + 1) * sizes[a]) // outs[a]))
                   for a in range(3))
        win = x[(slice(None), slice(None)) + sl]
        out[(slice(None), slice(None)) + o] = (win.mean((2, 3, 4)) if reduce == "mean" else
                                               win.max((2, 3, 4)))
    return out[0] if unbatched else out


def _adaptive3d_samples():
    x = np.random.default_rng(63).standard_normal((2, 2, 5, 4, 3))
    return [((x, 2), {}), ((x, (3, None, 2)), {}), ((x[0], (1, 3, 3)), {})]


@composite("adaptive_avg_pool3d", _adaptive3d_np, samples=_adaptive3d_samples)
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to output_size (an int, or a triple
    in which None keeps that size), with PyTorch's windows; three small products.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.adaptive_avg_pool3d(st.arange(8.0).reshape(1, 1, 2, 2, 2), 1).tolist()
        [[[[[3.5]]]]]
    """
    op = "adaptive_avg_pool3d"
    x, added = _spatial(op, input, 3)
    n, c, depth, h, w = x.shape
    od, oh, ow = _output_size(op, output_size, (depth, h, w))

    def mat(a, b):
        return creation.tensor(_adaptive_matrix(a, b), dtype=x.dtype, device=x.device)

    y = (mat(depth, od) @ x.reshape(n, c, depth, h * w)).reshape(n, c, od, h, w)
    out = mat(h, oh) @ y @ mat(w, ow).t()
    return out.squeeze(0) if added else out


@composite("adaptive_max_pool3d", lambda x, o: _adaptive3d_np(x, o, "max"),
           samples=_adaptive3d_samples)
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) to output_size; with return_indices,
    also each maximum's flat position in D*H*W.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.adaptive_max_pool3d(st.arange(8.0).reshape(1, 1, 2, 2, 2), 1).tolist()
        [[[[[7.0]]]]]
    """
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


def _lp3d_samples():
    x = np.random.default_rng(64).uniform(0.2, 2.0, (1, 2, 4, 5, 4))
    return [((x, 2.0, 2), {}), ((x, 1.5, (2, 3, 2)), {"stride": (1, 2, 2)})]


@composite("lp_pool3d", _lp_np, samples=_lp3d_samples)
def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, D, H, W) or (C, D, H, W): (window sum of x**p)**(1/p).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.lp_pool3d(st.ones(1, 1, 2, 2, 2), 1, 2).tolist()
        [[[[[8.0]]]]]
    """
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


# ---- max unpooling -------------------------------------------------------------------------------


def _unpool_size(op, nsp, sizes, kernel_size, stride, padding, output_size) -> tuple:
    k = at_least(op, "kernel_size", _tuple(op, kernel_size, nsp, "kernel_size"), 1)
    s = at_least(op, "stride", _tuple(op, stride if stride is not None else k, nsp, "stride"), 1)
    p = at_least(op, "padding", _tuple(op, padding, nsp, "padding"), 0)
    default = tuple((n - 1) * ss - 2 * pp + kk for n, kk, ss, pp in zip(sizes, k, s, p))
    if output_size is None:
        return default
    size = tuple(output_size)
    if len(size) == nsp + 2 or len(size) == nsp + 1:
        size = size[-nsp:]
    if len(size) != nsp or any(not isinstance(v, (int, np.integer)) for v in size):
        raise ValueError(f"{op}: output_size must hold {nsp} spatial sizes, got {output_size!r}")
    for v, dflt, ss in zip(size, default, s):
        if not dflt - ss < v < dflt + ss:
            raise ValueError(f"{op}: output_size {tuple(size)} is out of the range allowed "
                             f"around the default size {default} (stride {s})")
    return tuple(int(v) for v in size)


def _max_unpool(op, nsp, input, indices, kernel_size, stride, padding, output_size):
    x, added = _spatial(op, input, nsp)
    expect_tensor(op, indices, "indices")
    if tuple(indices.shape) != tuple(input.shape):
        raise ValueError(f"{op}: indices of shape {indices.shape} must match the input's shape "
                         f"{input.shape}")
    if indices.dtype is not _dt.int64:
        raise TypeError(f"{op}: indices must be int64, got {indices.dtype.name}")
    idx = indices.unsqueeze(0) if added else indices
    n, c = x.shape[:2]
    size = _unpool_size(op, nsp, x.shape[2:], kernel_size, stride, padding, output_size)
    plane = int(np.prod(size))
    flat_idx = idx.reshape(n, c, -1)
    if flat_idx.numel() and (int(flat_idx.min().item()) < 0 or
                             int(flat_idx.max().item()) >= plane):
        raise ValueError(f"{op}: found an index outside the output of spatial size {size}")
    zeros = creation.zeros((n, c, plane), dtype=x.dtype, device=x.device)
    out = scatter(zeros, 2, flat_idx, x.reshape(n, c, -1)).reshape((n, c) + size)
    return out.squeeze(0) if added else out


def _unpool_np(x, indices, kernel_size, stride=None, padding=0, output_size=None):
    nsp = x.ndim - 2  # the samples are all batched: (N, C, *spatial)
    size = _unpool_size("ref", nsp, x.shape[2:], kernel_size, stride, padding, output_size)
    out = np.zeros(x.shape[:2] + (int(np.prod(size)),), dtype=x.dtype)
    for i, j in itertools.product(range(x.shape[0]), range(x.shape[1])):
        out[i, j, indices[i, j].ravel()] = x[i, j].ravel()
    return out.reshape(x.shape[:2] + size)


def _unpool_samples(nsp, seed):
    def samples():
        r = np.random.default_rng(seed)
        spatial = (3, 2, 2)[:nsp]
        x = r.standard_normal((2, 3) + spatial)
        out = tuple(2 * v for v in spatial)
        # one distinct position in each 2-wide window, as max pooling gives
        grids = np.meshgrid(*[np.arange(v) for v in spatial], indexing="ij")
        flat = np.zeros((2, 3) + spatial, dtype=np.int64)
        for i, j in itertools.product(range(2), range(3)):
            pos = [2 * g + r.integers(0, 2, g.shape) for g in grids]
            flat[i, j] = np.ravel_multi_index(pos, out)
        return [((x, flat, 2), {}), ((x, flat, 2), {"output_size": (2, 3) + tuple(
            v + 1 for v in out)})]
    return samples


@composite("max_unpool1d", _unpool_np, onnx="ScatterElements", samples=_unpool_samples(1, 65))
def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of max_pool1d: each value of (N, C, L) or (C, L) goes to its
    index (from max_pool1d's return_indices) in a zero output; the rest stay zero.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> v, i = F.max_pool1d(st.tensor([[[1.0, 3.0, 4.0, 2.0]]]), 2, return_indices=True)
        >>> F.max_unpool1d(v, i, 2).tolist()
        [[[0.0, 3.0, 4.0, 0.0]]]
    """
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


@composite("max_unpool2d", _unpool_np, onnx="ScatterElements", samples=_unpool_samples(2, 66))
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of max_pool2d: values of (N, C, H, W) or (C, H, W) go to their
    flat H*W indices in a zero output.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> v, i = F.max_pool2d(st.arange(4.0).reshape(1, 1, 2, 2), 2, return_indices=True)
        >>> F.max_unpool2d(v, i, 2).tolist()
        [[[[0.0, 0.0], [0.0, 3.0]]]]
    """
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


@composite("max_unpool3d", _unpool_np, onnx="ScatterElements", samples=_unpool_samples(3, 67))
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of max_pool3d: values of (N, C, D, H, W) or (C, D, H, W) go to
    their flat D*H*W indices in a zero output.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> v, i = F.max_pool3d(x, 2, return_indices=True)
        >>> F.max_unpool3d(v, i, 2).reshape(-1).tolist()
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0]
    """
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)


# ---- fractional max pooling ---------------------------------------------------------------------


def _fractional_starts(sample: float, size: int, out: int, k: int) -> np.ndarray:
    """Window starts along one axis (pseudo-random, overlapping or not, as Graham's fractional
    pooling and PyTorch draw them): the last window ends at the input's end."""
    starts = np.empty(out, dtype=np.int64)
    if out > 1:
        alpha = (size - k) / (out - 1)
        for i in range(out - 1):
            starts[i] = int((i + sample) * alpha) - int(sample * alpha)
    starts[out - 1] = size - k
    return starts


def _fractional_args(op, nsp, sizes, kernel_size, output_size, output_ratio) -> tuple:
    k = _tuple(op, kernel_size, nsp, "kernel_size")
    if min(k) < 1:
        raise ValueError(f"{op}: kernel_size must be positive, got {k}")
    if (output_size is None) == (output_ratio is None):
        raise ValueError(f"{op}: give exactly one of output_size and output_ratio")
    if output_size is not None:
        outs = _tuple(op, output_size, nsp, "output_size")
    else:
        ratios = tuple(output_ratio) if isinstance(output_ratio, (list, tuple)) else (
            (output_ratio,) * nsp)
        if len(ratios) != nsp or any(not 0 < float(r) < 1 for r in ratios):
            raise ValueError(f"{op}: output_ratio must be in (0, 1), got {output_ratio!r}")
        outs = tuple(int(n * float(r)) for n, r in zip(sizes, ratios))
    for n, kk, o in zip(sizes, k, outs):
        if o < 1 or o + kk - 1 > n:
            raise ValueError(f"{op}: output size {outs} with kernel {k} does not fit the input "
                             f"of spatial size {tuple(sizes)} (need output + kernel - 1 <= "
                             "input)")
    return k, outs


def _fractional_table(samples: np.ndarray, sizes, k, outs) -> np.ndarray:
    """(N, C, prod(outs), prod(k)) flat input positions of every window of every plane."""
    n, c, nsp = samples.shape
    per = []
    for a in range(nsp):
        # PyTorch's order: the 2-d pool reads sample 0 for the width, 1 for the height; the
        # 3-d one reads 0, 1, 2 for depth, height, width
        j = (1 - a) if nsp == 2 else a
        starts = np.array([[_fractional_starts(samples[b, ch, j], sizes[a], outs[a], k[a])
                            for ch in range(c)] for b in range(n)])
        per.append(starts[..., :, None] + np.arange(k[a]))  # (n, c, out_a, k_a)
    table = np.zeros((n, c, 1, 1), dtype=np.int64)
    for a in range(nsp):
        t = table[:, :, :, None, :, None] * sizes[a] + per[a][:, :, None, :, None, :]
        table = t.reshape(n, c, t.shape[2] * t.shape[3], -1)
    return table


def _fractional_samples_of(op, x, nsp, random_samples) -> np.ndarray:
    n, c = x.shape[:2]
    if random_samples is None:
        return creation.rand(n, c, nsp, dtype=_dt.float64).numpy(force=True)
    arr = (random_samples.numpy(force=True) if isinstance(random_samples, Tensor)
           else np.asarray(random_samples, dtype=np.float64))
    if arr.shape != (n, c, nsp):
        raise ValueError(f"{op}: _random_samples must have shape {(n, c, nsp)}, got "
                         f"{arr.shape}")
    return arr.astype(np.float64)


def _fractional_max_pool(op, nsp, input, kernel_size, output_size, output_ratio,
                         return_indices, random_samples):
    x, added = _spatial(op, input, nsp)
    sizes = x.shape[2:]
    k, outs = _fractional_args(op, nsp, sizes, kernel_size, output_size, output_ratio)
    samples = _fractional_samples_of(op, x, nsp, random_samples)
    table = _fractional_table(samples, sizes, k, outs)
    n, c = x.shape[:2]
    index = creation.tensor(table.reshape(n, c, -1), dtype=_dt.int64, device=x.device)
    win = gather(x.reshape(n, c, -1), 2, index).reshape((n, c) + outs + (table.shape[3],))
    values, arg = _max(win, dim=-1)
    if not return_indices:
        return values.squeeze(0) if added else values
    tab = creation.tensor(table.reshape((n, c) + outs + (table.shape[3],)), dtype=_dt.int64,
                          device=x.device)
    indices = gather(tab, -1, arg.unsqueeze(-1)).squeeze(-1)
    return (values.squeeze(0), indices.squeeze(0)) if added else (values, indices)


def _fractional_np(x, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                   _random_samples=None):
    nsp = x.ndim - 2
    samples = np.asarray(_random_samples, dtype=np.float64)
    k, outs = _fractional_args("ref", nsp, x.shape[2:], kernel_size, output_size, output_ratio)
    out = np.zeros(x.shape[:2] + outs)
    for b, ch in itertools.product(range(x.shape[0]), range(x.shape[1])):
        starts = [_fractional_starts(samples[b, ch, (1 - a) if nsp == 2 else a], x.shape[2 + a],
                                     outs[a], k[a]) for a in range(nsp)]
        for o in itertools.product(*[range(v) for v in outs]):
            sl = tuple(slice(starts[a][o[a]], starts[a][o[a]] + k[a]) for a in range(nsp))
            out[(b, ch) + o] = x[(b, ch) + sl].max()
    return out


def _fractional_samples(nsp, seed):
    def samples():
        r = np.random.default_rng(seed)
        x = r.standard_normal((2, 3) + (7, 6, 5)[:nsp])
        u = r.uniform(0, 1, (2, 3, nsp)).tolist()
        return [((x, 2, (3, 4, 2)[:nsp], None, False, u), {}),
                ((x, 3, None, 0.5, False, u), {})]
    return samples


@composite("fractional_max_pool2d", _fractional_np, samples=_fractional_samples(2, 69))
def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling of (N, C, H, W) or (C, H, W): kernel_size windows at
    pseudo-random starts chosen so that output_size (or input size * output_ratio) windows
    span the input; _random_samples ((N, C, 2) in [0, 1)) fixes the draw, otherwise it comes
    from the default generator.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.fractional_max_pool2d(st.randn(1, 2, 9, 9), 2, output_size=4).shape
        (1, 2, 4, 4)
    """
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


@composite("fractional_max_pool3d", _fractional_np, samples=_fractional_samples(3, 70))
def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling of (N, C, D, H, W) or (C, D, H, W); _random_samples is
    (N, C, 3).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.fractional_max_pool3d(st.randn(1, 1, 6, 6, 6), 2, output_ratio=0.5).shape
        (1, 1, 3, 3, 3)
    """
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


# ---- pairwise distances --------------------------------------------------------------------------


def _pdist_np(x, p=2.0):
    rows, cols = np.triu_indices(x.shape[0], 1)
    return np.linalg.norm(x[rows] - x[cols], ord=p, axis=1)


def _pdist_samples():
    x = np.random.default_rng(68).standard_normal((5, 3))
    return [((x,), {}), ((x,), {"p": 1.0}), ((x,), {"p": 3.0}), ((x[:1],), {})]


@composite("pdist", _pdist_np, samples=_pdist_samples)
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between every pair of rows of an (N, M) input: a vector of
    N * (N - 1) / 2 values, row i against rows i+1, ..., N-1 in turn.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.pdist(st.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
        [5.0, 1.0, 4.242640495300293]
    """
    op = "pdist"
    expect_tensor(op, input)
    if input.ndim != 2:
        raise ValueError(f"{op}: expected a 2-d (N, M) input, got shape {input.shape}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise ValueError(f"{op}: p must be a non-negative number, got {p!r}")
    rows, cols = np.triu_indices(input.shape[0], 1)
    if rows.size == 0:
        return creation.zeros((0,), dtype=input.dtype, device=input.device)
    a = index_select(input, 0, creation.tensor(rows, dtype=_dt.int64, device=input.device))
    b = index_select(input, 0, creation.tensor(cols, dtype=_dt.int64, device=input.device))
    return _vnorm(a - b, float(p), 1)


# the names PyTorch also has at the top level (torch.conv3d ...); the pooling forms are
# nn.functional's only
# one ConvTranspose node for every rank (the form lives next to conv_transpose2d's)
def _max_unpool_onnx(cls, b, args, attrs, outs):
    """ScatterElements of each plane's values at their indices into a zero plane whose
    leading dims (N, C) come from the input's Shape, so the graph follows the batch. (ONNX
    MaxUnpool reads indices flattened over the whole tensor; ours index each plane.)"""
    from onnx import numpy_helper

    x, idx = args["input"], args["indices"]
    nsp = int(cls.name[-2])
    size = _unpool_size(cls.name, nsp, x.shape[-nsp:], args["kernel_size"], args["stride"],
                        args["padding"], args["output_size"])
    lead = x.ndim - nsp
    keep = [0] * lead
    (values,) = b.node("Reshape", [b.value(x), b.ints(keep + [-1])])
    (where,) = b.node("Reshape", [b.value(idx), b.ints(keep + [-1])])
    (shape,) = b.node("Shape", [b.value(x)])
    (head,) = b.node("Slice", [shape, b.ints([0]), b.ints([lead]), b.ints([0])])
    (full,) = b.node("Concat", [head, b.ints([int(np.prod(size))])], axis=0)
    zero = numpy_helper.from_array(np.zeros(1, dtype=np.dtype(x.dtype.name)), "value")
    (zeros,) = b.node("ConstantOfShape", [full], value=zero)
    (y,) = b.node("ScatterElements", [zeros, where, values], axis=lead)
    b.node("Reshape", [y, b.ints(keep + list(size))], outputs=outs)


for _name in ("max_unpool1d", "max_unpool2d", "max_unpool3d"):
    REGISTRY[_name].onnx_export = classmethod(_max_unpool_onnx)
REGISTRY["conv_transpose1d"].onnx_export = classmethod(_conv_transpose_onnx)
REGISTRY["conv_transpose3d"].onnx_export = classmethod(_conv_transpose_onnx)

__all__ = ["conv3d", "conv_transpose1d", "conv_transpose3d", "pdist"]
