"""nn.utils.parametrize, nn.utils.parametrizations (weight_norm, spectral_norm, orthogonal), the
hook-based nn.utils.weight_norm / spectral_norm, and parameters_to_vector."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn, optim
from singa_tensor.nn.utils import parametrizations as P
from singa_tensor.nn.utils import parametrize

from ..helpers import to_numpy


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).T


class Exp(nn.Module):
    def forward(self, x):
        return x.exp()

    def right_inverse(self, y):
        return y.log()


class Double(nn.Module):
    def forward(self, x):
        return x * 2


class Shrink(nn.Module):
    def forward(self, x):
        return x[:1]


def _sym_linear():
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    return m


# ---- parametrize ------------------------------------------------------------------------------


def test_register_moves_the_original_and_computes_the_property():
    m = nn.Linear(3, 3)
    w = m.weight
    raw = to_numpy(w).copy()
    assert parametrize.register_parametrization(m, "weight", Symmetric()) is m
    assert m.parametrizations.weight.original is w  # the same Parameter object
    np.testing.assert_allclose(to_numpy(m.weight), np.triu(raw) + np.triu(raw, 1).T)
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")


def test_gradients_reach_the_original_and_training_keeps_the_constraint():
    m = _sym_linear()
    opt = optim.SGD(m.parameters(), lr=0.1)
    x = st.randn(4, 3)
    for _ in range(3):
        opt.zero_grad()
        (m(x) ** 2).sum().backward()
        opt.step()
    assert m.parametrizations.weight.original.grad is not None
    w = to_numpy(m.weight)
    np.testing.assert_allclose(w, w.T)


def test_assignment_goes_through_right_inverse():
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "bias", Exp())
    m.bias = st.tensor([1.0, 3.0])
    np.testing.assert_allclose(to_numpy(m.parametrizations.bias.original), np.log([1.0, 3.0]),
                               rtol=1e-6)
    np.testing.assert_allclose(to_numpy(m.bias), [1.0, 3.0], rtol=1e-6)
    m.bias = nn.Parameter(st.tensor([2.0, 2.0]))  # a Parameter too is a value to assign
    assert "bias" not in m._parameters
    np.testing.assert_allclose(to_numpy(m.bias), [2.0, 2.0], rtol=1e-6)
    s = _sym_linear()
    with pytest.raises(RuntimeError, match="Symmetric does not implement right_inverse"):
        s.weight = st.eye(3)


def test_registration_runs_right_inverse_on_the_initial_value():
    m = nn.Linear(1, 2)
    with st.no_grad():
        m.bias.copy_(st.tensor([1.0, 2.0]))
    parametrize.register_parametrization(m, "bias", Exp())
    np.testing.assert_allclose(to_numpy(m.bias), [1.0, 2.0], rtol=1e-6)


def test_chained_parametrizations_apply_in_order():
    m = nn.Linear(2, 2)
    with st.no_grad():
        m.bias.copy_(st.tensor([1.0, 2.0]))
    parametrize.register_parametrization(m, "bias", Exp())  # keeps the value (right_inverse)
    parametrize.register_parametrization(m, "bias", Double())  # applied on top of it
    assert len(m.parametrizations.bias) == 2
    np.testing.assert_allclose(to_numpy(m.parametrizations.bias.original), np.log([1.0, 2.0]),
                               rtol=1e-6)
    np.testing.assert_allclose(to_numpy(m.bias), [2.0, 4.0], rtol=1e-6)


def test_shape_changes_need_unsafe():
    with pytest.raises(ValueError, match="may not change the shape or dtype.*unless unsafe"):
        parametrize.register_parametrization(nn.Linear(2, 2), "bias", Shrink())
    m = parametrize.register_parametrization(nn.Linear(2, 2), "bias", Shrink(), unsafe=True)
    assert m.bias.shape == (1,)


def test_registration_errors():
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a "
                                         "parametrized element with name 'nope'"):
        parametrize.register_parametrization(nn.Linear(2, 2), "nope", Double())
    with pytest.raises(TypeError, match="parametrization must be an nn.Module"):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", lambda x: x)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(nn.Linear(2, 2), "weight")


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    m = nn.Linear(3, 3)
    raw = to_numpy(m.weight).copy()
    parametrize.register_parametrization(m, "weight", Symmetric())
    expected = to_numpy(m.weight).copy() if leave else raw
    original = m.parametrizations.weight.original
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert m.weight is original and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(to_numpy(m.weight), expected)
    assert list(m.state_dict()) == ["bias", "weight"]


def test_remove_one_of_two_keeps_the_other():
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Double())
    parametrize.register_parametrization(m, "bias", Double())
    parametrize.remove_parametrizations(m, "bias")
    assert parametrize.is_parametrized(m, "weight") and not parametrize.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear"


def test_parametrized_buffer():
    m = nn.BatchNorm1d(2)
    parametrize.register_parametrization(m, "running_var", Double())
    np.testing.assert_allclose(to_numpy(m.running_var), [2.0, 2.0])
    assert "parametrizations.running_var.original" in m.state_dict()


def test_cached_computes_once_per_block():
    calls = []

    class Counting(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1

    m = parametrize.register_parametrization(nn.Linear(2, 2), "weight", Counting())
    calls.clear()
    with parametrize.cached():
        a, b = m.weight, m.weight
    assert a is b and len(calls) == 1
    _ = m.weight
    assert len(calls) == 2


def test_state_dict_round_trip_and_deepcopy():
    a, b = _sym_linear(), _sym_linear()
    b.load_state_dict(a.state_dict())
    np.testing.assert_allclose(to_numpy(b.weight), to_numpy(a.weight))
    c = copy.deepcopy(a)
    np.testing.assert_allclose(to_numpy(c.weight), to_numpy(a.weight))
    assert c.parametrizations.weight.original is not a.parametrizations.weight.original


# ---- parametrizations.weight_norm -------------------------------------------------------------


def test_weight_norm_parametrization_values_and_gradients():
    m = nn.Linear(3, 2).double()
    w0 = to_numpy(m.weight).copy()
    P.weight_norm(m)
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    assert g.shape == (2, 1) and v.shape == (2, 3)
    np.testing.assert_allclose(to_numpy(m.weight), w0, rtol=1e-12)
    with st.no_grad():
        g.mul_(3.0)
    np.testing.assert_allclose(to_numpy(m.weight), 3 * w0, rtol=1e-12)
    fn = m.parametrizations.weight[0]
    gg = st.rand(2, 1, dtype=st.float64, requires_grad=True)
    vv = st.randn(2, 3, dtype=st.float64, requires_grad=True)
    assert st.autograd.gradcheck(lambda a, b: fn(a, b), (gg, vv))


def test_weight_norm_parametrization_dims():
    m = P.weight_norm(nn.Conv2d(2, 4, 3), dim=1)
    assert m.parametrizations.weight.original0.shape == (1, 2, 1, 1)
    m = P.weight_norm(nn.Linear(3, 2), dim=None)
    assert m.parametrizations.weight.original0.shape == ()
    with pytest.raises(IndexError, match="weight_norm: dim 2 is out of range"):
        P.weight_norm(nn.Linear(3, 2), dim=2)
    with pytest.raises(ValueError, match="weight_norm: module 'Linear' has no parameter"):
        P.weight_norm(nn.Linear(3, 2), name="kernel")
    m = P.weight_norm(nn.Linear(3, 2))
    parametrize.remove_parametrizations(m, "weight")
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    with pytest.raises(ValueError, match="cannot leave unparametrized"):
        parametrize.remove_parametrizations(P.weight_norm(nn.Linear(3, 2)), "weight",
                                            leave_parametrized=False)


# ---- spectral norm ----------------------------------------------------------------------------


def _sigma(w):
    return np.linalg.svd(to_numpy(w).reshape(w.shape[0], -1), compute_uv=False)[0]


def test_spectral_norm_parametrization_normalizes_and_updates_u_in_training():
    st.manual_seed(0)
    m = P.spectral_norm(nn.Linear(5, 4))
    sn = m.parametrizations.weight[0]
    assert sn._u.shape == (4,) and sn._v.shape == (5,)
    for _ in range(5):
        w = m.weight
    assert abs(_sigma(w) - 1.0) < 1e-3
    u_before = to_numpy(sn._u).copy()
    with st.no_grad():
        m.parametrizations.weight.original.mul_(st.randn(4, 5))
    _ = m.weight  # training: a power-iteration step
    assert not np.allclose(to_numpy(sn._u), u_before)
    m.eval()
    u_eval = to_numpy(sn._u).copy()
    _ = m.weight
    np.testing.assert_array_equal(to_numpy(sn._u), u_eval)
    assert "parametrizations.weight.0._u" in m.state_dict()


def test_spectral_norm_parametrization_conv_and_errors():
    st.manual_seed(1)
    m = P.spectral_norm(nn.Conv2d(2, 3, 3), n_power_iterations=3)
    assert m.parametrizations.weight[0]._u.shape == (3,)
    assert abs(_sigma(m.weight) - 1.0) < 1e-3
    t = P.spectral_norm(nn.ConvTranspose2d(2, 3, 3))
    assert t.parametrizations.weight[0].dim == 1
    assert t.parametrizations.weight[0]._u.shape == (3,)
    with pytest.raises(ValueError, match="expected n_power_iterations to be positive"):
        P.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


def test_spectral_norm_gradient_flows():
    m = P.spectral_norm(nn.Linear(3, 2))
    m(st.randn(4, 3)).sum().backward()
    assert m.parametrizations.weight.original.grad is not None


def test_hook_spectral_norm():
    st.manual_seed(2)
    m = nn.utils.spectral_norm(nn.Linear(5, 4))
    assert sorted(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    x = st.randn(2, 5)
    for _ in range(20):
        m(x)
    assert abs(_sigma(m.weight) - 1.0) < 1e-3
    u = to_numpy(m.weight_u).copy()
    m.eval()
    m(x)
    np.testing.assert_array_equal(to_numpy(m.weight_u), u)
    m.train()
    m(x).sum().backward()
    assert m.weight_orig.grad is not None
    expected = to_numpy(m.weight_orig) / float(to_numpy(m.weight_u)
                                               @ to_numpy(m.weight_orig) @ to_numpy(m.weight_v))
    nn.utils.remove_spectral_norm(m)
    assert sorted(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(to_numpy(m.weight), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(m)
    with pytest.raises(RuntimeError, match="cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(nn.utils.spectral_norm(nn.Linear(2, 2)))


# ---- hook weight norm -------------------------------------------------------------------------


def test_hook_weight_norm():
    m = nn.Linear(3, 2)
    w0 = to_numpy(m.weight).copy()
    nn.utils.weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_g", "weight_v"]
    np.testing.assert_allclose(to_numpy(m.weight_g), np.linalg.norm(w0, axis=1, keepdims=True),
                               rtol=1e-6)
    with st.no_grad():
        m.weight_g.mul_(2.0)
    x = st.randn(4, 3)
    np.testing.assert_allclose(to_numpy(m(x)), to_numpy(x) @ (2 * w0).T + to_numpy(m.bias),
                               rtol=1e-5, atol=1e-6)
    m(x).sum().backward()
    assert m.weight_g.grad is not None and m.weight_v.grad is not None
    nn.utils.remove_weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    np.testing.assert_allclose(to_numpy(m.weight), 2 * w0, rtol=1e-5)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        nn.utils.remove_weight_norm(m)
    with pytest.raises(RuntimeError, match="cannot register two weight_norm hooks"):
        nn.utils.weight_norm(nn.utils.weight_norm(nn.Linear(2, 2)))
    whole = nn.utils.weight_norm(nn.Linear(3, 2), dim=None)
    assert whole.weight_g.shape == ()


# ---- orthogonal -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4)])
@pytest.mark.parametrize("triv", [True, False])
def test_orthogonal_stays_orthogonal_through_training(shape, triv):
    st.manual_seed(3)
    m = P.orthogonal(nn.Linear(shape[1], shape[0]), use_trivialization=triv)
    opt = optim.SGD(m.parameters(), lr=0.05)
    x = st.randn(6, shape[1])
    for _ in range(3):
        opt.zero_grad()
        (m(x) ** 2).sum().backward()
        opt.step()
    w = to_numpy(m.weight)
    small = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(small, np.eye(min(shape)), atol=1e-5)


def test_orthogonal_keeps_an_orthogonal_weight_and_assignment():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))
    for triv in (True, False):
        m = nn.Linear(4, 4)
        with st.no_grad():
            m.weight.copy_(st.tensor(q, dtype=st.float32))
        # QR with a positive diagonal of R reproduces q only up to column signs
        P.orthogonal(m, use_trivialization=triv)
        w = to_numpy(m.weight)
        np.testing.assert_allclose(np.abs(w), np.abs(q), atol=1e-5)
    m = P.orthogonal(nn.Linear(4, 4))
    m.weight = st.tensor(q, dtype=st.float32)
    np.testing.assert_allclose(to_numpy(m.weight), q, atol=1e-5)


def test_orthogonal_errors():
    with pytest.raises(NotImplementedError, match="orthogonal_map='matrix_exp' needs"):
        P.orthogonal(nn.Linear(2, 2), orthogonal_map="matrix_exp")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        P.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match=r"orthogonal: expected a matrix \(2-D weight\)"):
        P.orthogonal(nn.Conv2d(1, 1, 2))


# ---- parameters as a vector -------------------------------------------------------------------


def test_parameters_to_vector_and_back():
    m = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(m.parameters())
    np.testing.assert_allclose(to_numpy(vec), np.concatenate([to_numpy(m.weight).ravel(),
                                                              to_numpy(m.bias)]))
    w = m.weight
    nn.utils.vector_to_parameters(st.arange(8.0), m.parameters())
    assert m.weight is w
    assert m.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert m.bias.tolist() == [6.0, 7.0]
    # differentiable: d(sum(vec * k))/dp = k
    p = st.ones(2, requires_grad=True)
    (nn.utils.parameters_to_vector([p]) * 3).sum().backward()
    assert p.grad.tolist() == [3.0, 3.0]


def test_vector_parameter_errors():
    m = nn.Linear(3, 2)
    with pytest.raises(TypeError, match="vector_to_parameters: expected vec to be a Tensor"):
        nn.utils.vector_to_parameters([1.0] * 8, m.parameters())
    with pytest.raises(ValueError, match="does not hold the 8 elements"):
        nn.utils.vector_to_parameters(st.zeros(7), m.parameters())
    with pytest.raises(TypeError, match="parameters_to_vector: expected Tensors"):
        nn.utils.parameters_to_vector([st.ones(1), 3])
