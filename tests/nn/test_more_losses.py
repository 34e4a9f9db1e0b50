"""The margin, likelihood, triplet and CTC losses against numpy references, their gradients,
the modules against the functions, and their errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy

rng = np.random.default_rng(11)
X1 = rng.standard_normal((5, 4))
X2 = rng.standard_normal((5, 4))
X3 = rng.standard_normal((5, 4))
SIGN = np.where(rng.standard_normal(5) > 0, 1.0, -1.0)
SIGN_FULL = np.where(rng.standard_normal((5, 4)) > 0, 1.0, -1.0)
MULTI_HOT = (rng.standard_normal((5, 4)) > 0).astype(np.float64)
CLASSES = np.array([0, 3, 1, 2, 3])
W4 = rng.uniform(0.5, 2.0, 4)


def t(a, grad=False):
    return st.tensor(np.asarray(a), requires_grad=grad)


def _reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def _cos_np(a, b, eps=1e-12):
    return (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + eps) * ((b * b).sum(-1) + eps))


def _dist_np(a, b, p=2.0, eps=1e-6):
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1 / p)


def _softplus(x):
    return np.logaddexp(0, x)


def _multi_margin_np(x, y, p=1, margin=1.0, w=None):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        for j in range(c):
            if j != y[i]:
                h = max(0.0, margin - x[i, y[i]] + x[i, j]) ** p
                out[i] += h * (1.0 if w is None else w[y[i]])
    return out / c


def _multilabel_margin_np(x, y):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        tg = []
        for j in y[i]:
            if j < 0:
                break
            tg.append(j)
        for j in tg:
            for k in range(c):
                if k not in tg:
                    out[i] += max(0.0, 1 - (x[i, j] - x[i, k]))
    return out / c


CASES = {
    "margin_ranking": (
        lambda r: F.margin_ranking_loss(t(X1[:, 0]), t(X2[:, 0]), t(SIGN), margin=0.3,
                                        reduction=r),
        lambda: np.maximum(0, -SIGN * (X1[:, 0] - X2[:, 0]) + 0.3)),
    "hinge_embedding": (
        lambda r: F.hinge_embedding_loss(t(X1), t(SIGN_FULL), margin=0.5, reduction=r),
        lambda: np.where(SIGN_FULL == 1, X1, np.maximum(0, 0.5 - X1))),
    "soft_margin": (
        lambda r: F.soft_margin_loss(t(X1), t(SIGN_FULL), reduction=r),
        lambda: _softplus(-SIGN_FULL * X1)),
    "cosine_embedding": (
        lambda r: F.cosine_embedding_loss(t(X1), t(X2), t(SIGN), margin=-0.2, reduction=r),
        lambda: np.where(SIGN == 1, 1 - _cos_np(X1, X2),
                         np.maximum(0, _cos_np(X1, X2) + 0.2))),
    "huber": (
        lambda r: F.huber_loss(t(2 * X1), t(X2), reduction=r, delta=0.7),
        lambda: np.where(np.abs(2 * X1 - X2) < 0.7, 0.5 * (2 * X1 - X2) ** 2,
                         0.7 * (np.abs(2 * X1 - X2) - 0.35))),
    "poisson_log": (
        lambda r: F.poisson_nll_loss(t(X1), t(np.abs(X2) * 3), reduction=r),
        lambda: np.exp(X1) - np.abs(X2) * 3 * X1),
    "poisson_full": (
        lambda r: F.poisson_nll_loss(t(np.abs(X1)), t(np.abs(X2) * 3), log_input=False,
                                     full=True, reduction=r),
        lambda: (np.abs(X1) - np.abs(X2) * 3 * np.log(np.abs(X1) + 1e-8)
                 + np.where(np.abs(X2) * 3 > 1,
                            (y := np.maximum(np.abs(X2) * 3, 1)) * np.log(y) - y
                            + 0.5 * np.log(2 * np.pi * y), 0))),
    "gaussian": (
        lambda r: F.gaussian_nll_loss(t(X1), t(X2), t(np.abs(X3) + 0.1), full=True,
                                      reduction=r),
        lambda: 0.5 * (np.log(np.abs(X3) + 0.1) + (X1 - X2) ** 2 / (np.abs(X3) + 0.1))
        + 0.5 * np.log(2 * np.pi)),
    "gaussian_per_sample_var": (
        lambda r: F.gaussian_nll_loss(t(X1), t(X2), t(np.abs(X3[:, 0]) + 0.1), reduction=r),
        lambda: 0.5 * (np.log(np.abs(X3[:, :1]) + 0.1)
                       + (X1 - X2) ** 2 / (np.abs(X3[:, :1]) + 0.1))),
    "multilabel_soft_margin": (
        lambda r: F.multilabel_soft_margin_loss(t(X1), t(MULTI_HOT), weight=t(W4),
                                                reduction=r),
        lambda: ((MULTI_HOT * _softplus(-X1) + (1 - MULTI_HOT) * _softplus(X1)) * W4)
        .mean(-1)),
    "multi_margin": (
        lambda r: F.multi_margin_loss(t(X1), t(CLASSES), reduction=r),
        lambda: _multi_margin_np(X1, CLASSES)),
    "multi_margin_p2_weight": (
        lambda r: F.multi_margin_loss(t(X1), t(CLASSES), p=2, margin=0.6, weight=t(W4),
                                      reduction=r),
        lambda: _multi_margin_np(X1, CLASSES, 2, 0.6, W4)),
    "multilabel_margin": (
        lambda r: F.multilabel_margin_loss(
            t(X1), t(np.array([[3, 0, -1, 1], [1, -1, 0, 0], [0, 1, 2, 3], [-1, 2, 2, 2],
                               [2, 2, -1, 0]])), reduction=r),
        lambda: _multilabel_margin_np(
            X1, [[3, 0, -1, 1], [1, -1, 0, 0], [0, 1, 2, 3], [-1, 2, 2, 2], [2, 2, -1, 0]])),
    "triplet": (
        lambda r: F.triplet_margin_loss(t(X1), t(X2), t(X3), margin=1.5, reduction=r),
        lambda: np.maximum(_dist_np(X1, X2) - _dist_np(X1, X3) + 1.5, 0)),
    "triplet_swap_p1": (
        lambda r: F.triplet_margin_loss(t(X1), t(X2), t(X3), p=1.0, swap=True, reduction=r),
        lambda: np.maximum(_dist_np(X1, X2, 1) - np.minimum(_dist_np(X1, X3, 1),
                                                             _dist_np(X2, X3, 1)) + 1, 0)),
    "triplet_distance": (
        lambda r: F.triplet_margin_with_distance_loss(
            t(X1), t(X2), t(X3), distance_function=lambda a, b: 1 - F.cosine_similarity(a, b),
            margin=0.4, reduction=r),
        lambda: np.maximum((1 - _cos_np(X1, X2, 0)) - (1 - _cos_np(X1, X3, 0)) + 0.4, 0)),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_against_numpy(name, reduction):
    fn, ref = CASES[name]
    np.testing.assert_allclose(to_numpy(fn(reduction)), _reduce(ref(), reduction),
                               rtol=1e-10, atol=1e-12)


GRADS = {
    "margin_ranking": lambda a, b, c: F.margin_ranking_loss(a[:, 0], b[:, 0], t(SIGN), 0.3),
    "hinge_embedding": lambda a, b, c: F.hinge_embedding_loss(a, t(SIGN_FULL)),
    "soft_margin": lambda a, b, c: F.soft_margin_loss(a, t(SIGN_FULL)),
    "cosine_embedding": lambda a, b, c: F.cosine_embedding_loss(a, b, t(SIGN), margin=-0.2),
    "huber": lambda a, b, c: F.huber_loss(a, b, delta=0.7),
    "poisson": lambda a, b, c: F.poisson_nll_loss(a, b.abs()),
    "gaussian": lambda a, b, c: F.gaussian_nll_loss(a, b, c.abs() + 0.1),
    "multilabel_soft_margin": lambda a, b, c: F.multilabel_soft_margin_loss(a, t(MULTI_HOT)),
    "multi_margin": lambda a, b, c: F.multi_margin_loss(a, t(CLASSES), p=2),
    "multilabel_margin": lambda a, b, c: F.multilabel_margin_loss(
        a, t(np.array([[3, 0, -1, 1]] * 5))),
    "triplet": lambda a, b, c: F.triplet_margin_loss(a, b, c, swap=True),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_against_finite_differences(name):
    ins = [t(X1, True), t(X2, True), t(X3, True)]
    assert st.autograd.gradcheck(GRADS[name], ins, atol=1e-6, rtol=1e-4)


def test_gaussian_var_clamp_passes_gradient_through():
    var = t(np.array([1e-9, 1.0]), True)
    F.gaussian_nll_loss(t([0.0, 0.0]), t([1.0, 1.0]), var, reduction="sum").backward()
    g = to_numpy(var.grad)
    # d/dvar of 0.5 (log v + d^2 / v) evaluated at the clamped v = eps, applied to var itself
    np.testing.assert_allclose(g, [0.5 * (1 / 1e-6 - 1 / 1e-12), 0.0], rtol=1e-9)


# ---- CTC ---------------------------------------------------------------------------------------


def _collapse(path, blank):
    out, prev = [], None
    for k in path:
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return out


def _ctc_brute(lp, target, blank):
    """-log of the summed probability of every path of len(lp) frames that collapses to
    target, by enumerating all C^T paths."""
    t_len, c = lp.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        if _collapse(path, blank) == list(target):
            total += np.exp(sum(lp[i, k] for i, k in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


CTC_LP = _log_softmax(rng.standard_normal((5, 3, 4)), 2)
CTC_TARGETS = np.array([[1, 2, 2], [3, 1, 0], [2, 0, 0]])
CTC_IN = [5, 4, 3]
CTC_TL = [3, 2, 0]


@pytest.mark.parametrize("blank", [0, 3])
def test_ctc_matches_enumeration_of_alignments(blank):
    targets = np.where(CTC_TARGETS == blank, 0 if blank else 3, CTC_TARGETS)
    if blank:
        targets = np.where(CTC_TARGETS == 0, 1, targets)
    want = np.array([_ctc_brute(CTC_LP[:il, n], targets[n, :tl], blank)
                     for n, (il, tl) in enumerate(zip(CTC_IN, CTC_TL))])
    got = F.ctc_loss(t(CTC_LP), t(targets), CTC_IN, CTC_TL, blank=blank, reduction="none")
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-9)
    mean = F.ctc_loss(t(CTC_LP), t(targets), t(np.array(CTC_IN)), t(np.array(CTC_TL)),
                      blank=blank)
    np.testing.assert_allclose(mean.item(), np.mean(want / np.maximum(CTC_TL, 1)), rtol=1e-9)


def test_ctc_concatenated_targets_and_unbatched_forms():
    flat = np.array([1, 2, 2, 3, 1])
    got = F.ctc_loss(t(CTC_LP), t(flat), CTC_IN, CTC_TL, reduction="sum")
    want = F.ctc_loss(t(CTC_LP), t(CTC_TARGETS), CTC_IN, CTC_TL, reduction="sum")
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    one = F.ctc_loss(t(CTC_LP[:, 0]), t(np.array([1, 2, 2])), 5, 3, reduction="none")
    assert one.shape == ()
    np.testing.assert_allclose(one.item(), _ctc_brute(CTC_LP[:, 0], [1, 2, 2], 0), rtol=1e-9)


def test_ctc_impossible_alignment_is_inf_or_zeroed():
    # three labels with a repeat need at least 4 frames
    lp = t(CTC_LP[:3, :1], True)
    tg = t(np.array([[1, 2, 2]]))
    assert F.ctc_loss(lp, tg, [3], [3], reduction="sum").item() == np.inf
    loss = F.ctc_loss(lp, tg, [3], [3], reduction="sum", zero_infinity=True)
    assert loss.item() == 0.0
    loss.backward()
    assert not np.any(to_numpy(lp.grad))


def test_ctc_gradient_against_finite_differences():
    lp = t(CTC_LP, True)
    tg = t(CTC_TARGETS)

    def fn(x):
        return F.ctc_loss(x, tg, CTC_IN, CTC_TL)

    assert st.autograd.gradcheck(fn, [lp], atol=1e-6, rtol=1e-4)


def test_ctc_trains_with_log_softmax_input():
    logits = t(rng.standard_normal((6, 2, 4)), True)
    loss = nn.CTCLoss(blank=0)(logits.log_softmax(2), t(np.array([[1, 2], [3, 3]])), [6, 6],
                              [2, 2])
    loss.backward()
    g = to_numpy(logits.grad)
    assert np.all(np.isfinite(g)) and np.abs(g).sum() > 0
    np.testing.assert_allclose(g.sum(axis=2), 0, atol=1e-12)  # softmax rows: grads sum to 0


@pytest.mark.parametrize("args, kwargs, exc, match", [
    ((t(CTC_LP), t(CTC_TARGETS), [5, 4], CTC_TL), {}, ValueError, "input_lengths must have 3"),
    ((t(CTC_LP), t(CTC_TARGETS), [6, 4, 3], CTC_TL), {}, ValueError, "exceed the input"),
    ((t(CTC_LP), t(CTC_TARGETS), CTC_IN, [4, 1, 1]), {}, ValueError, "exceed the targets"),
    ((t(CTC_LP), t(CTC_TARGETS), CTC_IN, CTC_TL), {"blank": 4}, ValueError, "blank must be"),
    ((t(CTC_LP), t(CTC_TARGETS), CTC_IN, CTC_TL), {"blank": 1}, IndexError, "differ from"),
    ((t(CTC_LP), t(CTC_TARGETS * 1.0), CTC_IN, CTC_TL), {}, TypeError, "integer tensor"),
    ((t(CTC_LP), t(np.array([1, 2])), CTC_IN, CTC_TL), {}, ValueError, "sum to 5"),
    ((t(CTC_LP[0, 0]), t(CTC_TARGETS), CTC_IN, CTC_TL), {}, ValueError, r"\(T, N, C\)"),
    ((t(CTC_LP), t(CTC_TARGETS), CTC_IN, CTC_TL), {"reduction": "avg"}, ValueError,
     "reduction"),
    ((t(CTC_LP), t(CTC_TARGETS), 2.5, CTC_TL), {}, TypeError, "input_lengths"),
    ((t(CTC_LP).half(), t(CTC_TARGETS), CTC_IN, CTC_TL), {}, TypeError, "float32 or float64"),
])
def test_ctc_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        F.ctc_loss(*args, **kwargs)


# ---- modules -----------------------------------------------------------------------------------


@pytest.mark.parametrize("module, functional, args", [
    (nn.MarginRankingLoss(margin=0.2, reduction="sum"),
     lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2, reduction="sum"),
     (t(X1[:, 0]), t(X2[:, 0]), t(SIGN))),
    (nn.HingeEmbeddingLoss(margin=2.0), lambda a, y: F.hinge_embedding_loss(a, y, 2.0),
     (t(X1), t(SIGN_FULL))),
    (nn.SoftMarginLoss(), F.soft_margin_loss, (t(X1), t(SIGN_FULL))),
    (nn.CosineEmbeddingLoss(margin=0.1),
     lambda a, b, y: F.cosine_embedding_loss(a, b, y, 0.1), (t(X1), t(X2), t(SIGN))),
    (nn.HuberLoss(delta=0.5), lambda a, b: F.huber_loss(a, b, delta=0.5), (t(X1), t(X2))),
    (nn.PoissonNLLLoss(log_input=False, full=True),
     lambda a, b: F.poisson_nll_loss(a, b, log_input=False, full=True),
     (t(np.abs(X1)), t(np.abs(X2) * 3))),
    (nn.GaussianNLLLoss(full=True), lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True),
     (t(X1), t(X2), t(np.abs(X3)))),
    (nn.MultiLabelSoftMarginLoss(weight=t(W4)),
     lambda a, y: F.multilabel_soft_margin_loss(a, y, weight=t(W4)), (t(X1), t(MULTI_HOT))),
    (nn.MultiMarginLoss(p=2, margin=0.5),
     lambda a, y: F.multi_margin_loss(a, y, p=2, margin=0.5), (t(X1), t(CLASSES))),
    (nn.MultiLabelMarginLoss(), F.multilabel_margin_loss,
     (t(X1), t(np.array([[3, 0, -1, 1]] * 5)))),
    (nn.TripletMarginLoss(margin=0.5, p=1.0, swap=True),
     lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=0.5, p=1.0, swap=True),
     (t(X1), t(X2), t(X3))),
    (nn.TripletMarginWithDistanceLoss(margin=0.5),
     lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=0.5),
     (t(X1), t(X2), t(X3))),
    (nn.CTCLoss(reduction="sum", zero_infinity=True),
     lambda *a: F.ctc_loss(*a, reduction="sum", zero_infinity=True),
     (t(CTC_LP), t(CTC_TARGETS), CTC_IN, CTC_TL)),
])
def test_modules_match_functional_and_backprop(module, functional, args):
    args = (args[0].detach().requires_grad_(True),) + tuple(args[1:])
    got = module(*args)
    np.testing.assert_array_equal(to_numpy(got), to_numpy(functional(*args)))
    got.backward()
    assert args[0].grad is not None and np.all(np.isfinite(to_numpy(args[0].grad)))


# ---- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda: F.margin_ranking_loss(t(X1[:, 0]), t(X2[:, 0]), t(SIGN), margin="1"), TypeError,
     "margin_ranking_loss: margin must be a number"),
    (lambda: F.margin_ranking_loss(t(X1[:, 0]), t(X2[:2, 0]), t(SIGN)), ValueError,
     "margin_ranking_loss: expected inputs of the same shape"),
    (lambda: F.hinge_embedding_loss(t(X1), t(SIGN), reduction="avg"), ValueError,
     "hinge_embedding_loss: reduction must be one of"),
    (lambda: F.hinge_embedding_loss(t(X1), t(SIGN)), ValueError, "same shape"),
    (lambda: F.soft_margin_loss(X1, t(SIGN_FULL)), TypeError, "input must be a Tensor"),
    (lambda: F.cosine_embedding_loss(t(X1), t(X2), t(SIGN[:3])), ValueError,
     "target of shape"),
    (lambda: F.cosine_embedding_loss(t(X1), t(X2[:, :2]), t(SIGN)), ValueError, "same shape"),
    (lambda: F.cosine_embedding_loss(t(X1[None]), t(X2[None]), t(SIGN)), ValueError,
     "1-D or 2-D"),
    (lambda: F.huber_loss(t(X1), t(X2), delta=0.0), ValueError, "delta must be positive"),
    (lambda: F.huber_loss(t(X1), t(X2), delta=None), TypeError, "delta must be a number"),
    (lambda: F.poisson_nll_loss(t(X1), t(X2), size_average=True), TypeError, "deprecated"),
    (lambda: F.gaussian_nll_loss(t(X1), t(X2), t(-np.abs(X3))), ValueError, "negative"),
    (lambda: F.gaussian_nll_loss(t(X1), t(X2), t(np.abs(X3[:3]))), ValueError,
     "var of shape"),
    (lambda: F.multi_margin_loss(t(X1), t(CLASSES), p=3), ValueError, "p == 1 and p == 2"),
    (lambda: F.multi_margin_loss(t(X1), t(CLASSES + 2)), IndexError, r"in \[0, 4\)"),
    (lambda: F.multi_margin_loss(t(X1), t(CLASSES * 1.0)), TypeError, "integer tensor"),
    (lambda: F.multi_margin_loss(t(X1), t(CLASSES[:3])), ValueError, "does not match"),
    (lambda: F.multi_margin_loss(t(X1), t(CLASSES), weight=t(W4[:2])), ValueError,
     r"weight must have shape \(4,\)"),
    (lambda: F.multi_margin_loss(t(X1[None]), t(CLASSES)), ValueError, "1-D"),
    (lambda: F.multilabel_margin_loss(t(X1), t(CLASSES)), ValueError, "input's shape"),
    (lambda: F.multilabel_margin_loss(t(X1), t(np.full((5, 4), 7))), IndexError,
     "out of range"),
    (lambda: F.triplet_margin_with_distance_loss(t(X1), t(X2), t(X3), margin=0.0),
     ValueError, "greater than 0"),
    (lambda: F.triplet_margin_loss(t(X1), t(X2), t(X3), margin=None), TypeError,
     "triplet_margin_loss: margin must be a number"),
    (lambda: F.triplet_margin_loss(t(X1), t(X2), t(X3[0])), ValueError,
     "must all be 1-D or all 2-D"),
    (lambda: F.triplet_margin_with_distance_loss(t(X1), t(X2), t(X3), distance_function=3),
     TypeError, "callable"),
    (lambda: nn.MultiMarginLoss(p=0), ValueError, "MultiMarginLoss: only p"),
    (lambda: nn.TripletMarginWithDistanceLoss(margin=-1), ValueError,
     "TripletMarginWithDistanceLoss: margin"),
    (lambda: nn.PoissonNLLLoss(reduce=False), TypeError, "PoissonNLLLoss: size_average"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
