"""nn.Module, nn.Parameter and the containers: registration, naming, state dicts, modes,
conversion and printing."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn

from ..helpers import to_numpy


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(st.ones(4))
        self.register_buffer("steps", st.zeros(1, dtype=st.int64))
        self.register_buffer("scratch", st.zeros(2), persistent=False)
        self.note = "plain attribute"

    def forward(self, x):
        return self.fc(x) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x):
        return self.head(self.block(x))


# ---- Parameter ---------------------------------------------------------------------------------


def test_parameter_is_a_leaf_tensor_sharing_data():
    data = st.tensor([1.0, 2.0])
    p = nn.Parameter(data)
    assert isinstance(p, nn.Parameter) and isinstance(p, st.Tensor)
    assert p.requires_grad and p.is_leaf
    assert not isinstance(data, nn.Parameter)
    with st.no_grad():
        data.fill_(5.0)
    np.testing.assert_array_equal(to_numpy(p), [5.0, 5.0])
    assert not nn.Parameter(st.zeros(2), requires_grad=False).requires_grad


def test_parameter_works_with_every_op_and_gets_gradients():
    w = nn.Parameter(st.tensor([[1.0, 2.0], [3.0, 4.0]]))
    x = st.tensor([[1.0, -1.0]])
    y = (st.matmul(x, w) + w[0]).relu().sum() + w.sum()
    y.backward()
    # d/dw of relu(x@w + w[0]).sum(): x@w + w[0] = [-2+1, -2+2] = [-1, 0] -> relu mask [0, 0]
    np.testing.assert_allclose(to_numpy(w.grad), np.ones((2, 2)))
    # results of ops on a parameter are plain tensors, not parameters
    assert not isinstance(w * 2, nn.Parameter) and not isinstance(w.detach(), nn.Parameter)


def test_parameter_rejects_bad_data():
    with pytest.raises(TypeError, match="Parameter: data must be a Tensor"):
        nn.Parameter([1.0, 2.0])
    with pytest.raises(RuntimeError, match="only floating point tensors"):
        nn.Parameter(st.tensor([1, 2]))


# ---- registration and iteration ----------------------------------------------------------------


def test_registration_and_dotted_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "head.1.weight",
                     "head.1.bias"]
    assert [n for n, _ in net.named_buffers()] == ["block.steps", "block.scratch"]
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "head", "head.0",
                                                   "head.1"]
    assert [n for n, _ in net.block.named_parameters(prefix="b", recurse=False)] == ["b.scale"]
    assert len(list(net.parameters())) == 5 and len(list(net.buffers())) == 2
    assert net.block.note == "plain attribute" and "note" not in net.block._parameters
    assert net.get_parameter("block.fc.bias") is net.block.fc.bias
    assert net.get_submodule("head.1") is net.head[1]


def test_shared_parameters_and_modules_are_listed_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.modules())) == 3
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4


def test_reassignment_and_deletion():
    m = Block()
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        m.scale = st.ones(4)
    m.scale = None
    assert "scale" not in dict(m.named_parameters())
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        m.fc = 3
    with pytest.raises(TypeError, match="cannot assign 'str' as buffer 'steps'"):
        m.steps = "x"
    m.fc = nn.Identity()
    assert [n for n, _ in m.named_parameters()] == []
    del m.fc
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'fc'"):
        m.fc  # noqa: B018
    # a plain attribute replaced by a parameter becomes a parameter
    m.note = nn.Parameter(st.zeros(1))
    assert "note" in dict(m.named_parameters())


def test_registration_errors():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(st.zeros(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Early()
    m = nn.Module()
    with pytest.raises(KeyError, match=r"buffer name cannot contain \"\.\""):
        m.register_buffer("a.b", st.zeros(1))
    with pytest.raises(TypeError, match="nn.Parameter or None required"):
        m.register_parameter("w", st.zeros(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        m(st.zeros(1))


# ---- modes, gradients, apply ------------------------------------------------------------------


def test_train_eval_propagate_to_every_module():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.head.train()
    assert net.head[1].training and not net.block.training
    with pytest.raises(ValueError, match="mode is expected to be a bool"):
        net.train("yes")


def test_zero_grad_set_to_none_or_zeros():
    net = Net()
    net(st.ones(2, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        np.testing.assert_array_equal(to_numpy(p.grad), np.zeros(p.shape, np.float32))
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_requires_grad_and_apply():
    net = Net()
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "Block", "ReLU", "Linear", "Sequential", "Net"]

    def init_linear(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.5)

    net.apply(init_linear)
    np.testing.assert_array_equal(to_numpy(net.head[1].weight), np.full((2, 4), 0.5, np.float32))


# ---- conversion --------------------------------------------------------------------------------


def test_to_float64_keeps_parameter_identity_and_converts_grads():
    net = Net()
    net(st.ones(2, 3)).sum().backward()
    params = list(net.parameters())
    before = [to_numpy(p) for p in params]
    grad_before = to_numpy(net.block.fc.weight.grad)
    assert net.to(st.float64) is net
    after = list(net.parameters())
    assert all(a is b for a, b in zip(params, after))
    for p, v in zip(after, before):
        assert p.dtype is st.float64 and isinstance(p, nn.Parameter) and p.requires_grad
        np.testing.assert_array_equal(to_numpy(p), v.astype(np.float64))
    assert net.block.fc.weight.grad.dtype is st.float64
    np.testing.assert_array_equal(to_numpy(net.block.fc.weight.grad), grad_before)
    # the integer buffer keeps its dtype, float buffers follow
    assert net.block.steps.dtype is st.int64 and net.block.scratch.dtype is st.float64
    y = net(st.ones(2, 3, dtype=st.float64))
    assert y.dtype is st.float64
    y.sum().backward()
    assert net.half().block.fc.weight.dtype is st.float16
    assert net.float().block.fc.weight.dtype is st.float32
    assert net.double().block.scale.dtype is st.float64
    assert net.to("float32").block.scale.dtype is st.float32
    assert net.to("cpu").block.scale.device == st.device("cpu")
    with pytest.raises(TypeError, match="only accepts floating point dtypes"):
        net.to(st.int32)
    with pytest.raises(TypeError, match="expected a device or dtype"):
        net.to(3)


# ---- state dict --------------------------------------------------------------------------------


def test_state_dict_names_and_contents():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["block.scale", "block.steps", "block.fc.weight", "block.fc.bias",
                        "head.1.weight", "head.1.bias"]  # non-persistent scratch left out
    assert not any(t.requires_grad for t in sd.values())
    assert net.state_dict(keep_vars=True)["block.scale"] is net.block.scale
    np.testing.assert_array_equal(to_numpy(sd["block.fc.weight"]),
                                  to_numpy(net.block.fc.weight))


def test_state_dict_round_trip_into_fresh_model():
    st.manual_seed(1)
    src = Net()
    with st.no_grad():
        src.block.steps.fill_(7)
    st.manual_seed(2)
    dst = Net()
    assert not np.array_equal(to_numpy(src.block.fc.weight),
                              to_numpy(dst.block.fc.weight))
    # copies of the values, as a checkpoint on disk would hold
    saved = {k: st.tensor(to_numpy(v)) for k, v in src.state_dict().items()}
    result = dst.load_state_dict(saved)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for k, v in src.state_dict().items():
        np.testing.assert_array_equal(to_numpy(dst.state_dict()[k]), to_numpy(v))
    x = st.randn(5, 3)
    np.testing.assert_array_equal(to_numpy(dst(x)), to_numpy(src(x)))
    # loading copies: the parameters are still the model's own objects
    params = list(dst.parameters())
    dst.load_state_dict(src.state_dict())
    assert all(a is b for a, b in zip(params, dst.parameters()))


def test_load_state_dict_strict_and_non_strict():
    net = Net()
    sd = dict(net.state_dict())
    del sd["head.1.bias"]
    sd["extra.weight"] = st.zeros(1)
    with pytest.raises(RuntimeError) as err:
        Net().load_state_dict(sd)
    msg = str(err.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "head.1.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight".' in msg
    other = Net()
    keys = other.load_state_dict(sd, strict=False)
    assert keys.missing_keys == ["head.1.bias"] and keys.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(to_numpy(other.head[1].weight),
                                  to_numpy(net.head[1].weight))


def test_load_state_dict_shape_mismatch_copies_nothing():
    net = Net()
    before = to_numpy(net.block.scale)
    sd = dict(Net().state_dict())
    sd["block.scale"] = st.full((4,), 3.0)
    sd["block.fc.weight"] = st.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"size mismatch for block\.fc\.weight: copying a "
                       r"param with shape \(3, 4\) from checkpoint, the shape in current model "
                       r"is \(4, 3\)"):
        net.load_state_dict(sd, strict=False)
    np.testing.assert_array_equal(to_numpy(net.block.scale), before)
    with pytest.raises(TypeError, match="expected a mapping"):
        net.load_state_dict([1, 2])


# ---- repr --------------------------------------------------------------------------------------


def test_repr_nested_like_pytorch():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(),
                        nn.Sequential(nn.Dropout(0.1), nn.Linear(3, 1, bias=False)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "    (1): Linear(in_features=3, out_features=1, bias=False)\n"
        "  )\n"
        ")"
    )
    assert repr(nn.Embedding(10, 3, padding_idx=-1)) == "Embedding(10, 3, padding_idx=9)"
    assert repr(nn.Module()) == "Module()"


# ---- containers --------------------------------------------------------------------------------


def test_sequential_indexing_slicing_and_ordered_dict():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.Tanh()),
                                     ("out", nn.Linear(3, 1))]))
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias", "out.weight",
                                                      "out.bias"]
    assert len(seq) == 3 and seq[-1] is seq.out and seq[0] is seq.fc
    tail = seq[1:]
    assert isinstance(tail, nn.Sequential) and list(tail._modules) == ["act", "out"]
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear"]
    x = np.array([[0.5, -1.0]], np.float32)
    w1, b1 = to_numpy(seq.fc.weight), to_numpy(seq.fc.bias)
    w2, b2 = to_numpy(seq.out.weight), to_numpy(seq.out.bias)
    expect = np.tanh(x @ w1.T + b1) @ w2.T + b2
    np.testing.assert_allclose(to_numpy(seq(st.tensor(x))), expect, rtol=1e-5)
    with pytest.raises(IndexError, match="index 3 is out of range for 3 modules"):
        seq[3]
    with pytest.raises(TypeError, match="indices must be integers or slices"):
        seq["fc"]
    s2 = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    del s2[0]
    assert list(s2._modules) == ["0", "1"] and isinstance(s2[0], nn.Tanh)
    s2.append(nn.ReLU()).insert(0, nn.Identity())
    assert [type(m).__name__ for m in s2] == ["Identity", "Tanh", "Sigmoid", "ReLU"]
    s2[1] = nn.ELU()
    assert isinstance(s2[1], nn.ELU)


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    layers.append(nn.Linear(2, 1))
    layers += [nn.Sigmoid()]
    assert len(layers) == 4 and [n for n, _ in layers.named_parameters()] == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    del layers[1]
    assert list(layers._modules) == ["0", "1", "2"] and isinstance(layers[1], nn.Linear)
    layers.insert(0, nn.Tanh())
    assert isinstance(layers[0], nn.Tanh) and isinstance(layers[-1], nn.Sigmoid)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])

    assert len(list(Holder().parameters())) == 6
    with pytest.raises(IndexError, match="ModuleList: index 9 is out of range"):
        layers[9]
    with pytest.raises(TypeError, match="iterable of modules"):
        layers.extend(nn.Linear(1, 1))


def test_module_dict():
    d = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    d["c"] = nn.Linear(2, 1)
    assert list(d) == ["a", "b", "c"] and "b" in d and len(d) == 3
    assert [n for n, _ in d.named_parameters()] == ["a.weight", "a.bias", "c.weight", "c.bias"]
    assert isinstance(d.pop("b"), nn.ReLU) and list(d.keys()) == ["a", "c"]
    d.update([("e", nn.Tanh())])
    assert [k for k, _ in d.items()] == ["a", "c", "e"]
    with pytest.raises(KeyError, match="ModuleDict has no module 'zz'"):
        d["zz"]
    with pytest.raises(ValueError, match=r"expected \(name, module\) pairs"):
        d.update([("x", nn.ReLU(), 3)])
