"""DLPack exchange on the CPU: numpy arrays in and out without copies, in both directions."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st


def _cpu(*args, **kwargs):
    return st.tensor(*args, device="cpu", **kwargs)


def test_tensor_to_numpy_shares_memory():
    t = _cpu([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a = np.from_dlpack(t)
    assert a.shape == (2, 3) and a.dtype == np.float32
    a[1, 1] = -5.0
    assert t[1, 1].item() == -5.0
    t.add_(1.0)
    assert a[0, 0] == 2.0
    assert t.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", [st.float16, st.float32, st.float64, st.int32, st.int64,
                                   st.bool])
def test_round_trip_every_dtype(dtype):
    t = _cpu([1, 0, 1, 1]).to(dtype)
    a = np.from_dlpack(t)
    assert a.dtype == dtype.np
    back = st.from_dlpack(a)
    assert back.dtype is dtype and back.tolist() == t.tolist()


def test_strided_views_stay_views_both_ways():
    t = _cpu(np.arange(12.0).reshape(3, 4)).T[1:, ::2]
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, t.numpy())
    base = np.arange(20.0).reshape(4, 5)
    view = base[::2, 1::2]
    s = st.from_dlpack(view)
    assert s.shape == (2, 2) and s.stride() == (10, 2)
    base[2, 3] = 100.0
    assert s.tolist() == [[1.0, 3.0], [11.0, 100.0]]


def test_from_dlpack_keeps_the_producer_alive():
    a = np.arange(6, dtype=np.int64)
    t = st.from_dlpack(a)
    del a
    import gc

    gc.collect()
    assert t.sum().item() == 15


def test_non_zero_copy_inputs_are_copied():
    neg = np.arange(5.0)[::-1]  # negative strides: copied
    t = st.from_dlpack(neg)
    assert t.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]
    ro = np.arange(3.0)
    ro.flags.writeable = False
    r = st.from_dlpack(ro)
    assert r.tolist() == [0.0, 1.0, 2.0]
    assert st.from_dlpack(np.zeros((0, 3))).shape == (0, 3)


def test_export_errors():
    with pytest.raises(RuntimeError, match="requires grad; use tensor.detach"):
        np.from_dlpack(_cpu([1.0], requires_grad=True))
    with pytest.raises(TypeError, match="bfloat16 cannot be exported"):
        _cpu([1.0]).to(st.bfloat16).__dlpack__()
    with pytest.raises(TypeError, match="from_dlpack: expected an object with __dlpack__"):
        st.from_dlpack([1, 2, 3])


def test_a_tensor_round_trips_through_from_dlpack():
    t = _cpu([1.0, 2.0])
    u = st.from_dlpack(t)
    u.mul_(3.0)
    assert t.tolist() == [3.0, 6.0]
