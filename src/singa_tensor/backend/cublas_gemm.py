"""st_gemm through cuBLAS for the CUDA backend: which cuBLAS routine, data type and compute type
each dtype's matrix product runs with, and the call itself.

- float64: `dgemmStridedBatched`.
- float32: `sgemmStridedBatched` (full float32), or, while `st.backends.cuda.matmul.allow_tf32`
  is True (also set by `st.set_float32_matmul_precision("high")` or `"medium"`),
  `gemmStridedBatchedEx` with CUBLAS_COMPUTE_32F_FAST_TF32: tensor cores round the inputs to
  TF32 (10-bit mantissa) and accumulate in float32, as PyTorch does under the same flags.
- bfloat16 / float16: `gemmStridedBatchedEx` on CUDA_R_16BF / CUDA_R_16F operands with
  CUBLAS_COMPUTE_32F: tensor cores, float32 accumulation, one rounding on store.

While `allow_bf16_reduced_precision_reduction` / `allow_fp16_reduced_precision_reduction` is
False (True by default, as in PyTorch), the 16-bit products run under cuBLAS's
DISALLOW_REDUCED_PRECISION_REDUCTION math mode, so split-K partial sums stay in float32.

`gemm_types` and `strict_reduction` are the choice as pure functions (no CuPy needed, so they
are tested everywhere); `make_gemm` builds the kernel-ABI callable around any object with CuPy's
cuBLAS functions.

Example:
    >>> from singa_tensor.backend import cublas_gemm as cg
    >>> cg.gemm_types("bf16", allow_tf32=False) == (cg.CUDA_R_16BF, cg.COMPUTE_32F)
    True
    >>> cg.gemm_types("f32", allow_tf32=False) is None  # the plain sgemm
    True
"""

from __future__ import annotations

import numpy as np

# cudaDataType_t and cublasComputeType_t values (library_types.h, cublas_api.h)
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF = 0, 1, 2, 14
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
GEMM_DEFAULT = -1  # cuBLAS picks the algorithm (tensor cores where the types allow)
# cublasMath_t bit: split-K partial sums of 16-bit products stay in the compute type
MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16

INT_MAX = (1 << 31) - 1
# the dtypes whose st_gemm cuBLAS runs
SUFFIXES = ("f32", "f64", "f16", "bf16")
_HALF = {"f16": CUDA_R_16F, "bf16": CUDA_R_16BF}


def gemm_types(suffix: str, allow_tf32: bool) -> tuple[int, int] | None:
    """(data type of A, B and C, compute type) for st_gemm_<suffix> through
    cublasGemmStridedBatchedEx, or None where the classic sgemm/dgemm runs (float64; float32
    without TF32). Raises ValueError for a dtype cuBLAS does not run here (integers take the
    library's own kernel).

    Example:
        >>> from singa_tensor.backend import cublas_gemm as cg
        >>> cg.gemm_types("f32", allow_tf32=True) == (cg.CUDA_R_32F, cg.COMPUTE_32F_FAST_TF32)
        True
        >>> cg.gemm_types("f16", allow_tf32=True) == (cg.CUDA_R_16F, cg.COMPUTE_32F)
        True
    """
    if suffix in _HALF:
        return _HALF[suffix], COMPUTE_32F
    if suffix == "f32":
        return (CUDA_R_32F, COMPUTE_32F_FAST_TF32) if allow_tf32 else None
    if suffix == "f64":
        return None
    raise ValueError(f"gemm_types: no cuBLAS GEMM for dtype suffix {suffix!r} (one of "
                     f"{', '.join(SUFFIXES)})")


def strict_reduction(suffix: str, flags) -> bool:
    """Whether a 16-bit product must keep cuBLAS's split-K partial sums in float32 (the
    DISALLOW_REDUCED_PRECISION_REDUCTION math mode): when `flags` (`backends.cuda.matmul`)
    forbid the reduced-precision reduction of the dtype, as PyTorch's flags of the same names.

    Example:
        >>> from singa_tensor.backend import cublas_gemm as cg
        >>> flags = type("F", (), {"allow_bf16_reduced_precision_reduction": False})()
        >>> cg.strict_reduction("bf16", flags), cg.strict_reduction("f32", flags)
        (True, False)
    """
    name = {"bf16": "allow_bf16_reduced_precision_reduction",
            "f16": "allow_fp16_reduced_precision_reduction"}.get(suffix)
    return name is not None and not getattr(flags, name, True)


def _matmul_flags():
    from ..backends import cuda as flags  # at the first product, after the package import

    return flags.matmul


def make_gemm(suffix: str, kernel, cublas, handle, address, flags=None):
    """The st_gemm_<suffix> callable of the kernel ABI (trailing stream) through `cublas` (CuPy's
    `cupy_backends.cuda.libs.cublas`, or a stand-in with the same functions); `handle()` gives
    the cuBLAS handle, `address(p)` a device pointer's integer address, `flags` the object
    with `allow_tf32` and the reduced-precision-reduction flags (default:
    `st.backends.cuda.matmul`, read at each call).

    Row-major C = alpha op(A) op(B) + beta C is column-major C^T = alpha op(B)^T op(A)^T +
    beta C^T, so the operands swap and each keeps its own transpose flag and leading dimension.
    Shapes cuBLAS cannot take (k == 0, sizes past int32) go to `kernel`, the library's own.

    Example:
        >>> from singa_tensor.backend import cublas_gemm as cg
        >>> callable(cg.make_gemm("bf16", None, object(), lambda: 0, int))
        True
    """
    if suffix not in SUFFIXES:
        raise ValueError(f"make_gemm: no cuBLAS GEMM for dtype suffix {suffix!r}")
    classic = {"f32": "sgemmStridedBatched", "f64": "dgemmStridedBatched"}.get(suffix)
    scalar = np.float64 if suffix == "f64" else np.float32  # COMPUTE_32F takes float scalars
    flag_source = [flags]
    ex = getattr(cublas, "gemmStridedBatchedEx", None)  # absent from a stand-in without it

    def gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa, sb, sc, stream):
        if m <= 0 or n <= 0 or batch <= 0:
            return None
        if k <= 0 or max(m, n, k, lda, ldb, ldc, batch) > INT_MAX:
            return kernel(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa, sb,
                          sc, stream)
        if flag_source[0] is None:
            flag_source[0] = _matmul_flags()
        types = gemm_types(suffix, flag_source[0].allow_tf32)
        if types is not None and ex is None:
            if classic is None:
                return kernel(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa,
                              sb, sc, stream)
            types = None
        al = np.array(alpha, dtype=scalar)
        be = np.array(beta, dtype=scalar)
        h = handle()
        cublas.setPointerMode(h, cublas.CUBLAS_POINTER_MODE_HOST)
        if types is None:
            getattr(cublas, classic)(h, 1 if tb else 0, 1 if ta else 0, n, m, k, al.ctypes.data,
                                     address(b), max(ldb, 1), sb, address(a), max(lda, 1), sa,
                                     be.ctypes.data, address(c), max(ldc, 1), sc, batch)
            return None
        data, compute = types
        strict = strict_reduction(suffix, flag_source[0])
        if strict:  # the handle is CuPy's: its math mode is restored afterwards
            mode = cublas.getMathMode(h)
            cublas.setMathMode(h, mode | MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        try:
            ex(h, 1 if tb else 0, 1 if ta else 0, n, m, k, al.ctypes.data, address(b), data,
               max(ldb, 1), sb, address(a), data, max(lda, 1), sa, be.ctypes.data, address(c),
               data, max(ldc, 1), sc, batch, compute, GEMM_DEFAULT)
        finally:
            if strict:
                cublas.setMathMode(h, mode)
        return None

    gemm.__name__ = f"st_gemm_{suffix}"
    return gemm
