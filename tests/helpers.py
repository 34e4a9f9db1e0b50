"""Shared test helpers. The device under test comes from SINGA_TENSOR_DEVICE (default "cpu"),
so the same suite reruns on CUDA when a GPU is present."""

from __future__ import annotations

import os

import numpy as np
import pytest

import singa_tensor as st

DEVICE = os.environ.get("SINGA_TENSOR_DEVICE", "cpu")
# CI replays the same generated examples on every run (it sets CI); elsewhere hypothesis
# explores new ones each time
DERANDOMIZE = bool(os.environ.get("CI"))

if DEVICE.startswith("cuda"):
    try:
        st.tensor([0.0], device=DEVICE)
    except Exception as e:  # noqa: BLE001 - any failure means no usable GPU
        pytest.skip(f"SINGA_TENSOR_DEVICE={DEVICE} but no usable CUDA device: {e}",
                    allow_module_level=True)


def as_tensor(a, requires_grad: bool = False):
    """A tensor on the device under test holding numpy array a (dtype kept)."""
    a = np.asarray(a)
    return st.tensor(a, dtype=st.dtype.from_numpy_dtype(a.dtype) if a.dtype != np.bool_
                     else st.bool, device=DEVICE, requires_grad=requires_grad)


def to_numpy(t) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    if not isinstance(t, st.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.dtype is st.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, msg=""):
    g = to_numpy(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"{msg}: shape {g.shape} != expected {w.shape}"
    if w.dtype == np.bool_ or g.dtype == np.bool_:
        assert np.array_equal(g.astype(bool), w.astype(bool)), f"{msg}: {g} != {w}"
        return
    if w.dtype.kind in "iu" and g.dtype.kind in "iu":
        assert np.array_equal(g, w), f"{msg}: {g} != {w}"
        return
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=equal_nan, err_msg=msg)
