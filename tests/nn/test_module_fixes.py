"""Module attribute reassignment keeps order, integer inputs to dense layers are refused, and
parameters print as PyTorch prints them."""

from __future__ import annotations

import pytest

import singa_tensor as st
from singa_tensor import nn


class Three(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.ReLU()
        self.c = nn.Linear(2, 2)
        self.p = nn.Parameter(st.zeros(1))
        self.q = nn.Parameter(st.zeros(1))


def test_reassigned_submodule_keeps_its_position():
    m = Three()
    m.a = nn.Linear(2, 3)
    assert [n for n, _ in m.named_children()] == ["a", "b", "c"]
    assert list(m.state_dict())[2:4] == ["a.weight", "a.bias"]
    assert m.a.out_features == 3


def test_reassigned_parameter_keeps_its_position():
    m = Three()
    m.p = nn.Parameter(st.ones(2))
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["p", "q"]
    assert m.p.shape == (2,)


def test_a_parameter_replacing_a_buffer_moves_stores():
    m = Three()
    m.register_buffer("buf", st.zeros(1))
    m.buf = nn.Parameter(st.ones(1))
    assert "buf" not in m._buffers
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["p", "q", "buf"]
    with pytest.raises(TypeError, match="cannot assign 'Identity' as parameter 'p'"):
        m.p = nn.Identity()


@pytest.mark.parametrize("dtype", [st.int64, st.int32, st.bool])
def test_linear_refuses_integer_input(dtype):
    layer = nn.Linear(3, 2)
    x = st.zeros(4, 3, dtype=dtype)
    with pytest.raises(RuntimeError, match=r"linear: mat1 and mat2 must have the same dtype.*"
                                           + dtype.name):
        layer(x)
    with pytest.raises(RuntimeError, match="same dtype"):
        nn.functional.linear(st.zeros(3, dtype=dtype), layer.weight)


def test_linear_still_takes_float_input():
    layer = nn.Linear(3, 2)
    assert layer(st.ones(4, 3)).shape == (4, 2)
    assert layer(st.ones(3)).shape == (2,)


def test_conv_refuses_integer_input():
    with pytest.raises(TypeError, match="conv2d: expected a floating point input, got int64"):
        nn.Conv2d(1, 1, 3)(st.zeros(1, 1, 4, 4, dtype=st.int64))


def test_parameter_repr_is_marked():
    p = nn.Parameter(st.tensor([1.0, 2.0], device="cpu"))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    frozen = nn.Parameter(st.tensor([1.0], dtype=st.float64, device="cpu"),
                          requires_grad=False)
    assert repr(frozen) == "Parameter containing:\ntensor([1.], dtype=singa_tensor.float64)"
    assert repr(p.detach()) == "tensor([1., 2.])"
