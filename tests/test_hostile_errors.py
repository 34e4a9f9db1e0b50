"""Errors that name the op the user called and the problem: an embedding index out of range, a
layer_norm of integers, numbers that overflow the dtype they are created in."""

from __future__ import annotations

import re

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn


@pytest.mark.parametrize("bad", [5, 7, -1])
def test_embedding_index_out_of_range_names_embedding(bad):
    w = st.randn(5, 3)
    with pytest.raises(IndexError, match=rf"embedding: index {bad} is out of bounds for "
                                         r"num_embeddings=5"):
        F.embedding(st.tensor([[0, bad], [1, 2]]), w)
    with pytest.raises(IndexError, match=r"^embedding: .*num_embeddings=5"):
        nn.Embedding(5, 3)(st.tensor([bad]))


def test_embedding_in_range_still_works():
    w = st.tensor([[0.0, 1.0], [2.0, 3.0]])
    assert F.embedding(st.tensor([1, 0]), w).tolist() == [[2.0, 3.0], [0.0, 1.0]]


@pytest.mark.parametrize("dtype", [st.int64, st.int32, st.bool])
def test_layer_norm_of_integers_names_layer_norm_and_dtype(dtype):
    x = st.ones(2, 3, dtype=dtype)
    with pytest.raises(TypeError, match=rf"layer_norm: expected a floating-point input, got "
                                        rf"{dtype.name}"):
        F.layer_norm(x, (3,))
    with pytest.raises(TypeError, match=r"^layer_norm: .*" + dtype.name):
        nn.LayerNorm(3)(x)


@pytest.mark.parametrize("value", [2**70, -(2**70), 2**63, -(2**63) - 1])
def test_tensor_of_a_too_large_int_says_it_overflows_int64(value):
    with pytest.raises(OverflowError, match=rf"tensor: value {value} overflows int64"):
        st.tensor([value])
    with pytest.raises(OverflowError, match=rf"tensor: value {value} overflows int64"):
        st.tensor([[1, value], [2, 3]])


def test_edge_of_int64_is_accepted_and_floats_take_large_ints():
    assert st.tensor([2**63 - 1, -(2**63)]).tolist() == [2**63 - 1, -(2**63)]
    assert st.tensor([2**70], dtype=st.float64).tolist() == [float(2**70)]
    assert st.tensor([1.5, 2**70]).dtype is st.float32
    assert st.tensor([1e30, -1e30]).tolist() == [float(np.float32(1e30)), -float(np.float32(1e30))]


@pytest.mark.parametrize("data,dtype,value", [
    ([2**31], st.int32, 2**31),
    ([-(2**31) - 1], st.int32, -(2**31) - 1),
    (np.array([2**40], dtype=np.int64), st.int32, 2**40),
    (np.array([2**63], dtype=np.uint64), st.int64, 2**63),
    ([1e20], st.int64, 1e20),
    ([3e9], st.int32, 3e9),
])
def test_tensor_overflow_of_the_requested_dtype(data, dtype, value):
    with pytest.raises(OverflowError, match=re.escape(f"tensor: value {value} overflows "
                                                      f"{dtype.name}")):
        st.tensor(data, dtype=dtype)


def test_full_and_arange_overflow():
    with pytest.raises(OverflowError, match=r"full: value 1180591620717411303424 overflows "
                                            r"int64"):
        st.full((2,), 2**70)
    with pytest.raises(OverflowError, match=r"full: value 4294967296 overflows int32"):
        st.full((2,), 2**32, dtype=st.int32)
    with pytest.raises(OverflowError, match=r"arange: value 3000000000 overflows int32"):
        st.arange(3_000_000_000, 3_000_000_002, dtype=st.int32)
    assert st.full((1,), 2**31 - 1, dtype=st.int32).tolist() == [2**31 - 1]
