"""The CPU features the CPU library was compiled for, checked before it is loaded.

The library is built for one x86-64 microarchitecture level (`-march=x86-64-v3` unless the
build said otherwise): on a CPU without, say, AVX2 its first kernel would die of an illegal
instruction. The import checks the CPU's flags first and raises an ImportError that says what
is missing and how to build for this CPU.

Example:
    >>> from singa_tensor.backend import cpu_features
    >>> cpu_features.missing("x86-64-v3", {"avx", "avx2", "fma"})[:2]
    ['abm', 'bmi1']
"""

from __future__ import annotations

import platform

# Linux /proc/cpuinfo flag names of each x86-64 level (the psABI's list; "pni" is SSE3, "abm"
# carries LZCNT)
_V2 = {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"}
_V3 = _V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
LEVELS = {"x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4}


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The feature flags of this CPU, or None where they cannot be read (not Linux on x86-64)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        return None
    return None


def missing(level: str, flags: set[str]) -> list[str]:
    """The flags of `level` that `flags` lacks, sorted."""
    return sorted(LEVELS.get(level, set()) - flags)


def check(level: str | None, flags: set[str] | None = None) -> None:
    """ImportError when this CPU lacks a feature of `level` (the build's baseline); nothing
    when it has them all, or when the flags or the level are unknown."""
    if level is None:
        return
    if flags is None:
        flags = cpu_flags()
    if flags is None:
        return
    lacking = missing(level, flags)
    if lacking:
        older = {"x86-64-v4": "x86-64-v3", "x86-64-v3": "x86-64-v2"}.get(level)
        fix = (f"; build it for this CPU from a clone: SINGA_TENSOR_CPU_BASELINE={older} "
               f'pip install -e "."' if older else "")
        raise ImportError(f"singa_tensor: the CPU library of this build is compiled for {level}, "
                          f"and this CPU lacks {', '.join(lacking)}{fix}")
