"""`st.backends.cuda`: PyTorch's CUDA matmul flags and `is_built()`.

`matmul.allow_tf32` (False by default, as in PyTorch; `st.set_float32_matmul_precision("high")`
or `"medium"` sets it) lets float32 matrix products on a GPU run on tensor cores in TF32: cuBLAS
with CUBLAS_COMPUTE_32F_FAST_TF32, inputs rounded to a 10-bit mantissa, float32 accumulation.
It is read at each product. bfloat16 and float16 products always run on tensor cores with
float32 accumulation (CUBLAS_COMPUTE_32F); `matmul.allow_fp16_reduced_precision_reduction` /
`allow_bf16_reduced_precision_reduction` (True, PyTorch's defaults) set to False keep cuBLAS's
split-K partial sums of those products in float32 too. CPU products ignore all of them (they
always accumulate in float32). An unknown attribute of `matmul` raises AttributeError, so a
misspelt flag is not silently ignored.

Example:
    >>> import singa_tensor as st
    >>> st.backends.cuda.matmul.allow_tf32
    False
"""

from __future__ import annotations

from .. import backend as _backend

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """Whether this build has the CUDA library (a GPU may still be absent: see
    `st.cuda.is_available()`).

    Example:
        >>> import singa_tensor as st
        >>> isinstance(st.backends.cuda.is_built(), bool)
        True
    """
    info = _backend.build_info()
    return bool(getattr(info, "cuda_built", False))


class _MatmulFlags:
    """The flags of `backends.cuda.matmul`."""

    _names = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
              "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        object.__setattr__(self, "allow_tf32", False)
        object.__setattr__(self, "allow_fp16_reduced_precision_reduction", True)
        object.__setattr__(self, "allow_bf16_reduced_precision_reduction", True)
        object.__setattr__(self, "_precision", "highest")

    def __setattr__(self, name: str, value) -> None:
        if name == "_precision":
            object.__setattr__(self, name, value)
            return
        if name not in self._names:
            raise AttributeError(f"backends.cuda.matmul: unknown attribute '{name}' (known: "
                                 f"{', '.join(self._names)})")
        if not isinstance(value, bool):
            raise TypeError(f"backends.cuda.matmul.{name} must be a bool, got "
                            f"{type(value).__name__}")
        object.__setattr__(self, name, value)
        if name == "allow_tf32":
            object.__setattr__(self, "_precision", "high" if value else "highest")

    def __repr__(self) -> str:
        return "matmul(" + ", ".join(f"{n}={getattr(self, n)}" for n in self._names) + ")"


matmul = _MatmulFlags()
