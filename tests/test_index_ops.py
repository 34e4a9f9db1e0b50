"""Indexing ops and Tensor.__getitem__/__setitem__, checked against numpy indexing."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.autograd import gradcheck, gradgradcheck

from .helpers import DEVICE, as_tensor, assert_close, to_numpy

A = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
MASK = (A % 7) < 3
I = np.array

# index expressions for a (4, 5, 6) array where numpy and PyTorch agree
KEYS = [
    1, -1, (2, 3), (1, -2, 5), slice(1, 3), slice(None, None, 2), (slice(None), slice(1, None, 3)),
    (Ellipsis, 2), (Ellipsis, slice(0, 5, 4)), (None, 1), (slice(None), None, 2, None),
    (Ellipsis, None), (1, Ellipsis, None, slice(2, 4)), slice(10, 20), slice(-100, 100),
    (slice(3, 1),), (), Ellipsis,
    I([0, 3, 3]), I([-1, 0]), [1, 2], (I([0, 1]), I([4, 2])), (slice(None), I([[0], [4]]),
                                                                 I([1, 2, 5])),
    (I([0, 2]), slice(1, 3), I([5, 1])), (I([1, 2]), None, I([0, 0])),
    (Ellipsis, I([5, 0, 5])), (slice(1, None), [True, False, True, False, True]),
    MASK, (2, MASK[0]), (MASK[:, :, 0],), (slice(None), MASK[0]), (MASK[:, :, 0], I([5])),
    True, (1, False), (I([[2]]), slice(None), slice(None, None, 2)), (I(0), slice(1, 2)),
    (I([], dtype=np.int64),), (slice(None), I([0, 1]), I([2, 3]), None),
]


def _key(key, tensors: bool):
    """The key with numpy arrays turned into tensors (or kept as arrays/lists)."""
    if not tensors:
        return key
    if isinstance(key, np.ndarray):
        return as_tensor(key)
    if isinstance(key, tuple):
        return tuple(_key(k, True) for k in key)
    return key


@pytest.mark.parametrize("tensors", [True, False], ids=["tensor", "array"])
@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_getitem_matches_numpy(key, tensors):
    x = as_tensor(A)
    got = x[_key(key, tensors)]
    assert_close(got, A[key], msg=str(key))


@pytest.mark.parametrize("key", KEYS[:18], ids=[str(i) for i in range(18)])
def test_basic_getitem_is_a_view(key):
    x = as_tensor(A.copy())
    v = x[key]
    v.fill_(-1.0)
    want = A.copy()
    want[key] = -1.0
    assert_close(x, want)


def test_getitem_on_non_contiguous_input():
    x = as_tensor(A).permute(2, 0, 1)  # (6, 4, 5)
    b = A.transpose(2, 0, 1)
    for key in [(1, slice(None, None, 2)), (slice(1, 5, 3), 2), (I([5, 0]), slice(None), I([1, 4])),
                (Ellipsis, I([4, 0])), b > 50]:
        assert_close(x[_key(key, True)], b[key], msg=str(key))
    assert_close(x[1:4][::2, 1:][0, I([2, 0])], b[1:4][::2, 1:][0, [2, 0]])


def test_int_next_to_index_tensor_follows_pytorch():
    # numpy moves the broadcast dims first here (the int counts as advanced); PyTorch does not
    x = as_tensor(A)
    got = x[0, :, as_tensor(I([0, 1]))]
    assert got.shape == (5, 2)
    assert_close(got, A[0][:, [0, 1]])


def test_int32_index_and_negative_wrapping():
    x = as_tensor(A)
    idx = st.tensor([-1, 1], dtype=st.int32, device=DEVICE)
    assert_close(x[:, idx], A[:, [-1, 1]])


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_setitem_matches_numpy(key):
    want = A.copy()
    x = as_tensor(A)
    shape = A[key].shape
    value = np.random.default_rng(0).standard_normal(shape[-1:] if shape else ())
    if isinstance(key, tuple) and any(isinstance(k, np.ndarray) and k.size != len(np.unique(k))
                                      for k in key):
        value = 7.0  # repeated positions: only a constant is order independent
    want[key] = value
    x[_key(key, True)] = value if isinstance(value, float) else as_tensor(value)
    assert_close(x, want, msg=str(key))


def test_setitem_scalar_cast_and_broadcast():
    x = st.zeros(3, 4, dtype=st.int64, device=DEVICE)
    x[1] = 2.7  # cast like numpy: truncation
    x[:, I([0, 3])] = as_tensor(I([[5], [6], [7]]))
    x[x == 0] = -1
    want = np.full((3, 4), -1)
    want[1] = 2
    want[:, [0, 3]] = [[5], [6], [7]]
    assert_close(x, want)
    y = st.zeros(2, 3, device=DEVICE)
    y[0] = as_tensor(np.ones((1, 1, 3)))  # leading size-1 dims of the value are dropped
    assert_close(y, [[1, 1, 1], [0, 0, 0]])


def test_setitem_into_non_contiguous_and_overlapping():
    base = as_tensor(A.copy())
    x = base.transpose(0, 2)  # (6, 5, 4) view
    want = A.copy().swapaxes(0, 2)
    x[1, :, I([0, 3])] = 99.0
    want[1][:, [0, 3]] = 99.0
    x[::2, 1] = -5.0
    want[::2, 1] = -5.0
    assert_close(x, want)
    assert_close(base, want.swapaxes(0, 2))  # the writes went through to the base storage
    y = as_tensor(np.arange(6.0))
    y[1:] = y[:-1]  # source and destination overlap
    assert_close(y, [0, 0, 1, 2, 3, 4])


def test_setitem_bumps_version():
    x = as_tensor(A.copy())
    v0 = x._storage.version
    x[0] = 1.0
    x[I([1, 2])] = 2.0
    assert x._storage.version >= v0 + 2


# ---- ops against numpy ---------------------------------------------------------------------------

R = np.random.default_rng(3)


def test_gather_and_take_along_dim():
    x = R.standard_normal((3, 5, 4))
    idx = R.integers(0, 5, (2, 7, 3))
    got = st.gather(as_tensor(x), 1, as_tensor(idx))
    assert_close(got, np.take_along_axis(x[:2, :, :3], idx, 1))
    assert_close(st.gather(as_tensor(x), -1, as_tensor(idx[:, :5] % 4)),
                 np.take_along_axis(x[:2, :, :], idx[:, :5] % 4, -1))
    i2 = R.integers(0, 3, (2, 5, 1))
    assert_close(as_tensor(x).take_along_dim(as_tensor(i2), 0), np.take_along_axis(x, i2, 0))
    assert_close(st.take_along_dim(as_tensor(x), as_tensor(I([0, 59]))), x.ravel()[[0, 59]])


def test_scatter_variants():
    x = np.zeros((3, 4))
    idx = I([[2, 0, 1, 2], [1, 1, 0, 0]])
    src = R.standard_normal((2, 4))
    want = x.copy()
    want[idx[0], np.arange(4)] = src[0]
    want[idx[1], np.arange(4)] = src[1]  # later rows win on repeats (ours is deterministic)
    assert_close(st.scatter(as_tensor(x), 0, as_tensor(idx), as_tensor(src)), want)
    want = x.copy()
    np.add.at(want, (idx, np.broadcast_to(np.arange(4), idx.shape)), src)
    assert_close(st.scatter_add(as_tensor(x), 0, as_tensor(idx), as_tensor(src)), want)
    got = as_tensor(x).scatter(1, as_tensor(I([[3], [0]])), 9.0)
    assert_close(got, [[0, 0, 0, 9], [9, 0, 0, 0], [0, 0, 0, 0]])
    t = as_tensor(x)
    t.scatter_add_(1, as_tensor(I([[1, 1]])), as_tensor(I([[1.0, 2.0]])))
    assert_close(t[0], [0, 3, 0, 0])


def test_index_select_and_index_add():
    x = R.standard_normal((4, 3))
    idx = I([3, 0, 3])
    assert_close(st.index_select(as_tensor(x), 0, as_tensor(idx)), x[idx])
    assert_close(as_tensor(x).index_select(1, as_tensor(I(2))), x[:, [2]])
    src = R.standard_normal((3, 3))
    want = x.copy()
    np.add.at(want, idx, 2 * src)
    assert_close(st.index_add(as_tensor(x), 0, as_tensor(idx), as_tensor(src), alpha=2), want)
    t = as_tensor(x)
    t.index_add_(0, as_tensor(idx), as_tensor(src))
    np.add.at(x, idx, src)
    assert_close(t, x)


def test_nonzero_and_masked_select():
    a = I([[0, 1.5, 0], [2, 0, -1]])
    assert_close(st.nonzero(as_tensor(a)), np.argwhere(a))
    cols = as_tensor(a).nonzero(as_tuple=True)
    assert len(cols) == 2 and all(c.dtype is st.int64 for c in cols)
    for c, w in zip(cols, np.nonzero(a)):
        assert_close(c, w)
    assert st.nonzero(st.zeros(0, 3, device=DEVICE)).shape == (0, 2)
    assert_close(st.nonzero(st.zeros(2, 2, device=DEVICE)), np.zeros((0, 2), np.int64))
    x = R.standard_normal((2, 1, 3))
    m = R.standard_normal((4, 3)) > 0
    assert_close(st.masked_select(as_tensor(x), as_tensor(m)), np.broadcast_arrays(x, m)[0][
        np.broadcast_arrays(x, m)[1]])


# ---- gradients -----------------------------------------------------------------------------------


def _leaf(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return as_tensor(a, requires_grad=True)


def _check(fn, *inputs):
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs, atol=1e-4)


def test_grads_gather_scatter():
    x, src = _leaf((3, 4)), _leaf((2, 5), 1)
    idx = as_tensor(I([[0, 2, 1], [2, 1, 0]]))  # no repeats along dim 0 per column
    _check(lambda t: st.gather(t, 0, idx), x)
    _check(lambda t, s: st.scatter(t, 0, idx, s), x, src)
    _check(lambda t, s: st.scatter_add(t, 1, idx, s), x, src)


def test_grads_index_select_index_add():
    x, src = _leaf((4, 3)), _leaf((4, 2), 1)
    idx = as_tensor(I([3, 0, 3]))
    _check(lambda t: st.index_select(t, 0, idx), x)
    _check(lambda t, s: st.index_add(t, 1, as_tensor(I([2, 2])), s, alpha=0.5), x, src)


@pytest.mark.parametrize("key", [(1, slice(None, None, 2)), (Ellipsis, None, slice(1, 3)),
                                 (I([2, 0, 2]), slice(1, 3)), (slice(None), I([[0], [2]]),
                                                               I([1, 1])),
                                 (I([0, 1]), slice(None), I([2, 0])), "mask"],
                         ids=["basic", "none", "adv", "adv2", "split", "mask"])
def test_grads_getitem(key):
    x = _leaf((3, 4, 3))
    if key == "mask":
        key = as_tensor(to_numpy(x) > 0)
    else:
        key = _key(key, True)
    _check(lambda t: t[key] * 1.0, x)


def test_grads_setitem_and_index_put():
    x, v = _leaf((3, 4)), _leaf((2,), 1)
    rows = as_tensor(I([2, 0]))

    def put(t, val):
        y = t * 1.0  # setitem into a non-leaf keeps the graph
        y[rows, 1:3] = val.reshape(2, 1)
        return y

    _check(put, x, v)
    _check(lambda t, val: st.index_put(t, (rows, rows), val, accumulate=True), x, v)
    _check(lambda t, val: st.index_put(t, (slice(1, 3),), val.reshape(2, 1)), x, v)


def test_setitem_grad_values():
    x = as_tensor(np.ones((2, 3)), requires_grad=True)
    v = as_tensor(np.array(3.0), requires_grad=True)
    y = x * 2.0
    y[:, I([0, 2])] = v * v
    y.sum().backward()
    assert_close(x.grad, [[0, 2, 0], [0, 2, 0]])
    assert_close(v.grad, 4 * 6.0)
    assert y.grad_fn is not None and not y.is_leaf


def test_setitem_without_grad_on_leaf_under_no_grad():
    w = as_tensor(np.zeros(3), requires_grad=True)
    with st.no_grad():
        w[1] = 5.0
    assert_close(w.detach(), [0, 5, 0])
    assert w.is_leaf and w.requires_grad


def test_setitem_errors_for_leaf_and_saved_tensor():
    w = as_tensor(np.zeros(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w[0] = 1.0
    x = as_tensor(np.ones(3), requires_grad=True)
    y = x.exp()  # saves its output for backward
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key, exc, match", [
    ((4,), IndexError, r"index 4 is out of range for dimension 0 with size 4"),
    ((0, -6), IndexError, r"index -6 is out of range for dimension 1 with size 5"),
    ((0, 0, 0, 0), IndexError, r"too many indices for tensor of dimension 3 \(got 4\)"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    ((I([0, 7]),), IndexError, r"index 7 is out of bounds for dimension 0 with size 4"),
    ((slice(None), I([-6])), IndexError, r"index -6 is out of bounds for dimension 1 with size 5"),
    ((I([0, 1]), I([0, 1, 2])), IndexError, "could not be broadcast"),
    ((MASK[0],), IndexError, r"shape of the mask \(5, 6\) does not match .*\(4, 5\)"),
    ((slice(None, None, 0),), ValueError, "step must be greater than zero, got 0"),
    ((slice(None, None, -1),), ValueError, "step must be greater than zero.*flip"),
    ((1.5,), IndexError, "valid indices .got float"),
    (([0.5, 1.0],), IndexError, "integer or bool type"),
    (("a",), IndexError, "valid indices .got str"),
])
def test_getitem_errors(key, exc, match):
    with pytest.raises(exc, match=match):
        as_tensor(A)[key]


def test_float_index_tensor_and_setitem_shape_errors():
    x = as_tensor(A)
    with pytest.raises(IndexError, match="must be integer or bool tensors, got float64"):
        x[as_tensor(I([0.0]))]
    with pytest.raises(ValueError, match=r"value of shape \(3,\) cannot be broadcast to "
                                         r"indexing result of shape \(5, 6\)"):
        x[0] = as_tensor(np.zeros(3))
    with pytest.raises(IndexError, match="__setitem__: index 9 is out of bounds"):
        x[I([9])] = 1.0


def test_op_errors():
    x = as_tensor(np.zeros((3, 4)))
    i = as_tensor(I([[0, 1]]))
    with pytest.raises(IndexError, match=r"gather: index 5 is out of bounds for dimension 1 "
                                         r"with size 4"):
        st.gather(x, 1, as_tensor(I([[5]])))
    with pytest.raises(IndexError, match=r"gather: index -1 is out of bounds"):
        st.gather(x, 0, as_tensor(I([[-1]])))
    with pytest.raises(ValueError, match=r"gather: index \(2,\) must have as many dims"):
        st.gather(x, 0, as_tensor(I([0, 1])))
    with pytest.raises(ValueError, match=r"gather: size does not match at dimension 1"):
        st.gather(x, 0, as_tensor(np.zeros((1, 5), np.int64)))
    with pytest.raises(TypeError, match="gather: expected an int64 .or int32. index tensor, got "
                                        "float64"):
        st.gather(x, 0, as_tensor(I([[0.0]])))
    with pytest.raises(IndexError, match="index_select: index -1 is out of bounds"):
        st.index_select(x, 0, as_tensor(I([-1])))
    with pytest.raises(ValueError, match="index_select: index must be a vector"):
        st.index_select(x, 0, i)
    with pytest.raises(TypeError, match="scatter: expected src of dtype float64"):
        st.scatter(x, 0, i, as_tensor(I([[1, 2]])))
    with pytest.raises(ValueError, match=r"scatter_add: size does not match at dimension 1"):
        st.scatter_add(x, 0, i, as_tensor(np.zeros((1, 1))))
    with pytest.raises(ValueError, match=r"index_add: source must have shape \(3, 2\)"):
        st.index_add(x, 1, as_tensor(I([0, 1])), as_tensor(np.zeros((3, 3))))
    with pytest.raises(TypeError, match="masked_select: expected a bool tensor for mask"):
        st.masked_select(x, x)
    with pytest.raises(IndexError, match="dimension out of range"):
        st.index_select(x, 2, as_tensor(I([0])))


def test_results_are_plain_arrays():
    got = to_numpy(as_tensor(A)[I([1]), 2])
    assert got.shape == (1, 6)
