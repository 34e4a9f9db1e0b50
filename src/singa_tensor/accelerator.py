"""`st.accelerator`: PyTorch's device-generic accelerator queries. The one accelerator
singa_tensor knows is CUDA, so these follow `st.cuda`; without a usable GPU there is none and
the CPU does the work.

Example:
    >>> import singa_tensor as st
    >>> st.accelerator.is_available() == st.cuda.is_available()
    True
    >>> st.accelerator.device_count() == st.cuda.device_count()
    True
"""

from __future__ import annotations

from . import backend as _backend
from . import cuda as _cuda
from .backend.device import Device

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available",
           "synchronize"]


def is_available() -> bool:
    """Whether an accelerator (a usable CUDA device) is present.

    Example:
        >>> import singa_tensor as st
        >>> isinstance(st.accelerator.is_available(), bool)
        True
    """
    return _cuda.is_available()


def device_count() -> int:
    """The number of usable accelerator devices (0 without one).

    Example:
        >>> import singa_tensor as st
        >>> st.accelerator.device_count() >= 0
        True
    """
    return _cuda.device_count()


def _built() -> bool:
    info = _backend.build_info()
    return bool(getattr(info, "cuda_built", False))


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator's device type, `device("cuda")`, when this build has CUDA (and, with
    check_available, a usable GPU); otherwise None.

    Example:
        >>> import singa_tensor as st
        >>> acc = st.accelerator.current_accelerator(check_available=True)
        >>> acc is None or acc.type == "cuda"
        True
    """
    if not isinstance(check_available, bool):
        raise TypeError(f"current_accelerator: check_available must be a bool, got "
                        f"{type(check_available).__name__}")
    if is_available() or (_built() and not check_available):
        return Device("cuda")
    return None


def _require(op: str) -> None:
    if not is_available():
        raise RuntimeError(f"accelerator.{op}: no accelerator is available (st.cuda.is_available()"
                           f" is False)")


def current_device_index() -> int:
    """The index of the current accelerator device.

    Example:
        >>> import singa_tensor as st
        >>> if st.accelerator.is_available():
        ...     assert st.accelerator.current_device_index() >= 0
    """
    _require("current_device_index")
    return _backend.load("cuda").device_index(None)


def synchronize(device=None) -> None:
    """Wait for the work queued on an accelerator device (default: the current one).

    Example:
        >>> import singa_tensor as st
        >>> if st.accelerator.is_available():
        ...     st.accelerator.synchronize()
    """
    _require("synchronize")
    _cuda.synchronize(device)
