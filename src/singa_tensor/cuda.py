"""CUDA device queries. The CUDA backend (backend/cuda.py) is built when a CUDA compiler is
found; until it is present and a GPU is usable, these report that no device is available.

Example:
    >>> import singa_tensor as st
    >>> isinstance(st.cuda.is_available(), bool)
    True
"""

from __future__ import annotations

from . import backend as _backend


def _backend_or_none():
    try:
        return _backend.get(_backend.Device("cuda:0"))
    except RuntimeError:
        return None


def is_available() -> bool:
    """Whether a CUDA device can be used by this build."""
    be = _backend_or_none()
    return bool(be is not None and be.device_count() > 0)


def device_count() -> int:
    """The number of usable CUDA devices (0 without the CUDA backend)."""
    be = _backend_or_none()
    return be.device_count() if be is not None else 0


def synchronize(device=None) -> None:
    """Wait for all kernels queued on a CUDA device to finish."""
    be = _backend_or_none()
    if be is None or be.device_count() == 0:
        raise RuntimeError("cuda.synchronize: no CUDA device is available in this build")
    be.synchronize(device)
