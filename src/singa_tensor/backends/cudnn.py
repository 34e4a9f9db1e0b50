"""`st.backends.cudnn`: PyTorch's cuDNN flags, stored only (singa_tensor calls no cuDNN).

`enabled` (True), `benchmark` (False), `deterministic` (False) and `allow_tf32` (True) are the
PyTorch defaults; assigning a non-bool raises TypeError. `is_available()` is False and
`version()` None, since no cuDNN is linked.

Example:
    >>> import singa_tensor as st
    >>> st.backends.cudnn.deterministic = True
    >>> st.backends.cudnn.deterministic
    True
    >>> st.backends.cudnn.deterministic = False
"""

from __future__ import annotations

import contextlib
import sys
import types

__all__ = ["flags", "is_available", "version"]

_FLAGS = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}


def is_available() -> bool:
    """False: singa_tensor's CUDA kernels are its own, no cuDNN is linked.

    Example:
        >>> import singa_tensor as st
        >>> st.backends.cudnn.is_available()
        False
    """
    return False


def version() -> None:
    """None: no cuDNN is linked.

    Example:
        >>> import singa_tensor as st
        >>> st.backends.cudnn.version() is None
        True
    """
    return None


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, deterministic: bool = False,
          allow_tf32: bool = True):
    """Set the four flags for the duration of a with block (PyTorch's defaults for the
    arguments), then restore them.

    Example:
        >>> import singa_tensor as st
        >>> with st.backends.cudnn.flags(enabled=True, benchmark=True):
        ...     st.backends.cudnn.benchmark
        True
        >>> st.backends.cudnn.benchmark
        False
    """
    new = {"enabled": enabled, "benchmark": benchmark, "deterministic": deterministic,
           "allow_tf32": allow_tf32}
    for name, value in new.items():
        _check(name, value)
    old = dict(_FLAGS)
    _FLAGS.update(new)
    try:
        yield
    finally:
        _FLAGS.update(old)


def _check(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"backends.cudnn.{name} must be a bool, got {type(value).__name__}")


class _CudnnModule(types.ModuleType):
    # a module whose flags are properties, so that assignments are checked
    def __getattr__(self, name: str):
        if name in _FLAGS:
            return _FLAGS[name]
        raise AttributeError(f"module 'singa_tensor.backends.cudnn' has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        if name in _FLAGS:
            _check(name, value)
            _FLAGS[name] = value
        else:
            super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_FLAGS))


sys.modules[__name__].__class__ = _CudnnModule
