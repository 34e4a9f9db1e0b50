"""The CPU backend: buffers are numpy arrays, kernels are the C++ library through cffi.

Everything that touches memory addresses lives here; the layers above see only `Storage`
objects and `call(symbol, ...)`.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from .. import _execution
from ..dtype import ALL as _DTYPES
from .device import CPU

# One thread pool serves every CPU kernel: OpenMP's (GNU libgomp), which oneDNN shares. The C++
# library keeps OpenBLAS on the calling thread and splits large products over OpenMP's threads
# itself (cpp/src/blas.h), so no second pool's threads wait for work beside ours. The pool runs
# with OpenMP's defaults: an idle thread spins for a while before it sleeps, so that the next
# kernel, usually microseconds away in a training step, finds it awake (`OMP_WAIT_POLICY` and
# `GOMP_SPINCOUNT`, read when the library loads, change that).


def _preload_openblas() -> None:
    # The RPATH of the C++ library already points at the wheel's OpenBLAS; loading it here as
    # well makes the lookup independent of where the package was installed from.
    try:
        import scipy_openblas32 as sob

        path = os.path.join(sob.get_lib_dir(), f"lib{sob.get_library()}.so")
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except ImportError:  # pragma: no cover - a dependency of the package
        pass


def _check_cpu() -> None:
    from . import build_info, cpu_features

    info = build_info()
    cpu_features.check(info.cpu_baseline if info is not None else None)


_check_cpu()
_preload_openblas()
from ._cpu_ffi import ffi, lib  # noqa: E402

device = CPU
name = "cpu"


def simd_level() -> str:
    """"AVX512" while the kernels the library builds twice run their AVX-512 build (the float32
    unary kernels and their gradients, the recurrent step products), else "AVX2"."""
    return "AVX512" if lib.st_cpu_avx512(-1) else "AVX2"


def set_simd_level(level: str) -> str:
    """Run the AVX-512 builds ("avx512", where the CPU has AVX-512) or the AVX2 ones ("avx2");
    returns the level now in use. Also set at import by SINGA_TENSOR_CPU_CAPABILITY."""
    want = str(level).strip().lower()
    if want not in ("avx512", "avx2"):
        raise ValueError(f"set_simd_level: expected 'avx512' or 'avx2', got {level!r}")
    lib.st_cpu_avx512(1 if want == "avx512" else 0)
    return simd_level()


def _simd_from_env() -> None:
    v = os.environ.get("SINGA_TENSOR_CPU_CAPABILITY")
    if v is None or not v.strip():
        return
    try:
        set_simd_level(v)
    except ValueError:
        import warnings

        warnings.warn(f"SINGA_TENSOR_CPU_CAPABILITY={v!r} is neither 'avx512' nor 'avx2'; "
                      f"ignored", RuntimeWarning, stacklevel=2)


_simd_from_env()

_ALLOC = {d.name: getattr(lib, f"st_alloc_{d.suffix}") for d in _DTYPES}
_gc = ffi.gc
_free = lib.st_free


class Storage:
    """A flat, contiguous buffer of one dtype. Views share it; `version` counts in-place writes
    so that autograd can tell when a tensor saved for backward has been modified.

    Buffers come from the library's caching allocator (returned to it when the last reference
    goes), or wrap a numpy array's memory (`from_numpy`)."""

    __slots__ = ("ptr", "nbytes", "_array", "_np", "version", "__weakref__")

    def __init__(self, ptr, nbytes: int, np_dtype, array=None):
        self.ptr = ptr
        self.nbytes = nbytes
        self._np = np_dtype
        self._array = array
        self.version = 0

    @property
    def array(self) -> np.ndarray:
        """The whole buffer as a 1-d numpy array (no copy)."""
        a = self._array
        if a is None:
            n = self.nbytes // self._np.itemsize
            a = np.frombuffer(ffi.buffer(self.ptr, self.nbytes), dtype=self._np, count=n)
            self._array = a
        return a


# Small buffers come from cffi's own allocator (malloc, freed with the cdata, no zero fill):
# one call instead of two. Large ones come from the caching allocator, where reuse matters.
_small = ffi.new_allocator(should_clear_after_alloc=False)
_SMALL_BYTES = 1 << 16
_ARRAY_TYPE = {d.name: d.ctype + "[]" for d in _DTYPES}


def empty(numel: int, dtype) -> Storage:
    nbytes = numel * dtype.itemsize
    if nbytes <= _SMALL_BYTES:
        return Storage(_small(_ARRAY_TYPE[dtype.name], numel or 1), nbytes, dtype.storage)
    p = _ALLOC[dtype.name](numel)
    if p == ffi.NULL:
        raise MemoryError(f"cpu: out of memory allocating {numel * dtype.itemsize} bytes")
    return Storage(_gc(p, _free), numel * dtype.itemsize, dtype.storage)


def fast_alloc_info() -> tuple:
    """What the C fast path of plain op calls (singa_tensor._fastpath) needs to make buffers
    as `empty` makes them: (Storage, the cdata base type, a cdata pointer and its address, the
    small-buffer allocator and its byte limit, `empty` itself)."""
    cdata = next(c for c in type(ffi.NULL).__mro__ if c.__name__ == "_CDataBase")
    probe = ffi.cast("char *", 0x5A17E45)
    return Storage, cdata, probe, int(ffi.cast("uintptr_t", probe)), _small, _SMALL_BYTES, empty


def kernel_address(symbol: str) -> int:
    """The address of the C function named symbol (0 if the library has none), for the C fast
    path; the wrapped gemms are not offered there."""
    if symbol in _ONEDNN_GEMMS or not hasattr(lib, symbol):
        return 0
    return int(ffi.cast("uintptr_t", ffi.addressof(lib, symbol)))


def array_type(dtype):
    """cffi's array type of dtype's elements (what the small-buffer allocator takes)."""
    return ffi.typeof(_ARRAY_TYPE[dtype.name])


def from_numpy(array: np.ndarray, dtype) -> Storage:
    """Wrap a contiguous 1-d numpy array of dtype.storage without copying."""
    ptr = ffi.from_buffer(_ARRAY_TYPE[dtype.name], array, require_writable=True)
    storage = Storage(ptr, array.nbytes, dtype.storage, array)
    if _execution.running_count:
        ex = _execution.current()
        if ex is not None:  # graph mode: these values come from the host, not a kernel
            ex.host_written(storage)
    return storage


def alias(address: int, nbytes: int, dtype) -> Storage:
    """A storage over nbytes of memory at address that another storage owns and keeps alive
    (graph mode's replay of a collective on its arena)."""
    return Storage(ffi.cast(dtype.ctype + " *", address), nbytes, dtype.storage)


def set_cache_limit(nbytes: int) -> None:
    """Most bytes of freed buffers the allocator keeps for reuse (default 4 GiB; also set by
    the environment variable SINGA_TENSOR_CPU_CACHE_LIMIT at import)."""
    if nbytes < 0:
        raise ValueError(f"set_cache_limit: expected a non-negative byte count, got {nbytes}")
    lib.st_set_cache_limit(int(nbytes))


def _limit_from_env() -> None:
    v = os.environ.get("SINGA_TENSOR_CPU_CACHE_LIMIT")
    if v is None:
        return
    try:
        set_cache_limit(int(v))
    except ValueError:
        raise ValueError(
            f"SINGA_TENSOR_CPU_CACHE_LIMIT must be a non-negative number of bytes, got {v!r}"
        ) from None


_limit_from_env()


def cached_bytes() -> int:
    return lib.st_cached_bytes()


def allocated_bytes() -> int:
    return lib.st_allocated_bytes()


def peak_bytes() -> tuple[int, int]:
    """High-water marks since reset_peak_bytes(): (bytes in use, bytes in use or cached) by the
    caching allocator (buffers of 64 KiB or less come from cffi and are not counted)."""
    return lib.st_peak_allocated_bytes(), lib.st_peak_reserved_bytes()


def reset_peak_bytes() -> None:
    lib.st_reset_peak_bytes()


def empty_cache() -> None:
    lib.st_empty_cache()


def view_numpy(storage: Storage, dtype, shape, strides, offset) -> np.ndarray:
    """A numpy view (no copy) of a strided tensor."""
    arr = storage.array
    if dtype.np is None:
        raise TypeError("numpy has no bfloat16; convert with .float() first")
    item = arr.itemsize
    base = arr[offset:] if offset else arr
    if not shape:
        return base[:1].reshape(())
    n = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != n:
            break
        n *= d
    else:  # row-major: a plain reshape, several times cheaper than as_strided
        return base[:n].reshape(shape)
    return np.lib.stride_tricks.as_strided(
        base, shape=shape, strides=tuple(s * item for s in strides), writeable=True
    )


def pointer(storage: Storage, offset: int):
    return storage.ptr + offset if offset else storage.ptr


def int64_array(values):
    return ffi.new("int64_t[]", values)


def pointer_array(ptrs):
    """A C array of `void *` holding ptrs (buffer pointers of this backend, as `pointer` returns
    them), for kernels that take a table of operands."""
    return ffi.new("void *[]", [ffi.cast("void *", p) for p in ptrs])


def kernel(symbol: str):
    """The C function named symbol, or None if this backend has no such kernel. The matrix
    products of float32, bfloat16 and float16 (st_gemm_f32/bf16/f16) come wrapped: oneDNN first
    where it pays (`_onednn_gemm`)."""
    fn = _wrapped.get(symbol)
    if fn is not None:
        return fn
    fn = getattr(lib, symbol, None)
    if fn is not None and symbol in _ONEDNN_GEMMS:
        fn = _wrapped[symbol] = _onednn_gemm(fn, *_ONEDNN_GEMMS[symbol])
    return fn


# Below this many multiply-adds (batch * m * n * k) a 16-bit product stays on the library's own
# kernel: oneDNN's fixed cost per call (about 4 us through cffi's ABI mode) is more than the
# product; measured crossing over near 48 x 48 x 48 on one thread (AVX512-BF16)
ONEDNN_MIN_WORK = 1 << 17
# A float32 product goes to oneDNN from 2^22 multiply-adds, with at least 16 rows and 16 columns
# and no batch. Timed call by call against OpenBLAS on the shapes of the training benchmarks
# (bench/bench_train.py: 64 x 512 x 784 to 512 x 1000 x 128, each layout), 2 threads on
# AVX-512: 0.69-1.01x the time (bench/bench_cpu_paths.py). Smaller products gain less than the
# 4 us oneDNN costs per call; a product with fewer rows or columns is a matrix-vector product,
# whose rounding in OpenBLAS must not depend on where a column lies (blas.h: kSplitRows).
ONEDNN_MIN_WORK_F32 = 1 << 22
_ONEDNN_GEMMS = {"st_gemm_bf16": ("bfloat16", ONEDNN_MIN_WORK, 1, True),
                 "st_gemm_f16": ("float16", ONEDNN_MIN_WORK, 1, True),
                 "st_gemm_f32": ("float32", ONEDNN_MIN_WORK_F32, 16, False)}
_wrapped: dict = {}


def _onednn_gemm(own, dtype: str, min_work: int, min_dim: int, batched: bool):
    """st_gemm of dtype through oneDNN's matmul where it has native code for this call (alpha
    1, beta 0 or 1, k > 0: what the ops send), with at least min_work multiply-adds, m and n of
    at least min_dim and, unless `batched`, a batch of one; else the library's own kernel (for
    the 16-bit dtypes: operands widened for sgemm). Both accumulate in float32 and round once.
    Which one runs depends only on the call's shape and this CPU, so results repeat from run to
    run."""
    num_threads = lib.st_num_threads
    plans: list = []

    def gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa, sb, sc):
        if (alpha == 1 and (beta == 0 or beta == 1) and k > 0 and m >= min_dim
                and n >= min_dim and (batch == 1 or batched and batch > 0)
                and batch * m * n * k >= min_work):
            if not plans:
                from . import onednn

                plans.append(onednn.matmul_plan)
            plan = plans[0](dtype, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
                            beta == 1, num_threads())
            if plan is not None:
                plan.run(a, b, c)
                return None
        return own(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa, sb, sc)

    gemm.__name__ = f"st_gemm_{dtype}"
    return gemm


def linear_plan(m: int, n: int, k: int, tb: int, ldb: int):
    """oneDNN's plan for a float32 linear layer's forward, out (m, n) = x (m, k) @ op(w) + b
    with the bias added in the product's epilogue (`run_bias(x, w, b, out)`, buffer pointers),
    instead of copying b into every row of out first; None where the float32 products rule
    (`ONEDNN_MIN_WORK_F32`, 16 rows and columns) or oneDNN (off, missing) says OpenBLAS.

    Example:
        >>> from singa_tensor.backend import cpu
        >>> p = cpu.linear_plan(64, 256, 512, 1, 512)
        >>> p is None or p.impl != ""
        True
    """
    if m < 16 or n < 16 or k < 1 or m * n * k < ONEDNN_MIN_WORK_F32:
        return None
    from . import onednn

    return onednn.matmul_plan("float32", 0, tb, m, n, k, k, ldb, n, 1, 0, 0, 0, False,
                              lib.st_num_threads(), bias=True)


def copy_symbol(dtype) -> str:
    return f"st_copy_{dtype.width_suffix}"


def synchronize() -> None:
    """CPU kernels run synchronously; nothing to wait for."""


def num_threads() -> int:
    return lib.st_num_threads()


def set_num_threads(n: int) -> None:
    lib.st_set_num_threads(int(n))


_onednn = None


def conv2d_plan(n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups, bias: bool,
                dtype: str = "float32"):
    """oneDNN's plan for a convolution of this geometry and dtype ("float32", "bfloat16" or
    "float16"; `backend/onednn.py`), or None when oneDNN is off, not installed, or not the
    faster path here (conv2d then runs im2col and a matrix product). The choice is a fixed
    rule, so that a geometry always takes the same path and results repeat from run to run:
    oneDNN for every geometry but unpadded 1x1 convolutions without groups.

    Example:
        >>> from singa_tensor.backend import cpu
        >>> p = cpu.conv2d_plan(2, 16, 8, 8, 16, 3, 3, 8, 8, (1, 1), (1, 1, 1, 1), (1, 1), 1,
        ...                     False)
        >>> p is None or p.dst_shape == (2, 16, 8, 8)
        True
    """
    global _onednn
    if kh == kw == 1 and pads == (0, 0, 0, 0) and groups == 1:
        # conv2d computes these as one matrix product on the image itself (no im2col copy);
        # oneDNN adds reorders to and from its blocked layout around a memory-bound kernel:
        # forward+backward measured as fast to 1.8x slower (batch 16, 64-256 channels, one
        # thread, AVX2), while every 3x3, strided, grouped and small-channel case gained
        return None
    if _onednn is None:
        from . import onednn as _onednn
    return _onednn.conv2d_plan(n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups,
                               bias, lib.st_num_threads(), dtype)


def conv_chain_plan(n, c, h, w, stages: tuple):
    """oneDNN's plan for inference through a chain of float32 convolutions (each with an
    optional ReLU) and max poolings from an (n, c, h, w) input (`backend/onednn_chain.py`), or
    None when oneDNN is off, not installed, or has no native code for a stage. stages: tuples
    ("conv", out channels, kh, kw, stride, pads (t, b, l, r), dilation, groups, bias, relu)
    and ("pool", kh, kw, stride, pads, dilation, (out h, out w)).

    Example:
        >>> from singa_tensor.backend import cpu
        >>> conv = ("conv", 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True, True)
        >>> pool = ("pool", 2, 2, (2, 2), (0, 0, 0, 0), (1, 1), (3, 3))
        >>> p = cpu.conv_chain_plan(1, 4, 6, 6, (conv, pool))
        >>> p is None or p.dst_shape == (1, 8, 3, 3)
        True
    """
    from . import onednn_chain

    typed = tuple(onednn_chain.ConvStage(s[1:]) if s[0] == "conv" else
                  onednn_chain.PoolStage(s[1:]) for s in stages)
    return onednn_chain.chain_plan(n, c, h, w, typed, lib.st_num_threads())
