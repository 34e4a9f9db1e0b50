"""nn.init's dirac_/eye_/sparse_/trunc_normal_, nn.utils' norm and fusion helpers, Module's
state-dict hooks, set_submodule and extra state, nn.Buffer and utils.data.StackDataset."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn
from singa_tensor.nn import utils

from ..helpers import to_numpy

# ---- init ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, groups", [((4, 4, 3), 1), ((6, 2, 3, 3), 3),
                                           ((2, 3, 1, 3, 3), 1)])
def test_dirac_kernel_passes_the_input_through(shape, groups):
    w = nn.init.dirac_(st.empty(*shape, dtype=st.float64), groups)
    nsp = len(shape) - 2
    cin = shape[1] * groups
    x = st.randn(1, cin, *([5] * nsp), dtype=st.float64)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    out = to_numpy(conv(x, w, padding="same", groups=groups))
    per = shape[0] // groups
    for g in range(groups):
        for d in range(min(per, shape[1])):
            np.testing.assert_allclose(out[0, g * per + d], to_numpy(x)[0, g * shape[1] + d])
    assert float(w.sum().item()) == groups * min(per, shape[1])


def test_eye_and_errors():
    assert nn.init.eye_(st.empty(3, 2)).tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="eye_: only 2-d tensors"):
        nn.init.eye_(st.empty(2, 2, 2))
    with pytest.raises(ValueError, match="dirac_: only tensors with 3, 4 or 5 dimensions"):
        nn.init.dirac_(st.empty(2, 2))
    with pytest.raises(ValueError, match="dirac_: groups=2 must be a positive divisor"):
        nn.init.dirac_(st.empty(3, 1, 3), 2)
    with pytest.raises(TypeError, match="eye_: expected a floating point tensor"):
        nn.init.eye_(st.zeros(2, 2, dtype=st.int64))


def test_sparse_zeroes_a_fraction_of_each_column_and_is_seeded():
    g = st.Generator().manual_seed(3)
    w = to_numpy(nn.init.sparse_(st.empty(20, 5), 0.25, std=0.5, generator=g))
    assert ((w == 0).sum(axis=0) == 5).all()
    assert 0.2 < w[w != 0].std() < 0.9
    again = to_numpy(nn.init.sparse_(st.empty(20, 5), 0.25, std=0.5,
                                     generator=st.Generator().manual_seed(3)))
    np.testing.assert_array_equal(w, again)
    with pytest.raises(ValueError, match="sparse_: sparsity must be in"):
        nn.init.sparse_(st.empty(2, 2), 1.5)
    with pytest.raises(ValueError, match="sparse_: only 2-d"):
        nn.init.sparse_(st.empty(2), 0.5)


def test_trunc_normal_stays_in_bounds_with_the_truncated_moments():
    w = to_numpy(nn.init.trunc_normal_(st.empty(20000, dtype=st.float64), mean=1.0, std=2.0,
                                       a=0.0, b=3.0, generator=st.Generator().manual_seed(0)))
    assert w.min() >= 0.0 and w.max() <= 3.0
    # E[X | 0 <= X <= 3] for X ~ N(1, 2**2): 1 + 2 (phi(-0.5) - phi(1)) / (Phi(1) - Phi(-0.5))
    np.testing.assert_allclose(w.mean(), 1.41328, atol=0.03)
    assert w.std() < 2.0
    with pytest.raises(ValueError, match="trunc_normal_: expects a <= b"):
        nn.init.trunc_normal_(st.empty(3), a=1.0, b=0.0)
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        nn.init.trunc_normal_(st.empty(3), mean=10.0, std=1.0, a=-1.0, b=1.0)


# ---- utils ---------------------------------------------------------------------------------------


def test_total_norm_and_clipping_by_it_match_clip_grad_norm():
    a, b = st.zeros(3, requires_grad=True), st.zeros(2, requires_grad=True)
    a.grad, b.grad = st.tensor([1.0, -2.0, 2.0]), st.tensor([4.0, 0.0])
    total = utils.get_total_norm([a.grad, b.grad])
    assert abs(total.item() - 5.0) < 1e-6
    assert abs(utils.get_total_norm([a.grad, b.grad], float("inf")).item() - 4.0) < 1e-6
    utils.clip_grads_with_norm_([a, b], 2.5, total)
    np.testing.assert_allclose(to_numpy(a.grad), [0.5, -1.0, 1.0], rtol=1e-5)
    utils.clip_grads_with_norm_([a, b], 100.0, total)  # no growth past 1
    np.testing.assert_allclose(to_numpy(b.grad), [2.0, 0.0], rtol=1e-5)
    assert utils.get_total_norm([]).item() == 0.0
    with pytest.raises(RuntimeError, match="get_total_norm: the total norm .* non-finite"):
        utils.get_total_norm([st.tensor([float("inf")])], error_if_nonfinite=True)
    with pytest.raises(ValueError, match="clip_grads_with_norm_: max_norm"):
        utils.clip_grads_with_norm_([a], -1.0, total)
    with pytest.raises(TypeError, match="get_total_norm: expected Tensors"):
        utils.get_total_norm([1.0])


def _trained_bn(bn, shape):
    bn.train()
    for _ in range(3):
        bn(st.randn(*shape) * 2 + 0.5)
    with st.no_grad():
        bn.weight.copy_(st.rand(bn.num_features) + 0.5)
        bn.bias.copy_(st.randn(bn.num_features))
    return bn.eval()


@pytest.mark.parametrize("make, bn_cls, shape, transpose", [
    (lambda: nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d, (2, 3, 5, 5), False),
    (lambda: nn.Conv3d(2, 3, 2, bias=False), nn.BatchNorm3d, (2, 2, 3, 3, 3), False),
    (lambda: nn.ConvTranspose2d(3, 4, 2, stride=2), nn.BatchNorm2d, (2, 3, 3, 3), True),
])
def test_fuse_conv_bn_eval_computes_the_same_function(make, bn_cls, shape, transpose):
    st.manual_seed(1)
    conv = make().eval()
    x = st.randn(*shape)
    bn = _trained_bn(bn_cls(conv.out_channels), conv(x).shape)
    fused = utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    np.testing.assert_allclose(to_numpy(fused(x)), to_numpy(bn(conv(x))), rtol=1e-4,
                               atol=1e-5)
    assert fused is not conv and fused.bias is not None


def test_fuse_linear_bn_and_errors():
    st.manual_seed(2)
    fc = nn.Linear(3, 4).eval()
    bn = _trained_bn(nn.BatchNorm1d(4), (8, 4))
    x = st.randn(5, 3)
    fused = utils.fuse_linear_bn_eval(fc, bn)
    np.testing.assert_allclose(to_numpy(fused(x)), to_numpy(bn(fc(x))), rtol=1e-4, atol=1e-5)
    w, b = utils.fuse_linear_bn_weights(fc.weight, fc.bias, bn.running_mean, bn.running_var,
                                        bn.eps, bn.weight, bn.bias)
    assert isinstance(w, nn.Parameter) and w.shape == (4, 3) and b.shape == (4,)
    with pytest.raises(RuntimeError, match="fuse_linear_bn_eval: fusion only works in eval"):
        utils.fuse_linear_bn_eval(fc.train(), bn)
    with pytest.raises(ValueError, match="fuse_linear_bn_eval: linear.out_features"):
        utils.fuse_linear_bn_eval(nn.Linear(3, 5).eval(), bn)
    with pytest.raises(ValueError, match="fuse_conv_bn_weights: batch norm of 4 features"):
        utils.fuse_conv_bn_weights(st.ones(3, 1, 1, 1), None, bn.running_mean,
                                   bn.running_var, 1e-5, None, None)


# ---- Module state ----------------------------------------------------------------------------


def test_state_dict_hooks_run_per_module_with_prefixes_and_can_be_removed():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    seen = []
    h1 = net[1].register_state_dict_pre_hook(lambda m, prefix, kv: seen.append((prefix, kv)))

    def post(m, sd, prefix, meta):
        sd[prefix + "note"] = st.tensor(1.0)

    h2 = net[1].register_state_dict_post_hook(post)
    sd = net.state_dict(keep_vars=True)
    assert seen == [("1.", True)] and "1.note" in sd and list(sd)[-1] == "1.note"
    h1.remove()
    h2.remove()
    assert "1.note" not in net.state_dict() and len(seen) == 1
    net.register_state_dict_post_hook(lambda m, sd, p, meta: sd)
    with pytest.raises(RuntimeError, match="state_dict post hook must return None"):
        net.state_dict()
    with pytest.raises(TypeError):
        net.register_state_dict_pre_hook(3)


def test_load_state_dict_hooks_edit_the_copy_and_relax_strictness():
    net = nn.Sequential(nn.Linear(2, 2))
    src = {"0.w": st.ones(2, 2), "0.bias": st.zeros(2)}
    calls = []

    def rename(m, sd, prefix, meta, strict, missing, unexpected, errors):
        calls.append((type(m).__name__, prefix, strict))
        if prefix + "w" in sd:
            sd[prefix + "weight"] = sd.pop(prefix + "w")

    net[0].register_load_state_dict_pre_hook(rename)
    out = net.load_state_dict(src)
    assert out.missing_keys == [] and out.unexpected_keys == []
    assert "0.w" in src  # the caller's dict is untouched
    assert calls == [("Linear", "0.", True)]
    assert net[0].weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]

    m = nn.Linear(2, 2)
    seen = []

    def forgive(mod, keys):
        seen.append((list(keys.missing_keys), list(keys.unexpected_keys)))
        if "bias" in keys.missing_keys:
            keys.missing_keys.remove("bias")

    m.register_load_state_dict_post_hook(forgive)
    out = m.load_state_dict({"weight": st.full((2, 2), 3.0)})
    assert seen == [(["bias"], [])] and out.missing_keys == []
    assert m.weight.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with pytest.raises(RuntimeError, match="Unexpected key"):
        m.load_state_dict({"weight": st.ones(2, 2), "bias": st.ones(2), "extra": st.ones(1)})


def test_load_pre_hook_result_is_checked_strictly():
    m = nn.Linear(2, 2)
    m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: sd.pop("bias"))
    with pytest.raises(RuntimeError, match='Missing key.*"bias"'):
        m.load_state_dict(nn.Linear(2, 2).state_dict())


class _Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1, 1)
        self.calls = 0

    def get_extra_state(self):
        return {"calls": self.calls}

    def set_extra_state(self, state):
        self.calls = state["calls"]


def test_extra_state_round_trips_through_state_dict():
    net = nn.Sequential(_Counted())
    net[0].calls = 7
    sd = net.state_dict()
    assert sd["0._extra_state"] == {"calls": 7}
    other = nn.Sequential(_Counted())
    other.load_state_dict(sd)
    assert other[0].calls == 7
    with pytest.raises(RuntimeError, match='Missing key.*"0._extra_state"'):
        other.load_state_dict({k: v for k, v in sd.items() if k != "0._extra_state"})
    assert "_extra_state" not in "".join(nn.Linear(1, 1).state_dict())
    with pytest.raises(RuntimeError, match="set_extra_state\\(\\) was called"):
        nn.Module().set_extra_state(1)
    with pytest.raises(RuntimeError, match="get_extra_state\\(\\) is only called"):
        nn.Module().get_extra_state()


def test_set_submodule_replaces_along_a_dotted_path():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 2)))
    new = nn.Tanh()
    net.set_submodule("1.0", new)
    assert net[1][0] is new and net.get_submodule("1.0") is new
    net.set_submodule("1.extra", nn.ReLU())
    assert isinstance(net[1].extra, nn.ReLU)
    with pytest.raises(AttributeError, match="strict=True"):
        net.set_submodule("1.missing", nn.ReLU(), strict=True)
    with pytest.raises(ValueError, match="set_submodule: cannot set the submodule without"):
        net.set_submodule("", nn.ReLU())
    with pytest.raises(TypeError, match="set_submodule: int is not a Module"):
        net.set_submodule("0", 3)
    with pytest.raises(AttributeError):
        net.set_submodule("nothere.x", nn.ReLU())


def test_buffer_marker_registers_buffers_with_persistence():
    m = nn.Module()
    m.stats = nn.Buffer(st.ones(2))
    m.tmp = nn.Buffer(st.zeros(1), persistent=False)
    assert isinstance(m.stats, nn.Buffer) and isinstance(m.stats, st.Tensor)
    assert [n for n, _ in m.named_buffers()] == ["stats", "tmp"]
    assert list(m.state_dict()) == ["stats"]
    assert not isinstance(st.ones(1), nn.Buffer)
    assert m.to(st.float64).stats.dtype == st.float64
    with pytest.raises(TypeError, match="Buffer: data must be a Tensor"):
        nn.Buffer([1.0])


def test_uninitialized_placeholders_of_lazy_modules():
    fc = nn.LazyLinear(3)
    assert isinstance(fc.weight, nn.UninitializedParameter)
    assert isinstance(fc.weight, nn.Parameter)
    assert not isinstance(fc.weight, nn.UninitializedBuffer)
    bn = nn.LazyBatchNorm2d()
    assert isinstance(bn.running_mean, nn.UninitializedBuffer)
    fc(st.ones(1, 4))
    bn(st.randn(2, 3, 2, 2))
    assert not isinstance(fc.weight, nn.UninitializedParameter)
    assert not isinstance(bn.running_mean, nn.UninitializedBuffer)
    p = nn.UninitializedParameter(dtype=st.float64)
    assert p.dtype == st.float64 and p.requires_grad and p.numel() == 0


# ---- StackDataset --------------------------------------------------------------------------------


def test_stack_dataset_tuples_dicts_and_errors():
    from singa_tensor.utils.data import DataLoader, StackDataset, TensorDataset

    xs = TensorDataset(st.arange(4.0))
    ys = [10, 11, 12, 13]
    pair = StackDataset(xs, ys)
    assert len(pair) == 4 and pair[2][1] == 12 and pair[2][0][0].item() == 2.0
    named = StackDataset(x=xs, y=ys)
    assert set(named[0]) == {"x", "y"} and named[3]["y"] == 13
    assert named.__getitems__([1, 0]) == [named[1], named[0]]
    batches = list(DataLoader(named, batch_size=2))
    assert batches[1]["y"].tolist() == [12, 13]
    with pytest.raises(ValueError, match="StackDataset: size mismatch"):
        StackDataset(xs, [1, 2])
    with pytest.raises(ValueError, match="StackDataset: give the datasets either"):
        StackDataset(xs, y=ys)
    with pytest.raises(ValueError, match="StackDataset: needs at least one dataset"):
        StackDataset()
    with pytest.raises(TypeError, match="StackDataset: dataset 0 has no length"):
        StackDataset(3)
