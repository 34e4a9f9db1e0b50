"""Convolution, pooling and resizing of images (N, C, H, W).

Two primitives carry them: `_im2col` (every kernel window as a column) and its adjoint
`_col2im`, each the other's backward. Convolution is im2col followed by one batched matrix
product, transposed convolution a product followed by col2im, average pooling a sum over
columns, max pooling a gather at indices found by a kernel. Adaptive average pooling and
bilinear resizing are linear maps along each axis, applied as products with small matrices.
Gradients of all of them, to any order, come from those pieces. Where the backend has a
convolution of its own for a geometry (oneDNN, for float32 on the CPU), conv2d runs that
instead (conv_onednn.py).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import _execution, creation
from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from . import conv_onednn as _planned
from . import index as _index
from ._geometry import at_least, kernel_of
from ._registry import (
    REGISTRY,
    OpSpec,
    apply,
    contiguous,
    expect_tensor,
    kernel,
    ptr,
    register,
    traced,
)

# ---- argument handling -------------------------------------------------------------------------


def _pair(op: str, v, name: str) -> tuple:
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"{op}: {name} must be an int or a pair, got {v!r}")
        out = tuple(v)
    else:
        out = (v, v)
    for x in out:
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool):
            raise TypeError(f"{op}: {name} must be ints, got {v!r}")
    return tuple(int(x) for x in out)


def _image(op: str, x) -> tuple:
    """x as a 4-d (N, C, H, W) tensor, and whether a batch dim was added."""
    expect_tensor(op, x)
    if x.ndim == 3:
        return x.unsqueeze(0), True
    if x.ndim != 4:
        raise ValueError(f"{op}: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape "
                         f"{x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    return x, False


def _out_size(op: str, n: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    size = (n + lo + hi - d * (k - 1) - 1) // s + 1
    if size <= 0:
        raise ValueError(
            f"{op}: the kernel (size {k}, dilation {d}) does not fit an input of size {n} with "
            f"padding {lo}+{hi}: output size would be {size}"
        )
    return size


# ---- primitives ----------------------------------------------------------------------------------


def _geometry_args(geo) -> tuple:
    return tuple(int(v) for v in geo)


@register
class Im2col(OpSpec):
    """geo = (kh, kw, sh, sw, pt, pl, dh, dw, oh, ow); x is (N, C, H, W)."""

    name = "_im2col"
    onnx = None

    @staticmethod
    def forward(ctx, x, geo):
        ctx.geo, ctx.in_shape = geo, x._shape
        n, c, h, w = x._shape
        kh, kw, sh, sw, pt, pl, dh, dw, oh, ow = geo
        xc = contiguous(x)
        out = Tensor._empty((n, c * kh * kw, oh * ow), x.dtype, x._device, x._be)
        if out.numel():
            kernel(x, "im2col")(ptr(xc), ptr(out), n, c, h, w, *_geometry_args(geo))
        return out

    @staticmethod
    def backward(ctx, g):
        return (apply(Col2im, g, ctx.geo, ctx.in_shape), None)

    @staticmethod
    def reference(x, geo):
        return _im2col_np(x, geo)

    @staticmethod
    def samples():
        x = np.random.default_rng(20).standard_normal((2, 3, 5, 4))
        return [((x, (2, 3, 2, 1, 1, 0, 1, 1, 3, 2)), {}),
                ((x, (3, 2, 1, 2, 0, 1, 2, 1, 1, 2)), {})]


@register
class Col2im(OpSpec):
    name = "_col2im"
    onnx = None

    @staticmethod
    def forward(ctx, cols, geo, image_shape):
        ctx.geo = geo
        n, c, h, w = image_shape
        cc = contiguous(cols)
        out = Tensor._empty(tuple(image_shape), cols.dtype, cols._device, cols._be)
        if out.numel():
            kernel(cols, "col2im")(ptr(cc), ptr(out), n, c, h, w, *_geometry_args(geo))
        return out

    @staticmethod
    def backward(ctx, g):
        return (apply(Im2col, g, ctx.geo), None, None)

    @staticmethod
    def reference(cols, geo, image_shape):
        return _col2im_np(cols, geo, image_shape)

    @staticmethod
    def samples():
        g = np.random.default_rng(21).standard_normal((2, 3 * 2 * 3, 3 * 2))
        return [((g, (2, 3, 2, 1, 1, 0, 1, 1, 3, 2), (2, 3, 5, 4)), {})]


Im2col.fn = staticmethod(lambda x, geo: apply(Im2col, x, tuple(geo)))
Col2im.fn = staticmethod(lambda cols, geo, shape: apply(Col2im, cols, tuple(geo), tuple(shape)))
Im2col.fn.__doc__ = "Internal: kernel windows of an (N, C, H, W) image as columns."
Col2im.fn.__doc__ = "Internal: the adjoint of _im2col."


def _im2col_np(x, geo):
    kh, kw, sh, sw, pt, pl, dh, dw, oh, ow = geo
    n, c, h, w = x.shape
    out = np.zeros((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            for y in range(oh):
                for xo in range(ow):
                    iy, ix = y * sh - pt + i * dh, xo * sw - pl + j * dw
                    if 0 <= iy < h and 0 <= ix < w:
                        out[:, :, i, j, y, xo] = x[:, :, iy, ix]
    return out.reshape(n, c * kh * kw, oh * ow)


def _col2im_np(cols, geo, image_shape):
    kh, kw, sh, sw, pt, pl, dh, dw, oh, ow = geo
    n, c, h, w = image_shape
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros(image_shape, dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            for y in range(oh):
                for xo in range(ow):
                    iy, ix = y * sh - pt + i * dh, xo * sw - pl + j * dw
                    if 0 <= iy < h and 0 <= ix < w:
                        out[:, :, iy, ix] += cols[:, :, i, j, y, xo]
    return out


# ---- convolution ---------------------------------------------------------------------------------


def _conv_padding(op, padding, kernel_size, dilation, stride) -> tuple:
    """(top, bottom, left, right) from an int, a pair, "valid" or "same"."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding != "same":
            raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a pair, got "
                             f"{padding!r}")
        if stride != (1, 1):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        pads = []
        for k, d in zip(kernel_size, dilation):
            total = d * (k - 1)
            pads.append((total // 2, total - total // 2))
        return pads[0][0], pads[0][1], pads[1][0], pads[1][1]
    ph, pw = _pair(op, padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
    return ph, ph, pw, pw


@traced("conv2d")
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation, as PyTorch) of (N, C, H, W) with (O, C/groups, kh, kw).

    padding is an int, a pair, "valid" or "same".

    Example:
        >>> import singa_tensor as st
        >>> x = st.ones(1, 1, 4, 4); w = st.ones(1, 1, 3, 3)
        >>> st.conv2d(x, w, padding=1)[0, 0].tolist()[0]
        [4.0, 6.0, 6.0, 4.0]
    """
    op = "conv2d"
    x4, squeeze = _image(op, x)
    expect_tensor(op, weight, "weight")
    if weight.ndim != 4:
        raise ValueError(f"{op}: weight must be 4-d (out, in/groups, kh, kw), got {weight.shape}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c, h, w = x4.shape
    o, cg = weight.shape[:2]
    kh, kw = kernel_of(op, weight)
    if c % groups or o % groups:
        raise ValueError(f"{op}: in channels {c} and out channels {o} must both be divisible by "
                         f"groups={groups}")
    if cg * groups != c:
        raise ValueError(f"{op}: weight of shape {weight.shape} expects {cg * groups} input "
                         f"channels (groups={groups}), but the input has {c} (shape {x.shape})")
    stride = at_least(op, "stride", _pair(op, stride, "stride"), 1)
    dilation = at_least(op, "dilation", _pair(op, dilation, "dilation"), 1)
    pt, pb, pl, pr = _conv_padding(op, padding, (kh, kw), dilation, stride)
    oh = _out_size(op, h, kh, stride[0], pt, pb, dilation[0])
    ow = _out_size(op, w, kw, stride[1], pl, pr, dilation[1])
    geo = (kh, kw, stride[0], stride[1], pt, pl, dilation[0], dilation[1], oh, ow)
    if weight.dtype is not x4.dtype:
        raise TypeError(f"{op}: input is {x4.dtype.name} but weight is {weight.dtype.name}")
    if bias is not None:
        expect_tensor(op, bias, "bias")
        if bias.shape != (o,):
            raise ValueError(f"{op}: bias must have shape ({o},), got {bias.shape}")
    plan = _planned.plan_for(x4, weight, bias, geo, (pt, pb, pl, pr), groups)
    if plan is not None:  # the backend's own convolution (oneDNN on the CPU)
        out = _planned.conv2d_planned(x4, weight, bias, plan)
        return out.squeeze(0) if squeeze else out
    if kh == kw == 1 and pt == pb == pl == pr == 0:
        # a 1x1 kernel reads each pixel once: the (strided) image is already the column
        # matrix, so the product runs on it directly, without an im2col copy
        xs = x4 if stride == (1, 1) else x4[:, :, ::stride[0], ::stride[1]]
        cols = xs.reshape(n, c, oh * ow)
    elif _no_half_kernel(x4, "im2col"):
        # no 16-bit im2col on this backend: the columns are gathered in float32 (col2im, the
        # gradient, then sums in float32) and the product stays 16-bit
        cols = apply(Im2col, x4.float(), geo).to(x4.dtype)
    else:
        cols = apply(Im2col, x4, geo)  # (n, c*kh*kw, oh*ow)
    cols = cols.reshape(n, groups, cg * kh * kw, oh * ow)
    wm = weight.reshape(groups, o // groups, cg * kh * kw)
    out = (wm @ cols).reshape(n, o, oh, ow)
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1)
        if out.dtype is not x4.dtype:  # the 16-bit result where the addition widened
            out = out.to(x4.dtype)
    return out.squeeze(0) if squeeze else out


def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-d convolution of (N, C, L) with (O, C/groups, k).

    Example:
        >>> import singa_tensor as st
        >>> st.conv1d(st.ones(1, 1, 5), st.ones(1, 1, 3)).tolist()
        [[[3.0, 3.0, 3.0]]]
    """
    op = "conv1d"
    expect_tensor(op, x)
    expect_tensor(op, weight, "weight")
    if x.ndim not in (2, 3) or weight.ndim != 3:
        raise ValueError(f"{op}: expected input (N, C, L) or (C, L) and weight (O, C/groups, k), "
                         f"got {x.shape} and {weight.shape}")
    x3 = x.unsqueeze(0) if x.ndim == 2 else x
    kernel_of(op, weight)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")

    def one(v, name):
        if isinstance(v, str) and name == "padding":
            return v
        if isinstance(v, (list, tuple)) and len(v) != 1:
            raise ValueError(f"{op}: {name} must be an int or a tuple of 1 int, got {v!r}")
        (a,) = v if isinstance(v, (list, tuple)) else (v,)
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{op}: {name} must be ints, got {v!r}")
        at_least(op, name, (int(a),), 0 if name == "padding" else 1, v)
        return (1, a) if name != "padding" else (0, a)

    s, p, d = one(stride, "stride"), one(padding, "padding"), one(dilation, "dilation")
    if not isinstance(p, str):
        _out_size(op, x3.shape[-1], weight.shape[-1], s[1], p[1], p[1], d[1])
    out = conv2d(x3.unsqueeze(2), weight.unsqueeze(2), bias, s, p, d, groups).squeeze(2)
    return out.squeeze(0) if x.ndim == 2 else out


@traced("conv_transpose2d")
def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """Transposed 2-d convolution (the gradient of conv2d with respect to its input) of
    (N, C_in, H, W) with weight (C_in, C_out/groups, kh, kw).

    Example:
        >>> import singa_tensor as st
        >>> st.conv_transpose2d(st.ones(1, 1, 2, 2), st.ones(1, 1, 2, 2), stride=2).shape
        (1, 1, 4, 4)
    """
    op = "conv_transpose2d"
    x4, squeeze = _image(op, x)
    expect_tensor(op, weight, "weight")
    if weight.ndim != 4:
        raise ValueError(f"{op}: weight must be 4-d (in, out/groups, kh, kw), got {weight.shape}")
    n, c, h, w = x4.shape
    ci, og = weight.shape[:2]
    kh, kw = kernel_of(op, weight)
    if not isinstance(groups, int) or groups < 1 or c % groups:
        raise ValueError(f"{op}: groups={groups!r} must be a positive divisor of the {c} input "
                         "channels")
    if ci != c:
        raise ValueError(f"{op}: weight of shape {weight.shape} expects {ci} input channels, the "
                         f"input has {c}")
    stride = at_least(op, "stride", _pair(op, stride, "stride"), 1)
    dilation = at_least(op, "dilation", _pair(op, dilation, "dilation"), 1)
    ph, pw = at_least(op, "padding", _pair(op, padding, "padding"), 0)
    oph, opw = at_least(op, "output_padding", _pair(op, output_padding, "output_padding"), 0)
    if oph >= max(stride[0], dilation[0]) or opw >= max(stride[1], dilation[1]):
        raise ValueError(f"{op}: output_padding {(oph, opw)} must be smaller than stride or "
                         f"dilation {stride}, {dilation}")
    hout = (h - 1) * stride[0] - 2 * ph + dilation[0] * (kh - 1) + oph + 1
    wout = (w - 1) * stride[1] - 2 * pw + dilation[1] * (kw - 1) + opw + 1
    if hout <= 0 or wout <= 0:
        raise ValueError(f"{op}: output size {(hout, wout)} is not positive")
    o = og * groups
    wm = weight.reshape(groups, c // groups, og * kh * kw).transpose(1, 2)
    xm = x4.reshape(n, groups, c // groups, h * w)
    cols = (wm @ xm).reshape(n, o * kh * kw, h * w)
    geo = (kh, kw, stride[0], stride[1], ph, pw, dilation[0], dilation[1], h, w)
    if _no_half_kernel(cols, "col2im"):  # the overlapping patches summed in float32
        out = apply(Col2im, cols.float(), geo, (n, o, hout, wout)).to(cols.dtype)
    else:
        out = apply(Col2im, cols, geo, (n, o, hout, wout))
    if bias is not None:
        expect_tensor(op, bias, "bias")
        if bias.shape != (o,):
            raise ValueError(f"{op}: bias must have shape ({o},), got {bias.shape}")
        out = out + bias.reshape(1, o, 1, 1)
        if out.dtype is not cols.dtype and bias.dtype is cols.dtype:
            out = out.to(cols.dtype)  # the 16-bit result where the addition widened
    return out.squeeze(0) if squeeze else out


def _no_half_kernel(x: Tensor, op: str) -> bool:
    """Whether x is 16-bit and its backend has no 16-bit kernel st_<op>_<dtype>."""
    return x.dtype.itemsize == 2 and x._be.kernel(f"st_{op}_{x.dtype.suffix}") is None


# ---- pooling -------------------------------------------------------------------------------------


def _pool_geometry(op, h, w, kernel_size, stride, padding, dilation, ceil_mode):
    k = at_least(op, "kernel_size", _pair(op, kernel_size, "kernel_size"), 1)
    s = at_least(op, "stride", _pair(op, stride if stride is not None and stride != () else k,
                                     "stride"), 1)
    p = at_least(op, "padding", _pair(op, padding, "padding"), 0)
    d = at_least(op, "dilation", _pair(op, dilation, "dilation"), 1)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} should be at most half of the kernel size {k}")
    sizes = []
    for n, kk, ss, pp, dd in ((h, k[0], s[0], p[0], d[0]), (w, k[1], s[1], p[1], d[1])):
        span = n + 2 * pp - dd * (kk - 1) - 1
        if span < 0:
            raise ValueError(f"{op}: kernel size {k} is too large for input size {(h, w)}")
        out = (span + (ss - 1 if ceil_mode else 0)) // ss + 1
        if ceil_mode and (out - 1) * ss >= n + pp:  # the last window must start inside
            out -= 1
        sizes.append(out)
    return k, s, p, d, sizes[0], sizes[1]


# dtypes with a one-pass max pooling kernel (maxima and indices together)
_ONE_PASS = (_dt.float32, _dt.float64)


@traced("max_pool2d")
def max_pool2d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over kernel windows of (N, C, H, W); NaN wins. With return_indices, also the flat
    index of each maximum within its H*W plane.

    Example:
        >>> import singa_tensor as st
        >>> st.max_pool2d(st.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    op = "max_pool2d"
    x4, squeeze = _image(op, x)
    n, c, h, w = x4.shape
    k, s, p, d, oh, ow = _pool_geometry(op, h, w, kernel_size, stride, padding, dilation,
                                        ceil_mode)
    xc = contiguous(x4)
    idx = Tensor._empty((n, c, oh * ow), _dt.int64, x4._device, x4._be)
    geometry = (n * c, h, w, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], oh, ow)
    ex = _execution.running_count and _execution.current()
    grad = _ag._mode.enabled and x4.requires_grad
    if x4.dtype in _ONE_PASS and not (ex and (grad or ex.tracing)):
        # one pass writes the maxima and their indices; with a gradient wanted the result is
        # recorded as the gather it equals, whose backward scatters the gradient back
        out = Tensor._empty((n, c, oh * ow), x4.dtype, x4._device, x4._be)
        if idx.numel():
            # without a gradient or indices wanted, the maxima alone (a faster loop)
            where = ptr(idx) if grad or return_indices else x4._be.ffi.NULL
            kernel(x4, "maxpool2d")(ptr(xc), ptr(out), where, *geometry)
        if grad:
            x3 = x4.reshape(n, c, h * w)
            ctx = _index.Gather.node_class()
            ctx.dim, ctx.in_shape = 2, x3._shape
            ctx.save_for_backward(idx)
            _ag.record(_index.Gather, ctx, (x3, 2, idx), out)
        out = out.reshape(n, c, oh, ow)
    else:
        if idx.numel():
            kernel(x4, "maxpool2d_index")(ptr(xc), ptr(idx), *geometry)
        # the kernel's indices are in range by construction: the op itself, not the public
        # gather (whose bounds check costs a device round trip per call off the CPU)
        out = apply(_index.Gather, x4.reshape(n, c, h * w), 2, idx).reshape(n, c, oh, ow)
    idx = idx.reshape(n, c, oh, ow)
    if squeeze:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return (out, idx) if return_indices else out


def _avg_divisor(h, w, k, s, p, oh, ow, count_include_pad):
    def axis(n, kk, ss, pp, m):
        full, valid = [], []
        for i in range(m):
            start = i * ss - pp
            end = min(start + kk, n + pp)
            full.append(end - start)
            valid.append(min(end, n) - max(start, 0))
        return np.array(full), np.array(valid)

    fh, vh = axis(h, k[0], s[0], p[0], oh)
    fw, vw = axis(w, k[1], s[1], p[1], ow)
    return np.outer(fh, fw) if count_include_pad else np.outer(vh, vw)


@traced("avg_pool2d")
def avg_pool2d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over kernel windows of (N, C, H, W), with PyTorch's divisor rules.

    Example:
        >>> import singa_tensor as st
        >>> st.avg_pool2d(st.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    op = "avg_pool2d"
    x4, squeeze = _image(op, x)
    n, c, h, w = x4.shape
    k, s, p, _, oh, ow = _pool_geometry(op, h, w, kernel_size, stride, padding, 1, ceil_mode)
    geo = (k[0], k[1], s[0], s[1], p[0], p[1], 1, 1, oh, ow)
    cols = apply(Im2col, x4.reshape(n * c, 1, h, w), geo)  # (n*c, kh*kw, oh*ow)
    total = cols.sum(dim=1).reshape(n, c, oh, ow)
    if divisor_override is not None:
        if not isinstance(divisor_override, int) or divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be a non-zero int")
        out = total / float(divisor_override)
    else:
        div = _avg_divisor(h, w, k, s, p, oh, ow, count_include_pad)
        out = total / creation.tensor(div, dtype=x4.dtype, device=x4.device)
    return out.squeeze(0) if squeeze else out


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Rows average the windows [floor(i*n_in/n_out), ceil((i+1)*n_in/n_out))."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        a, b = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
        m[i, a:b] = 1.0 / (b - a)
    return m


@traced("adaptive_avg_pool2d")
def adaptive_avg_pool2d(x: Tensor, output_size) -> Tensor:
    """Average pooling to a fixed output size (windows as PyTorch's), as two small products.

    Example:
        >>> import singa_tensor as st
        >>> st.adaptive_avg_pool2d(st.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
        [[[[7.5]]]]
    """
    op = "adaptive_avg_pool2d"
    x4, squeeze = _image(op, x)
    n, c, h, w = x4.shape
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 2:
            raise ValueError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
        oh, ow = (h if output_size[0] is None else output_size[0],
                  w if output_size[1] is None else output_size[1])
    else:
        oh, ow = _pair(op, output_size, "output_size")
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: output_size must be positive, got {output_size!r}")
    ah = creation.tensor(_adaptive_matrix(h, oh), dtype=x4.dtype, device=x4.device)
    aw = creation.tensor(_adaptive_matrix(w, ow), dtype=x4.dtype, device=x4.device)
    out = ah @ x4 @ aw.t()
    return out.squeeze(0) if squeeze else out


# ---- resizing ------------------------------------------------------------------------------------


def _linear_matrix(n_in: int, n_out: int, scale: float | None, align_corners: bool) -> np.ndarray:
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            ratio = (1.0 / scale) if scale else n_in / n_out
            src = max((i + 0.5) * ratio - 0.5, 0.0)
        lo = min(int(math.floor(src)), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        frac = src - lo
        m[i, lo] += 1.0 - frac
        m[i, hi] += frac
    return m


def interpolate(x: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None) -> Tensor:
    """Resize (N, C, H, W) by "nearest" or "bilinear" sampling (PyTorch's coordinate rules).

    Example:
        >>> import singa_tensor as st
        >>> st.interpolate(st.tensor([[[[1.0, 2.0]]]]), scale_factor=2).tolist()
        [[[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0]]]]
    """
    op = "interpolate"
    x4, squeeze = _image(op, x)
    n, c, h, w = x4.shape
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    if size is not None:
        oh, ow = _pair(op, size, "size")
        sh = sw = None
    else:
        sh, sw = (scale_factor if isinstance(scale_factor, (list, tuple)) else
                  (scale_factor, scale_factor))
        if sh <= 0 or sw <= 0:
            raise ValueError(f"{op}: scale_factor must be positive, got {scale_factor!r}")
        oh, ow = int(math.floor(h * sh)), int(math.floor(w * sw))
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: output size {(oh, ow)} must be positive")
    if mode == "nearest":
        if align_corners is not None:
            raise ValueError(f"{op}: align_corners only applies to the linear modes")
        rh = (1.0 / sh) if sh else h / oh
        rw = (1.0 / sw) if sw else w / ow
        ih = np.minimum(np.floor(np.arange(oh) * rh).astype(np.int64), h - 1)
        iw = np.minimum(np.floor(np.arange(ow) * rw).astype(np.int64), w - 1)
        out = x4.index_select(2, creation.tensor(ih, device=x4.device))
        out = out.index_select(3, creation.tensor(iw, device=x4.device))
    elif mode == "bilinear":
        ac = bool(align_corners)
        mh = creation.tensor(_linear_matrix(h, oh, sh, ac), dtype=x4.dtype, device=x4.device)
        mw = creation.tensor(_linear_matrix(w, ow, sw, ac), dtype=x4.dtype, device=x4.device)
        out = mh @ x4 @ mw.t()
    else:
        raise ValueError(f"{op}: mode must be 'nearest' or 'bilinear', got {mode!r}")
    return out.squeeze(0) if squeeze else out


# ---- the registry's view of the composites ------------------------------------------------------


def _composite(name, onnx, fn, reference, samples):
    spec = type("".join(p.title() for p in name.split("_")), (OpSpec,), {
        "name": name, "onnx": onnx, "composite": True, "fn": staticmethod(fn),
        "reference": staticmethod(reference), "samples": staticmethod(samples),
    })
    return register(spec)


def _conv2d_np(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    s, d = _pair("ref", stride, "s"), _pair("ref", dilation, "d")
    pt, pb, pl, pr = _conv_padding("ref", padding, w.shape[2:], d, s)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + pt + pb - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + pl + pr - d[1] * (kw - 1) - 1) // s[1] + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    out = np.zeros((n, o, oh, ow), dtype=x.dtype)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                           j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _pool_np(x, kernel_size, stride=None, padding=0, reduce="max"):
    k = _pair("ref", kernel_size, "k")
    s = _pair("ref", stride if stride is not None else k, "s")
    p = _pair("ref", padding, "p")
    fill = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    n, c, h, w = xp.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for y in range(oh):
        for xo in range(ow):
            win = xp[:, :, y * s[0]:y * s[0] + k[0], xo * s[1]:xo * s[1] + k[1]]
            out[:, :, y, xo] = win.max(axis=(2, 3)) if reduce == "max" else win.mean(axis=(2, 3))
    return out


def _ints(v, n: int) -> tuple:
    vals = tuple(int(a) for a in v) if isinstance(v, (list, tuple)) else (int(v),) * n
    return vals * n if len(vals) == 1 else vals


def _conv_transpose_np(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                       dilation=1):
    """Any-dimensional transposed convolution: every input value scatters its kernel."""
    nsp = w.ndim - 2
    unbatched = x.ndim == nsp + 1
    if unbatched:
        x = x[None]
    s, p, op_, d = (_ints(v, nsp) for v in (stride, padding, output_padding, dilation))
    n, c = x.shape[:2]
    og = w.shape[1]
    k = w.shape[2:]
    sizes = x.shape[2:]
    full = [(sizes[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 + op_[a] for a in range(nsp)]
    out = np.zeros((n, og * groups) + tuple(full), dtype=x.dtype)
    cg = c // groups
    for g in range(groups):
        for pos in itertools.product(*[range(v) for v in sizes]):
            for tap in itertools.product(*[range(v) for v in k]):
                at = tuple(pos[a] * s[a] + tap[a] * d[a] for a in range(nsp))
                xv = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos]  # (n, cg)
                wv = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap]  # (cg, og)
                out[(slice(None), slice(g * og, (g + 1) * og)) + at] += xv @ wv
    crop = tuple(slice(p[a], full[a] - p[a]) for a in range(nsp))
    out = out[(slice(None), slice(None)) + crop]
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * nsp)
    return out[0] if unbatched else out


_rng = np.random.default_rng(22)
_x = _rng.standard_normal((2, 4, 6, 5))
_composite("conv2d", "Conv", conv2d, _conv2d_np, lambda: [
    ((_x, _rng.standard_normal((3, 4, 3, 2)), _rng.standard_normal(3)), {}),
    ((_x, _rng.standard_normal((4, 2, 2, 3))), {"stride": 2, "padding": 1, "groups": 2}),
    ((_x, _rng.standard_normal((2, 4, 3, 3))), {"padding": "same", "dilation": 2}),
])
_composite("max_pool2d", "MaxPool", max_pool2d, lambda x, *a, **k: _pool_np(x, *a, **k),
           lambda: [((_x, 2), {}), ((_x, 3), {"stride": 2, "padding": 1})])
_composite("avg_pool2d", "AveragePool", avg_pool2d,
           lambda x, *a, **k: _pool_np(x, *a, reduce="mean", **k), lambda: [
               ((_x, 2), {}), ((_x, (3, 2)), {"stride": 1})])
_composite("adaptive_avg_pool2d", "GlobalAveragePool", adaptive_avg_pool2d,
           lambda x, s: np.einsum("oh,nchw,pw->ncop", _adaptive_matrix(x.shape[2], _pair(
               "r", s, "s")[0]), x, _adaptive_matrix(x.shape[3], _pair("r", s, "s")[1])),
           lambda: [((_x, 1), {}), ((_x, (4, 3)), {})])
_composite("conv_transpose2d", "ConvTranspose", conv_transpose2d, _conv_transpose_np, lambda: [
    ((_x[:, :, :3, :3], _rng.standard_normal((4, 3, 2, 3)), _rng.standard_normal(3)), {}),
    ((_x[:, :, :3, :2], _rng.standard_normal((4, 1, 3, 2))),
     {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "groups": 2}),
    ((_x[0, :, :3, :3], _rng.standard_normal((4, 2, 2, 2))), {"dilation": 2, "stride": 2}),
])

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "conv1d", "conv2d", "conv_transpose2d",
           "interpolate", "max_pool2d"]


# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _conv2d_onnx(cls, b, args, attrs, outs):
    x, w, bias = args["x"], args["weight"], args["bias"]
    if x.ndim != 4:
        return NotImplemented
    kh, kw = w.shape[2:]
    stride, dilation = _pair(cls.name, args["stride"], "s"), _pair(cls.name, args["dilation"], "d")
    pt, pb, pl, pr = _conv_padding(cls.name, args["padding"], (kh, kw), dilation, stride)
    ins = [b.value(x), b.value(w)] + ([b.value(bias)] if bias is not None else [])
    b.node("Conv", ins, outputs=outs, kernel_shape=[kh, kw], strides=list(stride),
           pads=[pt, pl, pb, pr], dilations=list(dilation), group=int(args["groups"]))


def _conv_transpose_onnx(cls, b, args, attrs, outs):
    """ConvTranspose for conv_transpose1d/2d/3d: PyTorch's padding p crops p from both ends of
    every spatial axis, output_padding grows the far end, which is ONNX's pads/output_padding."""
    from .shape import onnx_axes_node

    x = args["x"] if "x" in args else args["input"]
    w, bias = args["weight"], args["bias"]
    nsp = w.ndim - 2
    if x.ndim not in (nsp + 1, nsp + 2):
        return NotImplemented
    k = list(w.shape[2:])
    s, p, opd, d = (list(_ints(args[a], nsp)) for a in ("stride", "padding", "output_padding",
                                                         "dilation"))
    name = b.value(x)
    unbatched = x.ndim == nsp + 1
    if unbatched:
        name = onnx_axes_node(b, "Unsqueeze", name, [0])
    ins = [name, b.value(w)] + ([b.value(bias)] if bias is not None else [])
    kw = dict(kernel_shape=k, strides=s, pads=p + p, dilations=d, group=int(args["groups"]),
              output_padding=opd if any(opd) else None)
    if not unbatched:
        b.node("ConvTranspose", ins, outputs=outs, **kw)
        return None
    (y,) = b.node("ConvTranspose", ins, **kw)
    onnx_axes_node(b, "Squeeze", y, [0], outs)
    return None


def _pool_attrs(cls, args):
    x = args["x"]
    if x.ndim != 4:
        raise RuntimeError(f"onnx export: {cls.name} of a {x.ndim}-d input cannot be exported "
                           "(only batched (N, C, H, W) input)")
    k, s, p, d, _, _ = _pool_geometry(cls.name, x.shape[2], x.shape[3], args["kernel_size"],
                                      args["stride"], args["padding"], args.get("dilation", 1),
                                      args["ceil_mode"])
    return dict(kernel_shape=list(k), strides=list(s), pads=[p[0], p[1], p[0], p[1]],
                ceil_mode=int(bool(args["ceil_mode"]))), d


def _max_pool2d_onnx(cls, b, args, attrs, outs):
    # never decomposed: its window indices come from a kernel outside the op registry
    if args["return_indices"]:
        raise RuntimeError("onnx export: max_pool2d with return_indices=True cannot be exported")
    kw, d = _pool_attrs(cls, args)
    b.node("MaxPool", [b.value(args["x"])], outputs=outs, dilations=list(d), **kw)


def _avg_pool2d_onnx(cls, b, args, attrs, outs):
    if args["divisor_override"] is not None:
        return NotImplemented
    kw, _ = _pool_attrs(cls, args)
    b.node("AveragePool", [b.value(args["x"])], outputs=outs,
           count_include_pad=int(bool(args["count_include_pad"])), **kw)


def _adaptive_avg_pool2d_onnx(cls, b, args, attrs, outs):
    x, size = args["x"], args["output_size"]
    if x.ndim != 4 or size not in (1, (1, 1), [1, 1]):
        return NotImplemented  # other sizes: the two constant products it runs
    b.node("GlobalAveragePool", [b.value(x)], outputs=outs)


REGISTRY["conv2d"].onnx_export = classmethod(_conv2d_onnx)
REGISTRY["conv_transpose2d"].onnx_export = classmethod(_conv_transpose_onnx)
REGISTRY["max_pool2d"].onnx_export = classmethod(_max_pool2d_onnx)
REGISTRY["avg_pool2d"].onnx_export = classmethod(_avg_pool2d_onnx)
REGISTRY["adaptive_avg_pool2d"].onnx_export = classmethod(_adaptive_avg_pool2d_onnx)
