"""The fused optimizer kernels against numpy transcriptions of PyTorch's update rules, their
handling of non-contiguous operands, and their argument checks."""

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import optim
from singa_tensor.ops import fused_updates as fu

from ..helpers import to_numpy

R = np.random.default_rng(7)


def _t(a):
    return st.tensor(np.array(a, dtype=np.float64))


@pytest.mark.parametrize("nesterov,maximize,wd,damp", [(False, False, 0.0, 0.0),
                                                       (True, True, 0.1, 0.0),
                                                       (False, False, 0.05, 0.3)])
def test_sgd_step_matches_formula(nesterov, maximize, wd, damp):
    p0, b0 = R.standard_normal(9), R.standard_normal(9)
    grads = [R.standard_normal(9) for _ in range(3)]
    p, buf = _t(p0), _t(b0)
    want_p, want_b = p0.copy(), None
    for i, g in enumerate(grads):
        assert fu.sgd_step_(p, _t(g), buf, lr=0.1, momentum=0.9, dampening=damp,
                            weight_decay=wd, nesterov=nesterov, maximize=maximize, first=i == 0)
        ge = (-g if maximize else g) + wd * want_p
        want_b = ge.copy() if i == 0 else 0.9 * want_b + (1 - damp) * ge
        want_p = want_p - 0.1 * (ge + 0.9 * want_b if nesterov else want_b)
        np.testing.assert_allclose(to_numpy(p), want_p, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(buf), want_b, rtol=1e-12)


@pytest.mark.parametrize("amsgrad,decoupled,maximize", [(False, False, False), (True, True, True),
                                                         (True, False, False)])
def test_adam_step_matches_formula(amsgrad, decoupled, maximize):
    p0 = R.standard_normal(7)
    p, m, v = _t(p0), _t(np.zeros(7)), _t(np.zeros(7))
    vmax = _t(np.zeros(7)) if amsgrad else None
    wp, wm, wv, wx = p0.copy(), np.zeros(7), np.zeros(7), np.zeros(7)
    lr, b1, b2, eps, wd = 0.01, 0.8, 0.95, 1e-8, 0.2
    for t in range(1, 4):
        g = R.standard_normal(7)
        assert fu.adam_step_(p, _t(g), m, v, vmax, lr=lr, beta1=b1, beta2=b2, eps=eps,
                             weight_decay=wd, decoupled=decoupled, maximize=maximize, step=t)
        ge = -g if maximize else g
        if decoupled:
            wp = wp * (1 - lr * wd)
        else:
            ge = ge + wd * wp
        wm = b1 * wm + (1 - b1) * ge
        wv = b2 * wv + (1 - b2) * ge * ge
        wx = np.maximum(wx, wv)
        second = wx if amsgrad else wv
        wp = wp - lr / (1 - b1 ** t) * wm / (np.sqrt(second) / np.sqrt(1 - b2 ** t) + eps)
        np.testing.assert_allclose(to_numpy(p), wp, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(v), wv, rtol=1e-12)


@pytest.mark.parametrize("centered,momentum", [(False, 0.0), (True, 0.9)])
def test_rmsprop_step_matches_formula(centered, momentum):
    p0 = R.standard_normal(6)
    p, sq = _t(p0), _t(np.zeros(6))
    buf = _t(np.zeros(6)) if momentum else None
    ga = _t(np.zeros(6)) if centered else None
    wp, wsq, wb, wga = p0.copy(), np.zeros(6), np.zeros(6), np.zeros(6)
    for _ in range(3):
        g = R.standard_normal(6)
        assert fu.rmsprop_step_(p, _t(g), sq, buf, ga, lr=0.01, alpha=0.9, eps=1e-6,
                                weight_decay=0.1, momentum=momentum, maximize=False)
        ge = g + 0.1 * wp
        wsq = 0.9 * wsq + 0.1 * ge * ge
        var = wsq
        if centered:
            wga = 0.9 * wga + 0.1 * ge
            var = wsq - wga * wga
        upd = ge / (np.sqrt(var) + 1e-6)
        if momentum:
            wb = momentum * wb + upd
            upd = wb
        wp = wp - 0.01 * upd
        np.testing.assert_allclose(to_numpy(p), wp, rtol=1e-12)


def test_adagrad_step_matches_formula():
    p0 = R.standard_normal(5)
    p, s = _t(p0), _t(np.full(5, 0.1))
    wp, ws = p0.copy(), np.full(5, 0.1)
    for _ in range(3):
        g = R.standard_normal(5)
        assert fu.adagrad_step_(p, _t(g), s, clr=0.3, eps=1e-10, weight_decay=0.0,
                                maximize=True)
        ge = -g
        ws = ws + ge * ge
        wp = wp - 0.3 * ge / (np.sqrt(ws) + 1e-10)
        np.testing.assert_allclose(to_numpy(p), wp, rtol=1e-12)


def test_non_contiguous_parameter_and_gradient_are_updated_in_place():
    base = _t(R.standard_normal((4, 3)))
    p = base.t()  # a transposed view: the kernel works on a copy that is written back
    g = _t(R.standard_normal((4, 3))).t()
    want = to_numpy(p) - 0.5 * to_numpy(g)
    v0 = base._storage.version
    assert fu.sgd_step_(p, g, None, lr=0.5)
    np.testing.assert_allclose(to_numpy(p), want, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(base), want.T, rtol=1e-12)
    assert base._storage.version > v0


def test_half_precision_parameters_take_the_fused_path():
    p = st.tensor([1.0, -2.0], dtype=st.float16)
    assert fu.sgd_step_(p, st.tensor([0.5, 0.5], dtype=st.float16), None, lr=0.1) is True
    assert p.dtype is st.float16
    np.testing.assert_allclose(to_numpy(p.float()), [0.95, -2.05], rtol=1e-3)
    # a gradient in another dtype than the 16-bit parameter goes the composed way
    assert fu.sgd_step_(p, st.tensor([0.5, 0.5]), None, lr=0.1) is False
    w = st.tensor([1.0, -2.0], dtype=st.float16, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    (w.float() * w.float()).sum().backward()
    opt.step()
    np.testing.assert_allclose(to_numpy(w.detach().float()), [0.8, -1.6], rtol=1e-3)


def test_fused_update_argument_errors():
    p = _t(np.zeros(3))
    with pytest.raises(ValueError, match=r"sgd_step_: grad has shape \(2,\).*\(3,\)"):
        fu.sgd_step_(p, _t(np.zeros(2)), None, lr=0.1)
    with pytest.raises(TypeError, match="adam_step_: state 0 has dtype float32"):
        fu.adam_step_(p, _t(np.zeros(3)), st.zeros(3), _t(np.zeros(3)), None, lr=0.1,
                      beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0, decoupled=False,
                      maximize=False, step=1)
    with pytest.raises(ValueError, match=r"adagrad_step_: state 0 has shape \(4,\)"):
        fu.adagrad_step_(p, _t(np.zeros(3)), _t(np.zeros(4)), clr=0.1, eps=1e-10,
                         weight_decay=0.0, maximize=False)


# float32 kernels over lengths that fill whole vectors, leave a remainder, or fit in none: each
# step against the float64 rule applied to the kernel's own state before it, so only one
# step's rounding counts: a few float32 roundings of each term, within 16 ulps of the terms'
# magnitude. No weight decay: the gradient then enters exactly (the float64 tests above
# cover the decay terms)
_ULP32 = 2.0 ** -23


def _close32(got, want, scale):
    np.testing.assert_array_less(np.abs(got - want), 16 * _ULP32 * scale + 1e-30)


def _f32(a):
    return st.tensor(np.asarray(a, dtype=np.float32))


def _np(t):
    return to_numpy(t).astype(np.float64)


@pytest.mark.parametrize("n", [1, 7, 1003])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_float32_kernel_matches_rule_at_vector_lengths(n, amsgrad):
    r = np.random.default_rng(n)
    p, m, v = _f32(r.standard_normal(n)), _f32(np.zeros(n)), _f32(np.zeros(n))
    vmax = _f32(np.zeros(n)) if amsgrad else None
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.0
    for t in range(1, 4):
        g = r.standard_normal(n)
        p0, m0, v0 = _np(p), _np(m), _np(v)
        x0 = _np(vmax) if amsgrad else None
        assert fu.adam_step_(p, _f32(g), m, v, vmax, lr=lr, beta1=b1, beta2=b2, eps=eps,
                             weight_decay=wd, decoupled=False, maximize=False, step=t)
        g32 = g.astype(np.float32).astype(np.float64)
        ge = g32 + wd * p0
        wm = b1 * m0 + (1 - b1) * ge
        wv = b2 * v0 + (1 - b2) * ge * ge
        second = np.maximum(x0, wv) if amsgrad else wv
        upd = lr / (1 - b1 ** t) * wm / (np.sqrt(second) / np.sqrt(1 - b2 ** t) + eps)
        _close32(_np(m), wm, np.abs(b1 * m0) + np.abs(ge))
        _close32(_np(v), wv, np.abs(b2 * v0) + ge * ge)
        _close32(_np(p), p0 - upd, np.abs(p0) + np.abs(upd))


@pytest.mark.parametrize("n", [1, 7, 1003])
@pytest.mark.parametrize("centered,momentum", [(False, 0.0), (False, 0.9), (True, 0.0),
                                               (True, 0.9)])
def test_rmsprop_float32_kernel_matches_rule_at_vector_lengths(n, centered, momentum):
    r = np.random.default_rng(n + 1)
    p, sq = _f32(r.standard_normal(n)), _f32(np.zeros(n))
    buf = _f32(np.zeros(n)) if momentum else None
    ga = _f32(np.zeros(n)) if centered else None
    for _ in range(3):
        g = r.standard_normal(n)
        p0, s0 = _np(p), _np(sq)
        b0 = _np(buf) if momentum else 0.0
        a0 = _np(ga) if centered else 0.0
        assert fu.rmsprop_step_(p, _f32(g), sq, buf, ga, lr=0.01, alpha=0.9, eps=1e-6,
                                weight_decay=0.0, momentum=momentum, maximize=False)
        ge = g.astype(np.float32).astype(np.float64)
        ws = 0.9 * s0 + 0.1 * ge * ge
        var = ws
        if centered:
            wa = 0.9 * a0 + 0.1 * ge
            var = ws - wa * wa
            _close32(_np(ga), wa, np.abs(0.9 * a0) + np.abs(0.1 * ge))
        upd = ge / (np.sqrt(var) + 1e-6)
        if momentum:
            upd = momentum * b0 + upd
            _close32(_np(buf), upd, np.abs(momentum * b0) + np.abs(upd))
        _close32(_np(sq), ws, np.abs(0.9 * s0) + 0.1 * ge * ge)
        # var's own rounding (a difference when centered) bounds how well the update can agree
        _close32(_np(p), p0 - 0.01 * upd, np.abs(p0) + 0.01 * np.abs(upd) * (
            1 + (ws / np.maximum(var, 1e-30) if centered else 0)))


@pytest.mark.parametrize("n", [1, 7, 1003])
def test_adagrad_float32_kernel_matches_rule_at_vector_lengths(n):
    r = np.random.default_rng(n + 2)
    p, s = _f32(r.standard_normal(n)), _f32(np.full(n, 0.1))
    for _ in range(3):
        g = r.standard_normal(n)
        p0, s0 = _np(p), _np(s)
        assert fu.adagrad_step_(p, _f32(g), s, clr=0.3, eps=1e-10, weight_decay=0.0,
                                maximize=False)
        ge = g.astype(np.float32).astype(np.float64)
        ws = s0 + ge * ge
        upd = 0.3 * ge / (np.sqrt(ws) + 1e-10)
        _close32(_np(s), ws, ws)
        _close32(_np(p), p0 - upd, np.abs(p0) + np.abs(upd))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", ["adam", "amsgrad", "rmsprop", "rmsprop_centered_momentum",
                                  "adagrad"])
def test_half_precision_updates_round_the_float32_rule_once(dtype, kind):
    # the 16-bit kernels apply the float32 rule to the widened values and round each stored
    # value once: the same step on float32 copies, rounded, agrees to one 16-bit ulp
    n = 1003
    r = np.random.default_rng(3)
    dt = getattr(st, dtype)
    half = {"p": r.standard_normal(n), "g": r.standard_normal(n),
            "a": np.abs(r.standard_normal(n)) * 0.1, "b": np.abs(r.standard_normal(n)) * 0.1,
            "c": np.abs(r.standard_normal(n)) * 0.1}
    h = {k: st.tensor(v, dtype=st.float32).to(dt) for k, v in half.items()}
    f = {k: t.float() for k, t in h.items()}  # the same values, exactly, in float32
    for t in (h, f):
        if kind in ("adam", "amsgrad"):
            ok = fu.adam_step_(t["p"], t["g"], t["a"], t["b"],
                               t["c"] if kind == "amsgrad" else None, lr=0.01, beta1=0.9,
                               beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                               maximize=False, step=2)
        elif kind.startswith("rmsprop"):
            both = kind != "rmsprop"
            ok = fu.rmsprop_step_(t["p"], t["g"], t["a"], t["b"] if both else None,
                                  t["c"] if both else None, lr=0.01, alpha=0.9, eps=1e-6,
                                  weight_decay=0.0, momentum=0.9 if both else 0.0,
                                  maximize=False)
        else:
            ok = fu.adagrad_step_(t["p"], t["g"], t["a"], clr=0.3, eps=1e-10,
                                  weight_decay=0.0, maximize=False)
        assert ok is True
    for k in ("p", "a", "b", "c"):
        got = to_numpy(h[k].float()).astype(np.float64)
        want = to_numpy(f[k].to(dt).float()).astype(np.float64)
        ulp = 2.0 ** (-10 if dtype == "float16" else -7) * np.maximum(np.abs(want), 2.0 ** -14)
        np.testing.assert_array_less(np.abs(got - want), ulp * 1.01 + 1e-30)
