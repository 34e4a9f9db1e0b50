"""The fused batch-norm and softmax-cross-entropy kernels: gradients (first order through the
kernels, second order through the compositions), precision, and agreement with the composed
formulas they replace."""

import numpy as np

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor.autograd import gradcheck, gradgradcheck
from singa_tensor.ops.norm import _batch_norm_backward_composed

from .helpers import as_tensor, assert_close, to_numpy

RNG = np.random.default_rng(11)


def test_batch_norm_kernel_backward_matches_the_composition():
    x = as_tensor(RNG.standard_normal((4, 3, 5)), requires_grad=True)
    w = as_tensor(RNG.standard_normal(3), requires_grad=True)
    b = as_tensor(RNG.standard_normal(3), requires_grad=True)
    g = RNG.standard_normal((4, 3, 5))
    st.batch_norm(x, None, None, w, b, training=True).backward(as_tensor(g))
    want = _batch_norm_backward_composed(x.detach(), w.detach(), as_tensor(g), 1e-5)
    assert_close(x.grad, to_numpy(want[0]), rtol=1e-10, atol=1e-12)
    assert_close(w.grad, to_numpy(want[1]), rtol=1e-10, atol=1e-12)
    assert_close(b.grad, to_numpy(want[2]), rtol=1e-10, atol=1e-12)
    # against the textbook formula in numpy
    xn = to_numpy(x)
    mu, var = xn.mean(axis=(0, 2), keepdims=True), xn.var(axis=(0, 2), keepdims=True)
    xhat = (xn - mu) / np.sqrt(var + 1e-5)
    assert_close(w.grad, (g * xhat).sum(axis=(0, 2)), rtol=1e-10)


def test_batch_norm_gradients_without_affine_and_on_2d_input():
    x = as_tensor(RNG.standard_normal((6, 4)), requires_grad=True)
    assert gradcheck(lambda a: st.batch_norm(a, None, None, training=True), (x,))
    assert gradgradcheck(lambda a: st.batch_norm(a, None, None, training=True), (x,))
    x4 = as_tensor(RNG.standard_normal((2, 3, 2, 2)), requires_grad=True)
    w = as_tensor(RNG.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda a, c: st.batch_norm(a, None, None, c, None, training=True), (x4, w))


def test_batch_norm_float32_statistics_keep_precision_under_a_large_offset():
    x = (1000.0 + 0.1 * RNG.standard_normal((64, 2, 32, 32))).astype(np.float32)
    rm, rv = st.zeros(2), st.ones(2)
    y = st.batch_norm(st.tensor(x), rm, rv, training=True, momentum=1.0)
    x64 = x.astype(np.float64)
    want_var = x64.var(axis=(0, 2, 3))
    n = x.size // 2
    assert_close(rv, want_var * n / (n - 1), rtol=1e-3)
    assert_close(rm, x64.mean(axis=(0, 2, 3)), rtol=1e-6)
    want_std = np.sqrt(want_var / (want_var + 1e-5))
    assert_close(to_numpy(y).std(axis=(0, 2, 3)), want_std, rtol=1e-3)


def test_cross_entropy_spatial_targets_gradients():
    x = as_tensor(RNG.standard_normal((2, 3, 2, 2)), requires_grad=True)
    t = as_tensor(np.array([[[0, 2], [1, -100]], [[2, 2], [0, 1]]]))
    for red in ("none", "mean", "sum"):
        def fn(a, red=red):
            return F.cross_entropy(a, t, reduction=red)
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_cross_entropy_fused_matches_log_softmax_composition_in_float32():
    x = RNG.standard_normal((64, 10)).astype(np.float32) * 5
    t = RNG.integers(0, 10, 64)
    xt = st.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xt, st.tensor(t), label_smoothing=0.05)
    loss.backward()
    x64 = x.astype(np.float64)
    logp = x64 - x64.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    want = (-(0.95) * logp[np.arange(64), t] - 0.05 / 10 * logp.sum(1)).mean()
    assert_close(loss, want, rtol=1e-5)
    p = np.exp(logp)
    onehot = np.eye(10)[t]
    assert_close(xt.grad, (p - 0.95 * onehot - 0.005) / 64, rtol=1e-4, atol=1e-7)


def test_cross_entropy_extreme_logits_stay_finite():
    x = st.tensor([[1e4, -1e4, 0.0], [-np.inf, 0.0, 1.0]], requires_grad=True)
    loss = F.cross_entropy(x, st.tensor([1, 2]), reduction="none")
    got = to_numpy(loss)
    assert_close(got[0], 2e4, rtol=1e-6)
    assert np.isfinite(got[1])
    loss.sum().backward()
    assert np.isfinite(to_numpy(x.grad)).all()
