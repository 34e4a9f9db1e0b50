"""CUDA device queries. The CUDA backend (backend/cuda.py) needs the CUDA library of this
build and CuPy; without them, or without a usable GPU, these report that no device is
available and asking for a "cuda" tensor raises a RuntimeError.

Example:
    >>> import singa_tensor as st
    >>> isinstance(st.cuda.is_available(), bool)
    True
"""

from __future__ import annotations

from . import backend as _backend


def _module_or_none():
    try:
        return _backend.load("cuda")
    except RuntimeError:
        return None


def is_available() -> bool:
    """Whether a CUDA device can be used by this build."""
    return device_count() > 0


def device_count() -> int:
    """The number of usable CUDA devices (0 without the CUDA backend or a GPU)."""
    mod = _module_or_none()
    return mod.device_count() if mod is not None else 0


def _require(op: str):
    mod = _module_or_none()
    if mod is None or mod.device_count() == 0:
        raise RuntimeError(f"cuda.{op}: no CUDA device is available in this build")
    return mod


def synchronize(device=None) -> None:
    """Wait for all kernels queued on a CUDA device (default: the current one) to finish."""
    _require("synchronize").synchronize(device)


def memory_allocated(device=None) -> int:
    """Bytes of device memory held by live tensors on a CUDA device."""
    mod = _require("memory_allocated")
    return mod.for_device(mod.device_index(device)).allocated_bytes()


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds on a CUDA device: live tensors plus freed blocks kept
    for reuse."""
    mod = _require("memory_reserved")
    be = mod.for_device(mod.device_index(device))
    return be.allocated_bytes() + be.cached_bytes()


def empty_cache(device=None) -> None:
    """Return the memory pool's unused blocks on a CUDA device to the driver."""
    mod = _require("empty_cache")
    mod.for_device(mod.device_index(device)).empty_cache()


def __getattr__(name: str):
    # the legacy typed constructors (st.cuda.FloatTensor ...) live in legacy.py, above ops
    from .legacy import CUDA_TYPES

    if name in CUDA_TYPES:
        return CUDA_TYPES[name]
    raise AttributeError(f"module 'singa_tensor.cuda' has no attribute {name!r}")
