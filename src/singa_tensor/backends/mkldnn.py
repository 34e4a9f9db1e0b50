"""`st.backends.mkldnn`: whether CPU convolutions and matrix products may use oneDNN (PyTorch's
name for it).

`enabled` (True unless `SINGA_TENSOR_ONEDNN=0` was set at import) lets `conv2d` (float32, and
bfloat16/float16 where oneDNN has native code on this CPU), bfloat16/float16 matrix products and
float32 ones of at least 2^22 multiply-adds on the CPU run oneDNN's primitives when the library
is installed (`pip install onednn-cpu-gomp`, part of the `dev` and `demo` extras); False runs
the im2col path, OpenBLAS for float32 products and the library's own 16-bit GEMM (operands
widened to float32 for sgemm). `is_available()` says whether the library could be loaded.
Assigning a non-bool raises TypeError.

Example:
    >>> import singa_tensor as st
    >>> with st.backends.mkldnn.flags(enabled=False):
    ...     st.backends.mkldnn.enabled
    False
"""

from __future__ import annotations

import contextlib
import sys
import types

from ..backend import onednn as _onednn

__all__ = ["flags", "is_available"]


def is_available() -> bool:
    """Whether the oneDNN library is installed and usable here.

    Example:
        >>> import singa_tensor as st
        >>> isinstance(st.backends.mkldnn.is_available(), bool)
        True
    """
    return _onednn.is_available()


@contextlib.contextmanager
def flags(enabled: bool = False):
    """Set `enabled` for the duration of a with block, then restore it.

    Example:
        >>> import singa_tensor as st
        >>> before = st.backends.mkldnn.enabled
        >>> with st.backends.mkldnn.flags(enabled=False):
        ...     st.backends.mkldnn.enabled
        False
        >>> st.backends.mkldnn.enabled == before
        True
    """
    old = _onednn.enabled()
    _onednn.set_enabled(enabled)
    try:
        yield
    finally:
        _onednn.set_enabled(old)


class _MkldnnModule(types.ModuleType):
    # `enabled` is a property of the module, so that assignments are checked and reach the
    # CPU backend, which owns the setting
    @property
    def enabled(self) -> bool:
        return _onednn.enabled()

    @enabled.setter
    def enabled(self, value: bool) -> None:
        _onednn.set_enabled(value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {"enabled"})


sys.modules[__name__].__class__ = _MkldnnModule
