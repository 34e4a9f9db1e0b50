"""Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop, SparseAdam and LBFGS against independent float64
numpy implementations of the update rules in PyTorch's documentation.

Tolerance: float64 parameters after five steps agree with the references to rtol 1e-12 (plus
atol 1e-13 near zero); the two sides round the same formulas in different orders."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import optim

from ..helpers import to_numpy
from .test_optim import _check, _grad_of, _init_values, _params, _reference, _run

# ---- numpy references --------------------------------------------------------------------------

def ref_adadelta(p, g, s, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    g = (-g if maximize else g) + weight_decay * p
    s["v"] = rho * s.get("v", 0.0) + (1 - rho) * g * g
    delta = np.sqrt(s.get("u", 0.0) + eps) / np.sqrt(s["v"] + eps) * g
    s["u"] = rho * s.get("u", 0.0) + (1 - rho) * delta * delta
    return p - lr * delta


def ref_adamax(p, g, s, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
               maximize=False):
    b1, b2 = betas
    g = (-g if maximize else g) + weight_decay * p
    t = s["t"] = s.get("t", 0) + 1
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0.0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * s["m"] / s["u"]


def ref_nadam(p, g, s, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = s["t"] = s.get("t", 0) + 1
    if decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    s["prod"] = s.get("prod", 1.0) * mu
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = mu_next * s["m"] / (1 - s["prod"] * mu_next) + (1 - mu) * g / (1 - s["prod"])
    v_hat = s["v"] / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def ref_radam(p, g, s, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = s["t"] = s.get("t", 0) + 1
    if decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat = s["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho_t > 5:
        ell = np.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)
        r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2)
                                                              * rho_t))
        return p - lr * m_hat * ell * r
    return p - lr * m_hat


def ref_asgd(p, g, s, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0,
             maximize=False):
    g = (-g if maximize else g) + weight_decay * p
    t = s["t"] = s.get("t", 0) + 1
    eta, mu = s.get("eta", lr), s.get("mu", 1.0)
    p = p * (1 - lambd * eta) - eta * g
    s["ax"] = s.get("ax", np.zeros_like(p)) + (p - s.get("ax", 0.0)) * mu if mu != 1 else p
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return p


def ref_rprop(p, g, s, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    prev = s.get("prev", np.zeros_like(p))
    size = s.get("size", np.full_like(p, lr))
    prod = g * prev
    size = np.clip(np.where(prod > 0, size * etas[1], np.where(prod < 0, size * etas[0], size)),
                   *step_sizes)
    g = np.where(prod < 0, 0.0, g)
    s["prev"], s["size"] = g, size
    return p - np.sign(g) * size


def ref_sparse_adam(p, g, s, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
    """The update restricted to the entries of g that are nonzero (a sparse gradient's
    indices), written with boolean indexing."""
    b1, b2 = betas
    g = -g if maximize else g
    t = s["t"] = s.get("t", 0) + 1
    m = s.setdefault("m", np.zeros_like(p))
    v = s.setdefault("v", np.zeros_like(p))
    p = p.copy()
    idx = g != 0
    m[idx] = b1 * m[idx] + (1 - b1) * g[idx]
    v[idx] = b2 * v[idx] + (1 - b2) * g[idx] ** 2
    p[idx] -= lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m[idx] / (np.sqrt(v[idx]) + eps)
    return p


# ---- the update rules, five steps on three parameters -----------------------------------------

CASES = [
    (optim.Adadelta, ref_adadelta, dict()),
    (optim.Adadelta, ref_adadelta, dict(lr=0.5, rho=0.5, eps=1e-3)),
    (optim.Adadelta, ref_adadelta, dict(rho=0.8, weight_decay=0.1, maximize=True)),
    (optim.Adamax, ref_adamax, dict(lr=0.1)),
    (optim.Adamax, ref_adamax, dict(lr=0.05, betas=(0.5, 0.8), eps=1e-3, weight_decay=0.1)),
    (optim.Adamax, ref_adamax, dict(lr=0.05, maximize=True)),
    (optim.NAdam, ref_nadam, dict(lr=0.1)),
    (optim.NAdam, ref_nadam, dict(lr=0.05, betas=(0.8, 0.9), momentum_decay=0.3,
                                  weight_decay=0.1)),
    (optim.NAdam, ref_nadam, dict(lr=0.05, weight_decay=0.3, decoupled_weight_decay=True)),
    (optim.NAdam, ref_nadam, dict(lr=0.05, maximize=True, eps=1e-4)),
    # (RAdam's rectified branch first runs at step 6: test_radam_takes_both_branches)
    (optim.RAdam, ref_radam, dict(lr=0.1)),
    (optim.RAdam, ref_radam, dict(lr=0.05, betas=(0.5, 0.8), weight_decay=0.1)),
    (optim.ASGD, ref_asgd, dict(lr=0.1)),
    (optim.ASGD, ref_asgd, dict(lr=0.1, lambd=0.5, alpha=0.5, t0=2, weight_decay=0.1)),
    (optim.ASGD, ref_asgd, dict(lr=0.05, t0=0, maximize=True)),
    (optim.Rprop, ref_rprop, dict()),
    (optim.Rprop, ref_rprop, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.05, 0.2))),
    (optim.Rprop, ref_rprop, dict(lr=0.1, maximize=True)),
]


def _id(case):
    return f"{case[0].__name__}-" + ",".join(f"{k}={v}" for k, v in case[2].items())


@pytest.mark.parametrize("opt_cls,ref,kwargs", CASES, ids=[_id(c) for c in CASES])
def test_matches_reference(opt_cls, ref, kwargs):
    _check(opt_cls, ref, kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.01), dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.3, decoupled_weight_decay=True, maximize=True)])
def test_radam_takes_both_branches(kwargs):
    # rho_t passes 5 at step 6 for beta2 = 0.999 and for beta2 = 0.9: eight steps run both
    # the plain momentum steps and the rectified ones
    for b2 in (0.999, 0.9):
        rho_inf = 2 / (1 - b2) - 1
        rho = [rho_inf - 2 * t * b2 ** t / (1 - b2 ** t) for t in range(1, 9)]
        assert rho[4] <= 5 < rho[5]
    values = _init_values(4)
    got, _, _ = _run(optim.RAdam, values, kwargs, steps=8)
    want = _reference(ref_radam, values, [kwargs] * 3, steps=8)
    for k, (g_step, w_step) in enumerate(zip(got, want)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13, err_msg=f"step {k}")


def test_asgd_average_and_schedules():
    values = _init_values(5)
    kwargs = dict(lr=0.1, lambd=0.2, alpha=0.6, t0=1)
    _, params, opt = _run(optim.ASGD, values, kwargs)
    states = [{} for _ in values]
    ps = [v.copy() for v in values]
    for k in range(5):
        ps = [ref_asgd(p, _grad_of(p, k), s, **kwargs) for p, s in zip(ps, states)]
    for p, s in zip(params, states):
        st_ = opt.state[p]
        np.testing.assert_allclose(to_numpy(st_["ax"]), s["ax"], rtol=1e-12, atol=1e-13)
        assert st_["eta"] == pytest.approx(0.1 / (1 + 0.2 * 0.1 * 5) ** 0.6, rel=1e-14)
        assert st_["mu"] == pytest.approx(1 / 4, rel=1e-14)


def _sparse_grad(p: np.ndarray, k: int) -> np.ndarray:
    """_grad_of with about half of the entries zeroed, a different half at each step."""
    g = _grad_of(p, k)
    keep = (np.arange(g.size).reshape(g.shape) + k) % 2 == 0 if g.ndim else np.array(k % 2 == 0)
    return np.where(keep, g, 0.0)


@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.05, betas=(0.5, 0.8), eps=1e-3),
                                    dict(lr=0.05, maximize=True)])
def test_sparse_adam_updates_only_nonzero_entries(kwargs):
    values = _init_values(6)
    params = _params(values)
    opt = optim.SparseAdam(params, **kwargs)
    ps = [v.copy() for v in values]
    states = [{} for _ in values]
    for k in range(5):
        before = [to_numpy(p) for p in params]
        for p in params:
            p.grad = st.tensor(_sparse_grad(to_numpy(p), k), dtype=st.float64)
        opt.step()
        ps = [ref_sparse_adam(p, _sparse_grad(p, k), s, **kwargs) for p, s in zip(ps, states)]
        for p, b, w in zip(params, before, ps):
            got = to_numpy(p)
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-13, err_msg=f"step {k}")
            untouched = to_numpy(p.grad) == 0
            np.testing.assert_array_equal(got[untouched], b[untouched])
    for p, s in zip(params, states):
        np.testing.assert_allclose(to_numpy(opt.state[p]["exp_avg"]), s["m"], rtol=1e-12)
        np.testing.assert_allclose(to_numpy(opt.state[p]["exp_avg_sq"]), s["v"], rtol=1e-12)
    assert not np.allclose(to_numpy(params[0]), values[0])


def test_hand_computed_first_steps():
    # Adamax: u = |g| + eps, so the first step is lr * g / (|g| + eps) ~= lr * sign(g)
    w = st.tensor([3.0, -0.5], dtype=st.float64, requires_grad=True)
    opt = optim.Adamax([w], lr=0.01, eps=0.0)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(to_numpy(w), [2.99, -0.49], rtol=1e-14)
    # Rprop: first step -lr * sign(g); second step with the same sign grows by eta_plus
    w = st.tensor([3.0, -0.5], dtype=st.float64, requires_grad=True)
    opt = optim.Rprop([w], lr=0.1)
    for want in ([2.9, -0.4], [2.78, -0.28]):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        np.testing.assert_allclose(to_numpy(w), want, rtol=1e-14)
    # RAdam's first step is SGD with lr on m_hat = g
    w = st.tensor([1.0], dtype=st.float64, requires_grad=True)
    opt = optim.RAdam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert w.item() == pytest.approx(0.8, rel=1e-14)


def test_defaults_follow_pytorch():
    p = [st.zeros(1, requires_grad=True)]
    assert optim.Adadelta(p).defaults == dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0,
                                              maximize=False)
    assert optim.Adamax(p).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                                            weight_decay=0.0, maximize=False)
    assert optim.NAdam(p).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=0.0, momentum_decay=4e-3,
                                           decoupled_weight_decay=False, maximize=False)
    assert optim.RAdam(p).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=0.0, decoupled_weight_decay=False,
                                           maximize=False)
    assert optim.ASGD(p).defaults == dict(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6,
                                          weight_decay=0.0, maximize=False)
    assert optim.Rprop(p).defaults == dict(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
                                           maximize=False)
    assert optim.SparseAdam(p).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                                maximize=False)


@pytest.mark.parametrize("opt_cls", [optim.Adadelta, optim.Adamax, optim.NAdam, optim.RAdam,
                                     optim.ASGD, optim.Rprop, optim.SparseAdam])
def test_float32_parameters_track_the_float64_run(opt_cls):
    values = _init_values(7)
    kwargs = dict(lr=0.05)
    got32, params, opt = _run(opt_cls, values, kwargs, dtype=st.float32)
    got64, _, _ = _run(opt_cls, values, kwargs)
    assert all(p.dtype is st.float32 for p in params)
    assert all(v.dtype is st.float32 for s in opt.state.values() for v in s.values()
               if isinstance(v, st.Tensor))
    for g, w in zip(got32[-1], got64[-1]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_param_groups_and_add_param_group():
    values = _init_values(8)

    def groups(ps):
        return [{"params": [ps[0]], "lr": 0.2, "rho": 0.5}, {"params": ps[1:]}]

    kwargs = dict(lr=0.7)
    got, _, opt = _run(optim.Adadelta, values, kwargs, groups=groups)
    want = _reference(ref_adadelta, values, [dict(lr=0.2, rho=0.5), kwargs, kwargs])
    for g, w in zip(got[-1], want[-1]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert opt.param_groups[1]["rho"] == 0.9
    extra = st.ones(2, dtype=st.float64, requires_grad=True)
    opt.add_param_group({"params": [extra], "eps": 1e-2})
    assert opt.param_groups[2]["lr"] == 0.7 and opt.param_groups[2]["eps"] == 1e-2
    extra.grad = st.ones(2, dtype=st.float64)
    opt.step()
    want = ref_adadelta(np.ones(2), np.ones(2), {}, lr=0.7, eps=1e-2)
    np.testing.assert_allclose(to_numpy(extra), want, rtol=1e-12)


RESUME_CASES = [
    (optim.Adadelta, dict(lr=0.5, weight_decay=0.1)),
    (optim.Adamax, dict(lr=0.05)),
    (optim.NAdam, dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1)),
    (optim.RAdam, dict(lr=0.05, betas=(0.5, 0.8))),
    (optim.ASGD, dict(lr=0.05, t0=1, lambd=0.1)),
    (optim.Rprop, dict(lr=0.05)),
    (optim.SparseAdam, dict(lr=0.05)),
]


@pytest.mark.parametrize("opt_cls,kwargs", RESUME_CASES, ids=[c[0].__name__ for c in RESUME_CASES])
def test_state_dict_resume_reproduces_uninterrupted_run(opt_cls, kwargs):
    values = _init_values(9)
    full, _, _ = _run(opt_cls, values, kwargs, steps=6)
    _, params, opt = _run(opt_cls, values, kwargs, steps=3)
    saved = opt.state_dict()
    saved_values = [to_numpy(p) for p in params]
    for p in params:  # moving on must not change what was saved
        p.grad = st.ones(p.shape, dtype=st.float64)
    opt.step()
    resumed = _params(saved_values)
    opt2 = opt_cls(resumed, lr=123.0)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    for k in range(3, 6):
        for p in resumed:
            p.grad = st.tensor(_grad_of(to_numpy(p), k), dtype=st.float64)
        opt2.step()
    for got, want in zip(resumed, full[-1]):
        np.testing.assert_array_equal(to_numpy(got), want)


BAD_HYPERPARAMETERS = [
    (optim.Adadelta, dict(lr=-1), "Adadelta: invalid learning rate: -1"),
    (optim.Adadelta, dict(rho=1.5), "Adadelta: invalid rho value: 1.5"),
    (optim.Adadelta, dict(rho=-0.1), "Adadelta: invalid rho value: -0.1"),
    (optim.Adadelta, dict(eps=-1e-6), "Adadelta: invalid epsilon value: -1e-06"),
    (optim.Adadelta, dict(weight_decay=-0.5), "Adadelta: invalid weight_decay value: -0.5"),
    (optim.Adamax, dict(lr=-1), "Adamax: invalid learning rate: -1"),
    (optim.Adamax, dict(betas=(1.0, 0.9)), "Adamax: invalid beta parameter at index 0: 1.0"),
    (optim.Adamax, dict(betas=(0.9, -0.1)), "Adamax: invalid beta parameter at index 1: -0.1"),
    (optim.Adamax, dict(betas=0.9), "Adamax: betas must be a pair of floats, got 0.9"),
    (optim.Adamax, dict(eps=-1.0), "Adamax: invalid epsilon value: -1.0"),
    (optim.NAdam, dict(lr=-1), "NAdam: invalid learning rate: -1"),
    (optim.NAdam, dict(momentum_decay=-0.1), "NAdam: invalid momentum_decay value: -0.1"),
    (optim.NAdam, dict(weight_decay=-0.1), "NAdam: invalid weight_decay value: -0.1"),
    (optim.NAdam, dict(betas=(0.9, 1.0)), "NAdam: invalid beta parameter at index 1: 1.0"),
    (optim.RAdam, dict(lr=-1), "RAdam: invalid learning rate: -1"),
    (optim.RAdam, dict(eps=-1e-8), "RAdam: invalid epsilon value: -1e-08"),
    (optim.RAdam, dict(betas=(-0.5, 0.9)), "RAdam: invalid beta parameter at index 0: -0.5"),
    (optim.ASGD, dict(lr=-1), "ASGD: invalid learning rate: -1"),
    (optim.ASGD, dict(weight_decay=-1), "ASGD: invalid weight_decay value: -1"),
    (optim.ASGD, dict(lambd=-1e-4), "ASGD: invalid lambd value: -0.0001"),
    (optim.Rprop, dict(lr=-1), "Rprop: invalid learning rate: -1"),
    (optim.Rprop, dict(etas=(1.5, 1.2)), "Rprop: invalid eta values: 1.5, 1.2"),
    (optim.Rprop, dict(etas=(0.5, 0.9)), "Rprop: invalid eta values: 0.5, 0.9"),
    (optim.Rprop, dict(etas=0.5), "Rprop: etas must be a pair of numbers, got 0.5"),
    (optim.Rprop, dict(step_sizes=(1.0, 0.1)), "Rprop: invalid step_sizes: 1.0, 0.1"),
    (optim.SparseAdam, dict(lr=-1), "SparseAdam: invalid learning rate: -1"),
    (optim.SparseAdam, dict(eps=-1.0), "SparseAdam: invalid epsilon value: -1.0"),
    (optim.SparseAdam, dict(betas=(0.9, 1.5)), "SparseAdam: invalid beta parameter at index 1"),
]


@pytest.mark.parametrize("opt_cls,kwargs,msg", BAD_HYPERPARAMETERS)
def test_bad_hyperparameters_raise(opt_cls, kwargs, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        opt_cls([st.zeros(1, requires_grad=True)], **kwargs)


def test_bad_hyperparameters_in_groups_and_state_dicts_raise():
    w = st.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="NAdam: invalid learning rate: -2"):
        optim.NAdam([{"params": [w], "lr": -2}])
    with pytest.raises(TypeError, match="Adadelta: rho value must be a number, got str"):
        optim.Adadelta([w], rho="0.9")
    opt = optim.Rprop([w])
    with pytest.raises(ValueError, match="Rprop: invalid eta values: 2, 3"):
        opt.add_param_group({"params": [st.zeros(1, requires_grad=True)], "etas": (2, 3)})
    good = opt.state_dict()["param_groups"][0]
    with pytest.raises(ValueError, match="Rprop: invalid learning rate: -1"):
        opt.load_state_dict({"state": {}, "param_groups": [dict(good, lr=-1)]})
    with pytest.raises(ValueError, match=r"state 'step_size' of parameter 0 has shape \(2,\), "
                                         r"the parameter has shape \(1,\)"):
        opt.load_state_dict({"state": {0: {"step_size": st.zeros(2)}}, "param_groups": [good]})


@pytest.mark.parametrize("opt_cls", [optim.Adadelta, optim.Adamax, optim.NAdam, optim.RAdam,
                                     optim.ASGD, optim.Rprop, optim.SparseAdam])
def test_graph_mode_training_equals_eager(opt_cls):
    rng = np.random.default_rng(10)
    data = [(st.tensor(rng.standard_normal((8, 3))), st.tensor(rng.standard_normal((8, 2))))
            for _ in range(4)]

    def train(graph: bool):
        w = st.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
        o = opt_cls([w], lr=0.05)

        def step(x, y):
            o.zero_grad()
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            o.step()
            return loss

        fn = st.compile(step) if graph else step
        losses = [fn(x, y).item() for x, y in data]
        return to_numpy(w), losses, fn

    we, le, _ = train(False)
    wg, lg, fn = train(True)
    assert fn.replays == 2
    assert lg == pytest.approx(le, rel=1e-12)
    np.testing.assert_allclose(wg, we, rtol=1e-12, atol=1e-14)
    assert le[-1] != le[0]


# ---- LBFGS -------------------------------------------------------------------------------------

from singa_tensor.optim.lbfgs import _cubic_minimum, _strong_wolfe  # noqa: E402


def _closure(opt, params, fn):
    def closure():
        opt.zero_grad()
        loss = fn(*params)
        loss.backward()
        return loss
    return closure


def _rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def test_lbfgs_strong_wolfe_solves_rosenbrock():
    x = st.tensor([-1.5, 2.0], dtype=st.float64, requires_grad=True)
    # tolerances below the defaults: those stop within 3e-6 of the minimum
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe", tolerance_grad=1e-10,
                      tolerance_change=1e-14)
    closure = _closure(opt, [x], _rosenbrock)
    first = opt.step(closure)
    assert first.item() == pytest.approx(_rosenbrock(np.array([-1.5, 2.0])))
    for _ in range(10):
        opt.step(closure)
    np.testing.assert_allclose(to_numpy(x), [1.0, 1.0], atol=1e-7)
    state = opt.state[x]
    assert state["n_iter"] > 20 and state["func_evals"] >= state["n_iter"]


def test_lbfgs_float32_rosenbrock():
    x = st.tensor([-1.5, 2.0], dtype=st.float32, requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe")
    closure = _closure(opt, [x], _rosenbrock)
    for _ in range(5):
        opt.step(closure)
    assert x.dtype is st.float32 and opt.state[x]["d"].dtype is st.float32
    np.testing.assert_allclose(to_numpy(x), [1.0, 1.0], atol=1e-3)


def test_lbfgs_least_squares_matches_numpy_lstsq():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((30, 4))
    b = rng.standard_normal(30)
    want, *_ = np.linalg.lstsq(np.hstack([a, np.ones((30, 1))]), b, rcond=None)
    at, bt = st.tensor(a), st.tensor(b)
    for line_search in (None, "strong_wolfe"):
        # two parameters of different shapes: LBFGS works on them as one flat vector
        w = st.zeros((4, 1), dtype=st.float64, requires_grad=True)
        c = st.zeros((), dtype=st.float64, requires_grad=True)
        # a tiny tolerance_change: the default stops once g . d is below 1e-9, ~1e-9 away
        opt = optim.LBFGS([w, c], line_search_fn=line_search, tolerance_grad=1e-12,
                          tolerance_change=1e-24)
        closure = _closure(opt, [w, c], lambda w, c: ((at @ w).reshape(-1) + c - bt).pow(2)
                           .sum())
        for _ in range(5):
            opt.step(closure)
        got = np.concatenate([to_numpy(w).ravel(), [c.item()]])
        # 1e-8: a device's reductions add in another order than numpy's lstsq
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8, err_msg=str(line_search))


def ref_lbfgs(x, grad_fn, steps, lr=1.0, max_iter=20, history_size=100, tolerance_grad=1e-7,
              tolerance_change=1e-9):
    """Fixed-step L-BFGS as documented (no line search): `steps` calls of step(), each up to
    max_iter iterations and max_iter * 5 // 4 evaluations, history carried across calls."""
    f_and_g = grad_fn
    hist: list = []
    d = t = prev_g = None
    h = 1.0
    total_iter = 0
    max_eval = max_iter * 5 // 4
    for _ in range(steps):
        loss, g = f_and_g(x)
        evals = 1
        if np.abs(g).max() <= tolerance_grad:
            continue
        for n in range(1, max_iter + 1):
            total_iter += 1
            if total_iter == 1:
                d, hist, h = -g, [], 1.0
            else:
                y, s = g - prev_g, d * t
                if y @ s > 1e-10:
                    if len(hist) == history_size:
                        hist.pop(0)
                    hist.append((s, y, 1 / (y @ s)))
                    h = (y @ s) / (y @ y)
                q = -g
                alphas = []
                for s_i, y_i, r_i in reversed(hist):
                    alpha = r_i * (s_i @ q)
                    alphas.append(alpha)
                    q = q - alpha * y_i
                r = h * q
                for (s_i, y_i, r_i), alpha in zip(hist, reversed(alphas)):
                    r = r + s_i * (alpha - r_i * (y_i @ r))
                d = r
            prev_g, prev_loss = g, loss
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if total_iter == 1 else lr
            if g @ d > -tolerance_change:
                break
            x = x + t * d
            if n == max_iter:
                break
            loss, g = f_and_g(x)
            evals += 1
            if evals >= max_eval or np.abs(g).max() <= tolerance_grad:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < \
                    tolerance_change:
                break
    return x


def _quartic(x):
    """A smooth convex function with a non-constant Hessian, as (value, gradient)."""
    scale = np.array([1.0, 2.0, 0.5, 1.5])
    v = (scale * x * x).sum() + 0.1 * (x ** 4).sum() + 0.3 * x[0] * x[1]
    g = 2 * scale * x + 0.4 * x ** 3
    g[0] += 0.3 * x[1]
    g[1] += 0.3 * x[0]
    return v, g


@pytest.mark.parametrize("kwargs", [dict(lr=0.5, max_iter=6), dict(lr=0.4, max_iter=4,
                                                                   history_size=2)])
def test_lbfgs_fixed_step_matches_reference(kwargs):
    x0 = np.array([1.0, -0.8, 1.5, 0.7])
    x = st.tensor(x0, requires_grad=True)
    opt = optim.LBFGS([x], **kwargs)
    scale = st.tensor([1.0, 2.0, 0.5, 1.5], dtype=st.float64)
    closure = _closure(opt, [x], lambda x: (scale * x * x).sum() + 0.1 * (x ** 4).sum()
                       + 0.3 * x[0] * x[1])
    for steps in (1, 2, 3):
        opt.step(closure)
        want = ref_lbfgs(x0, _quartic, steps, **kwargs)
        np.testing.assert_allclose(to_numpy(x), want, rtol=1e-10, atol=1e-12,
                                   err_msg=f"after {steps} steps")
    assert not np.allclose(to_numpy(x), x0)
    if kwargs.get("history_size") == 2:
        assert len(opt.state[x]["old_dirs"]) == 2


def test_lbfgs_stops_at_a_stationary_point_and_counts_evaluations():
    x = st.tensor([0.0, 0.0], dtype=st.float64, requires_grad=True)
    opt = optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (x * x).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 0.0 and len(calls) == 1
    assert opt.defaults["max_eval"] == 25
    y = st.tensor([3.0, -4.0], dtype=st.float64, requires_grad=True)
    # far from the minimum every iteration runs: one evaluation each but the last...
    opt = optim.LBFGS([y], max_iter=3, max_eval=10, tolerance_change=0.0, tolerance_grad=0.0)
    opt.step(_closure(opt, [y], lambda y: (y ** 4).sum()))
    assert opt.state[y]["func_evals"] == 3 and opt.state[y]["n_iter"] == 3
    # ...unless max_eval (by default max_iter * 5 // 4, 3 here) runs out first
    y = st.tensor([3.0, -4.0], dtype=st.float64, requires_grad=True)
    opt = optim.LBFGS([y], max_iter=3, tolerance_change=0.0, tolerance_grad=0.0)
    opt.step(_closure(opt, [y], lambda y: (y ** 4).sum()))
    assert opt.state[y]["func_evals"] == 3 and opt.state[y]["n_iter"] == 2


def test_cubic_interpolation_is_exact_for_a_cubic():
    # f(x) = x^3 - 3x: f(0) = 0, f'(0) = -3, f(2) = 2, f'(2) = 9; minimum at x = 1
    assert _cubic_minimum(0.0, 0.0, -3.0, 2.0, 2.0, 9.0) == pytest.approx(1.0, rel=1e-14)
    assert _cubic_minimum(2.0, 2.0, 9.0, 0.0, 0.0, -3.0) == pytest.approx(1.0, rel=1e-14)
    # clamped to the bounds, and the middle when the cubic has no minimum
    assert _cubic_minimum(0.0, 0.0, -3.0, 2.0, 2.0, 9.0, bounds=(1.5, 3.0)) == 1.5
    # x^3 + x is monotone
    assert _cubic_minimum(0.0, 0.0, 1.0, 1.0, 2.0, 4.0) == 0.5


@pytest.mark.parametrize("t0", [1e-3, 1.0, 30.0])
def test_strong_wolfe_step_satisfies_the_conditions(t0):
    def f(x):
        return float(np.log(1 + (x - 2.0) ** 2) + 0.05 * x * x)

    def df(x):
        return float(2 * (x - 2.0) / (1 + (x - 2.0) ** 2) + 0.1 * x)

    d = st.tensor([1.0], dtype=st.float64)
    g0 = st.tensor([df(0.0)], dtype=st.float64)
    gtd = df(0.0)
    evals = []

    def evaluate(t):
        evals.append(t)
        return f(t), st.tensor([df(t)], dtype=st.float64)

    f_t, g_t, t, n = _strong_wolfe(evaluate, t0, d, f(0.0), g0, gtd)
    assert n == len(evals) and t > 0
    assert f_t == pytest.approx(f(t)) and g_t.item() == pytest.approx(df(t))
    assert f_t <= f(0.0) + 1e-4 * t * gtd
    assert abs(df(t)) <= -0.9 * gtd


def test_lbfgs_state_dict_resume():
    def start():
        x = st.tensor([-1.2, 1.0], dtype=st.float64, requires_grad=True)
        opt = optim.LBFGS([x], max_iter=4, history_size=3, line_search_fn="strong_wolfe")
        opt.step(_closure(opt, [x], _rosenbrock))
        return x, opt

    x, opt = start()
    for _ in range(2):
        opt.step(_closure(opt, [x], _rosenbrock))
    want = to_numpy(x)

    x, opt = start()
    saved, saved_x = opt.state_dict(), to_numpy(x)
    assert 1 <= len(saved["state"][0]["old_dirs"]) <= 3 and saved["state"][0]["n_iter"] > 1
    opt.step(_closure(opt, [x], _rosenbrock))  # must not alter what was saved
    x2 = st.tensor(saved_x, requires_grad=True)
    opt2 = optim.LBFGS([x2], lr=5.0)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 1 and opt2.param_groups[0]["max_iter"] == 4
    for _ in range(2):
        opt2.step(_closure(opt2, [x2], _rosenbrock))
    np.testing.assert_array_equal(to_numpy(x2), want)
    assert not np.array_equal(want, saved_x)


def test_lbfgs_errors():
    x = st.zeros(2, dtype=st.float64, requires_grad=True)
    opt = optim.LBFGS([x])
    with pytest.raises(RuntimeError, match="LBFGS.step requires a closure that clears the "
                                           "gradients, computes the loss"):
        opt.step()
    with pytest.raises(ValueError, match="LBFGS: invalid learning rate: -1"):
        optim.LBFGS([x], lr=-1)
    with pytest.raises(ValueError, match="LBFGS: only 'strong_wolfe' is supported as "
                                         "line_search_fn, got 'armijo'"):
        optim.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(ValueError, match="LBFGS: max_iter must be a positive integer, got 0"):
        optim.LBFGS([x], max_iter=0)
    with pytest.raises(ValueError, match="LBFGS: history_size must be a positive integer, got "
                                         "2.5"):
        optim.LBFGS([x], history_size=2.5)
    with pytest.raises(ValueError, match="LBFGS: invalid tolerance_grad: -1"):
        optim.LBFGS([x], tolerance_grad=-1)
    y = st.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [x]}, {"params": [y]}])
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        opt.add_param_group({"params": [y]})

    def step(a):
        opt.step(_closure(opt, [x], lambda x: ((x - a) ** 2).sum()))
        return x.sum()

    with pytest.raises(RuntimeError, match="LBFGS.step cannot run under .*: its number of "
                                           "closure evaluations depends on the values"):
        compiled = st.compile(step)
        for _ in range(2):  # the first call runs eagerly, the second records
            compiled(st.ones(2, dtype=st.float64))
