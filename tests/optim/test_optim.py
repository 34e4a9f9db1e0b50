"""Optimizers against independent numpy implementations of PyTorch's published update rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import optim
from singa_tensor.nn.utils import clip_grad_norm_, clip_grad_value_

from ..helpers import DEVICE, to_numpy

SHAPES = [(3, 4), (5,), ()]
STEPS = 5


def _init_values(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def _grad_of(p: np.ndarray, k: int) -> np.ndarray:
    """A gradient that depends on the parameter and the step, with mixed signs."""
    return np.sin(3.0 * p + k) + 0.3 * p ** 3 - 0.1 * (k + 1)


def _params(values, dtype=st.float64) -> list[st.Tensor]:
    return [st.tensor(v, dtype=dtype, requires_grad=True) for v in values]


def _run(opt_cls, values, kwargs, steps=STEPS, groups=None, dtype=st.float64):
    """Run opt_cls for `steps` steps; the gradient at step k is _grad_of(current value, k)."""
    params = _params(values, dtype)
    opt = opt_cls(groups(params) if groups else params, **kwargs)
    history = []
    for k in range(steps):
        for p in params:
            p.grad = st.tensor(_grad_of(to_numpy(p), k), dtype=dtype)
        opt.step()
        history.append([to_numpy(p) for p in params])
    return history, params, opt


# ---- numpy references: one function per optimizer, state in plain dicts ----------------------

def ref_sgd(p, g, s, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    if momentum:
        if "buf" not in s:
            s["buf"] = g.copy()
        else:
            s["buf"] = momentum * s["buf"] + (1 - dampening) * g
        g = g + momentum * s["buf"] if nesterov else s["buf"]
    return p - lr * g


def ref_adam(p, g, s, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = s["t"] = s.get("t", 0) + 1
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = s["m"] / (1 - b1 ** t)
    if amsgrad:
        s["vmax"] = np.maximum(s.get("vmax", 0.0), s["v"])
        v_hat = s["vmax"] / (1 - b2 ** t)
    else:
        v_hat = s["v"] / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def ref_adamw(p, g, s, lr=1e-3, weight_decay=1e-2, **kw):
    return ref_adam(p, g, s, lr=lr, weight_decay=weight_decay, decoupled=True, **kw)


def ref_rmsprop(p, g, s, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    s["v"] = alpha * s.get("v", 0.0) + (1 - alpha) * g * g
    if centered:
        s["a"] = alpha * s.get("a", 0.0) + (1 - alpha) * g
        denom = np.sqrt(s["v"] - s["a"] ** 2) + eps
    else:
        denom = np.sqrt(s["v"]) + eps
    if momentum > 0:
        s["b"] = momentum * s.get("b", 0.0) + g / denom
        return p - lr * s["b"]
    return p - lr * g / denom


def ref_adagrad(p, g, s, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                eps=1e-10, maximize=False):
    g = -g if maximize else g
    t = s["t"] = s.get("t", 0) + 1
    g = g + weight_decay * p
    s["sum"] = s.get("sum", initial_accumulator_value) + g * g
    clr = lr / (1 + (t - 1) * lr_decay)
    return p - clr * g / (np.sqrt(s["sum"]) + eps)


def _reference(ref, values, kwargs_per_param, steps=STEPS):
    ps = [v.copy() for v in values]
    states = [{} for _ in values]
    history = []
    for k in range(steps):
        ps = [ref(p, _grad_of(p, k), s, **kw) for p, s, kw in zip(ps, states, kwargs_per_param)]
        history.append([p.copy() for p in ps])
    return history


def _check(opt_cls, ref, kwargs, rtol=1e-12, atol=1e-13):
    values = _init_values()
    got, _, _ = _run(opt_cls, values, kwargs)
    want = _reference(ref, values, [kwargs] * len(values))
    for k, (g_step, w_step) in enumerate(zip(got, want)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {k}")
    # the parameters actually moved (a no-op optimizer would fail the comparison above anyway)
    assert not np.allclose(got[-1][0], values[0])


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.1, weight_decay=0.2),
    dict(lr=0.1, momentum=0.5, maximize=True),
]
ADAM_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6),
    dict(lr=0.05, weight_decay=0.1),
    dict(lr=0.05, amsgrad=True, betas=(0.5, 0.9)),
    dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True),
]
ADAMW_CASES = [
    dict(lr=0.05),
    dict(lr=0.05, weight_decay=0.3),
    dict(lr=0.05, weight_decay=0.3, amsgrad=True, betas=(0.5, 0.9)),
    dict(lr=0.05, weight_decay=0.0, maximize=True),
]
RMSPROP_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, alpha=0.9, eps=1e-4),
    dict(lr=0.01, centered=True),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1, alpha=0.8),
    dict(lr=0.01, maximize=True, weight_decay=0.05),
]
ADAGRAD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, lr_decay=0.5),
    dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3),
    dict(lr=0.1, weight_decay=0.2, lr_decay=0.1, maximize=True),
]


@pytest.mark.parametrize("kwargs", SGD_CASES)
def test_sgd_matches_reference(kwargs):
    _check(optim.SGD, ref_sgd, kwargs)


@pytest.mark.parametrize("kwargs", ADAM_CASES)
def test_adam_matches_reference(kwargs):
    _check(optim.Adam, ref_adam, kwargs)


@pytest.mark.parametrize("kwargs", ADAMW_CASES)
def test_adamw_matches_reference(kwargs):
    _check(optim.AdamW, ref_adamw, kwargs)


@pytest.mark.parametrize("kwargs", RMSPROP_CASES)
def test_rmsprop_matches_reference(kwargs):
    _check(optim.RMSprop, ref_rmsprop, kwargs)


@pytest.mark.parametrize("kwargs", ADAGRAD_CASES)
def test_adagrad_matches_reference(kwargs):
    _check(optim.Adagrad, ref_adagrad, kwargs)


def test_hand_computed_steps():
    # SGD, momentum 0.5, gradient 2p of p^2 from p = 1: p1 = 1 - 0.1*2 = 0.8,
    # buf = 0.5*2 + 1.6 = 2.6, p2 = 0.8 - 0.26 = 0.54
    w = st.tensor([1.0], dtype=st.float64, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.5)
    for want in (0.8, 0.54):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        assert w.item() == pytest.approx(want, rel=1e-14)
    # Adam's first step moves every coordinate by lr * g / (|g| + eps') ~= lr (bias-corrected)
    w = st.tensor([3.0, -0.5], dtype=st.float64, requires_grad=True)
    opt = optim.Adam([w], lr=0.01, eps=0.0)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(to_numpy(w), [2.99, -0.49], rtol=1e-14)


def test_defaults_follow_pytorch():
    p = [st.zeros(1, requires_grad=True)]
    assert optim.SGD(p).defaults == dict(lr=1e-3, momentum=0.0, dampening=0.0,
                                         weight_decay=0.0, nesterov=False, maximize=False,
                                         foreach=None, differentiable=False, fused=None)
    assert optim.Adam(p).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                          weight_decay=0.0, amsgrad=False, maximize=False,
                                          foreach=None, capturable=False, differentiable=False,
                                          fused=None, decoupled_weight_decay=False)
    d = optim.AdamW(p).defaults
    assert (d["weight_decay"], d["decoupled_weight_decay"]) == (1e-2, True)
    d = optim.RMSprop(p).defaults
    assert (d["lr"], d["alpha"], d["eps"], d["momentum"], d["centered"]) == (
        1e-2, 0.99, 1e-8, 0.0, False)
    d = optim.Adagrad(p).defaults
    assert (d["lr"], d["lr_decay"], d["eps"], d["initial_accumulator_value"]) == (
        1e-2, 0.0, 1e-10, 0.0)


def test_float32_parameters_track_the_float64_reference():
    values = _init_values(1)
    kwargs = dict(lr=0.05, amsgrad=True, weight_decay=0.01)
    got, params, opt = _run(optim.Adam, values, kwargs, dtype=st.float32)
    assert all(p.dtype is st.float32 for p in params)
    assert all(s["exp_avg"].dtype is st.float32 for s in opt.state.values())
    want = _reference(ref_adam, values, [kwargs] * 3)
    for g, w in zip(got[-1], want[-1]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_param_groups_use_their_own_hyperparameters():
    values = _init_values(2)

    def groups(ps):
        return [{"params": [ps[0]], "lr": 0.2, "momentum": 0.9},
                {"params": ps[1:], "nesterov": True}]

    kwargs = dict(lr=0.01, momentum=0.5)
    got, _, opt = _run(optim.SGD, values, kwargs, groups=groups)
    per_param = [dict(lr=0.2, momentum=0.9), dict(kwargs, nesterov=True),
                 dict(kwargs, nesterov=True)]
    want = _reference(ref_sgd, values, per_param)
    for g, w in zip(got[-1], want[-1]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert [g["lr"] for g in opt.param_groups] == [0.2, 0.01]
    assert opt.param_groups[1]["dampening"] == 0.0  # filled from defaults


def test_add_param_group_and_skipping_params_without_grad():
    a, b = st.ones(2, requires_grad=True), st.ones(3, requires_grad=True)
    opt = optim.Adam([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert len(opt.param_groups[1]["params"]) == 1 and opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    b.grad = st.ones(3)
    opt.step()
    np.testing.assert_allclose(to_numpy(a), [1.0, 1.0])  # no grad: untouched
    np.testing.assert_allclose(to_numpy(b), [0.5] * 3, rtol=1e-6)
    assert a not in opt.state and b in opt.state


def test_step_with_closure_and_zero_grad():
    w = st.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    calls = []

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        calls.append(1)
        return loss

    with st.no_grad():  # the closure must still see gradients enabled
        loss = opt.step(closure)
    assert loss.item() == 5.0 and calls == [1]
    np.testing.assert_allclose(to_numpy(w), [0.0, 0.0])
    (w + 1).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert w.grad is not None and w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_step_with_real_backward_updates_in_place():
    w = st.tensor([[1.0, -1.0], [0.5, 2.0]], dtype=st.float64, requires_grad=True)
    storage = w._storage
    opt = optim.RMSprop([w], lr=0.01, momentum=0.9, centered=True)
    for k in range(3):
        opt.zero_grad()
        ((w ** 3).sum() * (k + 1)).backward()
        opt.step()
    assert w._storage is storage and w.is_leaf and w.requires_grad
    s = {}
    ps = np.array([[1.0, -1.0], [0.5, 2.0]])
    for k in range(3):
        ps = ref_rmsprop(ps, 3 * ps ** 2 * (k + 1), s, lr=0.01, momentum=0.9, centered=True)
    np.testing.assert_allclose(to_numpy(w), ps, rtol=1e-12)


# ---- state_dict ------------------------------------------------------------------------------

RESUME_CASES = [
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (optim.Adam, dict(lr=0.05, amsgrad=True)),
    (optim.AdamW, dict(lr=0.05, weight_decay=0.1)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1)),
]


@pytest.mark.parametrize("opt_cls,kwargs", RESUME_CASES)
def test_state_dict_resume_reproduces_uninterrupted_run(opt_cls, kwargs):
    values = _init_values(3)
    full, _, _ = _run(opt_cls, values, kwargs, steps=6)

    first, params, opt = _run(opt_cls, values, kwargs, steps=3)
    saved = opt.state_dict()
    saved_values = [to_numpy(p) for p in params]
    # continuing the first optimizer must not alter what was saved (state is copied)
    for p in params:
        p.grad = st.ones(p.shape, dtype=st.float64)
    opt.step()

    resumed = _params(saved_values)
    opt2 = opt_cls(resumed, lr=123.0)  # hyper-parameters come from the state dict
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    for k in range(3, 6):
        for p in resumed:
            p.grad = st.tensor(_grad_of(to_numpy(p), k), dtype=st.float64)
        opt2.step()
    for got, want in zip(resumed, full[-1]):
        np.testing.assert_array_equal(to_numpy(got), want)


def test_state_dict_layout_matches_pytorch():
    a, b, c = (st.ones(2, requires_grad=True) for _ in range(3))
    opt = optim.SGD([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1, momentum=0.9)
    for p in (a, c):
        p.grad = st.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["momentum"] == 0.9
    assert sorted(sd["state"]) == [0, 2]
    buf = sd["state"][0]["momentum_buffer"]
    assert buf.tolist() == [1.0, 1.0]
    assert buf._storage is not opt.state[a]["momentum_buffer"]._storage


def test_load_state_dict_casts_and_accepts_lists_and_string_keys():
    w = st.ones(2, dtype=st.float32, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    sd = {"state": {"0": {"step": 2, "exp_avg": st.tensor([0.1, 0.2], dtype=st.float64),
                          "exp_avg_sq": st.tensor([0.01, 0.04], dtype=st.float64)}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0], betas=[0.5, 0.6])]}
    opt.load_state_dict(sd)
    assert opt.state[w]["exp_avg"].dtype is st.float32
    assert opt.param_groups[0]["betas"] == (0.5, 0.6)
    assert opt.state[w]["step"] == 2


def test_load_state_dict_errors():
    a, b = st.ones(2, requires_grad=True), st.ones(3, requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="SGD.load_state_dict: loaded state dict has 2 parameter "
                                         "groups, the optimizer has 1"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    good = opt.state_dict()["param_groups"][0]
    with pytest.raises(ValueError, match="loaded parameter group 0 has 1 parameters, the "
                                         "optimizer's has 2"):
        opt.load_state_dict({"state": {}, "param_groups": [dict(good, params=[0])]})
    with pytest.raises(ValueError, match=r"state 'momentum_buffer' of parameter 1 has shape "
                                         r"\(2,\), the parameter has shape \(3,\)"):
        opt.load_state_dict({"state": {1: {"momentum_buffer": st.zeros(2)}},
                             "param_groups": [good]})
    with pytest.raises(ValueError, match="state refers to parameter 7"):
        opt.load_state_dict({"state": {7: {}}, "param_groups": [good]})
    with pytest.raises(ValueError, match="SGD: invalid learning rate: -1"):
        opt.load_state_dict({"state": {}, "param_groups": [dict(good, lr=-1)]})
    with pytest.raises(ValueError, match="expected a dict with 'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    assert opt.param_groups[0]["lr"] == 0.1  # failed loads change nothing


# ---- construction errors ---------------------------------------------------------------------

BAD_HYPERPARAMETERS = [
    (optim.SGD, dict(lr=-0.1), "SGD: invalid learning rate: -0.1"),
    (optim.SGD, dict(momentum=-0.5), "SGD: invalid momentum value: -0.5"),
    (optim.SGD, dict(weight_decay=-1e-4), "SGD: invalid weight_decay value: -0.0001"),
    (optim.SGD, dict(nesterov=True), "SGD: Nesterov momentum requires a momentum and zero "
                                     "dampening"),
    (optim.SGD, dict(nesterov=True, momentum=0.9, dampening=0.1), "Nesterov momentum requires"),
    (optim.Adam, dict(lr=-1e-3), "Adam: invalid learning rate: -0.001"),
    (optim.Adam, dict(eps=-1.0), "Adam: invalid epsilon value: -1.0"),
    (optim.Adam, dict(betas=(1.0, 0.9)), "Adam: invalid beta parameter at index 0: 1.0"),
    (optim.Adam, dict(betas=(0.9, -0.1)), "Adam: invalid beta parameter at index 1: -0.1"),
    (optim.Adam, dict(betas=(0.9,)), "Adam: betas must be a pair"),
    (optim.AdamW, dict(weight_decay=-0.1), "AdamW: invalid weight_decay value: -0.1"),
    (optim.RMSprop, dict(alpha=-0.1), "RMSprop: invalid alpha value: -0.1"),
    (optim.RMSprop, dict(momentum=-0.1), "RMSprop: invalid momentum value: -0.1"),
    (optim.Adagrad, dict(lr_decay=-0.1), "Adagrad: invalid lr_decay value: -0.1"),
    (optim.Adagrad, dict(initial_accumulator_value=-1.0),
     "Adagrad: invalid initial_accumulator_value: -1.0"),
    (optim.Adagrad, dict(lr=math.nan), "Adagrad: invalid learning rate: nan"),
]


@pytest.mark.parametrize("opt_cls,kwargs,msg", BAD_HYPERPARAMETERS)
def test_bad_hyperparameters_raise(opt_cls, kwargs, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        opt_cls([st.zeros(1, requires_grad=True)], **kwargs)


def test_bad_hyperparameter_in_a_group_raises():
    w = st.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="SGD: invalid learning rate: -2"):
        optim.SGD([{"params": [w], "lr": -2}], lr=0.1)
    with pytest.raises(TypeError, match="SGD: learning rate must be a number, got str"):
        optim.SGD([w], lr="0.1")


def test_bad_params_raise():
    w = st.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="SGD: params should be an iterable of Tensors or dicts, "
                                        "but got a Tensor"):
        optim.SGD(w)
    with pytest.raises(ValueError, match="Adam: got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="not a set"):
        optim.SGD({w})
    with pytest.raises(TypeError, match="SGD: can only optimize Tensors, but one of the params "
                                        "is ndarray"):
        optim.SGD([np.zeros(2)])
    with pytest.raises(ValueError, match="SGD: can't optimize a non-leaf Tensor"):
        optim.SGD([w * 2])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter "
                                         "group"):
        optim.SGD([{"params": [w]}, {"params": [w]}])
    opt = optim.SGD([w])
    with pytest.raises(TypeError, match="SGD: a param group must be a dict, got list"):
        opt.add_param_group([w])
    with pytest.raises(ValueError, match="needs a 'params' entry"):
        opt.add_param_group({"lr": 0.1})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([st.zeros(1, requires_grad=True)] + [w, w])


def test_repr_lists_groups():
    opt = optim.SGD([st.zeros(1, requires_grad=True)], lr=0.1)
    text = repr(opt)
    assert text.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.1\n" in text


# ---- gradient clipping -----------------------------------------------------------------------

def _with_grads(arrays, dtype=st.float64):
    params = []
    for a in arrays:
        p = st.zeros(a.shape, dtype=dtype, requires_grad=True)
        p.grad = st.tensor(a, dtype=dtype)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_numpy(norm_type):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 4)), rng.standard_normal(5), rng.standard_normal(())]
    flat = np.concatenate([a.ravel() for a in arrays])
    total = np.max(np.abs(flat)) if norm_type == math.inf else \
        np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
    params = _with_grads(arrays)
    params.append(st.zeros(2, requires_grad=True))  # no grad: ignored
    max_norm = 0.5
    got = clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert got.item() == pytest.approx(total, rel=1e-12)
    coef = min(1.0, max_norm / (total + 1e-6))
    for p, a in zip(params, arrays):
        np.testing.assert_allclose(to_numpy(p.grad), a * coef, rtol=1e-12)


def test_clip_grad_norm_leaves_small_gradients_and_handles_edge_cases():
    (p,) = _with_grads([np.array([0.3, -0.4])])
    assert clip_grad_norm_(p, 10.0).item() == pytest.approx(0.5)
    np.testing.assert_allclose(to_numpy(p.grad), [0.3, -0.4], rtol=1e-12)
    empty = clip_grad_norm_([st.zeros(2, requires_grad=True)], 1.0)
    assert empty.item() == 0.0
    (q,) = _with_grads([np.array([np.inf, 1.0])])
    with pytest.raises(RuntimeError, match="total norm of order 2.0 for gradients from "
                                           "`parameters` is non-finite"):
        clip_grad_norm_([q], 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="clip_grad_norm_: max_norm must be a non-negative "
                                         "number, got -1.0"):
        clip_grad_norm_([p], -1.0)
    with pytest.raises(TypeError, match="clip_grad_norm_: expected Tensors as parameters, got "
                                        "ndarray"):
        clip_grad_norm_([np.zeros(2)], 1.0)


def test_clip_grad_value_():
    a = np.array([[-3.0, 0.2], [0.7, 5.0]])
    params = _with_grads([a, np.array([-0.1])])
    assert clip_grad_value_(params, 0.5) is None
    np.testing.assert_array_equal(to_numpy(params[0].grad), np.clip(a, -0.5, 0.5))
    np.testing.assert_array_equal(to_numpy(params[1].grad), [-0.1])
    with pytest.raises(ValueError, match="clip_grad_value_: clip_value must be a non-negative "
                                         "number, got -1.0"):
        clip_grad_value_(params, -1)


# ---- one kernel call per parameter list (foreach) ----------------------------------------------


def _list_run(opt_cls, kwargs, foreach, steps=4):
    """Params of several sizes (one split across threads mid-tensor, a float64 one and a
    transposed view among float32 ones), updated `steps` times; their values and states."""
    rng = np.random.default_rng(21)
    vals = [rng.standard_normal(s) for s in [(7,), (300, 257), (3, 5), (40,), ()]]
    params = [st.tensor(v, dtype=st.float32, requires_grad=True) for v in vals]
    params.append(st.tensor(rng.standard_normal((6, 4)), dtype=st.float64, requires_grad=True))
    leaf = st.tensor(rng.standard_normal((4, 9)), dtype=st.float32, requires_grad=True)
    opt = opt_cls(params + [leaf], foreach=foreach, **kwargs)
    for k in range(steps):
        for p in params + [leaf]:
            p.grad = st.tensor(_grad_of(to_numpy(p.detach()).astype(np.float64), k),
                               dtype=p.dtype)
        leaf.grad = leaf.grad.t().contiguous().t()  # a non-contiguous gradient
        opt.step()
    states = [{k: to_numpy(v) for k, v in opt.state[p].items() if isinstance(v, st.Tensor)}
              for p in params + [leaf]]
    return [to_numpy(p.detach()) for p in params + [leaf]], states


@pytest.mark.parametrize("opt_cls, kwargs", [
    (optim.SGD, dict(lr=0.05)),
    (optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.3, maximize=True)),
    (optim.Adam, dict(lr=0.01, weight_decay=0.02)),
    (optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
])
def test_list_updates_equal_per_parameter_updates(opt_cls, kwargs):
    # the list kernels apply the per-parameter rule to each element: the same bits
    got, got_states = _list_run(opt_cls, kwargs, None)
    want, want_states = _list_run(opt_cls, kwargs, False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for gs, ws in zip(got_states, want_states):
        assert gs.keys() == ws.keys()
        for k in gs:
            np.testing.assert_array_equal(gs[k], ws[k])


def test_list_updates_make_one_call_per_dtype(monkeypatch):
    from singa_tensor.ops import fused_updates

    calls = []
    real = fused_updates.sgd_multi_step_
    monkeypatch.setattr(fused_updates, "sgd_multi_step_",
                        lambda ps, *a, **k: (calls.append(len(ps)), real(ps, *a, **k)))
    single = []
    real_single = fused_updates.sgd_step_
    monkeypatch.setattr(fused_updates, "sgd_step_",
                        lambda p, *a, **k: (single.append(p.shape), real_single(p, *a, **k))[1])
    _list_run(optim.SGD, dict(lr=0.1, momentum=0.9), None, steps=2)
    if st.backend.get(st.device(DEVICE)).kernel("st_sgd_step_multi_f32") is not None:
        # per step: the five float32 parameters in one call, the float64 one in another; the
        # parameter with a non-contiguous gradient alone
        assert sorted(calls) == [1, 1, 5, 5] and single == [(4, 9), (4, 9)]
    else:  # a backend without the list kernels (CUDA's): one call per parameter
        assert calls == [] and len(single) == 14
    calls.clear()
    single.clear()
    _list_run(optim.SGD, dict(lr=0.1, momentum=0.9), False, steps=1)
    assert calls == [] and len(single) == 7


def test_each_optimizer_asks_for_its_own_list_kernel(monkeypatch):
    """A backend with the SGD list kernel but not Adam's: Adam updates one parameter per call,
    SGD still the whole list."""
    from singa_tensor.ops import fused_updates

    be = st.backend.get(st.device(DEVICE))
    if be.kernel("st_sgd_step_multi_f32") is None:
        pytest.skip("this backend has no list kernels")
    real_kernel = be.kernel

    def kernel(name):
        return None if name.startswith("st_adam_step_multi_") else real_kernel(name)

    monkeypatch.setattr(be, "kernel", kernel)
    counts = {"sgd": 0, "adam": 0}
    for name, key in (("sgd_multi_step_", "sgd"), ("adam_multi_step_", "adam")):
        real = getattr(fused_updates, name)

        def counting(ps, *a, _real=real, _key=key, **k):
            counts[_key] += 1
            return _real(ps, *a, **k)

        monkeypatch.setattr(fused_updates, name, counting)
    ws = [st.randn(3, requires_grad=True) for _ in range(3)]
    for opt in (optim.Adam(ws, lr=0.1), optim.SGD(ws, lr=0.1, momentum=0.9)):
        sum((w * w).sum() for w in ws).backward()
        opt.step()
        opt.zero_grad()
    assert counts == {"sgd": 1, "adam": 0}


def test_list_updates_version_counters():
    # a backward that saved a parameter must see that the list update changed it
    w = st.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    pending = (w * w).sum()
    before = w._storage.version
    opt.step()
    assert w._storage.version == before + 1
    buf = opt.state[w]["momentum_buffer"]
    v = buf._storage.version
    w.grad = st.tensor([1.0, 1.0])
    opt.step()
    assert buf._storage.version == v + 1
    with pytest.raises(RuntimeError):
        pending.backward()


def test_decoupled_weight_decay_makes_adam_adamw():
    values = _init_values(3)
    a, _, _ = _run(optim.Adam, values, dict(lr=0.05, weight_decay=0.3,
                                            decoupled_weight_decay=True))
    b, _, _ = _run(optim.AdamW, values, dict(lr=0.05, weight_decay=0.3))
    for x, y in zip(a[-1], b[-1]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam, optim.AdamW])
def test_implementation_switches(opt_cls):
    p = [st.zeros(2, requires_grad=True)]
    for kw in (dict(foreach=True), dict(foreach=False), dict(fused=True), dict(fused=None)):
        opt_cls(p, lr=0.1, **kw)
    with pytest.raises(TypeError, match=f"{opt_cls.__name__}: foreach must be None or a bool"):
        opt_cls(p, lr=0.1, foreach="yes")
    with pytest.raises(TypeError, match=f"{opt_cls.__name__}: fused must be None or a bool"):
        opt_cls(p, lr=0.1, fused=1)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        opt_cls(p, lr=0.1, differentiable=True)
