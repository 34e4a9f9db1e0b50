"""Convolution, pooling and resizing: shapes, adjoint identities, numpy references written
pixel by pixel, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import as_tensor, to_numpy

rng = np.random.default_rng(7)


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (2, 0, 2, 2), (3, 2, 1, 1)])
def test_conv_transpose2d_is_the_adjoint_of_conv2d(stride, padding, dilation, groups):
    x = rng.standard_normal((2, 4, 9, 8))
    w = rng.standard_normal((6, 4 // groups, 3, 2))
    y = st.conv2d(as_tensor(x), as_tensor(w), stride=stride, padding=padding,
                  dilation=dilation, groups=groups)
    g = rng.standard_normal(y.shape)
    # output_padding restores the rows and columns the strided windows' last start leaves over
    sizes = [(n - 1) * stride - 2 * padding + dilation * (k - 1) + 1
             for n, k in zip(y.shape[2:], w.shape[2:])]
    out_pad = (x.shape[2] - sizes[0], x.shape[3] - sizes[1])
    xt = st.conv_transpose2d(as_tensor(g), as_tensor(w), stride=stride, padding=padding,
                             output_padding=out_pad, groups=groups, dilation=dilation)
    assert xt.shape == x.shape
    lhs = float((to_numpy(y) * g).sum())  # <conv(x), g> == <x, conv_transpose(g)>
    rhs = float((x * to_numpy(xt)).sum())
    assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs))


def test_conv_transpose2d_output_size_and_gradcheck():
    x = as_tensor(rng.standard_normal((1, 2, 3, 3)), requires_grad=True)
    w = as_tensor(rng.standard_normal((2, 3, 3, 3)), requires_grad=True)
    out = st.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
    assert out.shape == (1, 3, 6, 6)
    assert st.autograd.gradcheck(
        lambda a, b: st.conv_transpose2d(a, b, stride=2, padding=1, output_padding=1), (x, w))


def test_conv1d_matches_numpy():
    x, w = rng.standard_normal((2, 3, 10)), rng.standard_normal((4, 3, 3))
    b = rng.standard_normal(4)
    got = to_numpy(st.conv1d(as_tensor(x), as_tensor(w), as_tensor(b), stride=2, padding=1))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    want = np.stack([np.einsum("ncl,ocl->no", xp[:, :, i * 2:i * 2 + 3], w) for i in range(5)],
                    axis=-1) + b.reshape(1, 4, 1)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def _bilinear_np(x, oh, ow, align_corners):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))

    def src(i, n_in, n_out):
        if align_corners:
            return i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return max((i + 0.5) * n_in / n_out - 0.5, 0.0)

    for i in range(oh):
        for j in range(ow):
            y, xx = src(i, h, oh), src(j, w, ow)
            y0, x0 = min(int(y), h - 1), min(int(xx), w - 1)
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            fy, fx = y - y0, xx - x0
            out[:, :, i, j] = ((1 - fy) * ((1 - fx) * x[:, :, y0, x0] + fx * x[:, :, y0, x1])
                               + fy * ((1 - fx) * x[:, :, y1, x0] + fx * x[:, :, y1, x1]))
    return out


@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_resize_matches_a_pixel_by_pixel_reference(align_corners):
    x = rng.standard_normal((1, 2, 4, 5))
    got = st.interpolate(as_tensor(x), size=(7, 3), mode="bilinear", align_corners=align_corners)
    np.testing.assert_allclose(to_numpy(got), _bilinear_np(x, 7, 3, align_corners), rtol=1e-10)


def test_nearest_resize_and_its_gradient():
    x = as_tensor(rng.standard_normal((1, 1, 2, 3)), requires_grad=True)
    y = st.interpolate(x, scale_factor=2)
    np.testing.assert_array_equal(to_numpy(y), np.repeat(np.repeat(to_numpy(x), 2, 2), 2, 3))
    y.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), np.full((1, 1, 2, 3), 4.0))


def test_max_pool_indices_and_gradient_go_to_the_maximum():
    x = as_tensor(np.array([[[[1.0, 5.0], [3.0, 2.0]]]]), requires_grad=True)
    out, idx = st.max_pool2d(x, 2, return_indices=True)
    assert to_numpy(idx).tolist() == [[[[1]]]]
    out.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[[[0.0, 1.0], [0.0, 0.0]]]])


def _max_pool_pixel_by_pixel(x, k, s, p, d, oh, ow):
    """Indices of each window's maximum: the first maximum among ties, the first NaN over
    everything; windows read only the cells inside the input."""
    n, c, h, w = x.shape
    idx = np.zeros((n, c, oh, ow), dtype=np.int64)
    for a in range(n):
        for b in range(c):
            for y in range(oh):
                for xo in range(ow):
                    best, bv = -1, 0.0
                    for i in range(k[0]):
                        iy = y * s[0] - p[0] + i * d[0]
                        for j in range(k[1]):
                            ix = xo * s[1] - p[1] + j * d[1]
                            if not (0 <= iy < h and 0 <= ix < w):
                                continue
                            v = x[a, b, iy, ix]
                            if best < 0 or (not np.isnan(bv) and (v > bv or np.isnan(v))):
                                best, bv = iy * w + ix, v
                    idx[a, b, y, xo] = best
    return idx


@pytest.mark.parametrize("k, s, p, d, ceil", [
    ((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((3, 2), (1, 2), (1, 1), (2, 1), False), ((2, 3), (3, 1), (1, 0), (1, 2), True),
    ((3, 2), (1, 3), (0, 0), (2, 1), False)])  # the first and last: every window inside
def test_max_pool_indices_match_a_pixel_by_pixel_reference(k, s, p, d, ceil):
    # ties (small integers) and NaN, with padding, dilation, strides and ceil_mode
    x = rng.integers(-2, 3, (2, 3, 7, 8)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    out, idx = st.max_pool2d(as_tensor(x), k, s, p, d, ceil_mode=ceil, return_indices=True)
    want = _max_pool_pixel_by_pixel(x, k, s, p, d, *idx.shape[2:])
    np.testing.assert_array_equal(to_numpy(idx), want)
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(
        to_numpy(out), np.take_along_axis(flat, want.reshape(2, 3, -1), 2).reshape(want.shape))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("k, s, p, d, ceil", [
    ((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((3, 2), (1, 3), (0, 0), (2, 1), False), ((3, 2), (1, 2), (1, 1), (2, 1), False),
    ((2, 3), (3, 1), (1, 0), (1, 2), True), ((3, 3), (1, 1), (1, 1), (1, 1), False)])
def test_max_pool_without_indices_gives_the_same_maxima(dtype, k, s, p, d, ceil):
    # under no_grad without return_indices the kernel writes the maxima alone (float32 and
    # float64); with a gradient it writes indices too, and float16 gathers by index: all agree
    x = rng.integers(-2, 3, (2, 3, 9, 8)).astype(np.float64)
    x[rng.random(x.shape) < 0.05] = np.nan
    t = as_tensor(x).to(getattr(st, dtype))
    with st.no_grad():
        alone = st.max_pool2d(t, k, s, p, d, ceil_mode=ceil)
    leaf = t.detach().requires_grad_(True) if dtype != "float16" else t
    indexed, idx = st.max_pool2d(leaf, k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(to_numpy(alone), to_numpy(indexed.detach()))
    want = _max_pool_pixel_by_pixel(x, k, s, p, d, *idx.shape[2:])
    np.testing.assert_array_equal(to_numpy(idx), want)
    if dtype != "float16":  # the gradient goes to each window's first maximum
        indexed.sum().backward()
        grad = np.zeros((6, 9 * 8))
        for plane, taken in enumerate(want.reshape(6, -1)):
            np.add.at(grad[plane], taken, 1.0)
        np.testing.assert_array_equal(to_numpy(leaf.grad), grad.reshape(x.shape))


def test_avg_pool_divisors_follow_pytorch():
    x = as_tensor(np.ones((1, 1, 3, 3)))
    inc = st.avg_pool2d(x, 2, stride=2, padding=1)  # corners see 1 of 4 cells
    exc = st.avg_pool2d(x, 2, stride=2, padding=1, count_include_pad=False)
    np.testing.assert_allclose(to_numpy(inc), [[[[0.25, 0.5], [0.5, 1.0]]]])
    np.testing.assert_allclose(to_numpy(exc), np.ones((1, 1, 2, 2)))


def test_max_pool_ceil_mode_size():
    x = as_tensor(rng.standard_normal((1, 1, 5, 5)))
    assert st.max_pool2d(x, 2, ceil_mode=True).shape == (1, 1, 3, 3)
    assert st.max_pool2d(x, 2).shape == (1, 1, 2, 2)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: st.conv2d(st.ones(1, 3, 5, 5), st.ones(2, 2, 3, 3)), ValueError, "input channels"),
    (lambda: st.conv2d(st.ones(1, 4, 5, 5), st.ones(3, 2, 3, 3), groups=2), ValueError,
     "divisible by groups"),
    (lambda: st.conv2d(st.ones(1, 1, 2, 2), st.ones(1, 1, 3, 3)), ValueError,
     "does not fit"),
    (lambda: st.conv2d(st.ones(5, 5), st.ones(1, 1, 3, 3)), ValueError, "3-d .* or 4-d"),
    (lambda: st.conv2d(st.ones(1, 1, 5, 5), st.ones(1, 1, 3, 3), padding="same", stride=2),
     ValueError, "strided"),
    (lambda: st.max_pool2d(st.ones(1, 1, 4, 4), 2, padding=2), ValueError, "at most half"),
    (lambda: st.interpolate(st.ones(1, 1, 2, 2), size=3, scale_factor=2), ValueError,
     "exactly one"),
    (lambda: st.interpolate(st.ones(1, 1, 2, 2), size=3, mode="cubic"), ValueError, "mode"),
    (lambda: st.conv_transpose2d(st.ones(1, 2, 3, 3), st.ones(2, 1, 3, 3), stride=2,
                                 output_padding=2), ValueError, "output_padding"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_batch_norm_updates_running_statistics_like_pytorch():
    x = rng.standard_normal((4, 3, 2))
    rm, rv = st.zeros(3, dtype=st.float64), st.ones(3, dtype=st.float64)
    st.batch_norm(as_tensor(x), rm, rv, training=True, momentum=0.1)
    mean = x.mean(axis=(0, 2))
    var_unbiased = x.var(axis=(0, 2), ddof=1)
    np.testing.assert_allclose(to_numpy(rm), 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(rv), 0.9 + 0.1 * var_unbiased, rtol=1e-12)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        st.batch_norm(st.ones(1, 3), None, None, training=True)


@pytest.mark.parametrize("call, match", [
    (lambda: st.layer_norm(st.ones(2, 3), (2,)), "trailing dims"),
    (lambda: st.group_norm(st.ones(2, 6, 2), 4), "divisor"),
    (lambda: st.batch_norm(st.ones(2, 3), st.zeros(4), st.ones(4)), "running_mean"),
])
def test_norm_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("stride,groups", [(1, 1), (2, 1), ((2, 3), 2)])
def test_pointwise_conv_direct_path_matches_im2col_reference(stride, groups):
    from singa_tensor.autograd import gradcheck
    from singa_tensor.ops.conv import _conv2d_np

    r = np.random.default_rng(5)
    x = r.standard_normal((2, 4, 5, 7))
    w = r.standard_normal((6, 4 // groups, 1, 1))
    b = r.standard_normal(6)
    got = st.conv2d(as_tensor(x), as_tensor(w), as_tensor(b), stride=stride, groups=groups)
    np.testing.assert_allclose(to_numpy(got), _conv2d_np(x, w, b, stride=stride, groups=groups),
                               rtol=1e-10)
    xt = as_tensor(x[:1, :, :3, :4].copy(), requires_grad=True)
    wt = as_tensor(w, requires_grad=True)
    assert gradcheck(lambda a, k: st.conv2d(a, k, stride=stride, groups=groups), (xt, wt))


def test_conv_transpose_bias_must_be_a_tensor():
    x, w = st.randn(1, 2, 4, 4), st.randn(2, 3, 3, 3)
    with pytest.raises(TypeError, match="conv_transpose2d.*bias"):
        st.nn.functional.conv_transpose2d(x, w, [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="conv_transpose1d.*bias"):
        st.nn.functional.conv_transpose1d(st.randn(1, 2, 4), st.randn(2, 3, 3), [0.0, 0.0, 0.0])
