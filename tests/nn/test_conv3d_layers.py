"""3-d and transposed convolutions, 3-d pools, unpooling, pdist, the *_with_indices pools,
the upsample aliases and the lazy 3-d/transposed/instance-norm modules."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy


def _t(a):
    return st.tensor(np.asarray(a, dtype=np.float64))


def _conv3d_loop(x, w, b, stride, pad, dil, groups):
    """A direct loop over every output position and kernel tap."""
    n, c, d, h, wd = x.shape
    o, cg, kd, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2, (pad[2],) * 2))
    outs = [(xp.shape[2 + a] - dil[a] * (w.shape[2 + a] - 1) - 1) // stride[a] + 1
            for a in range(3)]
    out = np.zeros((n, o, *outs))
    og = o // groups
    for b_, oc, z, y, xx in itertools.product(range(n), range(o), *[range(v) for v in outs]):
        g = oc // og
        acc = 0.0
        for ci, i, j, k in itertools.product(range(cg), range(kd), range(kh), range(kw)):
            acc += xp[b_, g * cg + ci, z * stride[0] + i * dil[0], y * stride[1] + j * dil[1],
                      xx * stride[2] + k * dil[2]] * w[oc, ci, i, j, k]
        out[b_, oc, z, y, xx] = acc + (b[oc] if b is not None else 0.0)
    return out


@pytest.mark.parametrize("stride, pad, dil, groups", [
    ((1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
    ((2, 1, 2), (1, 0, 1), (1, 2, 1), 2),
])
def test_conv3d_matches_a_direct_loop(stride, pad, dil, groups):
    r = np.random.default_rng(0)
    x = r.standard_normal((2, 4, 5, 6, 5))
    w = r.standard_normal((2, 4 // groups, 2, 3, 2))
    b = r.standard_normal(2)
    got = F.conv3d(_t(x), _t(w), _t(b), stride, pad, dil, groups)
    np.testing.assert_allclose(to_numpy(got), _conv3d_loop(x, w, b, stride, pad, dil, groups),
                               rtol=1e-10, atol=1e-12)


def test_conv3d_same_padding_keeps_the_size_and_valid_is_zero_padding():
    r = np.random.default_rng(1)
    x, w = _t(r.standard_normal((1, 2, 4, 5, 3))), _t(r.standard_normal((3, 2, 2, 3, 3)))
    assert F.conv3d(x, w, padding="same").shape == (1, 3, 4, 5, 3)
    np.testing.assert_allclose(to_numpy(F.conv3d(x, w, padding="valid")),
                               to_numpy(F.conv3d(x, w)), rtol=1e-12)
    # unbatched input
    assert F.conv3d(x[0], w).shape == (3, 3, 3, 1)


def _inner(a, b):
    return float((a * b).sum().item())


def test_conv_transpose3d_is_the_adjoint_of_conv3d():
    r = np.random.default_rng(2)
    x = _t(r.standard_normal((2, 4, 5, 6, 5)))
    w = _t(r.standard_normal((6, 2, 2, 3, 2)))
    s, p, d, g = (2, 1, 2), (1, 1, 0), (1, 2, 1), 2
    y = F.conv3d(x, w, None, s, p, d, g)
    v = _t(r.standard_normal(y.shape))
    # output_padding brings the transposed output back to x's size
    least = [(y.shape[2 + a] - 1) * s[a] - 2 * p[a] + d[a] * (w.shape[2 + a] - 1) + 1
             for a in range(3)]
    op = tuple(x.shape[2 + a] - least[a] for a in range(3))
    xt = F.conv_transpose3d(v, w, None, s, p, op, g, d)
    assert xt.shape == x.shape
    assert math.isclose(_inner(y, v), _inner(x, xt), rel_tol=1e-10)


def test_conv_transpose1d_is_the_adjoint_of_conv1d_and_adds_bias():
    r = np.random.default_rng(3)
    x, w = _t(r.standard_normal((2, 4, 9))), _t(r.standard_normal((6, 2, 3)))
    y = F.conv1d(x, w, None, 2, 1, 1, 2)
    v = _t(r.standard_normal(y.shape))
    xt = F.conv_transpose1d(v, w, None, 2, 1, 0, 2)
    assert xt.shape == x.shape
    assert math.isclose(_inner(y, v), _inner(x, xt), rel_tol=1e-10)
    b = _t([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(to_numpy(F.conv_transpose1d(v, w, b, 2, 1, 0, 2) - xt),
                               np.broadcast_to(to_numpy(b)[None, :, None], x.shape), atol=1e-12)


def test_conv3d_module_backward_matches_the_transposed_convolution():
    st.manual_seed(0)
    conv = nn.Conv3d(2, 3, (2, 3, 2), padding=1, dtype=st.float64)
    bound = 1.0 / math.sqrt(2 * 2 * 3 * 2)
    assert np.abs(to_numpy(conv.weight)).max() <= bound
    x = st.randn(1, 2, 3, 4, 3, dtype=st.float64, requires_grad=True)
    out = conv(x)
    out.sum().backward()
    want = F.conv_transpose3d(st.ones(*out.shape, dtype=st.float64), conv.weight.detach(),
                              padding=1)
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(want), rtol=1e-10)
    np.testing.assert_allclose(to_numpy(conv.bias.grad), [out[0, 0].numel()] * 3)
    assert conv.weight.grad.shape == (3, 2, 2, 3, 2)


def test_conv3d_padding_modes_pad_before_the_convolution():
    conv = nn.Conv3d(1, 2, 3, padding=(1, 2, 1), padding_mode="circular", dtype=st.float64)
    x = st.randn(1, 1, 3, 4, 3, dtype=st.float64)
    want = F.conv3d(F.pad(x, (1, 1, 2, 2, 1, 1), mode="circular"), conv.weight, conv.bias)
    out = conv(x)
    assert out.shape == (1, 2, 3, 6, 3)
    np.testing.assert_allclose(to_numpy(out), to_numpy(want), rtol=1e-12)
    xn = np.pad(to_numpy(x), ((0, 0), (0, 0), (1, 1), (2, 2), (1, 1)), mode="wrap")
    loop = _conv3d_loop(xn, to_numpy(conv.weight), to_numpy(conv.bias), (1, 1, 1), (0, 0, 0),
                        (1, 1, 1), 1)
    np.testing.assert_allclose(to_numpy(out), loop, rtol=1e-10)


def test_conv_transpose_modules_shapes_output_size_and_grad():
    m = nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert m.weight.shape == (2, 2, 3, 3, 3)
    x = st.randn(1, 2, 3, 2, 2, requires_grad=True)
    out = m(x)
    assert out.shape == (1, 4, 6, 4, 4)
    assert m(x, output_size=(5, 3, 4)).shape == (1, 4, 5, 3, 4)
    out.sum().backward()
    assert x.grad.shape == x.shape and m.weight.grad.shape == m.weight.shape
    m1 = nn.ConvTranspose1d(3, 2, 4, stride=3, dilation=2)
    assert m1(st.randn(5, 3, 4)).shape == (5, 2, 16)
    with pytest.raises(ValueError, match="ConvTranspose1d: output_size"):
        m1(st.randn(5, 3, 4), output_size=(30,))


def test_conv_errors_name_the_op():
    x = st.randn(1, 4, 3, 3, 3)
    with pytest.raises(ValueError, match="Conv3d: kernel_size must be positive"):
        nn.Conv3d(4, 2, 0)
    with pytest.raises(ValueError, match="Conv3d: stride must be positive"):
        nn.Conv3d(4, 2, 2, stride=0)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv3d(4, 3, 2, groups=2)
    with pytest.raises(ValueError, match="Conv3d: kernel_size must be an int or 3 ints"):
        nn.Conv3d(4, 2, (2, 2))
    with pytest.raises(ValueError, match="Conv3d: stride must be an int or 3 ints"):
        nn.Conv3d(4, 2, 2, stride=(1, 2))
    with pytest.raises(ValueError, match="ConvTranspose1d: kernel_size must be an int or 1"):
        nn.ConvTranspose1d(4, 2, (2, 2), stride=1)
    with pytest.raises(ValueError, match="Conv3d: padding_mode must be one of"):
        nn.Conv3d(4, 2, 2, padding_mode="mirror")
    with pytest.raises(ValueError, match="ConvTranspose3d: in_channels 3 .* divisible"):
        nn.ConvTranspose3d(3, 4, 2, groups=2)
    with pytest.raises(ValueError, match="conv3d: weight of shape .* expects 2 input channels"):
        F.conv3d(x, st.randn(2, 2, 2, 2, 2))
    with pytest.raises(ValueError, match="conv3d: stride must be positive"):
        F.conv3d(x, st.randn(2, 4, 2, 2, 2), stride=0)
    with pytest.raises(ValueError, match="conv3d: weight must be 5-d"):
        F.conv3d(x, st.randn(2, 4, 2, 2))
    with pytest.raises(ValueError, match="conv3d: expected a 4-d"):
        F.conv3d(st.randn(4, 3, 3), st.randn(2, 4, 2, 2, 2))
    with pytest.raises(ValueError, match="conv3d: padding='same' is not supported for strided"):
        F.conv3d(x, st.randn(2, 4, 2, 2, 2), stride=2, padding="same")
    with pytest.raises(ValueError, match="conv3d: the kernel .* does not fit"):
        F.conv3d(x, st.randn(2, 4, 4, 2, 2))
    with pytest.raises(ValueError, match="conv3d: groups must be a positive int"):
        F.conv3d(x, st.randn(2, 4, 2, 2, 2), groups=0)
    with pytest.raises(ValueError, match="conv_transpose3d: output_padding"):
        F.conv_transpose3d(x, st.randn(4, 2, 2, 2, 2), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="conv_transpose3d: weight of shape .* expects 3"):
        F.conv_transpose3d(x, st.randn(3, 2, 2, 2, 2))
    with pytest.raises(ValueError, match="conv_transpose1d: output_padding"):
        F.conv_transpose1d(st.randn(1, 2, 4), st.randn(2, 1, 2), output_padding=1)
    with pytest.raises(TypeError, match="conv_transpose1d: stride must be an int"):
        F.conv_transpose1d(st.randn(1, 2, 4), st.randn(2, 1, 2), stride=1.5)


def test_batchnorm3d_normalises_each_channel_and_tracks_statistics():
    bn = nn.BatchNorm3d(2, momentum=0.5)
    x = np.random.default_rng(4).standard_normal((3, 2, 2, 3, 2)) * 2 + 1
    y = to_numpy(bn(st.tensor(x.astype(np.float32))))
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3, 4)), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(axis=(0, 2, 3, 4)), 1, rtol=1e-3)
    np.testing.assert_allclose(to_numpy(bn.running_mean), 0.5 * x.mean(axis=(0, 2, 3, 4)),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="BatchNorm3d: expected a 5-d input"):
        bn(st.randn(3, 2, 2, 2))


def test_adaptive_3d_pools_against_numpy():
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 4, 3))
    got = to_numpy(nn.AdaptiveAvgPool3d((2, None, 1))(_t(x)))
    want = np.stack([x[:, :, 0:3].mean(axis=(2, 4)), x[:, :, 2:5].mean(axis=(2, 4))], 2)
    np.testing.assert_allclose(got, want[..., None], rtol=1e-12)
    values, idx = nn.AdaptiveMaxPool3d(1, return_indices=True)(_t(x))
    np.testing.assert_allclose(to_numpy(values).reshape(2, 3), x.reshape(2, 3, -1).max(-1))
    assert to_numpy(idx).reshape(2, 3).tolist() == x.reshape(2, 3, -1).argmax(-1).tolist()
    with pytest.raises(ValueError, match="adaptive_avg_pool3d: output_size must be positive"):
        F.adaptive_avg_pool3d(_t(x), 0)
    with pytest.raises(ValueError, match="adaptive_max_pool3d: expected a 4D or 5D input"):
        F.adaptive_max_pool3d(_t(x[0, 0]), 1)


def test_lp_pool3d_is_the_p_norm_of_each_window():
    x = np.random.default_rng(6).uniform(0.1, 2.0, (1, 2, 4, 4, 2))
    got = to_numpy(nn.LPPool3d(3, 2)(_t(x)))
    win = x.reshape(1, 2, 2, 2, 2, 2, 1, 2).transpose(0, 1, 2, 4, 6, 3, 5, 7)
    want = (win ** 3).sum(axis=(5, 6, 7)) ** (1 / 3)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    with pytest.raises(ValueError, match="lp_pool3d: norm_type must be a non-zero number"):
        F.lp_pool3d(_t(x), 0, 2)


@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_max_unpool_inverts_max_pool_at_the_maxima(nsp):
    x = st.tensor(np.random.default_rng(7).standard_normal((2, 3) + (4,) * nsp))
    pool = {1: F.max_pool1d_with_indices, 2: F.max_pool2d_with_indices,
            3: F.max_pool3d_with_indices}[nsp]
    unpool = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}[nsp](2)
    values, idx = pool(x, 2)
    out = to_numpy(unpool(values, idx))
    assert out.shape == x.shape
    xn = to_numpy(x).reshape(2, 3, -1)
    flat = out.reshape(2, 3, -1)
    for i, j in itertools.product(range(2), range(3)):
        kept = to_numpy(idx)[i, j].ravel()
        np.testing.assert_array_equal(flat[i, j, kept], xn[i, j, kept])
        assert np.count_nonzero(flat[i, j]) == kept.size
    bigger = unpool(values, idx, output_size=(5,) * nsp)
    assert bigger.shape == (2, 3) + (5,) * nsp


def test_max_unpool_gradient_gathers_at_the_indices_and_errors():
    v = st.tensor([[[2.0, 5.0]]], requires_grad=True)
    i = st.tensor([[[1, 2]]])
    out = F.max_unpool1d(v, i, 2)
    (out * st.tensor([[[1.0, 2.0, 3.0, 4.0]]])).sum().backward()
    assert v.grad.tolist() == [[[2.0, 3.0]]]
    with pytest.raises(ValueError, match="max_unpool1d: found an index outside"):
        F.max_unpool1d(v, st.tensor([[[1, 4]]]), 2)
    with pytest.raises(ValueError, match="max_unpool1d: indices of shape"):
        F.max_unpool1d(v, st.tensor([[[1]]]), 2)
    with pytest.raises(TypeError, match="max_unpool1d: indices must be int64"):
        F.max_unpool1d(v, st.tensor([[[1.0, 2.0]]]), 2)
    with pytest.raises(ValueError, match="max_unpool1d: output_size"):
        F.max_unpool1d(v, i, 2, output_size=(9,))
    with pytest.raises(ValueError, match="MaxUnpool2d: kernel_size must be positive"):
        nn.MaxUnpool2d(0)


def test_with_indices_pools_always_return_indices():
    x = st.tensor(np.random.default_rng(8).standard_normal((1, 2, 5, 4)))
    v, i = F.adaptive_max_pool2d_with_indices(x, (2, 2))
    v2, i2 = F.adaptive_max_pool2d(x, (2, 2), return_indices=True)
    assert v.tolist() == v2.tolist() and i.tolist() == i2.tolist()
    v, i = F.adaptive_max_pool1d_with_indices(x[0], 2)
    assert v.shape == (2, 5, 2) and i.dtype == st.int64
    v, i = F.adaptive_max_pool3d_with_indices(x, 1)  # an unbatched (C=1, D, H, W) volume
    assert v.shape == (1, 1, 1, 1)
    assert v.item() == to_numpy(x).max() and i.item() == to_numpy(x).argmax()


def test_pdist_against_numpy_and_errors():
    x = np.random.default_rng(9).standard_normal((4, 3))
    rows, cols = np.triu_indices(4, 1)
    for p in (2.0, 1.0, math.inf):
        np.testing.assert_allclose(to_numpy(F.pdist(_t(x), p)),
                                   np.linalg.norm(x[rows] - x[cols], ord=p, axis=1), rtol=1e-12)
    assert F.pdist(_t(x[:1])).shape == (0,)
    t = _t(x).requires_grad_()
    F.pdist(t).sum().backward()
    assert t.grad.shape == (4, 3)
    with pytest.raises(ValueError, match="pdist: expected a 2-d"):
        F.pdist(_t(x[0]))
    with pytest.raises(ValueError, match="pdist: p must be a non-negative number"):
        F.pdist(_t(x), -1.0)


def test_upsample_aliases_warn_and_match_interpolate():
    x = st.tensor(np.random.default_rng(10).standard_normal((1, 2, 3, 4)))
    with pytest.warns(UserWarning, match="upsample is deprecated"):
        a = F.upsample(x, scale_factor=2, mode="bilinear")
    assert a.tolist() == F.interpolate(x, scale_factor=2, mode="bilinear").tolist()
    with pytest.warns(UserWarning, match="upsample_nearest is deprecated"):
        b = F.upsample_nearest(x, size=(6, 8))
    assert b.tolist() == F.interpolate(x, size=(6, 8)).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = F.upsample_bilinear(x, size=(5, 7))
    want = F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True)
    assert c.tolist() == want.tolist()


def test_relu_in_place():
    x = st.tensor([-1.0, 0.0, 3.0])
    assert F.relu_(x) is x and x.tolist() == [0.0, 0.0, 3.0]
    with pytest.raises(TypeError, match="relu_: input must be a Tensor"):
        F.relu_([1.0])


def test_lazy_modules_become_their_eager_classes():
    cases = [
        (nn.LazyConv3d(4, 2), st.randn(1, 3, 3, 3, 3), nn.Conv3d, (4, 3, 2, 2, 2)),
        (nn.LazyConvTranspose1d(2, 3, stride=2), st.randn(2, 5, 4), nn.ConvTranspose1d,
         (5, 2, 3)),
        (nn.LazyConvTranspose2d(2, 2, groups=2), st.randn(4, 3, 3), nn.ConvTranspose2d,
         (4, 1, 2, 2)),
        (nn.LazyConvTranspose3d(3, 2), st.randn(1, 2, 2, 2, 2), nn.ConvTranspose3d,
         (2, 3, 2, 2, 2)),
    ]
    for lazy, x, eager, shape in cases:
        assert lazy.has_uninitialized_params()
        out = lazy(x)
        assert type(lazy) is eager and lazy.weight.shape == shape
        assert out.shape == eager.forward(lazy, x).shape
    bn = nn.LazyBatchNorm3d()
    bn(st.randn(2, 3, 2, 2, 2))
    assert type(bn) is nn.BatchNorm3d and bn.running_var.shape == (3,)
    for cls, eager, x in ((nn.LazyInstanceNorm1d, nn.InstanceNorm1d, st.randn(4, 6)),
                          (nn.LazyInstanceNorm2d, nn.InstanceNorm2d, st.randn(2, 4, 3, 3)),
                          (nn.LazyInstanceNorm3d, nn.InstanceNorm3d, st.randn(4, 2, 2, 2))):
        m = cls(affine=True)
        m(x)
        assert type(m) is eager and m.num_features == 4 and m.weight.shape == (4,)
    with pytest.raises(ValueError, match="LazyInstanceNorm2d: expected a 3-d"):
        nn.LazyInstanceNorm2d()(st.randn(3, 3))
    with pytest.raises(ValueError, match="LazyConvTranspose1d: out_channels"):
        nn.LazyConvTranspose1d(-1, 2)


def _fractional_loop(x, k, outs, u):
    """Windows from the starts formula, written out; u is (N, C, nsp) in PyTorch's order."""
    nsp = x.ndim - 2
    out = np.zeros(x.shape[:2] + tuple(outs))
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        starts = []
        for a in range(nsp):
            s = u[b, c, (1 - a) if nsp == 2 else a]
            n, o = x.shape[2 + a], outs[a]
            alpha = (n - k) / (o - 1)
            starts.append([int((i + s) * alpha) - int(s * alpha) for i in range(o - 1)]
                          + [n - k])
        for pos in itertools.product(*[range(v) for v in outs]):
            sl = tuple(slice(starts[a][pos[a]], starts[a][pos[a]] + k) for a in range(nsp))
            out[(b, c) + pos] = x[(b, c) + sl].max()
    return out


@pytest.mark.parametrize("nsp, outs", [(2, (3, 4)), (3, (2, 3, 3))])
def test_fractional_max_pool_matches_its_windows_and_indices(nsp, outs):
    r = np.random.default_rng(11)
    x = r.standard_normal((2, 2) + (7, 8, 6)[:nsp])
    u = r.uniform(0, 1, (2, 2, nsp))
    fn = F.fractional_max_pool2d if nsp == 2 else F.fractional_max_pool3d
    v, i = fn(_t(x), 2, outs, return_indices=True, _random_samples=_t(u))
    np.testing.assert_array_equal(to_numpy(v), _fractional_loop(x, 2, outs, u))
    flat = x.reshape(2, 2, -1)
    got = np.take_along_axis(flat, to_numpy(i).reshape(2, 2, -1), 2).reshape(v.shape)
    np.testing.assert_array_equal(got, to_numpy(v))
    t = _t(x).requires_grad_()
    fn(t, 2, outs, _random_samples=_t(u)).sum().backward()
    assert float(t.grad.sum().item()) == v.numel()


def test_fractional_max_pool_modules_draw_from_the_seeded_generator_and_errors():
    x = st.randn(1, 2, 9, 9)
    st.manual_seed(5)
    a = nn.FractionalMaxPool2d(2, output_ratio=0.5)(x)
    st.manual_seed(5)
    b = nn.FractionalMaxPool2d(2, output_ratio=0.5)(x)
    assert a.shape == (1, 2, 4, 4) and a.tolist() == b.tolist()
    v, i = nn.FractionalMaxPool3d(2, output_size=2, return_indices=True)(st.randn(2, 4, 4, 4))
    assert v.shape == (2, 2, 2, 2) and i.shape == (2, 2, 2, 2)
    with pytest.raises(ValueError, match="FractionalMaxPool2d: give exactly one of"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="FractionalMaxPool2d: output_ratio must be in"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="fractional_max_pool2d: output size .* does not fit"):
        F.fractional_max_pool2d(x, 3, output_size=8)
    with pytest.raises(ValueError, match="fractional_max_pool2d: _random_samples must have"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=st.rand(1, 2, 3))
