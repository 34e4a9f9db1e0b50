"""Layers, nn.functional and nn.init against numpy values and hand-derived gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn

from ..helpers import to_numpy

RNG = np.random.default_rng(0)


def t64(a, requires_grad=False):
    return st.tensor(np.asarray(a, np.float64), dtype=st.float64, requires_grad=requires_grad)


# ---- Linear ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_and_gradients_against_numpy(shape, bias):
    fc = nn.Linear(3, 4, bias=bias).double()
    w = to_numpy(fc.weight)
    b = to_numpy(fc.bias) if bias else np.zeros(4)
    x = RNG.standard_normal(shape)
    xt = t64(x, requires_grad=True)
    y = fc(xt)
    np.testing.assert_allclose(to_numpy(y), x @ w.T + b, rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(y.shape)
    (y * t64(g)).sum().backward()
    # y = x W^T + b  =>  dx = g W,  dW = sum over batch of g^T x,  db = sum over batch of g
    x2, g2 = x.reshape(-1, 3), g.reshape(-1, 4)
    np.testing.assert_allclose(to_numpy(xt.grad), g @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(to_numpy(fc.weight.grad), g2.T @ x2, rtol=1e-12, atol=1e-12)
    if bias:
        np.testing.assert_allclose(to_numpy(fc.bias.grad), g2.sum(0), rtol=1e-12, atol=1e-12)


def test_linear_default_init_matches_pytorch_bounds():
    st.manual_seed(0)
    fc = nn.Linear(400, 300)
    bound = 1.0 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) reduces to this bound
    w, b = to_numpy(fc.weight), to_numpy(fc.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert abs(w.mean()) < 0.01 * bound
    assert fc.weight.dtype is st.float32 and fc.weight.requires_grad
    assert nn.Linear(2, 2, dtype=st.float64).weight.dtype is st.float64
    st.manual_seed(5)
    a = to_numpy(nn.Linear(3, 3).weight)
    st.manual_seed(5)
    np.testing.assert_array_equal(to_numpy(nn.Linear(3, 3).weight), a)


def test_linear_bad_input():
    fc = nn.Linear(4, 3)
    with pytest.raises(ValueError, match=r"linear: input of shape \(2, 5\) does not match weight "
                       r"of shape \(3, 4\): the last input dimension must be in_features=4"):
        fc(st.zeros(2, 5))
    with pytest.raises(ValueError, match=r"input of shape \(\) does not match"):
        fc(st.tensor(1.0))
    with pytest.raises(TypeError, match="linear: input must be a Tensor"):
        fc(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"linear: bias must have shape \(3,\), got \(4,\)"):
        F.linear(st.zeros(2, 4), st.zeros(3, 4), st.zeros(4))
    with pytest.raises(ValueError, match="Linear: in_features must be a non-negative int"):
        nn.Linear(-1, 2)


# ---- activations and simple layers -------------------------------------------------------------

_erf = np.vectorize(math.erf)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU("tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Softmax(dim=1), lambda x: _softmax(x, 1)),
    (nn.LogSoftmax(dim=-1), lambda x: np.log(_softmax(x, -1))),
    (nn.Identity(), lambda x: x),
]


@pytest.mark.parametrize("module,ref", ACTIVATIONS, ids=[repr(m) for m, _ in ACTIVATIONS])
def test_activation_modules_against_numpy(module, ref):
    x = RNG.uniform(-3, 3, (4, 5))
    np.testing.assert_allclose(to_numpy(module(t64(x))), ref(x), rtol=1e-9, atol=1e-12)


def test_activation_gradients_against_hand_derivation():
    x = np.array([-2.0, -0.5, 0.5, 2.0])
    cases = [
        (lambda t: F.relu(t), (x > 0).astype(float)),
        (lambda t: F.leaky_relu(t, 0.1), np.where(x > 0, 1.0, 0.1)),
        (lambda t: F.elu(t, 2.0), np.where(x > 0, 1.0, 2.0 * np.exp(x))),
        (lambda t: F.sigmoid(t), np.exp(-x) / (1 + np.exp(-x)) ** 2),
        (lambda t: F.tanh(t), 1 - np.tanh(x) ** 2),
        (lambda t: F.silu(t), 1 / (1 + np.exp(-x)) * (1 + x * np.exp(-x) / (1 + np.exp(-x)))),
    ]
    for fn, expect in cases:
        xt = t64(x, requires_grad=True)
        fn(xt).sum().backward()
        np.testing.assert_allclose(to_numpy(xt.grad), expect, rtol=1e-10)


def test_functional_inplace_variants_write_into_the_input():
    x = t64([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x
    np.testing.assert_array_equal(to_numpy(x), [0.0, 2.0])
    y = t64([-1.0, 2.0])
    F.leaky_relu(y, 0.5, inplace=True)
    np.testing.assert_array_equal(to_numpy(y), [-0.5, 2.0])


def test_softmax_implicit_dim_warns_and_picks_pytorch_dim():
    x = RNG.standard_normal((2, 3))
    with pytest.warns(UserWarning, match="implicit dimension choice"):
        y = nn.Softmax()(t64(x))
    np.testing.assert_allclose(to_numpy(y), _softmax(x, 1), rtol=1e-12)


def test_flatten_and_gelu_errors():
    x = st.zeros(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    with pytest.raises(ValueError, match="GELU: approximate must be 'none' or 'tanh'"):
        nn.GELU("erf")


# ---- dropout -----------------------------------------------------------------------------------


def test_dropout_eval_is_identity_and_train_masks_and_scales():
    drop = nn.Dropout(0.3)
    x = st.ones(200, 100, requires_grad=True)
    st.manual_seed(3)
    y = drop(x)
    v = to_numpy(y)
    zero = v == 0
    assert abs(zero.mean() - 0.3) < 0.01
    np.testing.assert_allclose(v[~zero], 1 / 0.7, rtol=1e-6)
    # the gradient flows only through kept elements, scaled the same way
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), np.where(zero, 0.0, 1 / 0.7), rtol=1e-6)
    # seeded: the same mask again
    st.manual_seed(3)
    np.testing.assert_array_equal(to_numpy(drop(x)), v)
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.0) is x


def test_dropout_extremes_and_bad_p():
    x = t64(RNG.standard_normal(50))
    np.testing.assert_array_equal(to_numpy(F.dropout(x, 1.0)), np.zeros(50))
    for p in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            nn.Dropout(p)
    with pytest.raises(ValueError, match=r"dropout: dropout probability .* but got 2"):
        F.dropout(x, 2)
    with pytest.raises(TypeError, match="dropout: expected a floating point input"):
        F.dropout(st.tensor([1, 2]), 0.5)


# ---- embedding ---------------------------------------------------------------------------------


def test_embedding_forward_and_gradient_counts():
    emb = nn.Embedding(6, 3).double()
    w = to_numpy(emb.weight)
    idx = np.array([[1, 4, 1], [5, 0, 1]])
    out = emb(st.tensor(idx))
    np.testing.assert_array_equal(to_numpy(out), w[idx])
    out.sum().backward()
    counts = np.bincount(idx.ravel(), minlength=6).astype(float)
    np.testing.assert_array_equal(to_numpy(emb.weight.grad), np.repeat(counts[:, None], 3, 1))


def test_embedding_padding_idx_starts_zero_and_gets_no_gradient():
    st.manual_seed(0)
    emb = nn.Embedding(5, 4, padding_idx=-1)
    assert emb.padding_idx == 4
    w = to_numpy(emb.weight)
    np.testing.assert_array_equal(w[4], np.zeros(4, np.float32))
    assert np.abs(w[:4]).sum() > 0
    assert abs(to_numpy(nn.Embedding(200, 50).weight).std() - 1.0) < 0.05
    # a non-zero padding row is still looked up as is, but never gets a gradient
    with st.no_grad():
        emb.weight[4].fill_(2.0)
    idx = st.tensor([4, 2, 4, 2])
    out = emb(idx)
    np.testing.assert_array_equal(to_numpy(out)[0], np.full(4, 2.0, np.float32))
    (out * st.arange(4, dtype=st.float32).unsqueeze(1)).sum().backward()
    g = to_numpy(emb.weight.grad)
    np.testing.assert_array_equal(g[4], np.zeros(4, np.float32))
    np.testing.assert_array_equal(g[2], np.full(4, 1.0 + 3.0, np.float32))
    np.testing.assert_array_equal(g[[0, 1, 3]], np.zeros((3, 4), np.float32))


def test_embedding_from_pretrained_and_errors():
    table = st.tensor([[1.0, 2.0], [3.0, 4.0]])
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(to_numpy(emb(st.tensor([1]))), [[3.0, 4.0]])
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    with pytest.raises(IndexError,
                       match="embedding: index 6 is out of bounds for num_embeddings=6"):
        nn.Embedding(6, 2)(st.tensor([6]))
    with pytest.raises(TypeError, match="embedding: expected an integer index tensor, got "
                       "float32"):
        nn.Embedding(6, 2)(st.tensor([1.0]))
    with pytest.raises(ValueError, match="Embedding: padding_idx must be within "
                       "num_embeddings=6, got 6"):
        nn.Embedding(6, 2, padding_idx=6)


# ---- init --------------------------------------------------------------------------------------


def _stats(t):
    a = to_numpy(t).astype(np.float64)
    return a.mean(), a.std()


def test_uniform_normal_constant():
    st.manual_seed(0)
    m, s = _stats(nn.init.uniform_(st.empty(200, 500), -1.0, 3.0))
    assert abs(m - 1.0) < 0.02 and abs(s - 4 / math.sqrt(12)) < 0.01
    m, s = _stats(nn.init.normal_(st.empty(200, 500), 2.0, 0.5))
    assert abs(m - 2.0) < 0.01 and abs(s - 0.5) < 0.005
    np.testing.assert_array_equal(to_numpy(nn.init.constant_(st.empty(3), 1.5)), [1.5] * 3)
    np.testing.assert_array_equal(to_numpy(nn.init.zeros_(st.ones(3))), [0.0] * 3)
    np.testing.assert_array_equal(to_numpy(nn.init.ones_(st.zeros(3))), [1.0] * 3)


def test_init_works_on_parameters_with_grad_enabled_and_is_seeded():
    p = nn.Parameter(st.empty(10, 10))
    out = nn.init.normal_(p, generator=st.Generator().manual_seed(11))
    assert out is p and p.requires_grad and p.is_leaf
    q = nn.init.normal_(st.empty(10, 10), generator=st.Generator().manual_seed(11))
    np.testing.assert_array_equal(to_numpy(p), to_numpy(q))


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)])
def test_xavier_and_kaiming_statistics(shape):
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    st.manual_seed(1)
    xavier_std = math.sqrt(2.0 / (fan_in + fan_out))
    for fn in (nn.init.xavier_uniform_, nn.init.xavier_normal_):
        m, s = _stats(fn(st.empty(*shape), gain=2.0))
        assert abs(m) < 0.02 * xavier_std * 2 and abs(s / (2.0 * xavier_std) - 1) < 0.02
    a = to_numpy(nn.init.xavier_uniform_(st.empty(*shape)))
    assert np.abs(a).max() <= math.sqrt(6.0 / (fan_in + fan_out))
    relu_std_out = math.sqrt(2.0) / math.sqrt(fan_out)
    for fn in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_):
        m, s = _stats(fn(st.empty(*shape), mode="fan_out", nonlinearity="relu"))
        assert abs(s / relu_std_out - 1) < 0.02
    leaky_std = math.sqrt(2.0 / (1 + 0.3**2)) / math.sqrt(fan_in)
    m, s = _stats(nn.init.kaiming_normal_(st.empty(*shape), a=0.3))
    assert abs(s / leaky_std - 1) < 0.02


@pytest.mark.parametrize("shape", [(6, 6), (4, 10), (10, 4), (4, 2, 3)])
def test_orthogonal(shape):
    st.manual_seed(2)
    q = to_numpy(nn.init.orthogonal_(st.empty(*shape, dtype=st.float64), gain=1.5))
    q = q.reshape(shape[0], -1) / 1.5
    rows, cols = q.shape
    if rows <= cols:
        np.testing.assert_allclose(q @ q.T, np.eye(rows), atol=1e-12)
    else:
        np.testing.assert_allclose(q.T @ q, np.eye(cols), atol=1e-12)


def test_calculate_gain_and_init_errors():
    assert nn.init.calculate_gain("linear") == 1.0
    assert nn.init.calculate_gain("conv2d") == 1.0
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("selu") == 0.75
    assert nn.init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01**2))
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope 'x' is not a valid number"):
        nn.init.calculate_gain("leaky_relu", "x")
    with pytest.raises(ValueError, match=r"fewer than 2 dimensions \(shape \(5,\)\)"):
        nn.init.xavier_uniform_(st.empty(5))
    with pytest.raises(ValueError, match="mode 'fan_avg' not supported"):
        nn.init.kaiming_uniform_(st.empty(3, 3), mode="fan_avg")
    with pytest.raises(TypeError, match="uniform_: expected a floating point tensor, got int64"):
        nn.init.uniform_(st.zeros(3, dtype=st.int64))
    with pytest.raises(ValueError, match="orthogonal_: only tensors with 2 or more dimensions"):
        nn.init.orthogonal_(st.empty(3))
    with pytest.raises(ValueError, match="normal_: std must be non-negative, got -1"):
        nn.init.normal_(st.empty(3), 0.0, -1)
    with pytest.warns(UserWarning, match="zero-element tensor"):
        nn.init.kaiming_uniform_(st.empty(0, 3))
