"""Loss functions against independent numpy formulas, gradients against finite differences,
and the error paths."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.autograd import gradcheck, gradgradcheck
from singa_tensor.nn import _functional_losses as L

from .helpers import as_tensor, assert_close, to_numpy

RNG = np.random.default_rng(1234)
REDUCTIONS = ("none", "mean", "sum")


def _reduce(a, reduction):
    return {"none": a, "mean": a.mean(), "sum": a.sum()}[reduction]


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return x - m - np.log(e.sum(axis=axis, keepdims=True))


def _ce_ref(x, t, w=None, ignore_index=-100, reduction="mean", eps=0.0):
    """Cross entropy by its definition: classes moved last, targets smoothed into a
    distribution q, loss_n = -sum_c w_c q_nc log p_nc; the mean divides by sum of w[t_n]."""
    cdim = 0 if x.ndim == 1 else 1
    lp = np.moveaxis(_log_softmax(x, cdim), cdim, -1)
    c = lp.shape[-1]
    w = np.ones(c) if w is None else w
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    q = (1 - eps) * np.eye(c)[safe] + eps / c
    loss = -(q * w * lp).sum(-1) * valid
    if reduction == "mean":
        return loss.sum() / (w[safe] * valid).sum()
    return _reduce(loss, reduction)


def _nll_ref(lp, t, w=None, ignore_index=-100, reduction="mean"):
    cdim = 0 if lp.ndim == 1 else 1
    lp = np.moveaxis(lp, cdim, -1)
    w = np.ones(lp.shape[-1]) if w is None else w
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    wt = w[safe] * valid
    loss = -picked * wt
    if reduction == "mean":
        return loss.sum() / wt.sum()
    return _reduce(loss, reduction)


# ---- cross entropy and nll ---------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2), (5,)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_class_indices(reduction, shape, weighted, smoothing):
    x = RNG.standard_normal(shape)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
    t = RNG.integers(0, c, tshape)
    if len(shape) > 1:
        t.flat[0] = -100  # ignored
    w = RNG.uniform(0.5, 2.0, c) if weighted else None
    got = L.cross_entropy(as_tensor(x), as_tensor(t), None if w is None else as_tensor(w),
                          reduction=reduction, label_smoothing=smoothing)
    want = _ce_ref(x, t, w, reduction=reduction, eps=smoothing)
    assert_close(got, np.asarray(want), rtol=1e-10, atol=1e-12)


def test_cross_entropy_hand_value():
    # uniform logits over 4 classes: -log(1/4) per sample
    got = L.cross_entropy(st.zeros(3, 4), st.tensor([0, 1, 3]))
    assert abs(got.item() - np.log(4)) < 1e-6


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_float32_in_both_vector_widths(simd_build, smoothing, weighted):
    # 1000 classes (no multiple of either width) and an ignored row, forward and backward
    # against the float64 kernel, which both widths must match to float32 rounding
    r = np.random.default_rng(5)
    x = r.standard_normal((37, 1000)) * 4
    t = r.integers(0, 1000, 37)
    t[3] = -100
    w = r.uniform(0.5, 2.0, 1000) if weighted else None
    res = []
    for dtype in (st.float32, st.float64):
        xt = st.tensor(x, dtype=dtype, requires_grad=True)
        wt = None if w is None else st.tensor(w, dtype=dtype)
        loss = L.cross_entropy(xt, st.tensor(t), weight=wt, label_smoothing=smoothing,
                               reduction="none")
        (loss * st.tensor(np.linspace(0.5, 1.5, 37), dtype=dtype)).sum().backward()
        res.append((to_numpy(loss.detach()), to_numpy(xt.grad)))
    (l32, g32), (l64, g64) = res
    np.testing.assert_allclose(l32, l64, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("classes", [1, 10, 16, 17, 40])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_short_rows_in_both_vector_widths(simd_build, classes, reduction):
    # class counts below, at and past one 16-lane block: the row's last partial block runs
    # through a padded copy; forward and gradient against float64 and the definition
    r = np.random.default_rng(classes)
    x = r.standard_normal((9, classes)) * 3
    t = r.integers(0, classes, 9)
    t[4] = -100
    res = []
    for dtype in (st.float32, st.float64):
        xt = st.tensor(x, dtype=dtype, requires_grad=True)
        loss = L.cross_entropy(xt, st.tensor(t), reduction=reduction, label_smoothing=0.1)
        g = st.tensor(np.linspace(0.5, 1.5, 9), dtype=dtype) if reduction == "none" else 1.7
        (loss * g).sum().backward()
        res.append((to_numpy(loss.detach()), to_numpy(xt.grad)))
    (l32, g32), (l64, g64) = res
    assert_close(st.tensor(l64), np.asarray(_ce_ref(x, t, reduction=reduction, eps=0.1)),
                 rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(l32, l64, rtol=2e-6, atol=2e-6)
    # a gradient that cancels to 0 (one class) comes out within 2 ulps of its terms (<= 1.7)
    np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=2 * 1.7 * 2.0 ** -23)
    assert (g64[4] == 0).all()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_reduces_in_its_own_op(reduction, weighted):
    # the reduced loss comes out of the fused op itself (one autograd node, one backward
    # kernel), with the gradient of the definition; a weighted mean then divides by the
    # summed weights
    x = RNG.standard_normal((6, 5))
    t = np.array([0, 4, -100, 2, 2, 1])
    w = RNG.uniform(0.5, 2.0, 5) if weighted else None
    xt = as_tensor(x).requires_grad_()
    loss = L.cross_entropy(xt, as_tensor(t), None if w is None else as_tensor(w),
                           reduction=reduction)
    if reduction == "sum" or not weighted:
        assert type(loss.grad_fn).__name__ == "_softmax_cross_entropyBackward"
    assert_close(loss, np.asarray(_ce_ref(x, t, w, reduction=reduction)), rtol=1e-12)
    loss.backward()
    eps = 1e-6
    num = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        num[i] = (_ce_ref(hi, t, w, reduction=reduction) -
                  _ce_ref(lo, t, w, reduction=reduction)) / (2 * eps)
    np.testing.assert_allclose(to_numpy(xt.grad), num, rtol=1e-6, atol=1e-8)


def test_fused_cross_entropy_op_rejects_bad_reduction_and_count():
    from singa_tensor.ops.loss import softmax_cross_entropy

    x, t = st.zeros(2, 3), st.tensor([0, 1])
    with pytest.raises(ValueError, match="softmax_cross_entropy: reduction must be one of"):
        softmax_cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match="softmax_cross_entropy: count must be a non-negative"):
        softmax_cross_entropy(x, t, reduction="mean", count=-1)
    none = st.tensor([-100, -100])  # no target counted: the mean is 0 / 0
    assert np.isnan(softmax_cross_entropy(x, none, reduction="mean", count=0).item())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("classes", [3, 1000])
def test_cross_entropy_non_finite_logits(dtype, classes, simd_build):
    # as PyTorch's log_softmax: a row holding NaN or +inf gives NaN; -inf logits are ordinary
    # (probability 0). NaN and inf sit at positions off the vector lanes' boundaries.
    x = np.zeros((5, classes))
    x[:, :3] = [[np.inf, 1.0, 0.0], [1.0, np.nan, 2.0], [np.inf, np.nan, 0.0],
                [-np.inf, -np.inf, 0.0], [0.5, -1.0, 2.0]]
    x[1, classes - 2] = np.nan if classes > 3 else x[1, classes - 2]
    t = np.array([1, 0, 2, 2, 0])
    xt = st.tensor(x, dtype=getattr(st, dtype), requires_grad=True)
    got = L.cross_entropy(xt, st.tensor(t), reduction="none")
    loss = to_numpy(got)
    assert np.isnan(loss[:3]).all()
    rows = x[3:]
    m = rows.max(axis=1)
    want = m + np.log(np.exp(rows - m[:, None]).sum(axis=1)) - rows[[0, 1], t[3:]]
    assert_close(got[3:], want.astype(dtype), rtol=1e-5 if dtype == "float32" else 1e-12)
    got[3:].sum().backward()
    g = to_numpy(xt.grad)
    assert np.isfinite(g[3:]).all() and (g[3, :2] == 0).all()


def test_cross_entropy_custom_ignore_index_and_all_ignored():
    x = RNG.standard_normal((4, 3))
    t = np.array([2, 7, 0, 7])
    got = L.cross_entropy(as_tensor(x), as_tensor(t), ignore_index=7)
    assert_close(got, np.asarray(_ce_ref(x, t, ignore_index=7)), rtol=1e-10)
    allign = L.cross_entropy(as_tensor(x), as_tensor(np.full(4, 7)), ignore_index=7)
    assert np.isnan(allign.item())  # 0 / 0, as PyTorch
    s = L.cross_entropy(as_tensor(x), as_tensor(np.full(4, 7)), ignore_index=7, reduction="sum")
    assert s.item() == 0.0


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(reduction, weighted, smoothing):
    x = RNG.standard_normal((3, 4, 2))
    p = RNG.uniform(size=(3, 4, 2))
    p /= p.sum(1, keepdims=True)
    w = RNG.uniform(0.5, 2.0, 4) if weighted else np.ones(4)
    q = p * (1 - smoothing) + smoothing / 4
    loss = -(_log_softmax(x, 1) * q * w[None, :, None]).sum(1)
    got = L.cross_entropy(as_tensor(x), as_tensor(p), as_tensor(w) if weighted else None,
                          reduction=reduction, label_smoothing=smoothing)
    # the mean divides by the number of positions (6), weights or not
    assert_close(got, np.asarray(_reduce(loss, reduction)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5, 4), (2, 4, 3), (4,)])
def test_nll_loss_weighted(reduction, shape):
    lp = _log_softmax(RNG.standard_normal(shape), 0 if len(shape) == 1 else 1)
    tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
    t = RNG.integers(0, 4, tshape)
    if t.ndim:
        t.flat[-1] = -100
    w = np.array([0.2, 1.0, 3.0, 0.7])
    got = L.nll_loss(as_tensor(lp), as_tensor(t), as_tensor(w), reduction=reduction)
    assert_close(got, np.asarray(_nll_ref(lp, t, w, reduction=reduction)), rtol=1e-10,
                 atol=1e-12)


def test_nll_weighted_mean_hand_value():
    lp = st.tensor([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]])
    t = st.tensor([0, 1, -100])
    w = st.tensor([2.0, 0.5])
    # (2*1 + 0.5*4) / (2 + 0.5): the ignored row counts in neither sum
    assert abs(L.nll_loss(lp, t, w).item() - 4.0 / 2.5) < 1e-6


def test_cross_entropy_int32_target():
    x = RNG.standard_normal((3, 5))
    t = np.array([4, 0, 2], dtype=np.int32)
    got = L.cross_entropy(as_tensor(x), as_tensor(t))
    assert_close(got, np.asarray(_ce_ref(x, t.astype(np.int64))), rtol=1e-10)


def test_cross_entropy_gradients():
    x = as_tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    t = as_tensor(np.array([1, -100, 3]))
    w = as_tensor(RNG.uniform(0.5, 2, 4))
    for red in REDUCTIONS:
        def fn(a, red=red):
            return L.cross_entropy(a, t, w, reduction=red, label_smoothing=0.1)
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))
    p = as_tensor(RNG.dirichlet(np.ones(4), size=3), requires_grad=True)
    assert gradcheck(lambda a, b: L.cross_entropy(a, b), (x, p))
    assert gradgradcheck(lambda a, b: L.cross_entropy(a, b), (x, p))


def test_cross_entropy_gradient_value():
    # d/dx of mean CE = (softmax(x) - onehot) / N
    x = RNG.standard_normal((2, 3))
    xt = as_tensor(x, requires_grad=True)
    L.cross_entropy(xt, st.tensor([2, 0])).backward()
    sm = np.exp(_log_softmax(x, 1))
    assert_close(xt.grad, (sm - np.eye(3)[[2, 0]]) / 2, rtol=1e-10)


def test_nll_gradients_spatial():
    lp = as_tensor(RNG.standard_normal((2, 3, 2)), requires_grad=True)
    t = as_tensor(np.array([[0, 2], [1, -100]]))
    w = as_tensor(np.array([1.0, 2.0, 0.5]))
    assert gradcheck(lambda a: L.nll_loss(a, t, w), (lp,))
    assert gradgradcheck(lambda a: L.nll_loss(a, t, w, reduction="none"), (lp,))


def test_class_target_errors():
    x = st.zeros(3, 4)
    with pytest.raises(IndexError, match=r"cross_entropy: target 4 is out of bounds for 4"):
        L.cross_entropy(x, st.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match=r"nll_loss: target -1 is out of bounds"):
        L.nll_loss(x, st.tensor([0, -1, 1]))
    # ignore_index is exempt from the range check
    assert np.isfinite(L.nll_loss(x, st.tensor([0, -100, 1])).item())
    assert np.isfinite(L.nll_loss(x, st.tensor([0, 9, 1]), ignore_index=9).item())
    with pytest.raises(ValueError, match=r"cross_entropy: .*target must have shape \(3,\)"):
        L.cross_entropy(x, st.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"probability target must have the input's shape"):
        L.cross_entropy(x, st.zeros(3))
    with pytest.raises(TypeError, match=r"nll_loss: class-index target must be an integer"):
        L.nll_loss(x, st.zeros(3))
    with pytest.raises(TypeError, match=r"cross_entropy: input must be a floating point"):
        L.cross_entropy(st.zeros(3, 4, dtype=st.int64), st.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"weight must be a 1-D tensor with one value per "
                                         r"class \(4\), got shape \(3,\)"):
        L.cross_entropy(x, st.tensor([0, 1, 2]), weight=st.ones(3))
    with pytest.raises(ValueError, match=r"reduction must be one of"):
        L.cross_entropy(x, st.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\]"):
        L.cross_entropy(x, st.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(TypeError, match=r"cross_entropy: target must be a Tensor"):
        L.cross_entropy(x, [0, 1, 2])


# ---- regression --------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    a = RNG.standard_normal((3, 4))
    b = RNG.standard_normal((3, 4)) * 2
    d = a - b
    ta, tb = as_tensor(a), as_tensor(b)
    assert_close(L.mse_loss(ta, tb, reduction), np.asarray(_reduce(d * d, reduction)),
                 rtol=1e-12)
    assert_close(L.l1_loss(ta, tb, reduction), np.asarray(_reduce(np.abs(d), reduction)),
                 rtol=1e-12)
    for beta in (0.5, 1.0, 2.0):
        z = np.abs(d)
        want = np.where(z < beta, 0.5 * z ** 2 / beta, z - 0.5 * beta)
        got = L.smooth_l1_loss(ta, tb, reduction, beta=beta)
        assert_close(got, np.asarray(_reduce(want, reduction)), rtol=1e-12)
    assert_close(L.smooth_l1_loss(ta, tb, reduction, beta=0.0),
                 np.asarray(_reduce(np.abs(d), reduction)), rtol=1e-12)


def test_regression_gradients():
    a = as_tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    # keep |a - b| away from the kinks of l1 (0) and smooth_l1 (beta)
    b = as_tensor(to_numpy(a) + np.array([[0.3, -2.0, 1.7], [-0.4, 0.2, -3.0]]),
                  requires_grad=True)
    for fn in (L.mse_loss, L.l1_loss, lambda x, y: L.smooth_l1_loss(x, y, beta=1.0)):
        assert gradcheck(fn, (a, b))
        assert gradgradcheck(fn, (a, b))


def test_regression_errors_and_broadcast_warning():
    with pytest.raises(ValueError, match=r"smooth_l1_loss: beta must be a non-negative"):
        L.smooth_l1_loss(st.zeros(2), st.zeros(2), beta=-1.0)
    with pytest.raises(TypeError, match=r"mse_loss: target must be a floating point"):
        L.mse_loss(st.zeros(2), st.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"l1_loss: reduction must be one of"):
        L.l1_loss(st.zeros(2), st.zeros(2), reduction="batchmean")
    with pytest.warns(UserWarning, match=r"mse_loss: using a target size \(3,\)"):
        out = L.mse_loss(st.zeros(3, 1), st.ones(3), reduction="sum")
    assert out.item() == 9.0  # broadcast to (3, 3), as PyTorch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"mse_loss: shapes \(2,\) and \(3,\)"):
            L.mse_loss(st.zeros(2), st.zeros(3))


# ---- binary ------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    x = RNG.uniform(0.05, 0.95, (3, 4))
    y = RNG.uniform(size=(3, 4))
    w = RNG.uniform(0.5, 2, (4,))
    want = -w * (y * np.log(x) + (1 - y) * np.log(1 - x))
    got = L.binary_cross_entropy(as_tensor(x), as_tensor(y), as_tensor(w), reduction)
    assert_close(got, np.asarray(_reduce(want, reduction)), rtol=1e-12)


def test_binary_cross_entropy_clamps_log():
    x = st.tensor([0.0, 1.0, 0.0, 1.0], dtype=st.float64, requires_grad=True)
    y = st.tensor([1.0, 0.0, 0.0, 1.0], dtype=st.float64)
    loss = L.binary_cross_entropy(x, y, reduction="none")
    assert loss.tolist() == [100.0, 100.0, 0.0, 0.0]
    loss.sum().backward()
    assert np.all(np.isfinite(to_numpy(x.grad)))


def test_binary_cross_entropy_gradients():
    x = as_tensor(RNG.uniform(0.1, 0.9, (2, 3)), requires_grad=True)
    y = as_tensor(RNG.uniform(size=(2, 3)), requires_grad=True)
    assert gradcheck(L.binary_cross_entropy, (x, y))
    assert gradgradcheck(L.binary_cross_entropy, (x, y))


def test_binary_cross_entropy_errors():
    with pytest.raises(ValueError, match=r"binary_cross_entropy: all elements of input should "
                                         r"be between 0 and 1, found 1.5"):
        L.binary_cross_entropy(st.tensor([0.5, 1.5]), st.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: target size \(3,\) must be "
                                         r"the same as the input size \(2,\)"):
        L.binary_cross_entropy(st.tensor([0.5, 0.5]), st.zeros(3))
    with pytest.raises(ValueError, match=r"weight of shape \(3,\) must broadcast"):
        L.binary_cross_entropy(st.tensor([0.5, 0.5]), st.zeros(2), weight=st.ones(3))


def _bce_logits_ref(x, y, w=None, pw=None):
    sig = 1 / (1 + np.exp(-x))
    pw = 1.0 if pw is None else pw
    loss = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    return loss if w is None else loss * w


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits(reduction):
    x = RNG.standard_normal((3, 4)) * 3
    y = (RNG.uniform(size=(3, 4)) > 0.5).astype(np.float64)
    w = RNG.uniform(0.5, 2, (3, 1))
    pw = RNG.uniform(0.5, 3, (4,))
    got = L.binary_cross_entropy_with_logits(as_tensor(x), as_tensor(y), as_tensor(w),
                                             reduction, as_tensor(pw))
    assert_close(got, np.asarray(_reduce(_bce_logits_ref(x, y, w, pw), reduction)), rtol=1e-10)
    got = L.binary_cross_entropy_with_logits(as_tensor(x), as_tensor(y), reduction=reduction)
    assert_close(got, np.asarray(_reduce(_bce_logits_ref(x, y), reduction)), rtol=1e-10)


def test_bce_with_logits_is_stable_and_differentiable():
    x = st.tensor([-1000.0, 1000.0, 0.0], dtype=st.float64, requires_grad=True)
    y = st.tensor([1.0, 0.0, 1.0], dtype=st.float64)
    loss = L.binary_cross_entropy_with_logits(x, y, reduction="none")
    assert_close(loss, np.array([1000.0, 1000.0, np.log(2)]), rtol=1e-12)
    loss.sum().backward()
    assert_close(x.grad, np.array([-1.0, 1.0, -0.5]), rtol=1e-12)  # sigmoid(x) - y
    a = as_tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    b = as_tensor(RNG.uniform(size=(2, 3)), requires_grad=True)
    pw = as_tensor(np.array([0.5, 2.0, 1.5]))

    def fn(p, q):
        return L.binary_cross_entropy_with_logits(p, q, pos_weight=pw)
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


# ---- kl divergence -----------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    lp = _log_softmax(RNG.standard_normal((3, 4)), 1)
    q = RNG.dirichlet(np.ones(4), size=3)
    if not log_target:
        q[0, 1] = 0.0  # 0 log 0 = 0 (with log targets PyTorch gives exp(-inf) * -inf = nan)
    with np.errstate(divide="ignore"):
        lq = np.log(q)
    tgt = lq if log_target else q
    terms = np.where(q > 0, q * (np.where(q > 0, lq, 0) - lp), 0.0)
    want = terms.sum() / 3 if reduction == "batchmean" else _reduce(terms, reduction)
    got = L.kl_div(as_tensor(lp), as_tensor(tgt), reduction, log_target)
    assert_close(got, np.asarray(want), rtol=1e-10, atol=1e-14)


def test_kl_div_gradients_and_errors():
    lp = as_tensor(_log_softmax(RNG.standard_normal((2, 3)), 1), requires_grad=True)
    q = as_tensor(RNG.dirichlet(np.ones(3), size=2), requires_grad=True)
    for lt in (False, True):
        def fn(a, b, lt=lt):
            return L.kl_div(a, b.log() if lt else b, "batchmean", log_target=lt)
        assert gradcheck(fn, (lp, q))
        assert gradgradcheck(fn, (lp, q))
    with pytest.raises(ValueError, match=r"kl_div: reduction must be one of 'none', 'mean', "
                                         r"'sum', 'batchmean'"):
        L.kl_div(st.zeros(2), st.zeros(2), reduction="avg")


def test_float32_losses_keep_dtype():
    x = st.randn(4, 3)
    assert L.cross_entropy(x, st.tensor([0, 1, 2, 0])).dtype is st.float32
    assert L.mse_loss(x, st.zeros(4, 3, dtype=st.float64)).dtype is st.float32
