"""`st.cpu`: PyTorch's `torch.cpu` namespace: the CPU as a device module, and `st.cpu.amp`.

Example:
    >>> import singa_tensor as st
    >>> st.cpu.is_available(), st.cpu.device_count()
    (True, 1)
"""

from __future__ import annotations

from .amp._devices import cpu_amp as amp

__all__ = ["amp", "is_available", "device_count", "current_device", "synchronize"]


def is_available() -> bool:
    """Always True: every build has the CPU backend."""
    return True


def device_count() -> int:
    """The number of CPU devices: 1."""
    return 1


def current_device() -> str:
    """The current CPU device: "cpu"."""
    return "cpu"


def synchronize(device=None) -> None:
    """CPU kernels finish before they return: nothing to wait for."""
