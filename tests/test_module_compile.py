"""nn.Module.compile(): forward calls that need no gradients replay a graph-mode recording
(one per input signature and train/eval mode); calls that record gradients stay eager."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn

from .helpers import to_numpy


def _net():
    st.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


def test_inference_calls_replay_and_match_eager():
    net, ref = _net().eval(), _net().eval()
    net.compile()
    x = st.randn(2, 3, 6, 6)
    with st.inference_mode():
        for _ in range(4):
            got = net(x)
            np.testing.assert_allclose(to_numpy(got), to_numpy(ref(x)), rtol=1e-6, atol=1e-6)
    assert net._compiled_forward.replays >= 2
    # new values with the same signature replay, and follow the new inputs
    x2 = st.randn(2, 3, 6, 6)
    with st.no_grad():
        np.testing.assert_allclose(to_numpy(net(x2)), to_numpy(ref(x2)), rtol=1e-6, atol=1e-6)
        # another batch size records again
        x3 = st.randn(5, 3, 6, 6)
        np.testing.assert_allclose(to_numpy(net(x3)), to_numpy(ref(x3)), rtol=1e-6, atol=1e-6)


def test_train_and_eval_mode_are_recorded_apart():
    net, ref = _net(), _net()
    net.compile()
    x = st.randn(4, 3, 6, 6)
    with st.no_grad():
        for mode in ("train", "eval", "train", "eval"):
            getattr(net, mode)()
            getattr(ref, mode)()
            np.testing.assert_allclose(to_numpy(net(x)), to_numpy(ref(x)), rtol=1e-5,
                                       atol=1e-5)
    # the running statistics were updated by the replayed training-mode calls too
    np.testing.assert_allclose(to_numpy(net[1].running_mean), to_numpy(ref[1].running_mean),
                               rtol=1e-5, atol=1e-6)


def test_calls_with_gradients_stay_eager_and_train():
    net, ref = _net(), _net()
    net.compile()
    x = st.randn(2, 3, 6, 6)
    y = net(x)
    assert y.requires_grad
    y.sum().backward()
    ref(x).sum().backward()
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_allclose(to_numpy(p.grad), to_numpy(q.grad), rtol=1e-5, atol=1e-6)
    assert net._compiled_forward.replays == 0


def test_keyword_arguments_run_eagerly():
    class WithScale(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    m = WithScale()
    m.compile()
    with st.no_grad():
        assert m(st.ones(2), scale=3.0).tolist() == [3.0, 3.0]
    assert m._compiled_forward.graphs == {}


def test_compile_options_are_checked():
    with pytest.raises((TypeError, ValueError)):
        _net().compile(on_change="sometimes")


def test_a_deep_copy_of_a_compiled_module_replays_its_own_weights():
    import copy

    net = _net().eval()
    net.compile()
    x = st.randn(2, 3, 6, 6)
    with st.no_grad():
        for _ in range(3):
            net(x)
        twin = copy.deepcopy(net)
        for p in twin.parameters():
            p.mul_(0.5)
        ref = _net().eval()
        ref.load_state_dict(twin.state_dict())
        for _ in range(3):
            np.testing.assert_allclose(to_numpy(twin(x)), to_numpy(ref(x)), rtol=1e-6,
                                       atol=1e-6)
        # the original still gives its own results
        orig = _net().eval()
        np.testing.assert_allclose(to_numpy(net(x)), to_numpy(orig(x)), rtol=1e-6, atol=1e-6)
    assert twin._compiled_forward is not net._compiled_forward
    assert twin._compiled_forward.replays >= 1
