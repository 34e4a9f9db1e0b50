"""copy.deepcopy of tensors and modules: independent storage, same values and flags."""

import copy

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn

from ..helpers import to_numpy


def test_deepcopy_of_a_module_gives_independent_equal_parameters():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m[0].weight.grad = st.ones(4, 3)
    m2 = copy.deepcopy(m)
    for (n1, a), (n2, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        assert n1 == n2
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
        assert a._storage is not b._storage
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m2.parameters())
    np.testing.assert_array_equal(to_numpy(m2[0].weight.grad), np.ones((4, 3)))
    with st.no_grad():
        m2[0].weight.add_(1.0)
    assert not np.array_equal(to_numpy(m[0].weight), to_numpy(m2[0].weight))


def test_deepcopy_keeps_tied_parameters_tied():
    shared = nn.Linear(2, 2)
    m = nn.Sequential(shared, shared)
    m2 = copy.deepcopy(m)
    assert m2[0].weight is m2[1].weight and m2[0].weight is not m[0].weight


def test_deepcopy_of_a_non_leaf_raises():
    x = st.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="deepcopy: only tensors created by the user"):
        copy.deepcopy(x)
