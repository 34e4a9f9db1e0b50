"""Device backends, found by device type: `backend.get(device)` returns the object that owns
that device's memory and kernels (the `cpu` module; for "cuda:N" the per-device backend of
`cuda.py`, present when the CUDA library is built and CuPy is installed).

Everything that depends on where memory lives (host copies, transfers, DLPack) is decided
here or in the backends, never above this package.
"""

from __future__ import annotations

import importlib
import importlib.util

from .._optional import install_hint
from .device import CPU, Device, as_device

_loaded: dict[str, object] = {}
_by_key: dict[tuple, object] = {}

# DLPack device type codes (dlpack.h)
_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13


def build_info():
    """What the build of the installed libraries chose (`_build_info.py`, written by CMake:
    `cpu_baseline`, `cuda_mode`, `cuda_built`, `cuda_reason`); None for a source tree that was
    never built."""
    try:
        from . import _build_info
    except ImportError:
        return None
    return _build_info


def _unavailable(kind: str, err: ImportError) -> str:
    """Why the backend of `kind` cannot be imported, and what would fix it."""
    if kind == "cuda":
        if importlib.util.find_spec(f"{__name__}._cuda_ffi") is None:
            info = build_info()
            why = f" ({info.cuda_reason})" if info is not None and info.cuda_reason else ""
            return (f"the CUDA library is not part of this build{why}; build it with "
                    f'SINGA_TENSOR_CUDA=ON pip install -e ".[gpu]" from a clone (without the '
                    f"variable it is built where a GPU and nvcc are found)")
        if isinstance(err, ModuleNotFoundError) and (err.name or "").partition(".")[0] == "cupy":
            return f"CuPy is not installed: {install_hint('cupy')}"
    return str(err)


def load(kind: str, device=None):
    """The backend module for a device type; RuntimeError when this build lacks it."""
    mod = _loaded.get(kind)
    if mod is None:
        try:
            mod = importlib.import_module(f".{kind}", __name__)
        except ImportError as e:
            raise RuntimeError(
                f"device {device or kind}: the {kind} backend is not available: "
                f"{_unavailable(kind, e)}"
            ) from None
        _loaded[kind] = mod
    return mod


def get(device: Device):
    """The backend of one device: the module itself for the CPU, a per-device object for
    backends with several devices (they provide `for_device(index)`)."""
    key = (device.type, device.index)
    be = _by_key.get(key)
    if be is None:
        mod = load(device.type, device)
        per_device = getattr(mod, "for_device", None)
        be = per_device(device.index) if per_device is not None else mod
        _by_key[key] = be
    return be


def transfer(x, device: Device):
    """x copied to device. Host memory is visible to every backend, so the backend that is
    not plain host memory (it has `transfer`) does the copy, in either direction."""
    dst = get(device)
    mover = dst if hasattr(dst, "transfer") else x._be
    if not hasattr(mover, "transfer"):  # pragma: no cover - two host backends
        raise RuntimeError(f"to: no backend can copy from {x.device} to {device}")
    return mover.transfer(x, as_device(device))


# ---- interchange -------------------------------------------------------------------------------


def dlpack(t, **kwargs):
    """A DLPack capsule for t's memory (no copy); the capsule keeps the memory alive."""
    own = getattr(t._be, "dlpack", None)
    if own is not None:
        return own(t, **kwargs)
    a = t.detach().numpy()  # a view of host memory; it holds the storage
    return _call_dlpack(a, kwargs)


def _call_dlpack(producer, kwargs):
    kw = {k: v for k, v in kwargs.items() if v is not None}
    try:
        return producer.__dlpack__(**kw)
    except TypeError:
        if set(kw) <= {"stream"}:
            raise
        # a producer that predates the versioned protocol takes only stream
        return producer.__dlpack__(**{k: v for k, v in kw.items() if k == "stream"})


def dlpack_device(t) -> tuple:
    own = getattr(t._be, "dlpack_device", None)
    return own(t) if own is not None else (_DL_CPU, 0)


def from_dlpack(obj):
    """A tensor sharing the memory of obj, any object with `__dlpack__` (numpy, CuPy, PyTorch
    ...). The tensor keeps obj's memory alive."""
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ and __dlpack_device__ "
                        f"(a numpy or CuPy array, a tensor), got {type(obj).__name__}")
    kind, index = (int(v) for v in obj.__dlpack_device__())
    if kind == _DL_CPU:
        import numpy as np

        from ..creation import _wrap_host_array

        return _wrap_host_array(np.from_dlpack(obj), "from_dlpack")
    if kind in (_DL_CUDA, _DL_CUDA_MANAGED):
        return get(Device("cuda", index)).from_dlpack(obj)
    raise TypeError(f"from_dlpack: unsupported DLPack device type {kind} (expected CPU (1) or "
                    f"CUDA (2))")


__all__ = ["CPU", "Device", "as_device", "build_info", "dlpack", "dlpack_device", "from_dlpack",
           "get", "load", "transfer"]
