"""The repr of empty tensors keeps their shape and dtype, as PyTorch prints them."""

from __future__ import annotations

import pytest

import singa_tensor as st


@pytest.mark.parametrize("shape, dtype, expected", [
    ((0,), st.float32, "tensor([])"),
    ((0, 3), st.float32, "tensor([], size=(0, 3))"),
    ((2, 0, 1), st.float32, "tensor([], size=(2, 0, 1))"),
    ((0,), st.int64, "tensor([], dtype=singa_tensor.int64)"),
    ((0, 3), st.float64, "tensor([], size=(0, 3), dtype=singa_tensor.float64)"),
    ((3, 0), st.bool, "tensor([], size=(3, 0), dtype=singa_tensor.bool)"),
])
def test_empty_tensor_repr(shape, dtype, expected):
    assert repr(st.zeros(*shape, dtype=dtype)) == expected


def test_empty_tensor_repr_with_requires_grad():
    t = st.zeros(0, 2, requires_grad=True)
    assert repr(t) == "tensor([], size=(0, 2), requires_grad=True)"


def test_non_empty_repr_unchanged():
    assert repr(st.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(st.tensor([1.5], dtype=st.float64)) == "tensor([1.5], dtype=singa_tensor.float64)"
