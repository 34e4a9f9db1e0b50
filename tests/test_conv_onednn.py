"""conv2d on oneDNN (backend/onednn.py) against the im2col path: forward, input, weight and bias
gradients over a grid of geometries, second order, the switch that turns it off, graph mode,
and the CUDA path, which never reaches it.

Tolerance: both paths compute in float32 but sum in different orders (oneDNN's blocked
kernels, OpenBLAS's products), so results agree to a relative 2e-5 of the largest magnitude of
each result (about 170 float32 ulps of it; a sum of up to 5*5*8 products loses that much),
not bit for bit. These tests skip only when the oneDNN package (onednn-cpu-gomp, part of the
dev extra) is not installed."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.backend import onednn
from singa_tensor.ops.conv_onednn import conv2d_planned

pytestmark = pytest.mark.skipif(not onednn.is_available(),
                                reason=f"oneDNN is not usable: {onednn.unavailable_reason()}")

RTOL = 2e-5


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """oneDNN is the CPU backend's: these tests make CPU tensors whatever the session's device
    under test (SINGA_TENSOR_DEVICE) is."""
    before = st.get_default_device()
    st.set_default_device("cpu")
    try:
        yield
    finally:
        st.set_default_device(before)

rng = np.random.default_rng(11)


def _close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got - want).max())
    assert err <= RTOL * scale, f"{what}: max error {err:.3g} over scale {scale:.3g}"


def _run(x, w, b, g, on: bool, **kw):
    """(out, grad x, grad w, grad b) of conv2d with oneDNN on or off, and which path ran."""
    xt = st.tensor(x, requires_grad=True)
    wt = st.tensor(w, requires_grad=True)
    bt = st.tensor(b, requires_grad=True) if b is not None else None
    before = dict(onednn.calls)
    with st.backends.mkldnn.flags(enabled=on):
        y = st.conv2d(xt, wt, bt, **kw)
        y.backward(st.tensor(g))
    ran = {k: onednn.calls[k] - before[k] for k in before}
    grads = (xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy() if bt is not None else None)
    return (y.detach().numpy(), *grads), ran


def _run_planned(x, w, b, g, stride):
    """_run's results for an unpadded 1x1 convolution, by oneDNN's plan called directly."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    oh, ow = (h - 1) // stride + 1, (wd - 1) // stride + 1
    plan = onednn.conv2d_plan(n, c, h, wd, o, 1, 1, oh, ow, (stride, stride), (0, 0, 0, 0),
                              (1, 1), 1, b is not None, st.get_num_threads())
    xt = st.tensor(x, requires_grad=True)
    wt = st.tensor(w, requires_grad=True)
    bt = st.tensor(b, requires_grad=True) if b is not None else None
    before = dict(onednn.calls)
    y = conv2d_planned(xt, wt, bt, plan)
    y.backward(st.tensor(g))
    ran = {k: onednn.calls[k] - before[k] for k in before}
    grads = (xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy() if bt is not None else None)
    return (y.detach().numpy(), *grads), ran


def _case(n, c, o, k, hw, stride, padding, dilation, groups, bias):
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    w = rng.standard_normal((o, c // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = st.conv2d(st.tensor(x), st.tensor(w), None, **kw)
    g = rng.standard_normal(y.shape).astype(np.float32)
    return x, w, b, g, kw


# stride, padding, dilation, kernel, batch and groups (1, 2, depthwise) over channels 4 -> 8
GRID = [(s, p, d, k, n, grp) for s, p, d, k, n, grp in itertools.product(
    (1, 2), (0, 1), (1, 2), (1, 3, 5), (1, 4), (1, 2, "dw"))]


@pytest.mark.parametrize("stride, padding, dilation, k, n, groups", GRID)
def test_onednn_matches_im2col(stride, padding, dilation, k, n, groups):
    c, o = 4, 8
    groups = c if groups == "dw" else groups
    bias = (stride + padding + k) % 2 == 0  # half the cases with a bias
    x, w, b, g, kw = _case(n, c, o, k, (11, 10), stride, padding, dilation, groups, bias)
    old, ran_old = _run(x, w, b, g, False, **kw)
    assert ran_old == {"forward": 0, "backward_data": 0, "backward_weights": 0}
    if k == 1 and padding == 0 and groups == 1:
        # the CPU backend keeps these on their direct matrix product; oneDNN's own result,
        # through the plan, must agree all the same
        new, ran = _run_planned(x, w, b, g, stride)
        assert _run(x, w, b, g, True, **kw)[1]["forward"] == 0
    else:
        new, ran = _run(x, w, b, g, True, **kw)
    assert ran == {"forward": 1, "backward_data": 1, "backward_weights": 1}
    for name, a, want in zip(("output", "grad input", "grad weight", "grad bias"), new, old):
        if want is not None:
            _close(a, want, f"{name} {kw} k={k} n={n}")


def test_asymmetric_padding_non_square_kernel_and_3d_input():
    x = rng.standard_normal((3, 7, 9)).astype(np.float32)  # no batch dim
    w = rng.standard_normal((5, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    y = st.conv2d(st.tensor(x), st.tensor(w), padding="same")
    g = rng.standard_normal(y.shape).astype(np.float32)
    new, ran = _run(x, w, b, g, True, padding="same")
    old, _ = _run(x, w, b, g, False, padding="same")
    assert ran["forward"] == 1
    for a, want in zip(new, old):
        _close(a, want, "same padding")


def test_grads_only_where_needed():
    """A frozen input (the first layer's image) gets no backward-data pass; a frozen weight no
    backward-weights pass."""
    x = st.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    w = st.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    before = dict(onednn.calls)
    st.conv2d(x, w, padding=1).sum().backward()
    assert onednn.calls["backward_data"] == before["backward_data"]
    assert onednn.calls["backward_weights"] == before["backward_weights"] + 1
    xg = st.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    wf = w.detach()
    before = dict(onednn.calls)
    st.conv2d(xg, wf, padding=1).sum().backward()
    assert onednn.calls["backward_weights"] == before["backward_weights"]
    assert onednn.calls["backward_data"] == before["backward_data"] + 1


def test_second_order_gradients_match_im2col():
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)

    def second(on):
        xt, wt, bt = (st.tensor(a, requires_grad=True) for a in (x, w, b))
        with st.backends.mkldnn.flags(enabled=on):
            y = st.conv2d(xt, wt, bt, stride=2, padding=1)
            gx, gw, gb = st.autograd.grad((y * y).sum(), (xt, wt, bt), create_graph=True)
            (gx.square().sum() + gw.square().sum() + gb.square().sum()).backward()
        return [t.detach().numpy() for t in (gx, gw, gb, xt.grad, wt.grad, bt.grad)]

    before = onednn.calls["forward"]
    new = second(True)
    assert onednn.calls["forward"] > before
    for i, (a, want) in enumerate(zip(new, second(False))):
        _close(a, want, f"second order [{i}]")


def test_non_contiguous_inputs():
    x = rng.standard_normal((4, 2, 9, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    xt = st.tensor(x).transpose(0, 1)  # (2, 4, 9, 9), strided
    wt = st.tensor(w)[:, :, ::1, ::1].transpose(2, 3).transpose(2, 3)
    with st.backends.mkldnn.flags(enabled=True):
        got = st.conv2d(xt, wt, padding=1).numpy()
    with st.backends.mkldnn.flags(enabled=False):
        want = st.conv2d(xt, wt, padding=1).numpy()
    _close(got, want, "strided input")


def test_an_empty_batch_takes_the_im2col_path():
    x = st.zeros(0, 2, 5, 5, requires_grad=True)
    w = st.ones(3, 2, 3, 3, requires_grad=True)
    before = dict(onednn.calls)
    y = st.conv2d(x, w, padding=1)
    y.sum().backward()
    assert y.shape == (0, 3, 5, 5) and onednn.calls == before
    assert w.grad.abs().sum().item() == 0.0


def test_float64_stays_on_im2col():
    x = st.tensor(rng.standard_normal((1, 2, 5, 5)))
    w = st.tensor(rng.standard_normal((3, 2, 3, 3)))
    before = dict(onednn.calls)
    assert st.conv2d(x, w).dtype == st.float64
    assert onednn.calls == before


def test_flag_and_environment_variable_turn_it_off():
    x = st.tensor(rng.standard_normal((1, 2, 5, 5)).astype(np.float32))
    w = st.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    before = onednn.calls["forward"]
    st.backends.mkldnn.enabled = False
    try:
        assert st.backends.mkldnn.enabled is False
        st.conv2d(x, w)
        assert onednn.calls["forward"] == before
    finally:
        st.backends.mkldnn.enabled = True
    st.conv2d(x, w)
    assert onednn.calls["forward"] == before + 1
    with pytest.raises(TypeError, match="backends.mkldnn.enabled must be a bool"):
        st.backends.mkldnn.enabled = 1
    code = ("import numpy as np, singa_tensor as st\n"
            "from singa_tensor.backend import onednn\n"
            "x = st.ones(1, 2, 5, 5); st.conv2d(x, st.ones(3, 2, 3, 3)).sum()\n"
            "print(st.backends.mkldnn.enabled, onednn.calls['forward'])\n")
    env = dict(os.environ, SINGA_TENSOR_ONEDNN="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "0"]


def test_a_missing_library_falls_back_silently():
    code = ("import singa_tensor as st\n"
            "from singa_tensor.backend import onednn\n"
            "y = st.conv2d(st.ones(1, 2, 5, 5), st.ones(3, 2, 3, 3))\n"
            "print(onednn.is_available(), onednn.calls['forward'], y[0, 0, 0, 0].item())\n"
            "print(onednn.unavailable_reason())\n")
    env = dict(os.environ, SINGA_TENSOR_ONEDNN_LIB="/nonexistent/libdnnl.so.3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].split() == ["False", "0", "18.0"]
    assert "/nonexistent/libdnnl.so.3" in out[1]


def test_plans_are_made_once_per_geometry():
    onednn.clear_plans()
    x = st.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), requires_grad=True)
    w = st.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    for _ in range(3):
        st.conv2d(x, w, padding=1).sum().backward()
    assert len(onednn._plans) == 1  # forward, backward-data and -weights share one plan
    st.conv2d(x, w, padding=0)
    assert len(onednn._plans) == 2
    plan = next(iter(onednn._plans.values()))
    assert set(plan.impl) == {"forward", "backward_data", "backward_weights"}


def test_threads_follow_set_num_threads():
    x = st.tensor(rng.standard_normal((2, 8, 12, 12)).astype(np.float32))
    w = st.tensor(rng.standard_normal((8, 8, 3, 3)).astype(np.float32))
    old = st.get_num_threads()
    onednn.clear_plans()
    try:
        st.set_num_threads(1)
        one = st.conv2d(x, w).numpy()
        st.set_num_threads(2)
        two = st.conv2d(x, w).numpy()
    finally:
        st.set_num_threads(old)
    # a plan is made for each thread count (oneDNN splits the work by it when it is created)
    assert sorted(k[2] for k in onednn._plans) == [1, 2]
    _close(one, two, "1 vs 2 threads")


def test_graph_mode_conv_model_trains_as_eager():
    from singa_tensor import nn

    def make():
        st.manual_seed(3)
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False),
                             nn.Flatten(), nn.Linear(8 * 4 * 4, 5))

    x = st.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    y = st.tensor(rng.integers(0, 5, 4))

    def trainer(model, compiled):
        opt = st.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return st.compile(step) if compiled else step

    eager_model, graph_model = make(), make()
    eager, graph = trainer(eager_model, False), trainer(graph_model, True)
    before = onednn.calls["forward"]
    for _ in range(4):
        le, lg = eager(x, y).item(), graph(x, y).item()
        assert abs(le - lg) <= 1e-5 * max(1.0, abs(le))
    # replays run the recorded oneDNN calls: the counter moves on every step
    assert onednn.calls["forward"] - before == 4 * 2 * 2
    for pe, pg in zip(eager_model.parameters(), graph_model.parameters()):
        _close(pg.detach().numpy(), pe.detach().numpy(), "parameters after 4 steps")


def test_cuda_path_is_untouched(cuda):
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    before = dict(onednn.calls)
    xt = st.tensor(x, device=cuda, requires_grad=True)
    wt = st.tensor(w, device=cuda, requires_grad=True)
    y = st.conv2d(xt, wt, padding=1)
    y.sum().backward()
    assert onednn.calls == before
    with st.backends.mkldnn.flags(enabled=False):
        want = st.conv2d(st.tensor(x), st.tensor(w), padding=1).numpy()
    _close(y.to("cpu").detach().numpy(), want, "cuda output")


def _is_kept(storage) -> bool:
    return any(ref() is storage for p in onednn._plans.values() if p is not None
               for ref, _, _ in p._kept.values())


def test_kept_weights_are_reordered_once_and_follow_in_place_writes():
    from singa_tensor.ops.conv_onednn import keep_weights

    x = st.tensor(rng.standard_normal((2, 16, 9, 9)).astype(np.float32))
    w = st.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    b = st.tensor(rng.standard_normal(32).astype(np.float32))
    plain = st.tensor(w.numpy())  # the same values, not kept
    keep_weights(w)
    with st.no_grad():
        want = st.conv2d(x, plain, b, padding=1).numpy()
        first = st.conv2d(x, w, b, padding=1).numpy()
        second = st.conv2d(x, w, b, padding=1).numpy()
        np.testing.assert_array_equal(first, second)
        _close(first, want, "kept weights")
        # the layouts oneDNN picks for these shapes differ from NCHW on every x86-64 CPU
        assert _is_kept(w._storage)
        w.mul_(-2.0)  # an in-place write: the kept copy is made again
        _close(st.conv2d(x, w, b, padding=1).numpy(),
               st.conv2d(x, plain * -2.0, b, padding=1).numpy(), "after an in-place write")


def test_kept_weights_in_graph_mode_replay_the_current_values():
    from singa_tensor.ops.conv_onednn import keep_weights

    w = st.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    keep_weights(w)
    plain = st.tensor(w.numpy())

    def f(x):
        return st.conv2d(x, w, None, padding=1).relu()

    step = st.compile(f, warmup=0)
    with st.no_grad():
        for _ in range(3):
            x = st.tensor(rng.standard_normal((2, 16, 6, 6)).astype(np.float32))
            _close(step(x).numpy(), st.conv2d(x, plain, None, padding=1).relu().numpy(),
                   "replayed")
        assert step.replays >= 1 and _is_kept(w._storage)
        w.add_(1.0)
        x = st.tensor(rng.standard_normal((2, 16, 6, 6)).astype(np.float32))
        _close(step(x).numpy(), st.conv2d(x, plain + 1.0, None, padding=1).relu().numpy(),
               "replayed after a write")


# conv (+relu) and max pool chains against the same stages as eager ops: (input shape, stages)
# with stages ("conv", out channels, kernel, stride, pads (t, b, l, r), dilation, groups, bias,
# relu) and ("pool", kernel, stride, pads, dilation, ceil_mode)
CHAIN_CASES = [
    ((2, 3, 12, 11), [("conv", 8, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True, True),
                      ("pool", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
                      ("conv", 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, False, True),
                      ("pool", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True)]),
    ((1, 16, 9, 10), [("conv", 16, (3, 2), (2, 1), (0, 1, 2, 0), (1, 2), 4, True, False),
                      ("conv", 32, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, True)]),
    ((3, 8, 15, 15), [("conv", 16, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 16 // 8, False, True),
                      ("pool", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
                      ("conv", 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16, True, True)]),
]


def _pool_out(n, k, s, p0, p1, d, ceil):
    span = n + p0 + p1 - (k - 1) * d - 1
    o = (span + (s - 1 if ceil else 0)) // s + 1
    return o - 1 if ceil and (o - 1) * s >= n + p0 else o


@pytest.mark.parametrize("shape, stages", CHAIN_CASES)
def test_conv_pool_chain_matches_the_ops_one_by_one(shape, stages):
    from singa_tensor.backend import onednn_chain
    from singa_tensor.ops.conv_onednn import conv_chain, keep_weights

    x = st.tensor(rng.standard_normal(shape).astype(np.float32))
    args, want, c = [], x, shape[1]
    with st.no_grad():
        for s in stages:
            if s[0] == "conv":
                _, o, k, stride, pads, dil, groups, bias, relu = s
                w = st.tensor(rng.standard_normal((o, c // groups, *k)).astype(np.float32))
                b = st.tensor(rng.standard_normal(o).astype(np.float32)) if bias else None
                keep_weights(w)
                args.append(("conv", w, b, stride, pads, dil, groups, relu))
                padded = st.nn.functional.pad(want, (pads[2], pads[3], pads[0], pads[1]))
                want = st.conv2d(padded, w, b, stride=stride, dilation=dil, groups=groups)
                want = want.relu() if relu else want
                c = o
            else:
                _, k, stride, pads, dil, ceil = s
                out = tuple(_pool_out(n, kk, ss, p0, p1, d, ceil) for n, kk, ss, p0, p1, d in
                            zip(want.shape[2:], k, stride, pads[::2], pads[1::2], dil))
                args.append(("pool", k, stride, pads, dil, out))
                want = st.max_pool2d(want, k, stride, (pads[0], pads[2]), dil, ceil_mode=ceil)
        runs = onednn_chain.calls["run"]
        got = conv_chain(x, args)
        again = conv_chain(x, args)  # the kept weights' second use
    if got is None:  # no native code for a stage on this CPU: the caller runs them one by one
        assert onednn_chain.calls["run"] == runs
        return
    assert onednn_chain.calls["run"] == runs + 2
    _close(got.numpy(), want.numpy(), "chain")
    np.testing.assert_array_equal(got.numpy(), again.numpy())


def test_conv_chain_declines_what_it_cannot_run():
    from singa_tensor.ops.conv_onednn import conv_chain

    w = st.tensor(rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
    stages = [("conv", w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
              ("pool", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (2, 2))]
    x = st.tensor(rng.standard_normal((1, 2, 4, 4)).astype(np.float32))
    with st.no_grad():
        assert conv_chain(x.double(), stages) is None  # float32 only
        bad = x.numpy().copy()
        bad[0, 1, 2, 2] = np.inf
        assert conv_chain(st.tensor(bad), stages) is None  # not finite: stage by stage
    w.requires_grad_(True)
    assert conv_chain(x, stages) is None  # a gradient wanted
    with st.no_grad(), st.backends.mkldnn.flags(enabled=False):
        assert conv_chain(x, stages) is None  # oneDNN switched off
