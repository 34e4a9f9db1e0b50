"""Convolution, pooling and normalisation layers: parameters, initialisation, modes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn

from ..helpers import to_numpy


def test_conv2d_layer_matches_the_functional_op_and_pytorch_init_bounds():
    st.manual_seed(0)
    conv = nn.Conv2d(3, 5, (3, 2), stride=2, padding=1, groups=1)
    assert conv.weight.shape == (5, 3, 3, 2) and conv.bias.shape == (5,)
    bound = 1.0 / math.sqrt(3 * 3 * 2)
    assert np.abs(to_numpy(conv.weight)).max() <= bound
    assert np.abs(to_numpy(conv.bias)).max() <= bound
    x = st.randn(2, 3, 7, 6)
    np.testing.assert_allclose(to_numpy(conv(x)), to_numpy(st.conv2d(x, conv.weight, conv.bias,
                                                                       2, 1)), rtol=1e-6)
    assert {n for n, _ in conv.named_parameters()} == {"weight", "bias"}


def test_conv_layers_shapes_and_repr():
    assert nn.Conv1d(2, 4, 3, padding=1)(st.randn(3, 2, 9)).shape == (3, 4, 9)
    assert nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)(
        st.randn(1, 4, 5, 5)).shape == (1, 6, 10, 10)
    assert repr(nn.Conv2d(2, 4, 3, bias=False)) == (
        "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), bias=False)")


def test_batchnorm_train_and_eval_modes():
    bn = nn.BatchNorm2d(2, momentum=0.5)
    x = np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32) * 3 + 1
    y = bn(st.tensor(x))
    got = to_numpy(y)
    np.testing.assert_allclose(got.mean(axis=(0, 2, 3)), 0.0, atol=1e-5)
    np.testing.assert_allclose(got.std(axis=(0, 2, 3)), 1.0, atol=1e-3)
    np.testing.assert_allclose(to_numpy(bn.running_mean), 0.5 * x.mean(axis=(0, 2, 3)),
                               rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    z = bn(st.tensor(x))  # now the running statistics normalise, and do not change
    rm, rv = to_numpy(bn.running_mean), to_numpy(bn.running_var)
    want = (x - rm.reshape(1, 2, 1, 1)) / np.sqrt(rv.reshape(1, 2, 1, 1) + 1e-5)
    np.testing.assert_allclose(to_numpy(z), want, rtol=1e-5, atol=1e-6)
    assert bn.num_batches_tracked.item() == 1
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"}


def test_batchnorm_cumulative_average_when_momentum_is_none():
    bn = nn.BatchNorm1d(1, momentum=None)
    for v in (1.0, 3.0):
        bn(st.tensor([[v - 1.0], [v + 1.0]]))
    assert bn.running_mean.item() == pytest.approx(2.0)


def test_norm_and_pool_layers():
    x = st.randn(2, 4, 6, 6)
    assert nn.LayerNorm((6, 6))(x).shape == x.shape
    assert nn.GroupNorm(2, 4)(x).shape == x.shape
    assert nn.MaxPool2d(2)(x).shape == (2, 4, 3, 3)
    assert nn.AvgPool2d(3, stride=1, padding=1)(x).shape == x.shape
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 4, 1, 1)
    assert nn.Upsample(scale_factor=2, mode="bilinear")(x).shape == (2, 4, 12, 12)


@pytest.mark.parametrize("make, match", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), "divisible by groups"),
    (lambda: nn.Conv2d(0, 4, 3), "in_channels must be a positive int"),
    (lambda: nn.BatchNorm2d(0), "num_features"),
    (lambda: nn.GroupNorm(3, 4), "divisor"),
])
def test_bad_layer_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_batchnorm2d_rejects_wrong_rank():
    with pytest.raises(ValueError, match="expected a 4-d input"):
        nn.BatchNorm2d(3)(st.randn(2, 3))
