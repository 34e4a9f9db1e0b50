"""Activation and dropout modules and their nn.functional forms: values against numpy, a
backward through each module, in-place variants, and the error paths. (The registry tests
gradcheck the ops of ops/activation.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy

RNG = np.random.default_rng(7)
SELU_A, SELU_S = 1.6732632423543772, 1.0507009873554805


def t64(a, requires_grad=False):
    return st.tensor(np.asarray(a, np.float64), dtype=st.float64, requires_grad=requires_grad)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# module, numpy forward, numpy derivative
CASES = [
    (lambda: nn.Hardtanh(-0.5, 1.5), lambda x: np.clip(x, -0.5, 1.5),
     lambda x: ((x > -0.5) & (x < 1.5)).astype(float)),
    (nn.ReLU6, lambda x: np.clip(x, 0, 6), lambda x: ((x > 0) & (x < 6)).astype(float)),
    (nn.SELU, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
     lambda x: SELU_S * np.where(x > 0, 1.0, SELU_A * np.exp(x))),
    (lambda: nn.CELU(2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2.0)),
     lambda x: np.where(x > 0, 1.0, np.exp(x / 2.0))),
    (nn.Softsign, lambda x: x / (1 + np.abs(x)), lambda x: 1.0 / (1 + np.abs(x)) ** 2),
    (nn.Hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1),
     lambda x: np.where(np.abs(x) < 3, 1 / 6, 0.0)),
    (nn.Hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6,
     lambda x: np.where(x < -3, 0.0, np.where(x > 3, 1.0, (2 * x + 3) / 6))),
    (nn.Mish, lambda x: x * np.tanh(_softplus(x)),
     lambda x: np.tanh(_softplus(x)) + x * _sig(x) * (1 - np.tanh(_softplus(x)) ** 2)),
    (lambda: nn.Softplus(2.0, 3.0),
     lambda x: np.where(2 * x > 3, x, _softplus(2 * x) / 2),
     lambda x: np.where(2 * x > 3, 1.0, _sig(2 * x))),
    (nn.LogSigmoid, lambda x: -_softplus(-x), lambda x: 1 - _sig(x)),
    (lambda: nn.Threshold(0.3, -2.0), lambda x: np.where(x > 0.3, x, -2.0),
     lambda x: (x > 0.3).astype(float)),
    (nn.Tanhshrink, lambda x: x - np.tanh(x), lambda x: np.tanh(x) ** 2),
    (lambda: nn.Softshrink(0.7),
     lambda x: np.where(x > 0.7, x - 0.7, np.where(x < -0.7, x + 0.7, 0.0)),
     lambda x: (np.abs(x) > 0.7).astype(float)),
    (lambda: nn.Hardshrink(0.7), lambda x: np.where(np.abs(x) > 0.7, x, 0.0),
     lambda x: (np.abs(x) > 0.7).astype(float)),
    (lambda: nn.RReLU(0.1, 0.3).eval(), lambda x: np.where(x >= 0, x, 0.2 * x),
     lambda x: np.where(x >= 0, 1.0, 0.2)),
]


@pytest.mark.parametrize("make, fwd, deriv", CASES, ids=[str(i) for i in range(len(CASES))])
def test_module_forward_and_backward_against_numpy(make, fwd, deriv):
    x = RNG.uniform(-7.0, 7.0, (4, 5))
    xt = t64(x, requires_grad=True)
    y = make()(xt)
    np.testing.assert_allclose(to_numpy(y), fwd(x), rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(x.shape)
    (y * t64(g)).sum().backward()
    np.testing.assert_allclose(to_numpy(xt.grad), g * deriv(x), rtol=1e-10, atol=1e-12)


INPLACE = [
    (lambda: nn.LeakyReLU(0.1, inplace=True), lambda: nn.LeakyReLU(0.1)),
    (lambda: nn.ELU(0.7, inplace=True), lambda: nn.ELU(0.7)),
    (lambda: nn.Hardtanh(inplace=True), nn.Hardtanh),
    (lambda: nn.ReLU6(inplace=True), nn.ReLU6),
    (lambda: nn.SELU(inplace=True), nn.SELU),
    (lambda: nn.CELU(inplace=True), nn.CELU),
    (lambda: nn.Hardsigmoid(inplace=True), nn.Hardsigmoid),
    (lambda: nn.Hardswish(inplace=True), nn.Hardswish),
    (lambda: nn.Mish(inplace=True), nn.Mish),
    (lambda: nn.SiLU(inplace=True), nn.SiLU),
    (lambda: nn.Threshold(0.1, 5.0, inplace=True), lambda: nn.Threshold(0.1, 5.0)),
    (lambda: nn.RReLU(inplace=True).eval(), lambda: nn.RReLU().eval()),
]


@pytest.mark.parametrize("inplace, plain", INPLACE, ids=[str(i) for i in range(len(INPLACE))])
def test_inplace_module_overwrites_its_input_and_keeps_the_gradient(inplace, plain):
    # the input of an in-place activation is a non-leaf: its backward must not read the
    # overwritten values (LeakyReLU and ELU used to raise here)
    x = RNG.uniform(-4.0, 4.0, (3, 4))
    a, b = t64(x, requires_grad=True), t64(x, requires_grad=True)
    h = a * 1.0
    ya = inplace()(h)
    assert ya is h
    yb = plain()(b * 1.0)
    np.testing.assert_allclose(to_numpy(ya), to_numpy(yb), rtol=1e-12)
    g = RNG.standard_normal(x.shape)
    (ya * t64(g)).sum().backward()
    (yb * t64(g)).sum().backward()
    np.testing.assert_allclose(to_numpy(a.grad), to_numpy(b.grad), rtol=1e-12, atol=1e-14)


def test_inplace_leaky_relu_and_elu_gradient_values():
    x = t64([-2.0, -0.5, 1.5], requires_grad=True)
    F.leaky_relu(x * 1.0, 0.2, inplace=True).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [0.2, 0.2, 1.0])
    x.grad = None
    F.elu(x * 1.0, 0.5, inplace=True).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [0.5 * math.exp(-2.0), 0.5 * math.exp(-0.5),
                                                  1.0], rtol=1e-12)


@pytest.mark.parametrize("fn", [F.dropout, F.dropout1d, F.alpha_dropout])
def test_inplace_dropout_of_a_non_leaf_keeps_the_gradient(fn):
    x = t64(RNG.uniform(1.0, 2.0, (4, 6, 5)), requires_grad=True)
    h = x * 1.0
    y = fn(h, 0.5, training=True, inplace=True)
    assert y is h
    y.sum().backward()
    if fn is F.alpha_dropout:  # the kept elements have slope a, the dropped ones 0
        a = (0.5 * (1 + 0.5 * (SELU_A * SELU_S) ** 2)) ** -0.5
        assert set(np.round(to_numpy(x.grad), 12).ravel().tolist()) == {0.0, round(a, 12)}
    else:
        np.testing.assert_allclose(to_numpy(x.grad), to_numpy(y) / to_numpy(x), rtol=1e-12)


def test_negative_slope_leaky_relu_still_uses_the_input():
    x = t64([-2.0, 3.0], requires_grad=True)
    F.leaky_relu(x, -0.5).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [-0.5, 1.0])
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        F.leaky_relu(x * 1.0, -0.5, inplace=True).sum().backward()


@pytest.mark.parametrize("fn, points, grads", [
    (F.relu6, [0.0, 6.0, 3.0], [0.0, 0.0, 1.0]),
    (F.hardtanh, [-1.0, 1.0, 0.0], [0.0, 0.0, 1.0]),
    (F.hardsigmoid, [-3.0, 3.0, 0.0], [0.0, 0.0, 1.0 / 6.0]),
    (F.hardswish, [-3.0, 3.0, -4.0, 4.0], [-0.5, 1.5, 0.0, 1.0]),
    (F.softshrink, [0.5, -0.5, 0.6], [0.0, 0.0, 1.0]),
    (F.hardshrink, [0.5, -0.5, -0.6], [0.0, 0.0, 1.0]),
    (lambda v: F.threshold(v, 1.0, 0.0), [1.0, 1.5], [0.0, 1.0]),
    (lambda v: F.prelu(v, t64([0.25])), [0.0, -1.0], [0.25, 0.25]),
    (lambda v: F.rrelu(v, 0.2, 0.2, training=True), [0.0, 1.0], [0.2, 1.0]),
])
def test_gradient_at_the_kinks_follows_pytorch(fn, points, grads):
    x = t64(points, requires_grad=True)
    fn(x).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), grads, rtol=1e-12, atol=1e-15)


def test_glu_values_gradient_and_module():
    x = RNG.standard_normal((2, 6, 3))
    xt = t64(x, requires_grad=True)
    y = nn.GLU(dim=1)(xt)
    a, b = x[:, :3], x[:, 3:]
    np.testing.assert_allclose(to_numpy(y), a * _sig(b), rtol=1e-12)
    y.sum().backward()
    want = np.concatenate([_sig(b), a * _sig(b) * (1 - _sig(b))], axis=1)
    np.testing.assert_allclose(to_numpy(xt.grad), want, rtol=1e-10)
    assert nn.GLU()(t64(np.ones((2, 4)))).shape == (2, 2)


def test_prelu_module_learns_per_channel_slopes():
    m = nn.PReLU(3, init=0.1, dtype=st.float64)
    assert m.weight.shape == (3,) and to_numpy(m.weight).tolist() == [0.1] * 3
    x = RNG.standard_normal((2, 3, 4))
    xt = t64(x, requires_grad=True)
    y = m(xt)
    w = np.full((1, 3, 1), 0.1)
    np.testing.assert_allclose(to_numpy(y), np.where(x >= 0, x, w * x), rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(m.weight.grad), np.where(x < 0, x, 0).sum((0, 2)),
                               rtol=1e-10)
    np.testing.assert_allclose(to_numpy(xt.grad), np.where(x >= 0, 1.0, w + 0 * x), rtol=1e-12)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    one = nn.PReLU()
    assert one(st.tensor([[-4.0, 2.0]])).tolist() == [[-1.0, 2.0]]


def test_rrelu_training_draws_slopes_in_range_and_eval_uses_the_mean():
    m = nn.RReLU(0.2, 0.4)
    x = -st.ones(2000)
    slopes = to_numpy(m(x)) / -1.0
    assert slopes.min() >= 0.2 and slopes.max() <= 0.4 and slopes.std() > 0.03
    assert abs(slopes.mean() - 0.3) < 0.01
    pos = st.ones(5)
    assert m(pos).tolist() == [1.0] * 5
    m.eval()
    np.testing.assert_allclose(to_numpy(m(x)), -0.3 * np.ones(2000), rtol=1e-6)
    xt = t64(-np.ones(50), requires_grad=True)
    y = F.rrelu(xt, 0.2, 0.4, training=True)
    y.sum().backward()  # d/dx of slope * x is the drawn slope
    np.testing.assert_allclose(to_numpy(xt.grad), to_numpy(y) / -1.0, rtol=1e-12)


def test_softmin_and_softmax2d():
    x = RNG.standard_normal((2, 3, 4, 5))
    e = np.exp(-x)
    np.testing.assert_allclose(to_numpy(nn.Softmin(dim=1)(t64(x))), e / e.sum(1, keepdims=True),
                               rtol=1e-12)
    e = np.exp(x)
    np.testing.assert_allclose(to_numpy(nn.Softmax2d()(t64(x))), e / e.sum(1, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(to_numpy(nn.Softmax2d()(t64(x[0]))),
                               e[0] / e[0].sum(0, keepdims=True), rtol=1e-12)
    with pytest.warns(UserWarning, match="softmin: implicit dimension"):
        F.softmin(t64(x[0, 0]))


def test_reprs():
    assert repr(nn.Hardtanh(inplace=True)) == "Hardtanh(min_val=-1.0, max_val=1.0, inplace=True)"
    assert repr(nn.PReLU(4)) == "PReLU(num_parameters=4)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.hardtanh(st.ones(2), 1.0, -1.0), ValueError, "hardtanh: max_val"),
    (lambda: nn.Hardtanh(1.0, -1.0), ValueError, "Hardtanh: max_val"),
    (lambda: F.celu(st.ones(2), 0.0), ValueError, "celu: alpha must not be 0"),
    (lambda: F.softshrink(st.ones(2), -1.0), ValueError, "softshrink: lambd must be greater"),
    (lambda: nn.Hardshrink(-0.1), ValueError, "Hardshrink: lambd must be greater"),
    (lambda: nn.Softshrink(-0.1), ValueError, "Softshrink: lambd must be greater"),
    (lambda: F.glu(st.ones(2, 3)), ValueError, "glu: halving dimension must be even"),
    (lambda: F.glu(st.ones(2, 4), dim=2), IndexError, "glu: dim 2 is out of range"),
    (lambda: F.glu(st.tensor(1.0)), ValueError, "glu: does not support scalars"),
    (lambda: F.prelu(st.ones(2, 3), st.ones(2)), ValueError, "prelu: weight has 2 elements"),
    (lambda: F.prelu(st.ones(2, 3), st.ones(1, 3)), ValueError, "prelu: weight must be 1-D"),
    (lambda: F.prelu(st.ones(3), st.ones(3)), ValueError, "prelu: weight has 3 elements but "
                                                          "the input has 1 channels"),
    (lambda: nn.PReLU(0), ValueError, "PReLU: num_parameters must be a positive int"),
    (lambda: F.rrelu(st.ones(2), 0.5, 0.1), ValueError, "rrelu: lower"),
    (lambda: nn.RReLU(0.5, 0.1), ValueError, "RReLU: lower"),
    (lambda: F.relu6([1.0]), TypeError, "relu6: input must be a Tensor"),
    (lambda: F.mish(st.ones(2, dtype=st.int64)), TypeError, "mish: expected a floating point"),
    (lambda: F.threshold(st.ones(2), "a", 1.0), TypeError, "threshold: threshold must be a"),
    (lambda: nn.Softmax2d()(st.ones(2, 2)), ValueError, "Softmax2d: expected a 3D or 4D"),
    (lambda: F.softmin(3.0, 0), TypeError, "softmin: input must be a Tensor"),
])
def test_activation_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---- channel-wise and alpha dropout ------------------------------------------------------------


@pytest.mark.parametrize("fn, shape, chan", [
    (F.dropout1d, (4, 50, 6), (4, 50, 1)),
    (F.dropout1d, (50, 6), (50, 1)),
    (F.dropout2d, (4, 50, 3, 3), (4, 50, 1, 1)),
    (F.dropout3d, (4, 50, 2, 2, 2), (4, 50, 1, 1, 1)),
    (F.dropout3d, (50, 2, 2, 2), (50, 1, 1, 1)),
])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(fn, shape, chan):
    x = t64(RNG.uniform(1.0, 2.0, shape), requires_grad=True)
    y = fn(x, 0.4)
    ratio = to_numpy(y) / to_numpy(x)
    per_channel = ratio.reshape(chan[:-1] + (-1,)) if len(chan) > 1 else ratio
    # one value per channel: 0 or 1 / (1 - p)
    assert np.allclose(per_channel.max(-1), per_channel.min(-1))
    vals = np.unique(np.round(per_channel[..., 0], 12))
    assert set(vals.tolist()) <= {0.0, round(1 / 0.6, 12)} and len(vals) == 2
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.6
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), ratio, rtol=1e-12)
    assert fn(x, 0.4, training=False) is x


def test_channel_dropout_uses_the_generator():
    g1, g2 = st.Generator().manual_seed(3), st.Generator().manual_seed(3)
    x = st.ones(2, 20, 4)
    assert F.dropout1d(x, 0.5, generator=g1).tolist() == F.dropout1d(x, 0.5,
                                                                     generator=g2).tolist()


def test_dropout2d_on_3d_input_warns_and_drops_over_n_c():
    with pytest.warns(UserWarning, match="dropout2d: received a 3D input"):
        y = F.dropout2d(st.ones(3, 40, 5), 0.5)
    v = to_numpy(y)
    assert np.allclose(v.max(-1), v.min(-1))


def test_alpha_dropout_keeps_mean_and_variance_and_its_affine_form():
    p = 0.3
    x = st.randn(200000, dtype=st.float64)
    y = F.alpha_dropout(x, p, training=True)
    assert abs(y.mean().item()) < 0.02 and abs(y.std().item() - 1.0) < 0.02
    xv, yv = to_numpy(x), to_numpy(y)
    ap = -SELU_A * SELU_S
    a = ((1 - p) * (1 + p * ap * ap)) ** -0.5
    b = -a * ap * p
    kept = np.isclose(yv, a * xv + b, rtol=1e-12)
    dropped = np.isclose(yv, a * ap + b, rtol=1e-12)
    assert np.all(kept | dropped) and abs(dropped.mean() - p) < 0.01
    assert F.alpha_dropout(x, p) is x  # training defaults to False
    np.testing.assert_array_equal(to_numpy(F.alpha_dropout(x[:5], 1.0, True)), np.zeros(5))


def test_feature_alpha_dropout_drops_channels_and_modules_follow_train_mode():
    x = t64(RNG.standard_normal((3, 30, 4)))
    y = to_numpy(F.feature_alpha_dropout(x, 0.5, training=True))
    ap = -SELU_A * SELU_S
    a = (0.5 * (1 + 0.5 * ap * ap)) ** -0.5
    dropped = np.isclose(y, a * ap - a * ap * 0.5)
    assert np.all(dropped.all(-1) | ~dropped.any(-1)) and dropped.any()
    for m in (nn.Dropout1d(0.5), nn.Dropout2d(0.5), nn.Dropout3d(0.5), nn.AlphaDropout(0.5),
              nn.FeatureAlphaDropout(0.5)):
        inp = st.ones(2, 8, 2, 2, 2) if isinstance(m, nn.Dropout3d) else st.ones(2, 8, 3, 3)
        if isinstance(m, nn.Dropout1d):
            inp = st.ones(2, 8, 3)
        assert m.eval()(inp) is inp
        assert (to_numpy(m.train()(inp)) != 1.0).any()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.dropout1d(st.ones(2, 3, 4, 5)), ValueError, "dropout1d: expected 2D or 3D"),
    (lambda: F.dropout3d(st.ones(2, 3, 4)), ValueError, "dropout3d: expected 4D or 5D"),
    (lambda: F.dropout2d(st.ones(3)), ValueError, "dropout2d: expected a 4D"),
    (lambda: F.dropout2d(st.ones(1, 2, 3, 3), -0.1), ValueError, "dropout2d: dropout prob"),
    (lambda: F.alpha_dropout(st.ones(3), 1.5, True), ValueError, "alpha_dropout: dropout prob"),
    (lambda: nn.AlphaDropout(2.0), ValueError, "AlphaDropout: dropout probability"),
    (lambda: nn.Dropout2d(-1), ValueError, "Dropout2d: dropout probability"),
    (lambda: F.feature_alpha_dropout(st.ones(3), 0.5, True), ValueError,
     "feature_alpha_dropout: expected an input with a channel"),
    (lambda: F.alpha_dropout(st.ones(3, dtype=st.int64), 0.5, True), TypeError,
     "alpha_dropout: expected a floating point"),
    (lambda: F.dropout1d("x"), TypeError, "dropout1d: input must be a Tensor"),
])
def test_dropout_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("inplace, plain, args", [
    (F.celu_, F.celu, (0.5,)), (F.elu_, F.elu, (0.3,)), (F.hardtanh_, F.hardtanh, (-0.5, 0.5)),
    (F.leaky_relu_, F.leaky_relu, (0.2,)), (F.rrelu_, F.rrelu, ()), (F.selu_, F.selu, ()),
    (F.threshold_, F.threshold, (0.1, -3.0)),
])
def test_underscore_functions_write_into_their_input(inplace, plain, args):
    x = RNG.standard_normal(7)
    want = to_numpy(plain(t64(x), *args))
    xt = t64(x)
    assert inplace(xt, *args) is xt
    np.testing.assert_allclose(to_numpy(xt), want, rtol=1e-12)


def test_elu_keeps_tiny_negative_inputs():
    """elu(x) = alpha * expm1(x) below 0: for tiny x it is alpha * x, not the 0 that
    exp(x) - 1 rounds to."""
    for dtype, tiny in ((st.float32, 1e-30), (st.float64, 1e-300)):
        x = st.tensor([-tiny, -1e-8], dtype=dtype)
        y = F.elu(x, alpha=2.0).tolist()
        assert abs(y[0] + 2 * tiny) <= 1e-6 * 2 * tiny, (dtype, y)
        assert abs(y[1] + 2e-8) <= 1e-6 * 2e-8, (dtype, y)
