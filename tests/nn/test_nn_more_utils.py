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
