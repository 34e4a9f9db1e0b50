"""Device backends, found by device type: `backend.get(device)` returns the module that owns
that device's memory and kernels (`cpu.py`; `cuda.py` when the CUDA library is built)."""

from __future__ import annotations

import importlib

from .device import CPU, Device, as_device

_loaded: dict[str, object] = {}


def get(device: Device):
    kind = device.type
    mod = _loaded.get(kind)
    if mod is None:
        try:
            mod = importlib.import_module(f".{kind}", __name__)
        except ImportError as e:
            raise RuntimeError(
                f"device {device}: the {kind} backend is not available in this build ({e})"
            ) from None
        _loaded[kind] = mod
    return mod


__all__ = ["CPU", "Device", "as_device", "get"]
