"""`st.backends.cpu`: what the CPU kernels run with.

Example:
    >>> import singa_tensor as st
    >>> isinstance(st.backends.cpu.get_cpu_capability(), str)
    True
"""

from __future__ import annotations

from .. import backend as _backend

__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """The instruction-set level the CPU library was compiled for (e.g. "x86-64-v3"), or
    "DEFAULT" for a source tree that was never built."""
    info = _backend.build_info()
    return getattr(info, "cpu_baseline", "DEFAULT") if info is not None else "DEFAULT"
