"""The CUDA backend: device memory from CuPy's memory pool, the CUDA library's kernels (cffi API
mode, the same C ABI as the CPU library plus a trailing stream) launched on CuPy's current
stream, float matrix products (float16 and bfloat16 included) through cuBLAS.

Importing this module raises ImportError when CuPy or the CUDA library is missing, which
`backend.get` reports as "the cuda backend is not available". Shape and stride arrays passed
to kernels are host memory (the kernels copy them into their launch parameters); tensor data
pointers are device pointers.
"""

from __future__ import annotations

import cupy

from .. import _execution
from ..dtype import ALL as _DTYPES
from . import cublas_gemm as _cublas_gemm
from ._cuda_ffi import ffi, lib
from .device import Device, as_device

name = "cuda"

_runtime = cupy.cuda.runtime
_PTR = {d.name: d.ctype + " *" for d in _DTYPES}
_count: int | None = None
# Kernels a CUDA graph cannot hold: nonzero waits for its count on the host, and CuPy's cuBLAS
# wrappers refuse a capturing stream.
_UNCAPTURABLE = frozenset({"st_nonzero_u8", "st_gemm_f32", "st_gemm_f64", "st_gemm_f16",
                           "st_gemm_bf16"})
_BLAS_GEMMS = frozenset({"st_gemm_f32", "st_gemm_f64", "st_gemm_f16", "st_gemm_bf16"})


def device_count() -> int:
    """Usable CUDA devices: what both the CUDA library and CuPy see (0 on any error)."""
    global _count
    if _count is None:
        try:
            n = min(int(lib.st_cuda_device_count()), int(_runtime.getDeviceCount()))
        except Exception:  # noqa: BLE001 - no driver, no device, mismatched runtime
            n = 0
        _count = max(n, 0)
    return _count


def device_index(device) -> int:
    """The index of a CUDA device given as None (the current one), an int, a string or a
    Device."""
    if device is None:
        return _runtime.getDevice()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = as_device(device)
    if d.type != "cuda":
        raise ValueError(f"expected a CUDA device, got {d}")
    return d.index


def synchronize(device=None) -> None:
    """Wait until all work queued on a CUDA device (default: the current one) has finished."""
    for_device(device_index(device)).synchronize()


_backends: dict[int, CudaBackend] = {}


def for_device(index: int) -> CudaBackend:
    """The backend of cuda:index; a RuntimeError when no such device is usable."""
    be = _backends.get(index)
    if be is None:
        n = device_count()
        if n == 0:
            raise RuntimeError(f"device cuda:{index}: the cuda backend is not available: no "
                               "usable CUDA device (no GPU, or no driver)")
        if not 0 <= index < n:
            raise RuntimeError(f"device cuda:{index}: no such CUDA device (found {n})")
        be = _backends[index] = CudaBackend(index)
    return be


class Storage:
    """A flat buffer of device memory. `mem` (a CuPy MemoryPointer, or the array it came
    from) keeps the memory alive; `ptr` is a typed pointer, so `ptr + offset` works as on the
    CPU. Views share it; `version` counts in-place writes."""

    __slots__ = ("ptr", "nbytes", "mem", "device_index", "version", "__weakref__")

    def __init__(self, mem, address: int, nbytes: int, ctype_ptr: str, device_index: int):
        self.mem = mem
        self.ptr = ffi.cast(ctype_ptr, address)
        self.nbytes = nbytes
        self.device_index = device_index
        self.version = 0


def _address(p) -> int:
    return int(ffi.cast("uintptr_t", p))


def _load_cublas():
    from cupy_backends.cuda.libs import cublas

    return cublas, cupy.cuda.device.get_cublas_handle


class CudaBackend:
    """Memory, kernels and streams of one CUDA device."""

    name = "cuda"
    ffi = ffi  # for NULL and casts: pointers are the same C types on every backend

    def __init__(self, index: int):
        self.index = index
        self.device = as_device(Device("cuda", index))
        self._cupy_device = cupy.cuda.Device(index)
        # with one device it is always the current one: no per-call device switch
        self._multi = device_count() > 1
        self._kernels: dict = {}
        self._streams: dict = {}
        self._copiers: dict = {}

    def __repr__(self) -> str:
        return f"<cuda backend for {self.device}>"

    # ---- memory ---------------------------------------------------------------------------
    def _on_device(self):
        return self._cupy_device if self._multi else _NoSwitch

    def empty(self, numel: int, dtype) -> Storage:
        nbytes = numel * dtype.itemsize
        try:
            with self._on_device():
                mem = cupy.cuda.alloc(nbytes)
        except MemoryError as e:  # CuPy's OutOfMemoryError is one
            raise MemoryError(
                f"cuda:{self.index}: out of memory allocating {nbytes} bytes "
                f"({numel} x {dtype.name}); {self.allocated_bytes()} bytes in use ({e})"
            ) from None
        except _runtime.CUDARuntimeError as e:
            raise RuntimeError(
                f"cuda:{self.index}: allocating {nbytes} bytes failed: {e}") from None
        return Storage(mem, mem.ptr, nbytes, _PTR[dtype.name], self.index)

    def alias(self, address: int, nbytes: int, dtype) -> Storage:
        """A storage over nbytes of device memory at address that another storage owns and
        keeps alive (graph mode's replay of a collective on its arena)."""
        return Storage(None, address, nbytes, _PTR[dtype.name], self.index)

    def allocated_bytes(self) -> int:
        """Bytes of the memory pool in use by live buffers on this device."""
        with self._on_device():
            return int(cupy.get_default_memory_pool().used_bytes())

    def cached_bytes(self) -> int:
        """Bytes held by the memory pool for reuse (freed buffers) on this device."""
        with self._on_device():
            return int(cupy.get_default_memory_pool().free_bytes())

    def empty_cache(self) -> None:
        """Return the pool's free blocks on this device to the driver."""
        with self._on_device():
            cupy.get_default_memory_pool().free_all_blocks()

    def pointer(self, storage: Storage, offset: int):
        return storage.ptr + offset if offset else storage.ptr

    def int64_array(self, values):
        return ffi.new("int64_t[]", values)  # host memory: kernels copy it by value

    def pointer_array(self, ptrs):
        """A host array of `void *` holding ptrs (device pointers, as `pointer` returns them),
        for kernels that take a table of operands (they copy it into their launch parameters)."""
        return ffi.new("void *[]", [ffi.cast("void *", p) for p in ptrs])

    def copy_symbol(self, dtype) -> str:
        return f"st_copy_{dtype.width_suffix}"

    def synchronize(self) -> None:
        self._cupy_device.synchronize()

    # ---- kernels ----------------------------------------------------------------------------
    def _stream(self):
        p = cupy.cuda.get_current_stream(self.index).ptr
        s = self._streams.get(p)
        if s is None:
            if len(self._streams) > 256:
                self._streams.clear()
            s = self._streams[p] = ffi.cast("void *", p)
        return s

    def kernel(self, symbol: str):
        """The kernel named symbol as a callable taking the CPU kernel's arguments (the stream
        is appended), raising RuntimeError if the launch failed; None if there is none."""
        fn = self._kernels.get(symbol)
        if fn is None:
            raw = getattr(lib, symbol, None)
            if raw is None:
                return None
            if symbol in _BLAS_GEMMS:
                raw = self._blas_gemm(symbol, raw)
            fn = self._kernels[symbol] = self._launcher(symbol, raw)
        return fn

    def _launcher(self, symbol: str, raw):
        stream, last_error, index, multi = self._stream, lib.st_cuda_last_error, self.index, \
            self._multi
        cupy_device, get_device = self._cupy_device, _runtime.getDevice

        def launch(*args):
            if multi and get_device() != index:
                with cupy_device:
                    return launch(*args)
            r = raw(*args, stream())
            err = last_error()
            if err:
                raise RuntimeError(f"{symbol} on cuda:{index}: "
                                   f"{ffi.string(err).decode('utf-8', 'replace')}")
            return r

        launch.__name__ = symbol
        # read by graph mode, which captures runs of capturable launches into CUDA graphs
        launch.capturable = symbol not in _UNCAPTURABLE
        launch.backend = self
        return launch

    # ---- CUDA graphs ------------------------------------------------------------------------
    def capture(self, calls):
        """The kernel launches `calls` ([(launcher, args)], launchers from `kernel`) captured
        into one CUDA graph on a private stream; nothing runs until the graph is launched.
        Raises what the capture raised, with the capture ended and the error channel clear."""
        if not hasattr(cupy.cuda.Stream, "begin_capture"):
            raise RuntimeError("this CuPy cannot capture CUDA graphs")
        mode = getattr(_runtime, "streamCaptureModeRelaxed", None)
        stream = cupy.cuda.Stream(non_blocking=True)
        with self._on_device(), stream:
            stream.begin_capture(mode) if mode is not None else stream.begin_capture()
            try:
                for fn, args in calls:
                    fn(*args)
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # an invalidated capture: the first error is the one to see
                    pass
                lib.st_cuda_clear_error()
                raise
            graph = stream.end_capture()
        return _Captured(graph, stream, self)

    def _blas_gemm(self, symbol: str, kernel):
        """st_gemm through cuBLAS (`cublas_gemm.py`: sgemm/dgemm, TF32 under
        `st.backends.cuda.matmul.allow_tf32`, bfloat16/float16 on tensor cores with float32
        accumulation); the library's own kernel where CuPy's cuBLAS is missing."""
        try:
            cublas, handle = _load_cublas()
        except ImportError:
            return kernel
        return _cublas_gemm.make_gemm(symbol.rsplit("_", 1)[1], kernel, cublas, handle,
                                      _address)

    # ---- host and device copies -------------------------------------------------------------
    def transfer(self, x, device: Device):
        """x copied to device, where x or device (or both) is this backend's device."""
        from ..ops._registry import contiguous
        from ..tensor import Tensor
        from . import get

        dst = get(device)
        src = contiguous(x)
        out = Tensor._empty(x._shape, x.dtype, device, dst)
        nbytes = x.numel() * x.dtype.itemsize
        if nbytes:
            copy = self._copier(x._device, device)
            ex = _execution.current()
            if ex is not None:  # graph mode records the copy as a call
                copy = ex.kernel(copy, "transfer", self)
            copy(_data(out), _data(src), nbytes)
        ex = _execution.current()
        if ex is not None:  # a guard on out's values copies them again from x
            ex.transferred(out, x, lambda: self.transfer(x, device))
        return out

    def _copier(self, src: Device, dst: Device):
        """copy(dst_ptr, src_ptr, nbytes) from memory on src to memory on dst."""
        key = (src, dst)
        fn = self._copiers.get(key)
        if fn is not None:
            return fn
        from . import get

        index = self.index if dst.type != "cuda" else dst.index
        between = src.type == dst.type == "cuda" and src != dst
        from_device = src.type == "cuda"

        def copy(dst_ptr, src_ptr, nbytes):
            stream = cupy.cuda.get_current_stream(index)
            if between:  # the source device's queue must finish before another one reads
                get(src).synchronize()
            _runtime.memcpyAsync(_address(dst_ptr), _address(src_ptr), nbytes,
                                 _runtime.memcpyDefault, stream.ptr)
            if from_device:
                # host memory is read as soon as this returns, and a temporary source must
                # not go back to another device's pool while the copy still reads it (a copy
                # from pageable host memory has been staged by the time memcpyAsync returns)
                stream.synchronize()

        copy.__name__ = f"transfer {src} -> {dst}"
        self._copiers[key] = copy
        return copy

    # ---- interchange ------------------------------------------------------------------------
    def cupy_view(self, t):
        """A CuPy array sharing t's memory (it keeps the storage alive)."""
        if t.dtype.np is None:
            raise TypeError(f"CuPy has no {t.dtype.name}; convert with .float() first")
        s = t._storage
        item = t.dtype.itemsize
        mem = cupy.cuda.UnownedMemory(_address(s.ptr), s.nbytes, s, self.index)
        return cupy.ndarray(t._shape, dtype=t.dtype.np,
                            memptr=cupy.cuda.MemoryPointer(mem, t._offset * item),
                            strides=tuple(st * item for st in t._strides))

    def cuda_array_interface(self, t) -> dict:
        if t.dtype.np is None:
            raise TypeError(f"__cuda_array_interface__: no array-interface type for "
                            f"{t.dtype.name}; convert with .float() first")
        item = t.dtype.itemsize
        p = cupy.cuda.get_current_stream(self.index).ptr
        return {
            "shape": t._shape,
            "typestr": t.dtype.np.str,
            "data": (_address(t._storage.ptr) + t._offset * item if t.numel() else 0, False),
            "strides": None if t._contig else tuple(s * item for s in t._strides),
            "version": 3,
            # the protocol spells the legacy default stream 1; 0 is not allowed
            "stream": p if p else 1,
        }

    def dlpack(self, t, **kwargs):
        from . import _call_dlpack

        return _call_dlpack(self.cupy_view(t), kwargs)

    def dlpack_device(self, t) -> tuple:
        return (2, self.index)

    def from_dlpack(self, obj):
        with self._cupy_device:
            arr = cupy.from_dlpack(obj)
        return self.from_cupy(arr)

    def from_cupy(self, arr):
        """A tensor sharing a CuPy array's memory (copied only when its strides are negative
        or not whole elements)."""
        from .. import dtype as _dt
        from ..tensor import Tensor

        d = _dt.from_numpy_dtype(arr.dtype)
        if d.np != arr.dtype:
            arr = arr.astype(d.np)
        item = arr.itemsize
        if any(s < 0 or s % item for s in arr.strides):
            arr = cupy.ascontiguousarray(arr)
        strides = tuple(s // item for s in arr.strides)
        span = 1 + sum((n - 1) * s for n, s in zip(arr.shape, strides)) if arr.size else 0
        storage = Storage(arr, arr.data.ptr, span * item, _PTR[d.name], self.index)
        ex = _execution.current()
        if ex is not None:  # graph mode: these values come from the host, not a kernel
            ex.host_written(storage)
        return Tensor._make(storage, tuple(arr.shape), strides, 0, d, self.device, self)


class _Captured:
    """A CUDA graph made by `CudaBackend.capture`, with the stream it was captured on."""

    __slots__ = ("graph", "stream", "be")

    def __init__(self, graph, stream, be: CudaBackend):
        self.graph, self.stream, self.be = graph, stream, be

    def launch(self) -> None:
        """Run the captured launches once, in order, on the current stream."""
        be = self.be
        with be._on_device():
            self.graph.launch(cupy.cuda.get_current_stream(be.index))


class _NoSwitchType:
    """A do-nothing context: with a single device there is nothing to switch."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NoSwitch = _NoSwitchType()


def _data(t):
    return t._storage.ptr + t._offset if t._offset else t._storage.ptr
