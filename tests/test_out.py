"""PyTorch's out= keyword on the package's functions (singa_tensor/_out.py): results written
into the given tensors, casts, resizing, several results, and the errors; and add's and sub's
alpha=."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor._out import NAMES

from .helpers import to_numpy

R = np.random.default_rng(5)


def _t(shape, dtype=np.float32):
    return st.tensor(R.standard_normal(shape).astype(dtype))


CASES = [
    ("add", lambda a, b: ((a, b), {"alpha": 2})),
    ("sub", lambda a, b: ((a, b), {})),
    ("mul", lambda a, b: ((a, b), {})),
    ("div", lambda a, b: ((a, b), {"rounding_mode": "floor"})),
    ("maximum", lambda a, b: ((a, b), {})),
    ("pow", lambda a, b: ((a.abs(), b), {})),
    ("exp", lambda a, b: ((a,), {})),
    ("sqrt", lambda a, b: ((a.abs(),), {})),
    ("clamp", lambda a, b: ((a, -0.5, 0.5), {})),
    ("where", lambda a, b: ((a > 0, a, b), {})),
    ("sum", lambda a, b: ((a, 1), {"keepdim": True})),
    ("mean", lambda a, b: ((a, 0), {})),
    ("cumsum", lambda a, b: ((a, 1), {})),
    ("matmul", lambda a, b: ((a, b.t()), {})),
    ("mm", lambda a, b: ((a, b.t()), {})),
    ("addmm", lambda a, b: ((st.ones(3), a, b.t()), {"beta": 0.5})),
    ("cat", lambda a, b: (([a, b], 0), {})),
    ("stack", lambda a, b: (([a, b],), {"dim": 1})),
    ("tril", lambda a, b: ((a,), {})),
    ("index_select", lambda a, b: ((a, 1, st.tensor([2, 0])), {})),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_out_receives_the_result_and_is_returned(name, make):
    a, b = _t((3, 4)), _t((3, 4))
    args, kw = make(a, b)
    fn = getattr(st, name)
    want = fn(*args, **kw)
    out = st.empty(*want.shape)
    got = fn(*args, **kw, out=out)
    assert got is out
    np.testing.assert_array_equal(to_numpy(out), to_numpy(want))


def test_creation_functions_fill_out():
    o = st.empty(2, 3)
    assert st.zeros(2, 3, out=o) is o and to_numpy(o).sum() == 0
    assert st.full((2, 3), 7.0, out=o) is o and (to_numpy(o) == 7).all()
    v = st.empty(0, dtype=st.int64)
    assert st.arange(5, out=v) is v and v.tolist() == [0, 1, 2, 3, 4]
    st.manual_seed(3)
    want = st.randn(2, 3)
    st.manual_seed(3)
    np.testing.assert_array_equal(to_numpy(st.randn(2, 3, out=o)), to_numpy(want))


def test_out_may_be_an_input():
    a, b = _t((5,)), _t((5,))
    want = to_numpy(a) + to_numpy(b)
    st.add(a, b, out=a)
    np.testing.assert_allclose(to_numpy(a), want, rtol=1e-6)
    m = _t((4, 4))
    want = to_numpy(m) @ to_numpy(m)
    st.matmul(m, m, out=m)  # the product is computed before it is written
    np.testing.assert_allclose(to_numpy(m), want, rtol=1e-5, atol=1e-5)


def test_out_casts_to_its_dtype_when_the_result_can_be_cast():
    i = st.tensor([1, 2, 3])
    f = st.empty(3)
    assert st.add(i, i, out=f) is f and f.dtype is st.float32 and f.tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match=r"add\(\): result type float32 can't be cast to the "
                                           r"desired output type int64"):
        st.add(f, f, out=st.empty(3, dtype=st.int64))
    b = st.empty(3, dtype=st.bool)
    assert st.gt(f, 3.0, out=b).tolist() == [False, True, True]


def test_out_of_another_shape_is_resized():
    a = _t((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = st.empty(0)
        st.exp(a, out=empty)  # no elements: resized without a word
    assert empty.shape == (2, 3)
    held = st.empty(7)
    with pytest.warns(UserWarning, match=r"exp\(\): an output with one or more elements was "
                                         r"resized since it had shape \[7\]"):
        st.exp(a, out=held)
    assert held.shape == (2, 3)
    np.testing.assert_array_equal(to_numpy(held), to_numpy(st.exp(a)))


def test_functions_with_several_results_take_a_tuple():
    x = _t((3, 5))
    v, i = st.empty(3), st.empty(3, dtype=st.int64)
    got = st.max(x, 1, out=(v, i))
    assert got.values is v and got.indices is i
    np.testing.assert_array_equal(to_numpy(v), to_numpy(x).max(1))
    np.testing.assert_array_equal(to_numpy(i), to_numpy(x).argmax(1))
    s, k = st.empty(0), st.empty(0, dtype=st.int64)
    st.sort(x, dim=1, out=(s, k))
    np.testing.assert_array_equal(to_numpy(s), np.sort(to_numpy(x), axis=1))
    with pytest.raises(TypeError, match=r"max\(\): out must be a tuple of 2 tensors, got tuple "
                                        r"of 1"):
        st.max(x, 1, out=(v,))
    with pytest.raises(TypeError, match=r"sort\(\): out must be a tuple of 2 tensors"):
        st.sort(x, out=s)


def test_out_errors_name_the_function():
    a = _t((2,))
    with pytest.raises(TypeError, match=r"add\(\): argument 'out' must be Tensor, not list"):
        st.add(a, a, out=[1.0, 2.0])
    g = st.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=\.\.\. arguments "
                                           r"don't support automatic differentiation"):
        st.mul(g, a, out=st.empty(2))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        st.mul(a, a, out=st.empty(2, requires_grad=True))
    with st.no_grad():  # without gradients recorded, inputs that require grad are fine
        o = st.empty(2)
        st.mul(g, a, out=o)
    np.testing.assert_allclose(to_numpy(o), to_numpy(a), rtol=0)


def test_out_on_another_device_is_refused(cuda):
    a = st.ones(2, device="cpu")
    with pytest.raises(RuntimeError, match=r"add\(\): expected the out tensor on cpu, got one "
                                           r"on cuda:0"):
        st.add(a, a, out=st.empty(2, device=cuda))


def test_without_out_the_functions_are_unchanged():
    # every wrapped function still answers without out=, and its docs stay its own
    for name in sorted(NAMES):
        fn = getattr(st, name, None)
        if fn is None:
            continue
        assert fn.__wrapped__ is fn._without_out
        assert fn.__doc__ == fn._without_out.__doc__
    assert st.add(st.ones(2), 1).tolist() == [2.0, 2.0]


def test_add_and_sub_scale_the_other_operand_by_alpha():
    a, b = _t((3,)), _t((3,))
    an, bn = to_numpy(a), to_numpy(b)
    np.testing.assert_allclose(to_numpy(st.add(a, b, alpha=0.5)), an + 0.5 * bn, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(a.sub(b, alpha=2)), an - 2 * bn, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(a.subtract(b, alpha=-1)), an + bn, rtol=1e-6)
    assert st.add(st.tensor([1, 2]), st.tensor([3, 4]), alpha=2).tolist() == [7, 10]
    assert st.sub(st.tensor([1.0]), 1, alpha=3).tolist() == [-2.0]
    # the gradient of b carries alpha
    w = st.ones(3, requires_grad=True)
    st.add(a, w, alpha=-3.0).sum().backward()
    assert w.grad.tolist() == [-3.0, -3.0, -3.0]
    # and out= with it
    o = st.empty(3)
    st.add(a, b, alpha=2, out=o)
    np.testing.assert_allclose(to_numpy(o), an + 2 * bn, rtol=1e-6)


def test_alpha_errors_name_the_op():
    i = st.tensor([1, 2])
    with pytest.raises(RuntimeError, match=r"add\(\): for integral input tensors, argument "
                                           r"alpha must not be a floating point number"):
        st.add(i, i, alpha=0.5)
    with pytest.raises(TypeError, match=r"sub\(\): alpha must be a number, got str"):
        st.sub(i, i, alpha="2")
