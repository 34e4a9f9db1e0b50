"""x.mul_(s), x.add_(s) and x.sub_(s) with a Python number write through the affine kernel
in place: the results must be exactly those of the out-of-place ops (the same rounding of s
to x's dtype, negative zeros kept), and autograd must still see the write."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

VALUES = [1.0, -2.5, 0.0, -0.0, 3e38, -1e-40, float("inf"), float("nan"), 0.1]


@pytest.mark.parametrize("dtype", [st.float32, st.float64])
@pytest.mark.parametrize("op", ["mul_", "add_", "sub_"])
@pytest.mark.parametrize("scalar", [-0.5, 0.3, 3, 0.0, -1e-30])
def test_scalar_inplace_is_bitwise_the_out_of_place_op(dtype, op, scalar):
    x = st.tensor(VALUES, dtype=dtype)
    want = {"mul_": x * scalar, "add_": x + scalar, "sub_": x - scalar}[op].numpy()
    before = x._storage.version
    assert getattr(x, op)(scalar) is x
    got = x.numpy()
    assert x._storage.version == before + 1
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_scalar_inplace_on_a_saved_tensor_is_caught_in_backward():
    w = st.ones(3, requires_grad=True)
    y = w * 2
    z = y.exp()  # saves its output
    with st.no_grad():
        z.mul_(3.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_scalar_inplace_with_grad_is_recorded():
    w = st.ones(3, requires_grad=True)
    y = w * 2
    y.mul_(3.0).add_(1)
    y.sum().backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]


@pytest.mark.parametrize("dtype", [st.float16, st.bfloat16])
@pytest.mark.parametrize("op", ["add_", "mul_", "sub_"])
def test_half_precision_inplace_keeps_the_dtype_and_the_out_of_place_result(dtype, op):
    x = st.tensor([1.5, -2.0, 0.25], dtype=dtype)
    other = st.tensor([0.5, 3.0, 1.0], dtype=dtype)
    want = {"add_": x + other, "mul_": x * other, "sub_": x - other}[op].to(dtype)
    assert getattr(x, op)(other) is x and x.dtype is dtype
    assert x.to(st.float32).tolist() == want.to(st.float32).tolist()
    y = st.tensor([1.5, -2.0], dtype=dtype)
    getattr(y, op)(2)
    assert y.dtype is dtype


def test_half_precision_gradients_accumulate():
    import singa_tensor.nn.functional as F

    x = st.tensor([0.5, -1.0, 2.0]).to(st.float16).requires_grad_()
    F.gelu(x).sum().backward()
    F.gelu(x).sum().backward()  # the second backward adds into .grad
    assert x.grad.dtype is st.float16
    single = st.tensor([0.5, -1.0, 2.0]).to(st.float16).requires_grad_()
    F.gelu(single).sum().backward()
    assert x.grad.to(st.float32).tolist() == (single.grad.to(st.float32) * 2).tolist()


@pytest.mark.parametrize("dtype", [st.float32, st.float64, st.float16])
def test_unary_in_place_writes_into_the_tensors_own_memory(dtype):
    x = st.tensor([[-1.0, 2.0], [3.0, -4.0]], dtype=dtype)
    storage, version = x._storage, x._storage.version
    row = x[1]  # a view made before sees the result: the kernel wrote into x's memory
    assert x.relu_() is x and x._storage is storage and x._storage.version == version + 1
    assert x.to(st.float32).tolist() == [[0.0, 2.0], [3.0, 0.0]]
    assert row.to(st.float32).tolist() == [3.0, 0.0]
    t = st.tensor([[-1.0, 2.0], [3.0, -4.0]], dtype=dtype).t()  # not contiguous
    t.relu_()
    assert t.to(st.float32).tolist() == [[0.0, 3.0], [2.0, 0.0]]


def test_unary_in_place_replays_in_graph_mode_and_keeps_gradients():
    def f(a):
        b = a * 2.0
        b.tanh_()
        return b + 1.0

    step = st.compile(f, warmup=0)
    for v in ([0.1, -0.2], [0.3, 0.4], [-1.0, 2.0]):
        a = st.tensor(v)
        np.testing.assert_allclose(step(a).numpy(), np.tanh(np.array(v) * 2.0) + 1.0,
                                   rtol=1e-6)
    x = st.tensor([0.5, -0.5], requires_grad=True)
    y = x * 1.0
    y.sigmoid_()  # recorded: the general path, whose backward reads the result
    y.sum().backward()
    s = 1.0 / (1.0 + np.exp(-np.array([0.5, -0.5])))
    np.testing.assert_allclose(x.grad.numpy(), s * (1.0 - s), rtol=1e-6)
