"""Tensor factories: st.tensor dtype inference, from_numpy, filled tensors, ranges, the _like
family, random draws, seeding and generator state."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import to_numpy

HAS_SETITEM = hasattr(st.Tensor, "__setitem__")


# ---- st.tensor / from_numpy ----------------------------------------------------------------------


@pytest.mark.parametrize("data, dtype", [
    ([1.0, 2.0], st.float32),
    ([1, 2], st.int64),
    ([1, 2.5], st.float32),
    ([True, False], st.bool),
    (3.5, st.float32),
    (7, st.int64),
    (np.array([1.0, 2.0]), st.float64),
    (np.array([1.0], dtype=np.float16), st.float16),
    (np.array([1, 2], dtype=np.int32), st.int32),
    (np.float64(1.5), st.float64),
    (np.array([True]), st.bool),
])
def test_tensor_dtype_inference(data, dtype):
    t = st.tensor(data)
    assert t.dtype is dtype
    np.testing.assert_array_equal(to_numpy(t.to(st.float64)), np.asarray(data, dtype=np.float64))


def test_tensor_explicit_dtype_and_copy():
    t = st.tensor([1, 2, 3], dtype=st.float64)
    assert t.dtype is st.float64 and t.tolist() == [1.0, 2.0, 3.0]
    a = np.array([1.0, 2.0], dtype=np.float32)
    t = st.tensor(a)
    a[0] = 9.0  # st.tensor copies
    assert t.tolist() == [1.0, 2.0]
    u = st.tensor(t, dtype=st.float64)
    t.add_(1.0)
    assert u.dtype is st.float64 and u.tolist() == [1.0, 2.0]


def test_tensor_nested_shape_and_requires_grad():
    t = st.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    assert t.shape == (2, 3) and t.requires_grad and t.is_leaf
    assert st.tensor([]).shape == (0,)


def test_tensor_ragged_raises():
    with pytest.raises(ValueError, match="could not convert"):
        st.tensor([[1.0, 2.0], [3.0]])


def test_tensor_bad_data_raises():
    with pytest.raises(TypeError, match="numbers"):
        st.tensor(["a", None])
    with pytest.raises(ValueError, match="non-finite"):
        st.tensor([1.0, float("nan")], dtype=st.int64)


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = st.from_numpy(a)
    assert t.dtype is st.float64 and t.shape == (2, 3)
    a[1, 2] = -1.0
    assert t.tolist()[1][2] == -1.0
    t.mul_(2.0)
    np.testing.assert_array_equal(a, np.array([[0, 2, 4], [6, 8, -2.0]]))


def test_from_numpy_dtypes_and_non_contiguous():
    i = np.array([1, 2], dtype=np.int32)
    assert st.from_numpy(i).dtype is st.int32
    b = np.array([True, False])
    tb = st.from_numpy(b)
    assert tb.dtype is st.bool and tb.tolist() == [True, False]
    a = np.arange(6.0).reshape(2, 3).T  # not C-contiguous: copied, values kept
    np.testing.assert_array_equal(to_numpy(st.from_numpy(a)), a)
    with pytest.raises(TypeError, match="numpy array"):
        st.from_numpy([1, 2])
    with pytest.raises(TypeError, match="not supported"):
        st.from_numpy(np.array([1 + 2j]))


# ---- filled --------------------------------------------------------------------------------------


def test_zeros_ones_full_empty():
    z = st.zeros(2, 3)
    assert z.dtype is st.float32 and z.shape == (2, 3)
    np.testing.assert_array_equal(to_numpy(z), np.zeros((2, 3)))
    o = st.ones((3,), dtype=st.int32)
    assert o.dtype is st.int32 and o.tolist() == [1, 1, 1]
    assert st.zeros([2, 2]).shape == (2, 2)
    assert st.zeros(()).shape == () and st.zeros(()).item() == 0.0
    assert st.full((2,), 7).dtype is st.int64 and st.full((2,), 7).tolist() == [7, 7]
    f = st.full((2, 2), 2.5)
    assert f.dtype is st.float32 and f.tolist() == [[2.5, 2.5], [2.5, 2.5]]
    assert st.full(3, True).dtype is st.bool
    assert st.full((1,), 3, dtype=st.float64).tolist() == [3.0]
    e = st.empty(4, 5, dtype=st.float64)
    assert e.shape == (4, 5) and e.dtype is st.float64
    assert st.zeros(0, 3).numel() == 0
    assert st.ones(2, requires_grad=True).requires_grad


def test_factories_reject_bad_shapes():
    for fn in (st.zeros, st.ones, st.empty, st.rand, st.randn):
        with pytest.raises(ValueError, match=r"negative dimension -1 in shape \(2, -1\)"):
            fn(2, -1)
    with pytest.raises(ValueError, match="negative dimension"):
        st.full((-2,), 1.0)
    with pytest.raises(TypeError, match="shape must be ints"):
        st.zeros(2.5)
    with pytest.raises(TypeError, match="fill_value must be a number"):
        st.full((2,), "x")
    with pytest.raises(RuntimeError, match="floating point"):
        st.zeros(2, dtype=st.int64, requires_grad=True)


def test_like_functions_keep_shape_and_dtype():
    x = st.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    for fn, val in ((st.zeros_like, 0), (st.ones_like, 1)):
        y = fn(x)
        assert y.shape == (2, 3) and y.dtype is st.int32
        np.testing.assert_array_equal(to_numpy(y), np.full((2, 3), val))
    f = st.full_like(x, 4)
    assert f.dtype is st.int32 and f.tolist() == [[4] * 3] * 2
    e = st.empty_like(x, dtype=st.float64)
    assert e.shape == (2, 3) and e.dtype is st.float64
    r = st.rand_like(st.zeros(3, 2, dtype=st.float64))
    assert r.shape == (3, 2) and r.dtype is st.float64
    assert st.randn_like(st.zeros(4)).shape == (4,)
    assert st.zeros_like(x, dtype=st.float32).dtype is st.float32


# ---- ranges --------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [(5,), (2, 7), (0, 10, 3), (10, 0, -3), (-3, 3), (4, 4)])
def test_arange_integer(args):
    t = st.arange(*args)
    assert t.dtype is st.int64
    np.testing.assert_array_equal(to_numpy(t), np.arange(*args))


@pytest.mark.parametrize("args", [(0, 1, 0.1), (1, 2.5, 0.5), (2.0, -1.0, -0.75), (0.5,),
                                  (0, 1, 0.3)])
def test_arange_float(args):
    t = st.arange(*args)
    assert t.dtype is st.float32
    np.testing.assert_allclose(to_numpy(t), np.arange(*args, dtype=np.float64), rtol=1e-6,
                               atol=1e-7)


def test_arange_dtype_argument():
    t = st.arange(0, 4, dtype=st.float64)
    assert t.dtype is st.float64 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert st.arange(0, 1.0, 0.25, dtype=st.float16).dtype is st.float16


def test_arange_bad_arguments():
    with pytest.raises(ValueError, match="step must be nonzero"):
        st.arange(0, 5, 0)
    with pytest.raises(ValueError, match="inconsistent with step sign"):
        st.arange(0, 5, -1)
    with pytest.raises(ValueError, match="finite"):
        st.arange(0, float("inf"))
    with pytest.raises(TypeError, match="must be numbers"):
        st.arange("5")


@pytest.mark.parametrize("start, end, steps",
                         [(0, 1, 5), (-1.0, 2.0, 7), (3, -3, 4), (0.1, 0.7, 3)])
def test_linspace(start, end, steps):
    t = st.linspace(start, end, steps)
    assert t.dtype is st.float32 and t.shape == (steps,)
    np.testing.assert_allclose(to_numpy(t), np.linspace(start, end, steps), rtol=1e-6, atol=1e-7)
    assert to_numpy(t)[-1] == np.float32(end)


def test_linspace_single_and_empty():
    assert st.linspace(2.0, 5.0, 1).tolist() == [2.0]
    assert st.linspace(0, 1, 0).shape == (0,)
    with pytest.raises(ValueError, match="non-negative"):
        st.linspace(0, 1, -1)


def test_eye():
    np.testing.assert_array_equal(to_numpy(st.eye(3)), np.eye(3))
    np.testing.assert_array_equal(to_numpy(st.eye(2, 4)), np.eye(2, 4))
    np.testing.assert_array_equal(to_numpy(st.eye(4, 2)), np.eye(4, 2))
    e = st.eye(2, dtype=st.int64)
    assert e.dtype is st.int64 and e.tolist() == [[1, 0], [0, 1]]
    assert st.eye(0).shape == (0, 0)
    with pytest.raises(ValueError, match="non-negative"):
        st.eye(-1)


# ---- random --------------------------------------------------------------------------------------


def test_rand_range_and_moments():
    st.manual_seed(1)
    x = to_numpy(st.rand(20000, dtype=st.float64))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(x.var() - 1 / 12) < 0.005
    assert st.rand(2, 3).dtype is st.float32 and st.rand(2, 3).shape == (2, 3)


def test_randn_moments():
    st.manual_seed(2)
    x = to_numpy(st.randn(20000, dtype=st.float64))
    assert abs(x.mean()) < 0.03
    assert abs(x.std() - 1.0) < 0.03
    assert abs(np.mean(x ** 3)) < 0.1  # symmetric
    assert abs(np.mean(np.abs(x) < 1.0) - 0.6827) < 0.02


def test_normal_and_uniform():
    st.manual_seed(3)
    n = to_numpy(st.normal(5.0, 2.0, (20000,), dtype=st.float64))
    assert abs(n.mean() - 5.0) < 0.06 and abs(n.std() - 2.0) < 0.06
    u = to_numpy(st.uniform((20000,), -2.0, 4.0, dtype=st.float64))
    assert u.min() >= -2.0 and u.max() < 4.0 and abs(u.mean() - 1.0) < 0.06
    with pytest.raises(ValueError, match="std must be non-negative"):
        st.normal(0.0, -1.0, (2,))


def test_randint_range_and_coverage():
    st.manual_seed(4)
    x = st.randint(-3, 4, (5000,))
    assert x.dtype is st.int64 and x.shape == (5000,)
    vals = to_numpy(x)
    assert vals.min() == -3 and vals.max() == 3
    counts = np.bincount(vals + 3)
    assert counts.min() > 5000 / 7 * 0.8
    assert st.randint(0, 2, (4,), dtype=st.int32).dtype is st.int32


def test_randint_high_and_size_form():
    st.manual_seed(4)
    x = st.randint(5, (3, 200))
    assert x.shape == (3, 200) and x.dtype is st.int64
    vals = to_numpy(x)
    assert vals.min() == 0 and vals.max() == 4


def test_randint_bad_arguments():
    with pytest.raises(ValueError, match="low < high"):
        st.randint(3, 3, (2,))
    with pytest.raises(TypeError, match="size is required"):
        st.randint(0, 3)
    with pytest.raises(TypeError, match="low and high must be ints"):
        st.randint(0.5, 3, (2,))


def test_rand_rejects_integer_dtype():
    with pytest.raises(TypeError, match="floating point"):
        st.rand(3, dtype=st.int64)


def test_manual_seed_reproducible():
    st.manual_seed(123)
    a, ai = st.randn(50), st.randint(0, 100, (20,))
    st.manual_seed(123)
    b, bi = st.randn(50), st.randint(0, 100, (20,))
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    np.testing.assert_array_equal(to_numpy(ai), to_numpy(bi))
    st.manual_seed(124)
    assert not np.array_equal(to_numpy(st.randn(50)), to_numpy(a))
    c = st.randn(50)  # consecutive draws differ
    assert not np.array_equal(to_numpy(c), to_numpy(st.randn(50)))


def test_generator_is_independent_of_default_stream():
    st.manual_seed(7)
    expected = to_numpy(st.rand(10))
    st.manual_seed(7)
    g = st.Generator().manual_seed(99)
    mine = st.rand(10, generator=g)
    np.testing.assert_array_equal(to_numpy(st.rand(10)), expected)
    g2 = st.Generator().manual_seed(99)
    np.testing.assert_array_equal(to_numpy(st.rand(10, generator=g2)), to_numpy(mine))
    with pytest.raises(TypeError, match="Generator"):
        st.rand(2, generator=42)


def test_rng_state_resumes_stream():
    st.manual_seed(5)
    st.randn(7)
    state = st.get_rng_state()
    a = to_numpy(st.randn(13))
    st.randn(3)
    st.set_rng_state(state)
    np.testing.assert_array_equal(to_numpy(st.randn(13)), a)
    g = st.Generator().manual_seed(11)
    st.rand(5, generator=g)
    s = g.get_state()
    b = to_numpy(st.rand(6, generator=g))
    g.set_state(s)
    np.testing.assert_array_equal(to_numpy(st.rand(6, generator=g)), b)
    assert g.initial_seed() == 11


def test_split_draws_continue_the_stream():
    # two draws of n equal one draw of 2n (offsets are counted in whole blocks of 4 floats)
    st.manual_seed(8)
    one = to_numpy(st.rand(16))
    st.manual_seed(8)
    two = np.concatenate([to_numpy(st.rand(8)), to_numpy(st.rand(8))])
    np.testing.assert_array_equal(one, two)


def test_randperm_is_a_permutation():
    st.manual_seed(9)
    p = st.randperm(50)
    assert p.dtype is st.int64 and p.shape == (50,)
    vals = to_numpy(p)
    np.testing.assert_array_equal(np.sort(vals), np.arange(50))
    assert not np.array_equal(vals, np.arange(50))
    st.manual_seed(9)
    np.testing.assert_array_equal(to_numpy(st.randperm(50)), vals)
    assert st.randperm(0).shape == (0,)


def test_randperm_is_uniform_over_first_position():
    st.manual_seed(3)
    firsts = np.array([st.randperm(4)[0].item() for _ in range(4000)])
    counts = np.bincount(firsts, minlength=4)
    assert counts.min() > 850 and counts.max() < 1150, counts  # 1000 expected each


def test_randperm_rejects_negative_n():
    with pytest.raises(ValueError, match="randperm: n must be a non-negative int"):
        st.randperm(-1)
