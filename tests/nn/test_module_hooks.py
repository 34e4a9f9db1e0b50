"""Module hooks (forward, forward pre, full backward, full backward pre, global), their handles,
and the Module helpers around them: get_submodule/get_parameter/get_buffer, named_modules,
apply, type, requires_grad_, zero_grad, extra_repr, __dir__, non-persistent buffers."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn
from singa_tensor.nn.hooks import RemovableHandle
from singa_tensor.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)

from ..helpers import to_numpy


class Scale(nn.Module):
    def __init__(self, k=2.0):
        super().__init__()
        self.k = k

    def forward(self, x, shift=0.0):
        return x * self.k + shift


class Split(nn.Module):
    def forward(self, x, y):
        return x * y, x + y


# ---- forward pre-hooks and forward hooks ------------------------------------------------------


def test_forward_hook_sees_args_and_output_and_can_replace_it():
    m = Scale()
    seen = []

    def hook(mod, args, out):
        seen.append((mod, args[0].tolist(), out.tolist()))
        return out + 100

    h = m.register_forward_hook(hook)
    assert isinstance(h, RemovableHandle)
    assert m(st.tensor([1.0])).tolist() == [102.0]
    assert seen == [(m, [1.0], [2.0])]
    h.remove()
    assert m(st.tensor([1.0])).tolist() == [2.0]
    h.remove()  # twice is harmless
    assert len(seen) == 1


def test_forward_hooks_run_in_order_and_prepend_puts_first():
    m = Scale()
    order = []
    m.register_forward_hook(lambda *a: order.append("a"))
    m.register_forward_hook(lambda *a: order.append("b"))
    m.register_forward_hook(lambda *a: order.append("first"), prepend=True)
    m(st.ones(1))
    assert order == ["first", "a", "b"]


def test_forward_hook_with_kwargs():
    m = Scale()
    got = {}

    def hook(mod, args, kwargs, out):
        got.update(kwargs)
        return out * 0

    m.register_forward_hook(hook, with_kwargs=True)
    assert m(st.ones(1), shift=5.0).tolist() == [0.0]
    assert got == {"shift": 5.0}


def test_forward_pre_hook_replaces_args_single_value_or_tuple():
    m = Scale()
    h = m.register_forward_pre_hook(lambda mod, args: args[0] + 1)
    assert m(st.zeros(1)).tolist() == [2.0]
    h.remove()
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 10,))
    assert m(st.ones(1)).tolist() == [20.0]


def test_forward_pre_hook_with_kwargs_replaces_both():
    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kw: ((args[0] * 0,), {"shift": 7.0}),
                                with_kwargs=True)
    assert m(st.ones(1), shift=1.0).tolist() == [7.0]


def test_forward_pre_hook_with_kwargs_bad_return():
    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kw: "nope", with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple"):
        m(st.ones(1))


def test_always_call_hook_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    calls = []
    m.register_forward_hook(lambda mod, args, out: calls.append(("always", out)),
                            always_call=True)
    m.register_forward_hook(lambda mod, args, out: calls.append(("plain", out)))
    with pytest.raises(ValueError, match="boom"):
        m(st.ones(1))
    assert calls == [("always", None)]


def test_handle_as_context_manager():
    m = Scale()
    with m.register_forward_hook(lambda mod, a, out: out * 0):
        assert m(st.ones(1)).tolist() == [0.0]
    assert m(st.ones(1)).tolist() == [2.0]


def test_hooks_run_for_nested_modules():
    net = nn.Sequential(Scale(2.0), Scale(3.0))
    outs = []
    for child in net:
        child.register_forward_hook(lambda mod, a, out: outs.append(out.item()))
    net(st.ones(1))
    assert outs == [2.0, 6.0]


def test_hook_must_be_callable():
    with pytest.raises(TypeError, match="register_forward_hook: hook must be callable"):
        Scale().register_forward_hook(3)
    with pytest.raises(TypeError, match="register_module_forward_hook: hook must be callable"):
        register_module_forward_hook("x")


def test_global_hooks_see_every_module_and_run_before_local_ones():
    order = []
    m = Scale()
    m.register_forward_pre_hook(lambda mod, a: order.append("local pre"))
    m.register_forward_hook(lambda mod, a, o: order.append("local"))
    with register_module_forward_pre_hook(lambda mod, a: order.append("global pre")), \
            register_module_forward_hook(lambda mod, a, o: order.append("global")):
        m(st.ones(1))
    assert order == ["global pre", "local pre", "global", "local"]
    order.clear()
    m(st.ones(1))
    assert order == ["local pre", "local"]


# ---- backward hooks ---------------------------------------------------------------------------


def test_full_backward_hook_gets_grad_input_and_grad_output():
    m = nn.Linear(3, 2)
    x = st.randn(4, 3, requires_grad=True)
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go)))
    y = m(x)
    y.sum().backward()
    (gi, go), = got
    assert len(gi) == 1 and len(go) == 1
    np.testing.assert_allclose(to_numpy(go[0]), np.ones((4, 2)))
    expected = np.ones((4, 2)) @ to_numpy(m.weight)
    np.testing.assert_allclose(to_numpy(gi[0]), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_numpy(x.grad), expected, rtol=1e-6, atol=1e-6)


def test_full_backward_hook_can_replace_grad_input():
    m = Scale(3.0)
    x = st.ones(2, requires_grad=True)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0 + 7,))
    m(x).sum().backward()
    assert x.grad.tolist() == [7.0, 7.0]


def test_full_backward_hook_multiple_outputs_and_non_tensor_args():
    m = Split()
    x = st.tensor([2.0], requires_grad=True)
    y = st.tensor([5.0])  # needs no grad: its grad_input entry is None
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go)))
    a, b = m(x, y)
    (a * 3).sum().backward()
    (gi, go), = got
    assert gi[1] is None and gi[0].tolist() == [15.0]
    assert go[0].tolist() == [3.0] and go[1].tolist() == [0.0]


def test_full_backward_hook_when_no_input_requires_grad():
    m = nn.Linear(2, 1)
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go[0].shape)))
    m(st.ones(3, 2)).sum().backward()
    assert got == [((None,), (3, 1))]
    assert m.weight.grad is not None


def test_full_backward_pre_hook_replaces_grad_output_before_the_module():
    m = Scale(3.0)
    x = st.ones(2, requires_grad=True)
    order = []
    m.register_full_backward_pre_hook(lambda mod, go: (order.append("pre"), (go[0] * 10,))[1])
    m.register_full_backward_hook(lambda mod, gi, go: order.append(("hook", go[0].tolist())))
    m(x).sum().backward()
    assert order == ["pre", ("hook", [10.0, 10.0])]
    assert x.grad.tolist() == [30.0, 30.0]


def test_backward_hook_bad_return_raises():
    m = Scale()
    x = st.ones(2, requires_grad=True)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of input gradients"):
        m(x).sum().backward()


def test_backward_hooks_removed_and_skipped_under_no_grad():
    m = Scale()
    calls = []
    h = m.register_full_backward_hook(lambda *a: calls.append(1))
    with st.no_grad():
        y = m(st.ones(1, requires_grad=True))
    assert not y.requires_grad
    h.remove()
    x = st.ones(1, requires_grad=True)
    m(x).sum().backward()
    assert calls == [] and x.grad.tolist() == [2.0]


def test_global_backward_hooks_run_before_local_ones():
    m = Scale(2.0)
    order = []
    m.register_full_backward_pre_hook(lambda mod, go: order.append("local pre"))
    m.register_full_backward_hook(lambda mod, gi, go: order.append(("local", gi[0].tolist())))
    x = st.ones(1, requires_grad=True)
    with register_module_full_backward_pre_hook(lambda mod, go: order.append("global pre")), \
            register_module_full_backward_hook(lambda mod, gi, go: (gi[0] * 5,)):
        m(x).sum().backward()
    assert order == ["global pre", "local pre", ("local", [10.0])]
    assert x.grad.tolist() == [10.0]
    order.clear()
    x.grad = None
    m(x).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_hooks_registered_after_forward_do_not_fire_for_it():
    m = Scale()
    calls = []
    x = st.ones(1, requires_grad=True)
    y = m(x)
    m.register_full_backward_hook(lambda *a: calls.append(1))
    y.sum().backward()
    assert calls == []


# ---- module helpers ---------------------------------------------------------------------------


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
        self.head = nn.Linear(2, 1)
        self.register_buffer("cache", st.zeros(2), persistent=False)
        self.tag = "text"


def test_get_submodule_parameter_buffer():
    t = Tree()
    assert t.get_submodule("body.0") is t.body[0]
    assert t.get_submodule("") is t
    assert t.get_parameter("body.0.weight") is t.body[0].weight
    assert t.get_buffer("body.1.running_mean") is t.body[1].running_mean
    assert t.get_buffer("cache") is t.cache


def test_get_submodule_errors():
    t = Tree()
    with pytest.raises(AttributeError, match="Sequential has no attribute `5`"):
        t.get_submodule("body.5")
    with pytest.raises(AttributeError, match="`tag` is not an nn.Module"):
        t.get_submodule("tag")
    with pytest.raises(AttributeError, match="`running_mean` is not an nn.Parameter"):
        t.get_parameter("body.1.running_mean")
    with pytest.raises(AttributeError, match="Linear has no attribute `nope`"):
        t.get_parameter("head.nope")
    with pytest.raises(AttributeError, match="`weight` is not a buffer"):
        t.get_buffer("head.weight")
    with pytest.raises(AttributeError, match="BatchNorm1d has no attribute `x`"):
        t.get_buffer("body.1.x")
    with pytest.raises(TypeError, match="target must be a str"):
        t.get_submodule(0)


def test_non_persistent_buffer_not_in_state_dict():
    t = Tree()
    assert "cache" in dict(t.named_buffers())
    assert "cache" not in t.state_dict()
    t2 = Tree()
    t2.load_state_dict(t.state_dict())  # strict: the non-persistent buffer is not expected


def test_named_modules_prefix_memo_and_duplicates():
    shared = nn.Linear(1, 1)
    net = nn.Sequential(shared, shared)
    assert [n for n, _ in net.named_modules()] == ["", "0"]
    assert [n for n, _ in net.named_modules(remove_duplicate=False)] == ["", "0", "1"]
    assert [n for n, _ in net.named_modules(prefix="net")] == ["net", "net.0"]
    memo = {id(shared)}
    assert [n for n, _ in net.named_modules(memo=memo)] == [""]


def test_apply_type_requires_grad_zero_grad():
    t = Tree()
    visited = []
    t.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "BatchNorm1d", "Sequential", "Linear", "Tree"]
    t.type(st.float64)
    assert {p.dtype for p in t.parameters()} == {st.float64}
    assert t.body[1].num_batches_tracked.dtype is st.float64  # type() casts every tensor
    with pytest.raises(TypeError, match=r"Module.type\(\): dst_type must be a dtype"):
        t.type(3)
    t.requires_grad_(False)
    assert not any(p.requires_grad for p in t.parameters())
    t.requires_grad_()
    out = t.head(t.body(st.ones(3, 2, dtype=st.float64)))
    out.sum().backward()
    t.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any().item() for p in t.parameters())
    t.zero_grad()
    assert all(p.grad is None for p in t.parameters())


def test_extra_repr_and_dir():
    class WithExtra(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(1, 1)

        def extra_repr(self):
            return "size=3"

    text = repr(WithExtra())
    assert text.startswith("WithExtra(\n  size=3\n  (lin): Linear(")
    names = dir(Tree())
    for expected in ("body", "head", "cache", "forward", "register_forward_hook"):
        assert expected in names
