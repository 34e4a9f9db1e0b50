"""`st.backends`: PyTorch's namespace of backend flags, for scripts that set them.

`backends.mkldnn.enabled` chooses whether CPU convolutions and matrix products may run on
oneDNN; `backends.cpu.get_cpu_capability()` names the vector instruction set the CPU kernels run
with; `backends.cuda.matmul.allow_tf32` whether float32 matrix products on a GPU may
run in TF32. The other flags are stored and read back, and change nothing else: singa_tensor
uses no cuDNN and no MPS, and its kernels already give the same result on every run for the
same inputs and thread count. `backends.cudnn` (`enabled`, `benchmark`, `deterministic`,
`allow_tf32`), `backends.cuda.matmul.allow_tf32`, `backends.mps.is_available()` (False) and
`st.use_deterministic_algorithms` accept what PyTorch accepts and validate it.

Not to be confused with `singa_tensor.backend` (singular): the device backends that run kernels.

Example:
    >>> import singa_tensor as st
    >>> st.backends.cudnn.benchmark = True
    >>> st.backends.cudnn.benchmark, st.backends.mps.is_available()
    (True, False)
    >>> st.backends.cudnn.benchmark = False
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mkldnn, mps

__all__ = [
    "are_deterministic_algorithms_enabled", "cpu", "cuda", "cudnn",
    "get_float32_matmul_precision", "is_deterministic_algorithms_warn_only_enabled", "mkldnn",
    "mps",
    "set_float32_matmul_precision", "use_deterministic_algorithms",
]

_deterministic = {"mode": False, "warn_only": False}


def _check_bool(op: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__}")
    return value


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (stored for `are_deterministic_algorithms_enabled`).
    singa_tensor's kernels are deterministic for a fixed thread count either way, so nothing
    else changes.

    Example:
        >>> import singa_tensor as st
        >>> st.use_deterministic_algorithms(True)
        >>> st.are_deterministic_algorithms_enabled()
        True
        >>> st.use_deterministic_algorithms(False)
    """
    _deterministic["mode"] = _check_bool("use_deterministic_algorithms", "mode", mode)
    _deterministic["warn_only"] = _check_bool("use_deterministic_algorithms", "warn_only",
                                              warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """What the last `use_deterministic_algorithms` asked for (False at start).

    Example:
        >>> import singa_tensor as st
        >>> st.are_deterministic_algorithms_enabled()
        False
    """
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The warn_only of the last `use_deterministic_algorithms` call (False at start).

    Example:
        >>> import singa_tensor as st
        >>> st.is_deterministic_algorithms_warn_only_enabled()
        False
    """
    return _deterministic["warn_only"]


_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """"highest", "high" or "medium"; anything but "highest" sets
    `backends.cuda.matmul.allow_tf32`, as in PyTorch: float32 matrix products on a GPU then run
    in TF32 on tensor cores ("medium" too: no bfloat16 passes are used). CPU products compute
    in full float32 precision either way.

    Example:
        >>> import singa_tensor as st
        >>> st.set_float32_matmul_precision("high")
        >>> st.backends.cuda.matmul.allow_tf32
        True
        >>> st.set_float32_matmul_precision("highest")
    """
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: precision must be one of "
                         f"{', '.join(_PRECISIONS)}, got {precision!r}")
    cuda.matmul.allow_tf32 = precision != "highest"
    cuda.matmul._precision = precision


def get_float32_matmul_precision() -> str:
    """The precision set by `set_float32_matmul_precision` ("highest" at start).

    Example:
        >>> import singa_tensor as st
        >>> st.get_float32_matmul_precision()
        'highest'
    """
    return cuda.matmul._precision
