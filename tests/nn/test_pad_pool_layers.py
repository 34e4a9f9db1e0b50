"""Padding, pooling, local response normalisation and rearranging (shuffle, fold, unflatten,
upsampling) modules: values against numpy, a backward through each (float64 gradcheck),
return_indices, and the error paths. (The registry tests check the ops of ops/pooling.py and
ops/rearrange.py against their references, with gradients.)"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy

RNG = np.random.default_rng(11)


def t64(a, requires_grad=False):
    return st.tensor(np.asarray(a, np.float64), dtype=st.float64, requires_grad=requires_grad)


def _np_pairs(padding, ndim):
    """np.pad's widths from a PyTorch-style (last dim first) padding tuple."""
    pairs = [(0, 0)] * ndim
    for i in range(len(padding) // 2):
        pairs[ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
    return pairs


# ---- padding ------------------------------------------------------------------------------------

PADS = [
    (nn.ReflectionPad1d, "reflect", 1, (2, 1)),
    (nn.ReflectionPad2d, "reflect", 2, (1, 2, 2, 0)),
    (nn.ReflectionPad3d, "reflect", 3, 1),
    (nn.ReplicationPad1d, "edge", 1, 3),
    (nn.ReplicationPad2d, "edge", 2, (0, 1, 3, 2)),
    (nn.ReplicationPad3d, "edge", 3, (1, 0, 0, 2, 1, 1)),
    (nn.CircularPad1d, "wrap", 1, (1, 2)),
    (nn.CircularPad2d, "wrap", 2, 1),
    (nn.CircularPad3d, "wrap", 3, (1, 1, 0, 2, 2, 1)),
    (nn.ZeroPad1d, "constant", 1, (2, 3)),
    (nn.ZeroPad2d, "constant", 2, (1, 0, 2, 1)),
    (nn.ZeroPad3d, "constant", 3, 1),
]


@pytest.mark.parametrize("cls, np_mode, dims, padding", PADS, ids=[p[0].__name__ for p in PADS])
@pytest.mark.parametrize("batched", [True, False])
def test_padding_modules_against_numpy_with_gradients(cls, np_mode, dims, padding, batched):
    shape = ((2,) if batched else ()) + (3,) + (4, 3, 5)[:dims]
    x = RNG.standard_normal(shape)
    m = cls(padding)
    full = (padding,) * (2 * dims) if isinstance(padding, int) else padding
    assert m.padding == tuple(full)
    want = np.pad(x, _np_pairs(full, x.ndim), mode=np_mode)
    np.testing.assert_allclose(to_numpy(m(t64(x))), want, rtol=0, atol=0)
    xs = t64(RNG.standard_normal(shape[:-1] + (3,)), requires_grad=True) if dims == 1 else None
    assert st.autograd.gradcheck(lambda v: m(v), (xs if xs is not None else
                                                 t64(x, requires_grad=True),))


@pytest.mark.parametrize("cls, dims", [(nn.ConstantPad1d, 1), (nn.ConstantPad2d, 2),
                                       (nn.ConstantPad3d, 3)])
def test_constant_padding_uses_its_value(cls, dims):
    x = RNG.standard_normal((2, 3, 2, 4)[-dims - 1:])
    m = cls(1, 3.5)
    want = np.pad(x, _np_pairs((1,) * (2 * dims), x.ndim), constant_values=3.5)
    np.testing.assert_array_equal(to_numpy(m(t64(x))), want)
    assert repr(m) == f"{cls.__name__}(padding={(1,) * (2 * dims)}, value=3.5)"


def test_padding_reprs():
    assert repr(nn.ReflectionPad2d(1)) == "ReflectionPad2d((1, 1, 1, 1))"
    assert repr(nn.ZeroPad1d((1, 2))) == "ZeroPad1d((1, 2))"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: nn.ReflectionPad2d((1, 2)), ValueError, "ReflectionPad2d: padding must be an int "
                                                      "or a tuple of 4 ints"),
    (lambda: nn.ZeroPad1d(1.5), ValueError, "ZeroPad1d: padding must be"),
    (lambda: nn.ReflectionPad2d(1)(st.ones(4, 4)), ValueError,
     "ReflectionPad2d: expected a 3D or 4D input"),
    (lambda: nn.ReplicationPad3d(1)(st.ones(2, 2, 2)), ValueError,
     "ReplicationPad3d: expected a 4D or 5D input"),
    (lambda: nn.ReflectionPad1d(3)(st.ones(1, 3)), ValueError, "pad: padding size should be "
                                                               "less than"),
    (lambda: nn.CircularPad1d(4)(st.ones(1, 3)), ValueError, "pad: circular padding"),
    (lambda: nn.ConstantPad3d(1, 0.0)(st.ones(2, 2)), ValueError,
     "ConstantPad3d: expected an input with at least 3"),
    (lambda: nn.ZeroPad2d(1)([1.0]), TypeError, "ZeroPad2d: input must be a Tensor"),
])
def test_padding_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---- pooling ------------------------------------------------------------------------------------


def _np_max1d(x, k, s, p=0):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p)), constant_values=-np.inf)
    return sliding_window_view(xp, k, axis=2)[:, :, ::s].max(-1)


def test_max_and_avg_pool1d_against_numpy_with_indices():
    x = RNG.standard_normal((2, 3, 11))
    y, idx = nn.MaxPool1d(3, 2, 1, return_indices=True)(t64(x))
    np.testing.assert_array_equal(to_numpy(y), _np_max1d(x, 3, 2, 1))
    np.testing.assert_array_equal(np.take_along_axis(x, to_numpy(idx), 2), to_numpy(y))
    assert idx.dtype == st.int64
    want = sliding_window_view(x, 4, axis=2)[:, :, ::3].mean(-1)
    np.testing.assert_allclose(to_numpy(nn.AvgPool1d(4, 3)(t64(x))), want, rtol=1e-12)
    # unbatched (C, L)
    np.testing.assert_array_equal(to_numpy(F.max_pool1d(t64(x[0]), 2)), _np_max1d(x, 2, 2)[0])


def test_pool1d_ceil_mode_and_count_include_pad():
    x = t64([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
    assert F.max_pool1d(x, 2, ceil_mode=True).tolist() == [[[2.0, 4.0, 5.0]]]
    assert F.avg_pool1d(x, 2, ceil_mode=True).tolist() == [[[1.5, 3.5, 5.0]]]
    assert F.avg_pool1d(x, 3, 2, padding=1).tolist() == [[[1.0, 3.0, 3.0]]]
    assert F.avg_pool1d(x, 3, 2, padding=1, count_include_pad=False).tolist() == [
        [[1.5, 3.0, 4.5]]]


def _np_pool3d(x, k, reduce):
    w = sliding_window_view(x, (k, k, k), axis=(2, 3, 4))[:, :, ::k, ::k, ::k]
    return w.max((-3, -2, -1)) if reduce == "max" else w.mean((-3, -2, -1))


def test_pool3d_against_numpy_with_gradients():
    x = RNG.standard_normal((2, 2, 4, 6, 4))
    xt = t64(x, requires_grad=True)
    y, idx = nn.MaxPool3d(2, return_indices=True)(xt)
    np.testing.assert_array_equal(to_numpy(y), _np_pool3d(x, 2, "max"))
    flat = x.reshape(2, 2, -1)
    np.testing.assert_array_equal(
        np.take_along_axis(flat, to_numpy(idx).reshape(2, 2, -1), 2).reshape(y.shape),
        to_numpy(y))
    y.sum().backward()
    grad = np.zeros_like(flat)
    np.put_along_axis(grad, to_numpy(idx).reshape(2, 2, -1), 1.0, 2)
    np.testing.assert_array_equal(to_numpy(xt.grad), grad.reshape(x.shape))
    np.testing.assert_allclose(to_numpy(nn.AvgPool3d(2)(t64(x))), _np_pool3d(x, 2, "mean"),
                               rtol=1e-12)
    got = nn.AvgPool3d(2, divisor_override=1)(t64(x[0]))
    np.testing.assert_allclose(to_numpy(got), _np_pool3d(x[:1], 2, "mean")[0] * 8, rtol=1e-12)
    assert st.autograd.gradcheck(lambda v: F.avg_pool3d(v, 3, 2, 1, count_include_pad=False),
                                 (t64(x[:1, :1], requires_grad=True),))


def test_adaptive_pools_with_indices():
    x = RNG.standard_normal((2, 3, 7))
    y, idx = nn.AdaptiveMaxPool1d(3, return_indices=True)(t64(x))
    want = np.stack([x[..., 0:3].max(-1), x[..., 2:5].max(-1), x[..., 4:7].max(-1)], -1)
    np.testing.assert_array_equal(to_numpy(y), want)
    np.testing.assert_array_equal(np.take_along_axis(x, to_numpy(idx), 2), want)
    want = np.stack([x[..., 0:3].mean(-1), x[..., 2:5].mean(-1), x[..., 4:7].mean(-1)], -1)
    np.testing.assert_allclose(to_numpy(nn.AdaptiveAvgPool1d(3)(t64(x))), want, rtol=1e-12)
    x2 = RNG.standard_normal((2, 3, 5, 4))
    y2, idx2 = nn.AdaptiveMaxPool2d((2, 1), return_indices=True)(t64(x2))
    want = np.stack([x2[:, :, 0:3].max((-2, -1)), x2[:, :, 2:5].max((-2, -1))], -1)[..., None]
    np.testing.assert_array_equal(to_numpy(y2), want)
    np.testing.assert_array_equal(
        np.take_along_axis(x2.reshape(2, 3, -1), to_numpy(idx2).reshape(2, 3, -1), 2),
        want.reshape(2, 3, -1))
    assert nn.AdaptiveMaxPool2d((None, 2))(t64(x2[0])).shape == (3, 5, 2)
    xt = t64(x2, requires_grad=True)
    assert st.autograd.gradcheck(lambda v: F.adaptive_max_pool2d(v, 3), (xt,))


def test_lp_pools_against_numpy():
    x = RNG.uniform(0.1, 2.0, (2, 3, 8))
    want = (sliding_window_view(x, 3, axis=2)[:, :, ::2] ** 2).sum(-1) ** 0.5
    np.testing.assert_allclose(to_numpy(nn.LPPool1d(2, 3, 2)(t64(x))), want, rtol=1e-12)
    x2 = RNG.uniform(0.1, 2.0, (1, 2, 4, 6))
    w = sliding_window_view(x2, (2, 3), axis=(2, 3))[:, :, ::2, ::3]
    want = (w ** 3).sum((-2, -1)) ** (1 / 3)
    np.testing.assert_allclose(to_numpy(nn.LPPool2d(3, (2, 3))(t64(x2))), want, rtol=1e-12)
    assert st.autograd.gradcheck(lambda v: F.lp_pool2d(v, 2.0, 2), (t64(x2, True),))


def test_local_response_norm_against_numpy():
    x = RNG.standard_normal((2, 6, 3, 2))
    size, alpha, beta, k = 3, 0.2, 0.75, 2.0
    sq = np.pad(x ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    div = (k + alpha / size * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** beta
    np.testing.assert_allclose(to_numpy(nn.LocalResponseNorm(size, alpha, beta, k)(t64(x))),
                               x / div, rtol=1e-12)
    assert st.autograd.gradcheck(lambda v: F.local_response_norm(v, 4, 0.5),
                                 (t64(x[:1], True),))


def test_pool_reprs():
    assert repr(nn.MaxPool1d(2)) == ("MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                     "ceil_mode=False)")
    assert repr(nn.LocalResponseNorm(2)) == "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.max_pool1d(st.ones(2, 3, 4, 5), 2), ValueError, "max_pool1d: expected a 2D or 3D"),
    (lambda: F.max_pool3d(st.ones(2, 3, 4), 2), ValueError, "max_pool3d: expected a 4D or 5D"),
    (lambda: F.avg_pool1d(st.ones(1, 1, 3), 5), ValueError, "avg_pool1d: kernel size"),
    (lambda: F.max_pool1d(st.ones(1, 1, 8), 2, padding=2), ValueError,
     "max_pool1d: padding .* should be at most half"),
    (lambda: F.max_pool3d(st.ones(1, 1, 4, 4, 4), (2, 2)), TypeError,
     "max_pool3d: kernel_size must be an int or a tuple of 3"),
    (lambda: F.avg_pool3d(st.ones(1, 1, 4, 4, 4), 0), ValueError, "avg_pool3d: kernel_size "
                                                                  "must be positive"),
    (lambda: F.avg_pool3d(st.ones(1, 1, 2, 2, 2), 2, divisor_override=0), ValueError,
     "avg_pool3d: divisor_override must be a non-zero int"),
    (lambda: F.adaptive_max_pool2d(st.ones(1, 1, 4, 4), 0), ValueError,
     "adaptive_max_pool2d: output_size must be positive"),
    (lambda: F.adaptive_avg_pool1d(st.ones(1, 1, 4), (2, 2)), ValueError,
     "adaptive_avg_pool1d: output_size must be an int or a tuple of 1"),
    (lambda: F.max_pool1d(st.ones(1, 1, 4, dtype=st.int64), 2), TypeError,
     "max_pool1d: expected a floating point"),
    (lambda: F.lp_pool1d(st.ones(1, 1, 4), 0, 2), ValueError, "lp_pool1d: norm_type"),
    (lambda: F.local_response_norm(st.ones(2, 3), 2), ValueError,
     "local_response_norm: expected a 3D or higher"),
    (lambda: nn.LocalResponseNorm(0), ValueError, "LocalResponseNorm: size must be a positive"),
    (lambda: F.adaptive_max_pool1d([1.0], 2), TypeError, "adaptive_max_pool1d: input must be"),
])
def test_pool_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---- shuffles, fold/unfold, unflatten, upsampling -----------------------------------------------


def test_pixel_shuffle_places_each_channel_block_and_unshuffle_inverts_it():
    r = 2
    x = RNG.standard_normal((2, 3 * r * r, 3, 4))
    y = to_numpy(nn.PixelShuffle(r)(t64(x)))
    assert y.shape == (2, 3, 6, 8)
    for c in range(3):
        for i in range(r):
            for j in range(r):
                np.testing.assert_array_equal(y[:, c, i::r, j::r], x[:, c * r * r + i * r + j])
    back = nn.PixelUnshuffle(r)(t64(y))
    np.testing.assert_array_equal(to_numpy(back), x)
    # extra batch dimensions
    x5 = RNG.standard_normal((2, 2, 9, 1, 2))
    assert F.pixel_shuffle(t64(x5), 3).shape == (2, 2, 1, 3, 6)
    assert st.autograd.gradcheck(lambda v: F.pixel_shuffle(v, 2), (t64(x[:1], True),))


def test_channel_shuffle_interleaves_groups():
    x = np.arange(2 * 6 * 2, dtype=np.float64).reshape(2, 6, 2)
    y = to_numpy(nn.ChannelShuffle(3)(t64(x)))
    np.testing.assert_array_equal(y, x[:, [0, 2, 4, 1, 3, 5]])


def test_unfold_and_fold_against_numpy():
    x = RNG.standard_normal((2, 3, 5, 4))
    cols = to_numpy(nn.Unfold((2, 3), padding=1, stride=(2, 1))(t64(x)))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    blocks = [xp[:, :, i:i + 2, j:j + 3].reshape(2, -1)
              for i in range(0, 6, 2) for j in range(0, 4)]
    np.testing.assert_array_equal(cols, np.stack(blocks, -1))
    # fold of unfold multiplies each pixel by the number of blocks covering it
    ones = t64(np.ones((1, 1, 4, 4)))
    counts = F.fold(F.unfold(ones, 2), (4, 4), 2)
    np.testing.assert_array_equal(to_numpy(counts)[0, 0],
                                  np.outer([1, 2, 2, 1], [1, 2, 2, 1]))
    c = RNG.standard_normal((2, 12, 12))
    m = nn.Fold((5, 4), 2)
    assert m(t64(c)).shape == (2, 3, 5, 4)
    assert st.autograd.gradcheck(lambda v: m(v), (t64(c, True),))
    assert nn.Unfold(2)(t64(x[0])).shape == (12, 12)


def test_unflatten_and_upsampling():
    x = t64(RNG.standard_normal((2, 12)))
    assert nn.Unflatten(1, (3, -1))(x).shape == (2, 3, 4)
    assert nn.Unflatten(-1, [2, 2, 3])(x).shape == (2, 2, 2, 3)
    img = t64([[[[0.0, 3.0], [6.0, 9.0]]]])
    np.testing.assert_array_equal(to_numpy(nn.UpsamplingNearest2d(scale_factor=2)(img)),
                                  np.kron(to_numpy(img), np.ones((2, 2))))
    got = to_numpy(nn.UpsamplingBilinear2d(size=(3, 3))(img))[0, 0]
    np.testing.assert_allclose(got, [[0, 1.5, 3], [3, 4.5, 6], [6, 7.5, 9]], rtol=1e-12)
    assert repr(nn.UpsamplingBilinear2d(scale_factor=2)) == "UpsamplingBilinear2d(scale_factor=2)"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.pixel_shuffle(st.ones(1, 3, 2, 2), 2), ValueError,
     "pixel_shuffle: the channel dimension \\(3\\) must be divisible"),
    (lambda: F.pixel_shuffle(st.ones(4, 2), 2), ValueError, "pixel_shuffle: expected an input "
                                                           "with at least 3"),
    (lambda: F.pixel_shuffle(st.ones(1, 4, 2, 2), 0), ValueError,
     "pixel_shuffle: upscale_factor must be a positive int"),
    (lambda: F.pixel_unshuffle(st.ones(1, 1, 3, 4), 2), ValueError,
     "pixel_unshuffle: height \\(3\\) and width \\(4\\) must be divisible"),
    (lambda: F.channel_shuffle(st.ones(1, 5, 2), 2), ValueError,
     "channel_shuffle: the number of channels \\(5\\) must be divisible"),
    (lambda: F.unfold(st.ones(2, 3), 2), ValueError, "unfold: expected a 3D"),
    (lambda: F.unfold(st.ones(1, 1, 2, 2), 3), ValueError, "unfold: the kernel"),
    (lambda: F.fold(st.ones(1, 5, 4), (3, 3), 2), ValueError,
     "fold: input dimension 1 \\(5\\) must be divisible"),
    (lambda: F.fold(st.ones(1, 4, 5), (3, 3), 2), ValueError, "fold: input has 5 blocks"),
    (lambda: nn.Unflatten(1, (5, -1))(st.ones(2, 12)), ValueError,
     "Unflatten: unflattened_size \\(5, -1\\) does not match"),
    (lambda: nn.Unflatten(1, (2, 2))(st.ones(2, 12)), ValueError, "Unflatten: unflattened_size"),
    (lambda: nn.Unflatten(3, (2, 6))(st.ones(2, 12)), IndexError, "Unflatten: dim 3 is out"),
    (lambda: nn.Unflatten(1, 12), TypeError, "Unflatten: unflattened_size must be"),
])
def test_rearrange_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
