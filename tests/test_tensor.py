"""The Tensor object: metadata, numpy interop, Python conversions, dtype round trips, storage
sharing (detach/clone/contiguous) and device errors."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

from .helpers import DEVICE, to_numpy

# CPU behaviour is tested on the CPU on every run; the device under test is added when it differs
DEVICES = ["cpu"] + ([DEVICE] if DEVICE != "cpu" else [])


def bf16_reference(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 -> float32 with round-to-nearest-even, done on the bits."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    out = (rounded << 16).view(np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), out)


# ---- metadata ------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_shape_dtype_device_and_sizes(device):
    t = st.zeros(2, 3, 4, device=device)
    assert t.shape == (2, 3, 4)
    assert t.dtype is st.float32
    want = "cpu" if device == "cpu" else "cuda:0" if device == "cuda" else device
    assert t.device == st.device(want) and str(t.device) == want
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.stride() == (12, 4, 1) and t.stride(0) == 12
    assert t.is_contiguous()
    assert t.element_size() == 4
    scalar = st.tensor(5.0, device=device)
    assert scalar.shape == () and scalar.numel() == 1 and scalar.device == t.device


def test_size_dim_out_of_range():
    with pytest.raises(IndexError, match=r"size: dimension out of range.*\[-2, 1\].*got 2"):
        st.zeros(2, 3).size(2)
    with pytest.raises(TypeError, match="dim must be an int"):
        st.zeros(2, 3).size(1.0)


def test_transpose_is_strided_view_and_contiguous_copies():
    base = np.arange(6, dtype=np.int64).reshape(2, 3)
    a = st.tensor(base)
    at = a.T
    assert at.shape == (3, 2) and at.stride() == (1, 3)
    assert not at.is_contiguous()
    np.testing.assert_array_equal(to_numpy(at), base.T)
    c = at.contiguous()
    assert c.is_contiguous() and c.stride() == (2, 1)
    np.testing.assert_array_equal(to_numpy(c), base.T)
    c.fill_(0)  # a copy: the original is untouched
    np.testing.assert_array_equal(to_numpy(a), base)
    assert a.contiguous() is a


# ---- numpy and Python conversion -----------------------------------------------------------------


def test_numpy_is_zero_copy_both_ways():
    t = st.tensor([1.0, 2.0, 3.0], device="cpu")
    a = t.numpy()
    a[0] = 10.0
    assert t.tolist() == [10.0, 2.0, 3.0]
    t.mul_(2)
    np.testing.assert_array_equal(a, [20.0, 4.0, 6.0])


def test_numpy_of_transposed_view_shares_memory():
    t = st.tensor(np.arange(6.0).reshape(2, 3), device="cpu")
    v = t.T.numpy()
    v[2, 1] = -1.0
    assert t.tolist()[1][2] == -1.0


def test_numpy_on_requires_grad_raises():
    t = st.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"requires grad.*detach\(\)\.numpy\(\)"):
        t.numpy()
    np.testing.assert_array_equal(t.detach().cpu().numpy(), [1.0, 1.0])


def test_numpy_of_bfloat16_raises():
    with pytest.raises(TypeError, match="bfloat16"):
        st.ones(2, dtype=st.bfloat16).numpy()


def test_array_protocol():
    t = st.tensor([[1.5, 2.5]], requires_grad=True)
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (1, 2)
    np.testing.assert_array_equal(a, [[1.5, 2.5]])
    np.testing.assert_array_equal(np.asarray(st.tensor([1, 2]), dtype=np.float64), [1.0, 2.0])
    assert np.asarray(st.ones(2, dtype=st.bfloat16)).dtype == np.float32


def test_data_ptr_is_the_address_numpy_sees():
    t = st.tensor(np.arange(12.0).reshape(3, 4), device="cpu")
    assert t.data_ptr() == t.numpy().ctypes.data
    v = t[1:, 2:]
    assert v.data_ptr() == t.data_ptr() + (1 * 4 + 2) * 8 == v.numpy().ctypes.data
    assert st.ones(3, dtype=st.bfloat16, device="cpu")[1:].data_ptr() % 2 == 0


def test_array_protocol_copies_exactly_when_asked():
    t = st.zeros(3, device="cpu")
    np.array(t)[0] = 5.0  # np.array copies
    assert t.tolist() == [0.0, 0.0, 0.0]
    np.asarray(t)[1] = 5.0  # np.asarray shares a CPU tensor's memory
    assert t.tolist() == [0.0, 5.0, 0.0]
    np.asarray(t, copy=False)[2] = 7.0
    assert t.tolist() == [0.0, 5.0, 7.0]
    with pytest.raises(ValueError, match=r"__array__: a bfloat16 tensor on cpu .*copy=False"):
        np.asarray(st.ones(2, dtype=st.bfloat16, device="cpu"), copy=False)
    with pytest.raises(ValueError, match=r"__array__: a float32 .* of float64 without a copy"):
        np.asarray(t, dtype=np.float64, copy=False)
    assert np.array(t, dtype=np.float64).tolist() == [0.0, 5.0, 7.0]


def test_item_and_python_scalars():
    assert st.tensor([2.5]).item() == 2.5
    assert isinstance(st.tensor([[7]]).item(), int)
    assert st.tensor(True).item() is True
    with pytest.raises(ValueError, match=r"only one-element tensors.*\(2,\)"):
        st.tensor([1.0, 2.0]).item()
    assert int(st.tensor([3.7])) == 3
    assert int(st.tensor([-3.7])) == -3
    assert float(st.tensor(2)) == 2.0
    assert bool(st.tensor([0.5])) is True and bool(st.tensor(0)) is False
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(st.tensor([1.0, 2.0]))


def test_tolist_nested_and_typed():
    assert st.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    out = st.tensor([[0.5], [1.5]], dtype=st.float64).tolist()
    assert out == [[0.5], [1.5]] and isinstance(out[0][0], float)
    assert st.tensor([True, False]).tolist() == [True, False]
    assert st.tensor(3.0).tolist() == 3.0


def test_len_and_zero_dim_errors():
    assert len(st.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="0-d"):
        len(st.tensor(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(st.tensor(1.0))


def test_iteration_yields_rows():
    rows = list(st.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert len(rows) == 2
    assert [r.tolist() for r in rows] == [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_repr_shows_values_and_autograd_state(device):
    x = st.tensor([1.5, -2.0], requires_grad=True, device=device)
    r = repr(x)
    assert r.startswith("tensor(") and "1.5" in r and "-2." in r and "requires_grad=True" in r
    y = x * 2
    ry = repr(y)
    assert "3." in ry and "-4." in ry and "grad_fn=" in ry and "requires_grad" not in ry
    # the device is shown only when it is not the CPU, as in PyTorch
    tag = "" if device == "cpu" else f", device='{x.device}'"
    assert repr(st.tensor([1, 2], device=device)) == f"tensor([1, 2]{tag})"
    assert "dtype=singa_tensor.float64" in repr(st.tensor([1.0], dtype=st.float64, device=device))
    assert "dtype=singa_tensor.bfloat16" in repr(st.ones(1, dtype=st.bfloat16, device=device))


# ---- dtype conversions ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [st.float32, st.float64, st.float16, st.bfloat16, st.int32,
                                   st.int64, st.bool])
def test_to_dtype_round_trip(dtype):
    vals = np.array([0.0, 1.0, 2.0, -3.0, 100.0])
    t = st.tensor(vals, dtype=st.float64)
    d = t.to(dtype)
    assert d.dtype is dtype and d.shape == (5,)
    back = to_numpy(d.to(st.float64))
    want = (vals != 0).astype(np.float64) if dtype is st.bool else vals
    np.testing.assert_array_equal(back, want)
    assert t.to(st.float64) is t  # no change, no copy


def test_float_to_int_truncates_toward_zero():
    t = st.tensor([1.7, -1.7, 2.5, -0.2])
    assert t.to(st.int64).tolist() == [1, -1, 2, 0]
    assert t.to(st.int32).dtype is st.int32


def test_float16_rounding_matches_numpy():
    vals = np.array([1 / 3, 0.1, 65504.0, 1e-5, -2.7182818], dtype=np.float32)
    h = st.tensor(vals).half()
    assert h.dtype is st.float16
    np.testing.assert_array_equal(to_numpy(h), vals.astype(np.float16))
    np.testing.assert_array_equal(to_numpy(h.float()), vals.astype(np.float16).astype(np.float32))


def test_float16_conversions_are_exact_over_every_bit_pattern():
    # the vectorised (F16C) and scalar paths both run: 65536 values, not a multiple of 8 after
    # the slice, so the scalar tail is exercised too
    h = np.arange(65536, dtype=np.uint16).view(np.float16)[3:]
    f = to_numpy(st.tensor(h).float())
    ref = h.astype(np.float32)
    assert np.array_equal(f, ref, equal_nan=True)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_003) * 10.0 ** rng.uniform(-9, 6, 100_003)).astype(np.float32)
    x = np.concatenate([x, np.array([65504, 65519.99, 65520, 6e-8, 3e-8, -0.0, np.inf, -np.inf],
                                    np.float32)])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = to_numpy(st.tensor(x).half())
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert np.isnan(to_numpy(st.tensor(np.array([np.nan] * 9, np.float32)).half())).all()


def test_bfloat16_rounding_matches_bit_level_reference():
    vals = np.array([1 / 3, 2 / 3, 0.1, 3.14159265, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
                     -2.5e-3, 1e30, 3.4028235e38, np.inf, -np.inf, 0.0, -0.0, 1e-40],
                    dtype=np.float32)
    got = to_numpy(st.tensor(vals).to(st.bfloat16).float())
    want = bf16_reference(vals)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert got[0] == np.float32(0.333984375)  # 1/3 in bf16
    assert got[4] == 1.0 and got[5] == np.float32(1 + 2.0 ** -6)  # ties go to even
    assert np.isinf(got[8])  # float32 max rounds up past bf16's largest finite value


def test_bfloat16_nan_and_round_trip():
    got = to_numpy(st.tensor([np.nan, 1.5]).to(st.bfloat16).float())
    assert np.isnan(got[0]) and got[1] == 1.5
    exact = bf16_reference(np.linspace(-4, 4, 33, dtype=np.float32))
    b = st.tensor(exact).bfloat16()
    np.testing.assert_array_equal(to_numpy(b.float()), exact)
    np.testing.assert_array_equal(to_numpy(b.to(st.float64)), exact.astype(np.float64))


def test_to_dtype_is_differentiable():
    x = st.tensor([0.5, 1.5], requires_grad=True)
    y = x.to(st.float64)
    assert y.requires_grad
    (y * y).sum().backward()
    assert x.grad.dtype is st.float32
    np.testing.assert_allclose(to_numpy(x.grad), [1.0, 3.0])


def test_to_unknown_argument_raises():
    with pytest.raises(TypeError, match="unexpected argument"):
        st.ones(1).to(3)


# ---- detach / clone / requires_grad --------------------------------------------------------------


def test_detach_shares_storage_and_drops_history():
    x = st.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    d.add_(1.0)  # writes through to y's storage
    np.testing.assert_array_equal(to_numpy(y), [4.0, 7.0])
    dx = x.detach()
    dx.zero_()
    np.testing.assert_array_equal(to_numpy(x), [0.0, 0.0])


def test_clone_copies_and_keeps_graph():
    x = st.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.requires_grad and c.grad_fn is not None
    with st.no_grad():
        c.add_(5.0)
    np.testing.assert_array_equal(to_numpy(x), [1.0, 2.0])
    (x.clone() * 2).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [2.0, 2.0])


def test_requires_grad_flags():
    t = st.zeros(2)
    assert t.requires_grad_() is t and t.requires_grad and t.is_leaf
    t.requires_grad_(False)
    assert not t.requires_grad
    with pytest.raises(RuntimeError, match="only floating point tensors can require gradients"):
        st.tensor([1, 2]).requires_grad_()
    y = st.ones(1, requires_grad=True) * 2
    assert not y.is_leaf
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_tensor_constructor_is_not_public():
    with pytest.raises(TypeError, match="st.tensor"):
        st.Tensor([1.0])


# ---- devices -------------------------------------------------------------------------------------


def test_unknown_device_type_raises():
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        st.zeros(2, device="tpu")


@pytest.mark.skipif(hasattr(st, "cuda") and st.cuda.is_available(), reason="CUDA is present")
def test_cuda_without_backend_raises_clearly():
    with pytest.raises(RuntimeError, match="cuda"):
        st.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="cuda"):
        st.zeros(2).to("cuda:0")


def _pretend_on_cuda(t):
    # only the device tag changes: the check must fire before any kernel could touch memory
    fake = t.detach()
    fake._device = st.device("cuda:0")
    return fake


def test_mixed_device_operands_raise():
    a = st.ones(2, device="cpu")
    b = _pretend_on_cuda(st.ones(2, device="cpu"))
    with pytest.raises(RuntimeError, match="same device.*cpu.*cuda:0"):
        a + b


def test_backward_gradient_on_other_device_raises():
    x = st.ones(2, requires_grad=True, device="cpu")
    g = _pretend_on_cuda(st.ones(2, device="cpu"))
    with pytest.raises(RuntimeError, match="gradient is on cuda:0 but the output on cpu"):
        (x * 2).backward(g)


@pytest.mark.skipif(DEVICE == "cpu", reason="needs a device under test other than the CPU")
def test_mixed_real_devices_raise():
    a, b = st.ones(2, device="cpu"), st.ones(2, device=DEVICE)
    dev = str(b.device)
    with pytest.raises(RuntimeError, match=f"same device.*{dev} and cpu"):
        b + a
    with pytest.raises(RuntimeError, match=f"same device.*cpu and {dev}"):
        a * b
    x = st.ones(2, requires_grad=True, device=DEVICE)
    with pytest.raises(RuntimeError, match=f"gradient is on cpu but the output on {dev}"):
        (x * 2).backward(a)
    assert x.grad is None  # refused before anything ran


def test_cuda_queries_without_a_gpu_backend():
    if st.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert st.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="no CUDA device"):
        st.cuda.synchronize()
    with pytest.raises(RuntimeError, match="cuda backend is not available"):
        st.ones(2).to("cuda")
