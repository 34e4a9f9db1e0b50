"""Strided elementwise kernels (binary ops, where, copies) over fewer rows than threads: a
contiguous tensor merges into one row, which the threads then share in pieces. Every thread
count from 1 to 4 must give numpy's result exactly (these ops are correctly rounded), with
piece edges that fall off the vector lanes, strided and broadcast operands, and 16-bit data."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import to_numpy

RNG = np.random.default_rng(11)
THREADS = [1, 2, 3, 4]


@pytest.fixture(params=THREADS, ids=lambda n: f"{n}threads")
def threads(request):
    before = st.get_num_threads()
    st.set_num_threads(request.param)
    yield request.param
    st.set_num_threads(before)


def _f32(shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(70001,), (2, 50001), (3, 40003)])
@pytest.mark.parametrize("op", ["add", "mul", "sub", "maximum"])
def test_binary_of_few_long_rows(threads, shape, op):
    a, b = _f32(shape), _f32(shape)
    got = to_numpy(getattr(st, op)(st.tensor(a), st.tensor(b)))
    np.testing.assert_array_equal(got, getattr(np, {"add": "add", "mul": "multiply",
                                                    "sub": "subtract",
                                                    "maximum": "maximum"}[op])(a, b))


def test_binary_of_strided_and_broadcast_rows(threads):
    a = _f32((3, 40003))
    b = _f32((40003, 3))
    # b's transpose: rows of stride 3 against a's contiguous rows
    np.testing.assert_array_equal(to_numpy(st.tensor(a) + st.tensor(b).t()), a + b.T)
    row = _f32((1, 70001))
    col = _f32((70001,))
    np.testing.assert_array_equal(to_numpy(st.tensor(row) * st.tensor(col)), row * col)
    one = _f32((1,))
    np.testing.assert_array_equal(to_numpy(st.tensor(col) - st.tensor(one)), col - one)
    np.testing.assert_array_equal(to_numpy(st.tensor(one) - st.tensor(col)), one - col)


def test_comparison_and_where_of_one_long_row(threads):
    a, b = _f32((90001,)), _f32((90001,))
    ta, tb = st.tensor(a), st.tensor(b)
    np.testing.assert_array_equal(to_numpy(ta < tb), a < b)
    np.testing.assert_array_equal(to_numpy(st.where(ta < tb, ta, tb)), np.where(a < b, a, b))


def test_copy_of_one_long_strided_row(threads):
    x = _f32((3 * 70001,))
    view = st.tensor(x)[1::3]
    assert not view.is_contiguous()
    np.testing.assert_array_equal(to_numpy(view.contiguous()), x[1::3])
    np.testing.assert_array_equal(to_numpy(st.tensor(x).clone()), x)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_binary_of_one_long_row(threads, dtype):
    a, b = _f32((70001,)), _f32((70001,))
    ta = st.tensor(a).to(getattr(st, dtype))
    tb = st.tensor(b).to(getattr(st, dtype))
    # the float32 sum of the rounded inputs, rounded once: what one thread computes
    want = (ta.float() + tb.float()).to(getattr(st, dtype))
    got = ta + tb
    assert got.dtype == getattr(st, dtype)
    np.testing.assert_array_equal(to_numpy(got.float()), to_numpy(want.float()))
