"""The fused batch-norm, layer-norm, group-norm, GELU/SiLU-backward and softmax-cross-entropy
kernels: gradients (first order through the kernels, second order through the compositions),
precision, and agreement with the composed formulas they replace."""

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor.autograd import gradcheck, gradgradcheck
from singa_tensor.ops import elementwise as _elt
from singa_tensor.ops.norm import (
    _batch_norm_backward_composed,
    _group_norm_composed,
    _layer_norm_composed,
)

from .helpers import DEVICE, as_tensor, assert_close, to_numpy

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


# ---- layer norm, group norm, GELU and SiLU: one kernel forward, one backward ---------------------
# Tolerances: each fused result is compared with the composition it replaces, run on the same
# device, with an absolute bound of K ulps of the dtype times the largest magnitude of the
# expected values (K = 64 for float32, 16 for float64): the kernels sum in double and in a
# different order than the composed reductions, so they agree to rounding, not bit for bit.

ULPS = {np.float32: 64, np.float64: 16}


def _close_ulps(got, want, dtype, msg="", scale=1.0):
    want = np.asarray(want, dtype=np.float64)
    scale = max(scale, float(np.abs(want).max())) if want.size else scale
    tol = ULPS[dtype] * np.finfo(dtype).eps * scale
    assert_close(got, want.astype(dtype), rtol=0, atol=tol, msg=msg)


def _grads(run, tensors, g):
    """run()'s output and the gradients of <run(), g> for each tensor that requires grad."""
    for t in tensors:
        if t is not None:
            t.grad = None
    y = run()
    y.backward(g)
    return y, [None if t is None else t.grad for t in tensors]


# (input shape, normalized_shape, weight, bias)
LN_CASES = [
    ((1, 8), (8,), True, True),          # one row
    ((37, 16), 16, True, True),          # many rows, int normalized_shape
    ((4, 3, 5), (3, 5), True, False),    # two normalized dims, weight only
    ((5, 1), (1,), True, True),          # normalized_shape of 1: xhat is 0
    ((2, 3, 4, 5), (3, 4, 5), False, True),  # three dims, bias only
    ((6, 7), (7,), False, False),        # no affine
    ((9,), (9,), True, True),            # the whole input is one row
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,norm,affine_w,affine_b", LN_CASES)
def test_layer_norm_fused_equals_the_composition(dtype, shape, norm, affine_w, affine_b):
    r = np.random.default_rng(len(shape) * 100 + shape[-1])
    nshape = (norm,) if isinstance(norm, int) else norm
    x = as_tensor((r.standard_normal(shape) * 3 + 1).astype(dtype), requires_grad=True)
    w = as_tensor(r.standard_normal(nshape).astype(dtype), requires_grad=True) if affine_w \
        else None
    b = as_tensor(r.standard_normal(nshape).astype(dtype), requires_grad=True) if affine_b \
        else None
    g = as_tensor(r.standard_normal(shape).astype(dtype))
    y, got = _grads(lambda: F.layer_norm(x, norm, w, b, 1e-5), (x, w, b), g)
    assert y.grad_fn.name == "_layer_norm"  # one fused node, not the composition's ops
    want_y, want = _grads(lambda: _layer_norm_composed(x, len(nshape), w, b, 1e-5), (x, w, b), g)
    _close_ulps(y, to_numpy(want_y), dtype, "y")
    # dx is rstd times a difference of terms of size |dy * weight|: its rounding scales so
    x64 = to_numpy(x).astype(np.float64)
    axes = tuple(range(x64.ndim - len(nshape), x64.ndim))
    rstd = 1 / np.sqrt(x64.var(axis=axes) + 1e-5)
    dx_scale = rstd.max() * np.abs(to_numpy(g)).max() * (
        np.abs(to_numpy(w)).max() if w is not None else 1.0)
    for name, a, e, sc in zip(("dx", "dweight", "dbias"), got, want, (dx_scale, 1.0, 1.0)):
        if e is None:
            assert a is None
        else:
            _close_ulps(a, to_numpy(e), dtype, name, scale=sc)
    # and the textbook formula in float64 numpy, to float32's precision
    xhat = (x64 - x64.mean(axis=axes, keepdims=True)) / np.sqrt(
        x64.var(axis=axes, keepdims=True) + 1e-5)
    ref = xhat * (to_numpy(w) if w is not None else 1) + (to_numpy(b) if b is not None else 0)
    assert_close(y, ref, rtol=1e-4, atol=1e-4 if dtype == np.float32 else 1e-12)


def test_layer_norm_module_runs_the_fused_kernel_and_takes_non_contiguous_input():
    ln = st.nn.LayerNorm(6)
    ln.to(DEVICE)
    base = RNG.standard_normal((6, 4, 3)).astype(np.float32)
    xt = as_tensor(base, requires_grad=True)
    x = xt.permute(2, 1, 0)  # (3, 4, 6), not contiguous
    assert not x.is_contiguous()
    y = ln(x)
    assert y.grad_fn.name == "_layer_norm"
    xc = as_tensor(np.ascontiguousarray(base.transpose(2, 1, 0)), requires_grad=True)
    want = ln(xc)
    assert_close(y, to_numpy(want), rtol=0, atol=0)  # the same kernel on the same values
    g = RNG.standard_normal((3, 4, 6)).astype(np.float32)
    y.backward(as_tensor(g))
    want.backward(as_tensor(g))
    assert_close(xt.grad, to_numpy(xc.grad).transpose(2, 1, 0), rtol=0, atol=0)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_gradcheck_and_double_backward(affine):
    x = as_tensor(RNG.standard_normal((3, 2, 4)), requires_grad=True)
    w = as_tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    b = as_tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    if affine:
        def fn(a, c, d):
            return st.layer_norm(a, (2, 4), c, d)
        args = (x, w, b)
    else:
        def fn(a):
            return st.layer_norm(a, 4)
        args = (x,)
    assert gradcheck(fn, args)
    assert gradgradcheck(fn, args)


def test_layer_norm_second_derivatives_equal_the_composition():
    x = as_tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    w = as_tensor(RNG.standard_normal(5), requires_grad=True)
    g = as_tensor(RNG.standard_normal((4, 5)))

    def second(run):
        y = run()
        gx, gw = st.autograd.grad(y, (x, w), g, create_graph=True)
        return st.autograd.grad((gx * gx).sum() + (gw * gw).sum(), (x, w))

    got = second(lambda: st.layer_norm(x, 5, w))
    want = second(lambda: _layer_norm_composed(x, 1, w, None, 1e-5))
    for a, e in zip(got, want):
        _close_ulps(a, to_numpy(e), np.float64)


def test_layer_norm_affine_gradients_have_the_same_bits_for_any_thread_count():
    x = as_tensor(RNG.standard_normal((2048, 32)).astype(np.float32), requires_grad=True)
    w = as_tensor(RNG.standard_normal(32).astype(np.float32), requires_grad=True)
    b = as_tensor(RNG.standard_normal(32).astype(np.float32), requires_grad=True)
    g = as_tensor(RNG.standard_normal((2048, 32)).astype(np.float32))
    before = st.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            st.set_num_threads(n)
            _, grads = _grads(lambda: st.layer_norm(x, 32, w, b), (x, w, b), g)
            results.append([to_numpy(t) for t in grads])
    finally:
        st.set_num_threads(before)
    for other in results[1:]:
        for a, e in zip(other, results[0]):
            assert np.array_equal(a, e)


def test_layer_norm_empty_rows_and_non_contiguous_weight():
    x = as_tensor(np.zeros((0, 4), np.float32), requires_grad=True)
    w = as_tensor(np.ones((4, 2), np.float32), requires_grad=True)
    b = as_tensor(np.ones(4, np.float32), requires_grad=True)
    wt = w[:, 0]  # a strided view
    assert not wt.is_contiguous()
    y = st.layer_norm(x, 4, wt, b)
    assert y.shape == (0, 4)
    y.sum().backward()
    assert_close(w.grad, np.zeros((4, 2)), rtol=0, atol=0)
    assert_close(b.grad, np.zeros(4), rtol=0, atol=0)
    x = as_tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    want = _layer_norm_composed(x, 1, wt, b, 1e-5)
    _close_ulps(st.layer_norm(x, 4, wt, b), to_numpy(want), np.float32)


def test_layer_norm_half_precision_computes_in_float32():
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    xt = as_tensor(x).to(st.bfloat16).requires_grad_()
    y = st.layer_norm(xt, 16)
    assert y.dtype is st.bfloat16
    want = st.layer_norm(as_tensor(x).to(st.bfloat16).float(), 16)
    assert_close(y.float(), to_numpy(want.to(st.bfloat16).float()), rtol=0, atol=0)
    y.float().sum().backward()
    assert xt.grad.dtype is st.bfloat16


def test_layer_norm_mixed_dtypes_promote_as_the_composition_does():
    x = as_tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    w = as_tensor(RNG.standard_normal(4))
    y = st.layer_norm(x, 4, w)
    assert y.dtype is st.float64
    x64 = to_numpy(x).astype(np.float64)
    xhat = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    assert_close(y, xhat * to_numpy(w), rtol=1e-6, atol=1e-6)  # statistics in float32


def test_layer_norm_bad_input_names_layer_norm():
    x = as_tensor(RNG.standard_normal((2, 3)).astype(np.float32))
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(4,\) must match"):
        st.layer_norm(x, 4)
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(2, 2, 3\) must match"):
        st.layer_norm(x, (2, 2, 3))
    with pytest.raises(ValueError, match=r"layer_norm: weight must have shape \(3,\)"):
        st.layer_norm(x, 3, as_tensor(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match=r"layer_norm: bias must have shape \(3,\)"):
        st.layer_norm(x, 3, None, as_tensor(np.ones((1, 3), np.float32)))
    with pytest.raises(TypeError, match="layer_norm: expected a floating-point input, got int64"):
        st.layer_norm(as_tensor(np.ones((2, 3), np.int64)), 3)
    with pytest.raises(TypeError, match="layer_norm: normalized_shape must be an int or"):
        st.layer_norm(x, 3.0)
    with pytest.raises(TypeError, match="layer_norm: eps must be a number"):
        st.layer_norm(x, 3, eps="small")
    with pytest.raises(TypeError, match="layer_norm: weight must be a Tensor"):
        st.layer_norm(x, 3, np.ones(3))
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(\) must match"):
        st.layer_norm(x, ())


# ---- group norm ----------------------------------------------------------------------------------

GN_CASES = [
    ((2, 4, 3, 3), 2, True, True),
    ((1, 6, 5), 3, True, False),    # one sample
    ((3, 4), 4, False, True),       # no spatial dims, a group per channel
    ((2, 4, 2, 2), 1, False, False),  # one group: layer norm over (C, H, W)
    ((5, 6, 1, 1), 2, True, True),  # spatial size 1
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,groups,affine_w,affine_b", GN_CASES)
def test_group_norm_fused_equals_the_composition(dtype, shape, groups, affine_w, affine_b):
    r = np.random.default_rng(sum(shape) + groups)
    c = shape[1]
    x = as_tensor((r.standard_normal(shape) * 2 - 1).astype(dtype), requires_grad=True)
    w = as_tensor(r.standard_normal(c).astype(dtype), requires_grad=True) if affine_w else None
    b = as_tensor(r.standard_normal(c).astype(dtype), requires_grad=True) if affine_b else None
    g = as_tensor(r.standard_normal(shape).astype(dtype))
    y, got = _grads(lambda: F.group_norm(x, groups, w, b), (x, w, b), g)
    assert y.grad_fn.name == "_group_norm"
    want_y, want = _grads(lambda: _group_norm_composed(x, groups, w, b, 1e-5), (x, w, b), g)
    _close_ulps(y, to_numpy(want_y), dtype, "y")
    for name, a, e in zip(("dx", "dweight", "dbias"), got, want):
        if e is None:
            assert a is None
        else:
            _close_ulps(a, to_numpy(e), dtype, name)


def test_group_norm_gradcheck_and_double_backward():
    x = as_tensor(RNG.standard_normal((2, 4, 3)), requires_grad=True)
    w = as_tensor(RNG.standard_normal(4), requires_grad=True)
    b = as_tensor(RNG.standard_normal(4), requires_grad=True)

    def fn(a, c, d):
        return st.group_norm(a, 2, c, d)

    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    assert gradgradcheck(lambda a: st.group_norm(a, 4), (x,))


def test_group_norm_module_and_bad_input():
    m = st.nn.GroupNorm(2, 4)
    m.to(DEVICE)
    y = m(as_tensor(RNG.standard_normal((2, 4, 3)).astype(np.float32)))
    assert y.grad_fn.name == "_group_norm"
    with pytest.raises(TypeError, match="group_norm: expected a floating-point input, got int32"):
        st.group_norm(as_tensor(np.ones((2, 4), np.int32)), 2)
    x = as_tensor(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="group_norm: num_groups=3 must be a positive divisor"):
        st.group_norm(x, 3)
    with pytest.raises(ValueError, match=r"group_norm: weight must have shape \(4,\)"):
        st.group_norm(x, 2, as_tensor(np.ones(2, np.float32)))


# ---- activation backward kernels -----------------------------------------------------------------

# (name, the activation, its gradient composed of Tensor ops as (ctx, g, x, y) -> dx)
ACTS = [("gelu", lambda x: st.gelu(x), _elt._gelu_grad),
        ("gelu_tanh", lambda x: st.gelu(x, approximate="tanh"), _elt._gelu_tanh_grad),
        ("silu", lambda x: F.silu(x), _elt._silu_grad),
        ("relu", lambda x: F.relu(x), _elt._relu_grad),
        ("sigmoid", lambda x: st.sigmoid(x), _elt._sigmoid_grad),
        ("tanh", lambda x: st.tanh(x), _elt._tanh_grad)]


def _act_grad_np(name, x):
    from math import erf, pi, sqrt
    if name == "gelu":
        cdf = 0.5 * (1 + np.vectorize(erf)(x / sqrt(2)))
        return cdf + x * np.exp(-0.5 * x * x) / sqrt(2 * pi)
    if name == "gelu_tanh":
        k = sqrt(2 / pi)
        t = np.tanh(k * (x + 0.044715 * x**3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    if name == "relu":
        return (x > 0).astype(x.dtype)
    if name == "tanh":
        return 1 - np.tanh(x) ** 2
    s = 1 / (1 + np.exp(-x))
    return s * (1 - s) if name == "sigmoid" else s * (1 + x * (1 - s))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,run,composed", ACTS, ids=[a[0] for a in ACTS])
def test_activation_backward_kernel_equals_the_composition(dtype, name, run, composed):
    xs = np.concatenate([np.linspace(-12, 12, 301), RNG.standard_normal(200) * 3,
                         [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0]]).astype(dtype)
    x = as_tensor(xs, requires_grad=True)
    g = as_tensor(RNG.standard_normal(xs.shape).astype(dtype))
    y = run(x)
    y.backward(g)
    want = composed(None, g, x.detach(), y.detach())
    _close_ulps(x.grad, to_numpy(want), dtype)
    ref = _act_grad_np(name, xs.astype(np.float64)) * to_numpy(g).astype(np.float64)
    # float32's terms of size |g| round to about 1e-7 * |g| (|g| < 5 here), and 1 + tanh cancels
    # for large negative x, in the kernel as in the composition
    assert_close(x.grad, ref, rtol=1e-5 if dtype == np.float32 else 1e-12,
                 atol=1e-5 if dtype == np.float32 else 1e-14)


def test_relu_backward_kernel_at_zero_nan_and_infinite_gradients():
    """relu's gradient is g where the input is not <= 0: 0 at +-0 and below, even where g is
    infinite or NaN (a multiply by a 0/1 mask would give NaN there), and g at a NaN input, as
    PyTorch's threshold backward gives."""
    x = as_tensor(np.array([0.0, -0.0, -1.0, 2.0, np.nan, -3.0, 4.0], np.float32),
                  requires_grad=True)
    g = as_tensor(np.array([5.0, 5.0, np.inf, np.inf, 7.0, np.nan, np.nan], np.float32))
    F.relu(x).backward(g)
    got = to_numpy(x.grad)
    assert np.array_equal(got[:4], [0.0, 0.0, 0.0, np.inf]) and got[4] == 7.0
    assert got[5] == 0.0 and np.isnan(got[6])


def test_relu_gradient_reads_the_output_not_the_input():
    """As in PyTorch, relu keeps its output for the backward: its input may be changed in
    place afterwards, and the gradient, first or second order, is the same."""
    a = as_tensor(np.array([-1.0, 2.0, 0.0, 3.0, np.nan]), requires_grad=True)
    x = a * 1.0
    y = F.relu(x)
    x.add_(5.0)  # would be an error if relu had kept x
    w = as_tensor(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    (y * w).sum().backward()
    got = to_numpy(a.grad)
    assert np.array_equal(got, [0.0, 2.0, 0.0, 4.0, 5.0])
    b = as_tensor(np.array([-2.0, 1.5, 3.0]), requires_grad=True)
    (gb,) = st.autograd.grad((F.relu(b) ** 2).sum(), b, create_graph=True)
    assert np.array_equal(to_numpy(gb.detach()), [0.0, 3.0, 6.0])
    gb.sum().backward()
    assert np.array_equal(to_numpy(b.grad), [0.0, 2.0, 2.0])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,run,composed", ACTS[3:], ids=[a[0] for a in ACTS[3:]])
def test_activation_backward_kernel_in_16_bit_dtypes(dtype, name, run, composed):
    """The 16-bit kernels compute each gradient in float32 and round once: within one ulp of
    the 16-bit dtype (2^-8 for bfloat16, 2^-11 for float16, relative) of the float64 formula
    applied to the same 16-bit inputs and output."""
    xs = np.concatenate([np.linspace(-6, 6, 121), [0.0, -0.0]]).astype(np.float32)
    low = getattr(st, dtype)
    x = as_tensor(xs).to(low).requires_grad_()
    g = as_tensor(RNG.standard_normal(xs.shape).astype(np.float32)).to(low)
    y = run(x)
    y.backward(g)
    assert x.grad.dtype is low
    x64 = to_numpy(x.detach().to(st.float64))
    y64 = to_numpy(y.detach().to(st.float64))
    g64 = to_numpy(g.to(st.float64))
    d = {"relu": (x64 > 0).astype(np.float64), "sigmoid": y64 * (1 - y64),
         "tanh": 1 - y64 * y64}[name]
    ulp = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    assert_close(x.grad.to(st.float64), g64 * d, rtol=ulp, atol=1e-6)


@pytest.mark.parametrize("name,run,composed", ACTS, ids=[a[0] for a in ACTS])
def test_activation_double_backward_still_composes(name, run, composed):
    x = as_tensor(RNG.standard_normal((3, 4)) * 2, requires_grad=True)
    assert gradcheck(run, (x,))
    assert gradgradcheck(run, (x,))
    # a non-contiguous, broadcast upstream gradient reaches the kernel as a copy
    y = run(x)
    (gx,) = st.autograd.grad(y.sum(), (x,))
    assert_close(gx, _act_grad_np(name, to_numpy(x)), rtol=1e-12, atol=1e-14)


# ---- graph mode ---------------------------------------------------------------------------------


def _norm_act_train(graph: bool, steps: int = 5):
    from singa_tensor import nn, optim

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 12)
            self.ln = nn.LayerNorm(12)
            self.gn = nn.GroupNorm(3, 12)
            self.b = nn.Linear(12, 4)

        def forward(self, x):
            h = F.gelu(self.ln(self.a(x)), approximate="tanh")
            h = F.silu(self.gn(h.unsqueeze(2)).squeeze(2))
            return self.b(F.gelu(h))

    st.manual_seed(0)
    model = Net()
    model.to(DEVICE)
    o = optim.SGD(model.parameters(), lr=0.1)
    r = np.random.default_rng(2)
    data = [(as_tensor(r.standard_normal((6, 8)).astype(np.float32)),
             as_tensor(r.integers(0, 4, 6).astype(np.int64))) for _ in range(steps)]

    def step(x, y):
        o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        return loss

    fn = st.compile(step) if graph else step
    losses = [fn(x, y).item() for x, y in data]
    return losses, [to_numpy(p) for p in model.parameters()], fn


def test_graph_mode_replays_the_fused_kernels_as_eager_runs_them():
    le, pe, _ = _norm_act_train(False)
    lg, pg, fn = _norm_act_train(True)
    assert fn.replays == 3  # one eager warm-up step, one recorded, three replayed
    assert_close(lg, le, rtol=1e-6, atol=1e-7)
    for a, e in zip(pg, pe):
        assert_close(a, e, rtol=1e-6, atol=1e-7)


# ---- the CUDA kernels (real or emulated) against the CPU's ---------------------------------------


@pytest.mark.skipif(DEVICE == "cpu", reason="compares the device under test with the CPU; runs "
                    "in the CUDA and emulated CUDA sessions (tests/test_cuda_emulated.py)")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_kernels_equal_the_cpu(dtype):
    r = np.random.default_rng(5)
    tol = {np.float32: 1e-5, np.float64: 1e-13}[dtype]

    def both(make_inputs, fn):
        outs = []
        for dev in ("cpu", DEVICE):
            ts = [as_tensor(a, requires_grad=True, device=dev) for a in make_inputs]
            y = fn(*ts)
            y.backward(as_tensor(gy, device=dev))
            outs.append([to_numpy(y)] + [to_numpy(t.grad) for t in ts])
        for a, e in zip(outs[1], outs[0]):
            assert_close(a, e, rtol=tol, atol=tol)

    for shape, norm in (((1, 5), (5,)), ((70, 33), (33,)), ((3, 4, 300), (4, 300)), ((4, 1), (1,))):
        x = r.standard_normal(shape).astype(dtype)
        w, b = (r.standard_normal(norm).astype(dtype) for _ in range(2))
        gy = r.standard_normal(shape).astype(dtype)
        both((x, w, b), lambda a, c, d, norm=norm: st.layer_norm(a, norm, c, d))
    for shape, groups in (((2, 6, 5, 7), 3), ((3, 4), 2), ((1, 2, 600), 1)):
        x = r.standard_normal(shape).astype(dtype)
        w, b = (r.standard_normal(shape[1]).astype(dtype) for _ in range(2))
        gy = r.standard_normal(shape).astype(dtype)
        both((x, w, b), lambda a, c, d, groups=groups: st.group_norm(a, groups, c, d))
    x = (r.standard_normal(1000) * 4).astype(dtype)
    gy = r.standard_normal(1000).astype(dtype)
    for _, run, _ in ACTS:
        both((x,), run)
