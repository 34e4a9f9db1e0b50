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
    """The vector instruction set the CPU kernels run with, by PyTorch's names: "AVX512" where
    the kernels built twice run their AVX-512 build (the CPU has it and
    SINGA_TENSOR_CPU_CAPABILITY=avx2 did not turn it off), "AVX2" for the library's AVX2 + FMA
    baseline (x86-64-v3), "DEFAULT" for an older baseline or a source tree never built.

    Example:
        >>> import singa_tensor as st
        >>> st.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
        True
    """
    info = _backend.build_info()
    if info is None:
        return "DEFAULT"
    from ..backend import cpu

    if cpu.simd_level() == "AVX512":
        return "AVX512"
    return "AVX2" if getattr(info, "cpu_baseline", "") in ("x86-64-v3", "x86-64-v4") else "DEFAULT"
