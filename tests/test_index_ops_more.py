"""The functions of ops/more_shape.py, more_index.py and more_scatter.py: values against
numpy beyond the registry's samples (keyword-only arguments, in-place forms, integer results
exactly, tensors on the device under test), gradients of the keyword forms, and every error
path."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp

import singa_tensor as st
from singa_tensor.autograd import gradcheck

from .helpers import as_tensor, assert_close, to_numpy

R = np.random.default_rng(1234)


def _exact(got, want):
    """Same shape and values; an integer (bool) array wants an integer (bool) result."""
    g = to_numpy(got)
    if isinstance(want, np.ndarray) and want.dtype.kind in "iub":
        assert (g.dtype.kind in "iu") == (want.dtype.kind in "iu"), (g.dtype, want.dtype)
    w = np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_array_equal(g, w)


# ---- diagonals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [-3, -1, 0, 2])
def test_diag_both_ways(k):
    v = R.integers(-5, 5, 4)
    _exact(st.diag(as_tensor(v), k), np.diag(v, k))
    m = R.integers(-5, 5, (3, 5))
    _exact(as_tensor(m).diag(k), np.diag(m, k))


def test_diag_embed_and_diagflat_values():
    x = R.standard_normal((2, 3))
    got = st.diag_embed(as_tensor(x), offset=1, dim1=0, dim2=-1)
    want = np.zeros((4, 2, 4))
    for b, i in itertools.product(range(2), range(3)):
        want[i, b, i + 1] = x[b, i]
    assert_close(got, want)
    assert_close(st.diagflat(as_tensor(x), -1), np.diagflat(x, -1))


def test_diag_errors():
    with pytest.raises(ValueError, match="diag: expected a 1-d or 2-d tensor"):
        st.diag(st.zeros(2, 2, 2))
    with pytest.raises(TypeError, match="diag: diagonal must be an int"):
        st.diag(st.zeros(2), 1.5)
    with pytest.raises(ValueError, match="diag_embed: diagonal dimensions cannot be identical"):
        st.diag_embed(st.zeros(2, 2), dim1=0, dim2=-3)
    with pytest.raises(IndexError, match="diag_embed: dimension out of range"):
        st.diag_embed(st.zeros(2), dim1=5)


@pytest.mark.parametrize("row, col, off", [(4, 4, 0), (3, 5, -1), (5, 2, 2), (1, 0, 0)])
def test_tri_indices(row, col, off):
    _exact(st.tril_indices(row, col, off), np.stack(np.tril_indices(row, off, col)))
    got = st.triu_indices(row, col, off, dtype=st.int32)
    assert got.dtype is st.int32
    _exact(got, np.stack(np.triu_indices(row, off, col)))
    with pytest.raises(ValueError, match="tril_indices: row and col must be non-negative"):
        st.tril_indices(-1, 2)


# ---- products -----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, math.inf])
def test_cdist_matches_numpy(p):
    a, b = R.standard_normal((2, 4, 3)), R.standard_normal((5, 3))
    b[1] = a[0, 1]  # a zero distance
    d = np.abs(a[..., :, None, :] - b[None, None, :, :])
    want = ((d != 0).sum(-1) if p == 0 else d.max(-1) if math.isinf(p) else
            (d ** p).sum(-1) ** (1 / p))
    assert_close(st.cdist(as_tensor(a), as_tensor(b), p=p), want, rtol=1e-10, atol=1e-12)


def test_cdist_errors():
    with pytest.raises(ValueError, match="cdist: x1 and x2 must have the same number of columns"):
        st.cdist(st.zeros(2, 3), st.zeros(2, 4))
    with pytest.raises(ValueError, match="cdist: only supports non-negative p"):
        st.cdist(st.zeros(2, 3), st.zeros(2, 3), p=-1.0)
    with pytest.raises(ValueError, match="cdist: x1 and x2 must have at least 2 dimensions"):
        st.cdist(st.zeros(3), st.zeros(2, 3))
    with pytest.raises(TypeError, match="cdist: expected floating point"):
        st.cdist(st.zeros(2, 3, dtype=st.int64), st.zeros(2, 3, dtype=st.int64))


def test_tensordot_forms_and_errors():
    a, b = R.standard_normal((2, 3, 4)), R.standard_normal((4, 3, 5))
    assert_close(st.tensordot(as_tensor(a), as_tensor(b), ([1, 2], [1, 0])),
                 np.tensordot(a, b, ([1, 2], [1, 0])), rtol=1e-10, atol=1e-12)
    assert_close(st.tensordot(as_tensor(a), as_tensor(b), dims=([2], [0])),
                 np.tensordot(a, b, (2, 0)), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="tensordot: contracted dimensions need to match"):
        st.tensordot(as_tensor(a), as_tensor(b), 2)
    with pytest.raises(ValueError, match="tensordot: both dim lists should have the same length"):
        st.tensordot(as_tensor(a), as_tensor(b), ([1, 2], [1]))
    with pytest.raises(ValueError, match=r"tensordot: dims must be in \[0, 3\]"):
        st.tensordot(as_tensor(a), as_tensor(b), 4)
    with pytest.raises(TypeError, match="tensordot: dims must be an int or a pair"):
        st.tensordot(as_tensor(a), as_tensor(b), "x")


def test_kron_ints_exact():
    a, b = R.integers(-3, 3, (2, 1, 3)), R.integers(-3, 3, (2, 2))
    _exact(st.kron(as_tensor(a), as_tensor(b)), np.kron(a, b))


def test_cross_default_dim_and_errors():
    a, b = R.standard_normal((2, 3, 3)), R.standard_normal((2, 3, 3))
    assert_close(st.cross(as_tensor(a), as_tensor(b)), np.cross(a, b, axis=1))
    assert_close(as_tensor(a).cross(as_tensor(b), dim=-1), np.cross(a, b))
    with pytest.raises(ValueError, match="cross: no dimension of size 3"):
        st.cross(st.zeros(2, 2), st.zeros(2, 2))
    with pytest.raises(ValueError, match="cross: inputs dimension 0 must have length 3"):
        st.cross(st.zeros(2, 3), st.zeros(2, 3), dim=0)
    with pytest.raises(ValueError, match="cross"):
        st.cross(st.zeros(4, 3), st.zeros(2, 3))


def test_grids_and_products():
    x, y = R.standard_normal(2), R.standard_normal(3)
    for ij in ("ij", "xy"):
        for g, w in zip(st.meshgrid([as_tensor(x), as_tensor(y)], indexing=ij),
                        np.meshgrid(x, y, indexing=ij)):
            assert_close(g, w)
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'ij' or 'xy'"):
        st.meshgrid(as_tensor(x), indexing="ji")
    with pytest.raises(ValueError, match="meshgrid: expects 0-d or 1-d tensors"):
        st.meshgrid(st.zeros(2, 2))
    with pytest.raises(ValueError, match="cartesian_prod: expects 1-d tensors"):
        st.cartesian_prod(st.zeros(2, 2), st.zeros(2))
    _exact(st.combinations(st.tensor([4, 5, 6]), 2, with_replacement=True),
           [[4, 4], [4, 5], [4, 6], [5, 5], [5, 6], [6, 6]])
    assert st.combinations(st.tensor([1, 2]), 3).shape == (0, 3)
    with pytest.raises(ValueError, match="combinations: expects a 1-d tensor"):
        st.combinations(st.zeros(2, 2))
    with pytest.raises(ValueError, match="combinations: r must be non-negative"):
        st.combinations(st.zeros(2), -1)


def test_block_diag_promotes_and_rejects_3d():
    got = st.block_diag(st.tensor([[1, 2]]), st.tensor([0.5]))
    assert got.dtype is st.float32
    assert_close(got, [[1, 2, 0], [0, 0, 0.5]])
    with pytest.raises(ValueError, match="block_diag: input tensors must have 2 or fewer"):
        st.block_diag(st.zeros(1, 1, 1))


# ---- at least n-d, stacks and splits ------------------------------------------------------------


def test_atleast_and_stacks():
    s, v, m = st.tensor(1.0), st.tensor([1.0, 2.0]), st.ones(2, 3)
    assert st.atleast_1d(s).shape == (1,)
    assert [t.shape for t in st.atleast_2d(s, v, m)] == [(1, 1), (1, 2), (2, 3)]
    assert [t.shape for t in st.atleast_3d([s, v, m])] == [(1, 1, 1), (1, 2, 1), (2, 3, 1)]
    a, b = R.standard_normal((2, 3)), R.standard_normal((2, 3))
    for fn, ref in [(st.hstack, np.hstack), (st.vstack, np.vstack), (st.row_stack, np.vstack),
                    (st.dstack, np.dstack), (st.column_stack, np.column_stack)]:
        assert_close(fn((as_tensor(a), as_tensor(b))), ref((a, b)))
        with pytest.raises(TypeError, match="expected a list or tuple of Tensors"):
            fn(as_tensor(a))
        with pytest.raises(ValueError, match="expected a non-empty list"):
            fn([])


@given(n=hs.integers(0, 9), sections=hs.integers(1, 5),
       idx=hs.lists(hs.integers(-12, 12), max_size=4))
@settings(max_examples=30, deadline=None)
def test_tensor_split_matches_array_split(n, sections, idx):
    x = np.arange(2 * n).reshape(2, n)
    for spec in (sections, idx, st.tensor(sections)):
        want = np.array_split(x, spec if not isinstance(spec, st.Tensor) else sections, axis=1)
        got = st.tensor_split(as_tensor(x), spec, dim=1)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _exact(g, w)


def test_tensor_split_errors():
    with pytest.raises(ValueError, match="tensor_split: expected at least a 1-dimensional"):
        st.tensor_split(st.tensor(1.0), 1)
    with pytest.raises(ValueError, match="tensor_split: number of sections must be larger"):
        st.tensor_split(st.zeros(3), 0)
    with pytest.raises(TypeError, match="tensor_split: indices_or_sections must be"):
        st.tensor_split(st.zeros(3), 1.5)
    with pytest.raises(TypeError, match="tensor_split: indices_or_sections must be a 0-d"):
        st.tensor_split(st.zeros(3), st.tensor([1.0]))


# ---- sets and counts ----------------------------------------------------------------------------


@given(a=hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
                    elements=hs.integers(-3, 3)), data=hs.data())
@settings(max_examples=40, deadline=None)
def test_unique_matches_numpy(a, data):
    dim = data.draw(hs.none() | hs.integers(-a.ndim, a.ndim - 1))
    if dim is not None and a.size == 0:
        return  # numpy and PyTorch disagree on the shapes of empty slices
    v, inv, cnt = st.unique(as_tensor(a), return_inverse=True, return_counts=True, dim=dim)
    wv, winv, wcnt = np.unique(a, return_inverse=True, return_counts=True, axis=dim)
    _exact(v, wv)
    _exact(inv, winv.reshape(a.shape) if dim is None else winv.reshape(-1))
    _exact(cnt, wcnt)


def test_unique_floats_and_consecutive():
    x = np.array([2.5, -1.0, 2.5, 0.0, -1.0])
    assert_close(as_tensor(x).unique(), np.unique(x))
    v, inv, cnt = st.unique_consecutive(st.tensor([1, 1, 3, 3, 1]), return_inverse=True,
                                        return_counts=True)
    _exact(v, [1, 3, 1])
    _exact(inv, [0, 0, 1, 1, 2])
    _exact(cnt, [2, 2, 1])
    h = st.unique(st.tensor([2.0, -1.0, 2.0]).half(), return_counts=True)
    assert h[0].dtype is st.float16
    assert_close(h[0].float(), [-1.0, 2.0])
    _exact(h[1], np.array([1, 2]))
    rows = st.tensor([[1, 2], [1, 2], [0, 0], [1, 2]])
    _exact(st.unique_consecutive(rows, dim=0), [[1, 2], [0, 0], [1, 2]])
    with pytest.raises(IndexError, match="unique: dimension out of range"):
        st.unique(rows, dim=2)
    with pytest.raises(TypeError, match="unique: input must be a Tensor"):
        st.unique([1, 2])


def test_bincount():
    x = R.integers(0, 6, 30)
    w = R.standard_normal(30)
    _exact(st.bincount(as_tensor(x)), np.bincount(x))
    _exact(as_tensor(x).bincount(minlength=10), np.bincount(x, minlength=10))
    assert_close(st.bincount(as_tensor(x), as_tensor(w)), np.bincount(x, w), rtol=1e-12)
    _exact(st.bincount(st.zeros(0, dtype=st.int64)), np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="bincount: input must contain only non-negative"):
        st.bincount(st.tensor([1, -1]))
    with pytest.raises(ValueError, match="bincount: input must be 1-d"):
        st.bincount(st.tensor([[1]]))
    with pytest.raises(TypeError, match="bincount: expected an integer tensor, got float32"):
        st.bincount(st.tensor([1.0]))
    with pytest.raises(ValueError, match="bincount: weights should have the same shape"):
        st.bincount(st.tensor([1, 2]), st.tensor([1.0]))
    with pytest.raises(ValueError, match="bincount: minlength should be >= 0"):
        st.bincount(st.tensor([1]), minlength=-1)


def test_histc_and_histogram():
    x = R.standard_normal(200)
    assert_close(st.histc(as_tensor(x), bins=7, min=-1.0, max=2.0),
                 np.histogram(x, 7, range=(-1.0, 2.0))[0])
    w = np.abs(R.standard_normal(200))
    h, e = st.histogram(as_tensor(x), 6, weight=as_tensor(w), density=True)
    wh, we = np.histogram(x, 6, weights=w, density=True)
    assert_close(h, wh, rtol=1e-10)
    assert_close(e, we, rtol=1e-12)
    edges = np.array([-2.0, -0.5, 0.0, 1.5])
    h, e = st.histogram(as_tensor(x), as_tensor(edges), weight=as_tensor(w))
    assert_close(h, np.histogram(x, edges, weights=w)[0], rtol=1e-12)
    with pytest.raises(ValueError, match="histc: bins must be > 0"):
        st.histc(st.zeros(3), bins=0)
    with pytest.raises(ValueError, match="histc: max must be larger than min"):
        st.histc(st.zeros(3), min=1.0, max=0.0)
    with pytest.raises(TypeError, match="histc: expected a floating point tensor"):
        st.histc(st.tensor([1, 2]))
    with pytest.raises(ValueError, match="histogram: bins must be a 1-d tensor of at least 2"):
        st.histogram(st.zeros(3), st.tensor([1.0]))
    with pytest.raises(ValueError, match="histogram: weight should have the same shape"):
        st.histogram(st.zeros(3), 2, weight=st.zeros(2))


def test_searchsorted_and_bucketize():
    seq = np.array([1.0, 2.0, 2.0, 4.0])
    v = np.array([[0.0, 2.0], [3.0, 5.0]])
    for right in (False, True):
        side = "right" if right else "left"
        _exact(st.searchsorted(as_tensor(seq), as_tensor(v), right=right),
               np.searchsorted(seq, v, side=side))
        _exact(st.searchsorted(as_tensor(seq), as_tensor(v), side=side),
               np.searchsorted(seq, v, side=side))
        _exact(st.bucketize(as_tensor(v), as_tensor(seq), right=right),
               np.searchsorted(seq, v, side=side))
    shuffled = np.array([4.0, 1.0, 2.0, 2.0])
    sorter = np.argsort(shuffled, kind="stable")
    _exact(st.searchsorted(as_tensor(shuffled), as_tensor(v), sorter=as_tensor(sorter)),
           np.searchsorted(shuffled, v, sorter=sorter))
    got = st.searchsorted(as_tensor(seq), 2.0, out_int32=True)
    assert got.shape == () and got.dtype is st.int32 and got.item() == 1
    assert st.searchsorted(st.tensor([1, 2, 3]), 2.5).item() == 2
    with pytest.raises(TypeError, match="searchsorted: input must be a Tensor or a number"):
        st.searchsorted(as_tensor(seq), [1.0])
    # an unsorted sequence gives some index in range, never a crash
    out = to_numpy(st.searchsorted(st.tensor([3.0, 1.0, 2.0]), st.tensor([2.5])))
    assert 0 <= out[0] <= 3
    with pytest.raises(ValueError, match="searchsorted: side and right can't be set to opp"):
        st.searchsorted(as_tensor(seq), as_tensor(v), right=True, side="left")
    with pytest.raises(ValueError, match="searchsorted: side can only be 'left' or 'right'"):
        st.searchsorted(as_tensor(seq), as_tensor(v), side="middle")
    with pytest.raises(ValueError, match="searchsorted: sorted_sequence .* must have the same "
                                         "leading dimensions"):
        st.searchsorted(st.zeros(3, 4), st.zeros(2, 1))
    with pytest.raises(ValueError, match="searchsorted: sorter and sorted_sequence must have"):
        st.searchsorted(as_tensor(seq), as_tensor(v), sorter=st.tensor([0, 1]))
    with pytest.raises(ValueError, match="bucketize: boundaries must be 1-d"):
        st.bucketize(st.zeros(2), st.zeros(2, 2))


# ---- broadcasting and comparisons ---------------------------------------------------------------


def test_broadcast_helpers():
    assert st.broadcast_shapes((2, 1), 3, (4, 1, 1)) == (4, 2, 3)
    with pytest.raises(ValueError, match="broadcast_shapes"):
        st.broadcast_shapes((2,), (3,))
    a, b = st.broadcast_tensors(st.ones(2, 1), st.zeros(3))
    assert a.shape == b.shape == (2, 3)
    with pytest.raises(ValueError, match="broadcast_tensors"):
        st.broadcast_tensors(st.ones(2), st.ones(3))


def test_isclose_allclose():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1.0, 0.0])
    b = np.array([1.0 + 1e-9, np.nan, np.inf, np.inf, 1.1, 1e-9])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.0}):
        _exact(st.isclose(as_tensor(a), as_tensor(b), **kw), np.isclose(a, b, **kw))
    _exact(st.isclose(st.tensor([1, 5]), st.tensor([1, 6]), atol=1), [True, True])
    _exact(st.isclose(st.tensor([1, 5]), st.tensor([1, 6]), rtol=0, atol=0), [True, False])
    _exact(st.isclose(as_tensor(a), math.nan, equal_nan=True), np.isnan(a))
    assert st.allclose(st.ones(3), st.ones(3) + 1e-9) is True
    assert st.ones(3).allclose(st.zeros(3)) is False
    with pytest.raises(ValueError, match="isclose: rtol and atol must be non-negative"):
        st.isclose(st.ones(1), st.ones(1), rtol=-1.0)
    with pytest.raises(TypeError, match="isclose: bool and float32 can't be compared"):
        st.isclose(st.tensor([True]), st.ones(1))


# ---- index reads and writes ---------------------------------------------------------------------


def test_take_and_put():
    x = R.standard_normal((3, 4))
    idx = np.array([[0, -1], [7, 3]])
    assert_close(as_tensor(x).take(as_tensor(idx)), np.take(x, idx))
    with pytest.raises(IndexError, match="take: index 12 is out of bounds"):
        st.take(as_tensor(x), st.tensor([12]))
    t = as_tensor(x.copy())
    t.put_(st.tensor([1, -1]), st.tensor([5.0, 6.0]))
    want = x.copy().reshape(-1)
    want[[1, -1]] = [5.0, 6.0]
    assert_close(t, want.reshape(3, 4))
    t.put_(st.tensor([1, 1]), st.tensor([1.0, 1.0]), accumulate=True)
    want[1] += 2
    assert_close(t, want.reshape(3, 4))
    with pytest.raises(ValueError, match="put: expected source and index to have the same"):
        t.put_(st.tensor([1]), st.tensor([1.0, 2.0]))
    with pytest.raises(IndexError, match="put: index -13 is out of bounds"):
        t.put(st.tensor([-13]), st.tensor([1.0]))


def test_index_copy_and_fill_inplace():
    x = st.zeros(3, 4)
    x.index_copy_(1, st.tensor([3, 0]), st.ones(3, 2))
    _exact(x, [[1, 0, 0, 1]] * 3)
    x.index_fill_(0, st.tensor([1]), -2.0)
    _exact(x, [[1, 0, 0, 1], [-2, -2, -2, -2], [1, 0, 0, 1]])
    y = st.index_fill(st.zeros(2, 2), 1, st.tensor([0]), st.tensor(3.0))
    _exact(y, [[3, 0], [3, 0]])
    with pytest.raises(ValueError, match=r"index_copy: source should have shape \(3, 2\)"):
        st.index_copy(st.zeros(3, 4), 1, st.tensor([3, 0]), st.ones(3, 3))
    with pytest.raises(IndexError, match="index_copy: index 4 is out of bounds"):
        st.index_copy(st.zeros(3, 4), 1, st.tensor([4]), st.ones(3, 1))
    with pytest.raises(IndexError, match="index_fill: index should have at most 1 dimension"):
        st.index_fill(st.zeros(3), 0, st.tensor([[0]]), 1.0)
    with pytest.raises(ValueError, match="index_fill: only supports a 0-dimensional value"):
        st.index_fill(st.zeros(3), 0, st.tensor([0]), st.ones(1))
    with pytest.raises(TypeError, match="index_fill: expected an int64"):
        st.index_fill(st.zeros(3), 0, st.tensor([0.0]), 1.0)


def test_scatter_reduce_ints_and_errors():
    x = np.array([[1, 2], [3, 4], [5, 6]])
    idx = np.array([[0, 2], [0, 0]])
    src = np.array([[7, -1], [2, 9]])
    for red, fn in [("sum", sum), ("prod", math.prod), ("amax", max), ("amin", min),
                    ("mean", lambda v: sum(v) // len(v))]:
        for inc in (True, False):
            want = x.copy()
            groups: dict = {}
            for i, j in itertools.product(range(2), range(2)):
                groups.setdefault((idx[i, j], j), []).append(src[i, j])
            for k, vals in groups.items():
                want[k] = fn(vals + ([x[k]] if inc else []))
            _exact(st.scatter_reduce(as_tensor(x), 0, as_tensor(idx), as_tensor(src), red,
                                     include_self=inc), want)
    t = st.zeros(3)
    t.scatter_reduce_(0, st.tensor([0, 0]), st.tensor([2.0, 4.0]), "mean", include_self=False)
    _exact(t, [3.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="scatter_reduce: reduce argument must be one of"):
        st.scatter_reduce(st.zeros(3), 0, st.tensor([0]), st.ones(1), "max")
    with pytest.raises(ValueError, match="scatter_reduce: index .* should have the same number"):
        st.scatter_reduce(st.zeros(3), 0, st.tensor([[0]]), st.ones(1), "sum")
    with pytest.raises(ValueError, match="scatter_reduce: index .* is larger than src"):
        st.scatter_reduce(st.zeros(3), 0, st.tensor([0, 1]), st.ones(1), "sum")
    with pytest.raises(IndexError, match="scatter_reduce: index 3 is out of bounds"):
        st.scatter_reduce(st.zeros(3), 0, st.tensor([3]), st.ones(1), "sum")


def test_scatter_reduce_gradient_with_kwargs():
    x = as_tensor(R.standard_normal((3, 2)), requires_grad=True)
    s = as_tensor(R.standard_normal((4, 2)), requires_grad=True)
    idx = as_tensor(np.array([[0, 1], [2, 1], [0, 0], [1, 2]]))
    for red in ("sum", "mean", "amax", "prod"):
        assert gradcheck(lambda a, b, red=red: st.scatter_reduce(a, 0, idx, b, red,
                                                                 include_self=False), [x, s])


def test_rot90_unfold_masked_scatter_renorm():
    m = R.standard_normal((2, 3, 4))
    for k in range(-2, 6):
        assert_close(st.rot90(as_tensor(m), k, [2, 0]), np.rot90(m, k, (2, 0)))
    with pytest.raises(ValueError, match="rot90: expected total rotation dims == 2"):
        st.rot90(as_tensor(m), 1, [0])
    with pytest.raises(ValueError, match="rot90: rotation dims must be different"):
        st.rot90(as_tensor(m), 1, [1, -2])
    with pytest.raises(ValueError, match="rot90: expected total dims >= 2"):
        st.rot90(st.zeros(3))
    u = st.arange(10).reshape(2, 5).unfold(1, 3, 2)
    _exact(u, [[[0, 1, 2], [2, 3, 4]], [[5, 6, 7], [7, 8, 9]]])
    _exact(st.tensor(5.0).unfold(0, 1, 1), [5.0])
    with pytest.raises(RuntimeError, match="unfold: maximum size for tensor at dimension 1 is 5"):
        st.zeros(2, 5).unfold(1, 6, 1)
    with pytest.raises(RuntimeError, match="unfold: step is 0 but must be > 0"):
        st.zeros(2, 5).unfold(1, 2, 0)
    t = st.zeros(2, 3)
    t.masked_scatter_(st.tensor([True, False, True]), st.arange(1.0, 7.0))
    _exact(t, [[1, 0, 2], [3, 0, 4]])
    with pytest.raises(ValueError, match="masked_scatter: expected source to have at least 4"):
        st.zeros(2, 3).masked_scatter(st.tensor([True, False, True]), st.ones(3))
    with pytest.raises(TypeError, match="masked_scatter: expected a bool tensor for mask"):
        st.zeros(3).masked_scatter(st.ones(3), st.ones(3))
    with pytest.raises(ValueError, match="masked_scatter: mask .* can't be broadcast"):
        st.zeros(3).masked_scatter(st.ones(2, 3) > 0, st.ones(6))
    x = R.standard_normal((3, 4)) * 2
    n = np.sqrt((x ** 2).sum(1, keepdims=True))
    want = x * np.where(n > 1.0, 1.0 / (n + 1e-7), 1.0)
    r = as_tensor(x.copy())
    r.renorm_(2, 0, 1.0)
    assert_close(r, want, rtol=1e-12)
    with pytest.raises(ValueError, match="renorm: non-positive norm not supported"):
        st.renorm(r, 0, 0, 1.0)
    with pytest.raises(ValueError, match="renorm: expected maxnorm to be >= 0"):
        st.renorm(r, 2, 0, -1.0)
    with pytest.raises(TypeError, match="renorm: expected a floating point tensor"):
        st.renorm(st.ones(2, 2, dtype=st.int64), 2, 0, 1.0)


def test_inplace_triangles_and_aliases():
    x = st.ones(3, 3)
    assert x.tril_(-1) is x
    _exact(x, np.tril(np.ones((3, 3)), -1))
    y = st.ones(2, 3)
    y.triu_(1)
    _exact(y, np.triu(np.ones((2, 3)), 1))
    assert st.ones(2, 3, 4).ndimension() == 3
    assert st.ones(2, 3, 4).nelement() == 24


def test_splits_flips_and_scatters():
    x = R.standard_normal((4, 6, 2))
    for fn, ref in [(st.hsplit, np.hsplit), (st.vsplit, np.vsplit), (st.dsplit, np.dsplit)]:
        for spec in (2, [1, 3]):
            got, want = fn(as_tensor(x), spec), ref(x, spec)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert_close(g, w)
    with pytest.raises(ValueError, match="hsplit: dimension 1 of size 6 is not divisible by"):
        st.hsplit(as_tensor(x), 4)
    with pytest.raises(ValueError, match="vsplit: requires a tensor with at least 2"):
        st.vsplit(st.zeros(4), 2)
    with pytest.raises(ValueError, match="dsplit: requires a tensor with at least 3"):
        st.dsplit(st.zeros(4, 2), 2)
    assert_close(as_tensor(x).fliplr(), np.fliplr(x))
    assert_close(st.flipud(as_tensor(x)), np.flipud(x))
    with pytest.raises(ValueError, match="fliplr: input must be >= 2-d"):
        st.fliplr(st.zeros(3))
    c = st.narrow_copy(as_tensor(x), 1, 2, 3)
    assert_close(c, x[:, 2:5])
    assert c.is_contiguous()
    _exact(st.argwhere(st.tensor([[0, 2], [3, 0]])), np.array([[0, 1], [1, 0]]))
    m = R.standard_normal((3, 4))
    want = m.copy()
    want[:, -1] = 7.0
    assert_close(st.select_scatter(as_tensor(m), st.full((3,), 7.0, dtype=st.float64), 1, -1),
                 want)
    with pytest.raises(IndexError, match="select_scatter: index 4 is out of bounds"):
        st.select_scatter(as_tensor(m), st.zeros(3), 1, 4)
    with pytest.raises(ValueError, match=r"select_scatter: src should have shape \(3,\)"):
        st.select_scatter(as_tensor(m), st.zeros(4), 1, 0)
    want = m.copy()
    want[:, 1::2] = 0.0
    assert_close(st.slice_scatter(as_tensor(m), st.zeros(3, 2, dtype=st.float64), 1, 1,
                                  step=2), want)
    with pytest.raises(ValueError, match="slice_scatter: step must be positive"):
        st.slice_scatter(as_tensor(m), st.zeros(3, 2), 1, step=0)
    with pytest.raises(ValueError, match=r"slice_scatter: src should have shape \(3, 2\)"):
        st.slice_scatter(as_tensor(m), st.zeros(3, 3), 1, 1, step=2)


def test_repeat_interleave_forms_and_errors():
    x = R.standard_normal((2, 3))
    assert_close(st.repeat_interleave(as_tensor(x), 2), np.repeat(x, 2))
    assert_close(as_tensor(x).repeat_interleave(st.tensor([0, 3, 1]), dim=1, output_size=4),
                 np.repeat(x, [0, 3, 1], axis=1))
    assert_close(as_tensor(x).repeat_interleave(st.tensor([2]), dim=0), np.repeat(x, 2, 0))
    _exact(st.repeat_interleave(st.tensor([1, 0, 3])), np.array([0, 2, 2, 2]))
    _exact(st.repeat_interleave(st.tensor([0, 0])), np.zeros(0, np.int64))
    g = as_tensor(x, requires_grad=True)
    assert gradcheck(lambda t: t.repeat_interleave(st.tensor([2, 0, 1]), dim=-1), [g])
    with pytest.raises(ValueError, match="repeat_interleave: repeats can not be negative"):
        st.repeat_interleave(as_tensor(x), st.tensor([1, -1, 1]), dim=1)
    with pytest.raises(ValueError, match="repeat_interleave: repeats can not be negative"):
        st.repeat_interleave(as_tensor(x), -2)
    with pytest.raises(ValueError, match="repeat_interleave: repeats must have the same size"):
        st.repeat_interleave(as_tensor(x), st.tensor([1, 2]), dim=1)
    with pytest.raises(ValueError, match="repeat_interleave: output_size 5 does not match"):
        st.repeat_interleave(as_tensor(x), st.tensor([1, 2, 1]), dim=1, output_size=5)
    with pytest.raises(TypeError, match="repeat_interleave: expected an integer tensor"):
        st.repeat_interleave(as_tensor(x), st.tensor([1.0, 2.0, 1.0]), dim=1)


def test_searchsorted_puts_nan_last():
    seq = np.array([1.0, 2.0, np.nan])
    v = np.array([np.nan, 1.5, 3.0])
    for side in ("left", "right"):
        _exact(st.searchsorted(as_tensor(seq), as_tensor(v), side=side),
               np.searchsorted(seq, v, side=side))


def test_cdist_gradient_is_zero_at_zero_distance():
    a = as_tensor(np.array([[0.0, 1.0], [2.0, 0.5]]), requires_grad=True)
    for p in (2.0, 3.0):
        d = st.cdist(a, a.detach(), p=p)
        (g,) = st.autograd.grad(d.sum(), [a])
        assert np.isfinite(to_numpy(g)).all()
    assert gradcheck(lambda t: st.cdist(t, st.tensor([[0.0, 1.0]], dtype=st.float64)), [a])


@given(seq=hnp.arrays(np.int64, hs.integers(0, 8), elements=hs.integers(-4, 4)),
       v=hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4),
                    elements=hs.integers(-5, 5)),
       right=hs.booleans(), rows=hs.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_searchsorted_matches_numpy_with_ties(seq, v, right, rows):
    seq = np.sort(seq)
    side = "right" if right else "left"
    _exact(st.searchsorted(as_tensor(seq), as_tensor(v), right=right),
           np.searchsorted(seq, v, side=side))
    batch = np.sort(np.stack([np.roll(seq, i) for i in range(rows)]), -1).astype(np.float64)
    vals = np.resize(v.astype(np.float64), (rows, 3))
    want = np.stack([np.searchsorted(s, w, side=side) for s, w in zip(batch, vals)])
    _exact(st.searchsorted(as_tensor(batch), as_tensor(vals), side=side), want)


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod", "mean", "sum"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_3d_corner(reduce, include_self):
    x = R.standard_normal((3, 5, 4))
    src = R.standard_normal((3, 7, 4))
    idx = R.integers(0, 5, (2, 6, 3))  # smaller than x and src in the other dims
    want = x.copy()
    groups: dict = {}
    for i, j, k in np.ndindex(*idx.shape):
        groups.setdefault((i, idx[i, j, k], k), []).append(src[i, j, k])
    fn = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}
    for pos, vals in groups.items():
        want[pos] = fn[reduce](vals + ([x[pos]] if include_self else []))
    got = st.scatter_reduce(as_tensor(x), 1, as_tensor(idx), as_tensor(src), reduce,
                            include_self=include_self)
    assert_close(got, want, rtol=1e-12, atol=1e-12)
