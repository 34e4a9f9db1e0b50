"""Shared test helpers. The device under test comes from SINGA_TENSOR_DEVICE (default "cpu"),
so the same suite reruns on CUDA when a GPU is present."""

from __future__ import annotations

import ctypes
import os
import zlib

import numpy as np

import singa_tensor as st

# "fake-cuda" runs the suite through backend/cuda.py on the stand-in device defined below, with
# the CPU library's kernels; "emu-cuda" does the same with the CUDA library's own kernels built
# for the CPU (tools/cuda_emu)
REQUESTED_DEVICE = os.environ.get("SINGA_TENSOR_DEVICE", "cpu")
STAND_IN = {"fake-cuda": "cpu", "emu-cuda": "emulated"}.get(REQUESTED_DEVICE)
DEVICE = "cuda:0" if STAND_IN else REQUESTED_DEVICE
# CI replays the same generated examples on every run (it sets CI); elsewhere hypothesis
# explores new ones each time
DERANDOMIZE = bool(os.environ.get("CI"))


def real_gpu() -> bool:
    """Whether a real CUDA device is usable (not the stand-in of a fake-cuda/emu-cuda session)."""
    return STAND_IN is None and st.cuda.is_available()


def device_problem() -> str | None:
    """Why the device under test cannot be used, or None when it can."""
    if DEVICE == "cpu":
        return None
    try:
        st.tensor([0.0], device=DEVICE)
    except Exception as e:  # noqa: BLE001 - any failure means no usable GPU
        return f"SINGA_TENSOR_DEVICE={DEVICE} but no usable CUDA device: {e}"
    return None


def as_tensor(a, requires_grad: bool = False, device: str | None = None):
    """A tensor holding numpy array a (dtype kept), on device (by default the device under
    test)."""
    a = np.asarray(a)
    return st.tensor(a, dtype=st.dtype.from_numpy_dtype(a.dtype) if a.dtype != np.bool_
                     else st.bool, device=device or DEVICE, requires_grad=requires_grad)


def spec_inputs(spec, *, dtype="float64", for_grad: bool = False,
                prefer_samples: bool = False) -> list[tuple[tuple, dict]]:
    """Argument sets (args, kwargs) for the registry op spec, arrays as numpy, the float ones
    in dtype ("bool": the positive values are True, so both truth values occur).

    A unary, binary or reduce op gets values drawn in its domain (b_domain for a binary op's
    second operand), seeded by its name: a 2x3 and a 0-d input; a broadcast against a row and
    an outer broadcast; a reduction over one dim, over all, and over two with keepdim. Other
    ops, and with prefer_samples those that declare them, get spec.samples(). for_grad draws
    from grad_domain, within [-3, 3], where float64 finite differences hold."""
    if spec.kind in ("unary", "binary", "reduce") and not (prefer_samples and spec.samples()):
        sets = _generated_inputs(spec, for_grad)
    else:
        sets = spec.samples()
    dtype = np.dtype(dtype)

    def cast(a):
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            return a
        return np.asarray(a > 0) if dtype == np.bool_ else a.astype(dtype)  # 0-d stays an array

    return [(tuple(cast(a) for a in args), kwargs) for args, kwargs in sets]


def _generated_inputs(spec, for_grad: bool) -> list[tuple[tuple, dict]]:
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    lo, hi = spec.domain
    if for_grad:
        lo, hi = spec.grad_domain or spec.domain
        lo, hi = max(lo, -3.0), min(hi, 3.0)
    b_lo, b_hi = getattr(spec, "b_domain", None) or (lo, hi)

    def a(shape):
        return rng.uniform(lo, hi, size=shape)

    def b(shape):
        return rng.uniform(b_lo, b_hi, size=shape)

    if spec.kind == "unary":
        return [((a((2, 3)),), {}), ((a(()),), {})]
    if spec.kind == "binary":
        return [((a((2, 3)), b((3,))), {}), ((a((2, 1)), b((1, 3))), {})]
    return [((a((2, 3, 2)),), {"dim": 1}), ((a((3, 2)),), {"dim": None}),
            ((a((2, 3, 2)),), {"dim": (0, 2), "keepdim": True})]


def spec_tensors(args, *, requires_grad: bool = False, device: str | None = None) -> list:
    """args with each numpy array made a tensor on device (by default the device under test);
    with requires_grad the float ones require grad."""
    return [as_tensor(a, requires_grad=requires_grad and a.dtype.kind == "f", device=device)
            if isinstance(a, np.ndarray) else a for a in args]


def to_numpy(t) -> np.ndarray:
    """The values of t (a tensor on any device, an array or a number) as a numpy array, a
    copy for a tensor. Tests read results through this: t.numpy() of a device tensor raises,
    in a test as in the library, which must never come to rely on it."""
    if isinstance(t, np.ndarray):
        return t
    if not isinstance(t, st.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.dtype is st.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, msg=""):
    g = to_numpy(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"{msg}: shape {g.shape} != expected {w.shape}"
    if w.dtype == np.bool_ or g.dtype == np.bool_:
        assert np.array_equal(g.astype(bool), w.astype(bool)), f"{msg}: {g} != {w}"
        return
    if w.dtype.kind in "iu" and g.dtype.kind in "iu":
        assert np.array_equal(g, w), f"{msg}: {g} != {w}"
        return
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=equal_nan, err_msg=msg)


def assert_ulp_close(got, want, ulps: float, dtype=None, msg: str = "") -> None:
    """got within `ulps` units in the last place of want, element by element: |got - want|
    (in float64) over the spacing of want rounded to `dtype`, by default the less precise of
    the two float dtypes. NaN must meet NaN and an infinity the same infinity, as in
    assert_array_equal. For results numpy or BLAS computes with CPU-dependent kernels
    (transcendentals, sums, matrix products), where a bit-for-bit comparison holds on some
    CPUs only; state at the call site why the bound is what it is."""
    g, w = to_numpy(got), np.asarray(want)
    assert g.shape == w.shape or w.ndim == 0, f"{msg}: shape {g.shape} != expected {w.shape}"
    w = np.broadcast_to(w, g.shape)
    if dtype is None:
        floats = [d for d in (g.dtype, w.dtype) if d.kind == "f"]
        assert floats, f"{msg}: ulps need a float dtype, got {g.dtype} and {w.dtype}"
        dtype = max(floats, key=lambda d: np.finfo(d).eps)
    with np.errstate(over="ignore"):  # where want overflows dtype, got must be infinite
        rounded = w.astype(dtype)
        spacing = np.array(np.spacing(np.abs(rounded)), dtype=np.float64)
    finite = np.isfinite(rounded)
    top = finite & np.isinf(spacing)  # above the largest finite value; take the gap below it
    spacing[top] = np.spacing(np.nextafter(np.abs(rounded[top]), 0))
    g64 = g.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.array(np.abs(g64 - w.astype(np.float64)) / spacing)
    same = (g64 == rounded) | (np.isnan(g64) & np.isnan(rounded))
    err[~finite] = np.where(same[~finite], 0.0, np.inf)
    err[np.isnan(err)] = np.inf  # got is NaN or infinite where want is finite
    if err.size and err.max() > ulps:
        at = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
        raise AssertionError(
            f"{msg}: {int((err > ulps).sum())} of {err.size} elements further than {ulps} ulp "
            f"({np.dtype(dtype).name}); the worst, {err[at]:.3g} ulp at index {at}: got "
            f"{g[at]!r}, want {w[at]!r}")


# ---- a stand-in CUDA device for machines without a GPU ----------------------------------------
# backend/cuda.py runs unchanged on top of fakes: "device memory" is host memory, the kernels
# are the CPU library's (the trailing stream argument is checked and dropped) or, with
# kernels="emulated", the CUDA library's own built for the CPU by tools/cuda_emu, and cuBLAS is a
# numpy model of its column-major strided-batched GEMM. This exercises every Python path of the
# CUDA backend (allocation, launches, transfers, the cuBLAS argument mapping) without a GPU, and
# in the emulated variant the CUDA kernels' indexing, reductions and launch configurations.


class FakeCudaError(RuntimeError):
    pass


class _FakeMem:
    """A pooled host buffer: freed buffers are kept by size and handed out again, like
    CuPy's memory pool, so the allocator statistics behave alike."""

    free: dict = {}
    used = [0]

    def __init__(self, nbytes: int):
        cached = self.free.get(nbytes)
        # a recognisable pattern: a kernel that forgets to write an element shows it
        self.buf = cached.pop() if cached else np.full(max(nbytes, 1), 0xAB, dtype=np.uint8)
        self.ptr = self.buf.ctypes.data if nbytes else 0
        self.nbytes = nbytes
        self.used[0] += nbytes

    def __del__(self):
        self.used[0] -= self.nbytes
        self.free.setdefault(self.nbytes, []).append(self.buf)


def _fake_cupy(pool_limit: int):
    import types

    streams_seen = []

    class OutOfMemoryError(MemoryError):
        pass

    def alloc(nbytes):
        if nbytes > pool_limit:
            raise OutOfMemoryError(f"Out of memory allocating {nbytes:,} bytes")
        return _FakeMem(nbytes)

    def memcpy_async(dst, src, n, kind, stream):
        streams_seen.append(stream)
        if stream in capturing:
            raise FakeCudaError("memcpyAsync of host memory on a capturing stream")
        ctypes.memmove(dst, src, n)

    # Streams and CUDA-graph capture: `with stream:` makes a stream current; launches on a
    # capturing stream are recorded (arguments as they are at capture, as CUDA copies kernel
    # parameters then) and run only when the graph is launched.
    current: list = []
    capturing: dict = {}  # stream ptr -> launches captured so far
    graph_launches = []

    class Graph:
        def __init__(self, launches):
            self.launches = launches

        def launch(self, stream=None):
            graph_launches.append(len(self.launches))
            for fn, args in self.launches:
                fn(*args)

    class Stream:
        _next = [0x5000]

        def __init__(self, null=False, non_blocking=False, ptr=None):
            if ptr is None:
                ptr = self._next[0]
                self._next[0] += 0x10
            self.ptr = ptr

        def __enter__(self):
            current.append(self)
            return self

        def __exit__(self, *exc):
            current.pop()
            return False

        def synchronize(self):
            if self.ptr in capturing:
                raise FakeCudaError("synchronize of a capturing stream")

        def begin_capture(self, mode=None):
            if self.ptr == 0 or self.ptr in capturing:
                raise FakeCudaError("cannot begin capture on this stream")
            capturing[self.ptr] = []

        def end_capture(self):
            return Graph(capturing.pop(self.ptr))

        def is_capturing(self):
            return self.ptr in capturing

    null_stream = Stream(ptr=0)

    class Device:
        def __init__(self, index=0):
            self.id = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    class Pool:
        def used_bytes(self):
            return _FakeMem.used[0]

        def free_bytes(self):
            return sum(k * len(v) for k, v in _FakeMem.free.items())

        def free_all_blocks(self):
            _FakeMem.free.clear()

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1, getDevice=lambda: 0, CUDARuntimeError=FakeCudaError,
        memcpyAsync=memcpy_async, memcpyDefault=4, streamCaptureModeRelaxed=2)
    cuda = types.SimpleNamespace(
        runtime=runtime, alloc=alloc, Device=Device, Stream=Stream,
        get_current_stream=lambda i=-1: current[-1] if current else null_stream,
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1))
    mod = types.ModuleType("cupy")
    mod.cuda = cuda
    mod.get_default_memory_pool = Pool
    mod.streams_seen = streams_seen
    mod.capturing, mod.graph_launches = capturing, graph_launches
    return mod


def _host_matrix(addr, rows, cols, ld, dtype):
    """The column-major rows x cols matrix at addr with leading dimension ld, as numpy."""
    item = np.dtype(dtype).itemsize
    n = (rows - 1) + (cols - 1) * ld + 1
    buf = (ctypes.c_char * (n * item)).from_address(addr)
    flat = np.frombuffer(buf, dtype=dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (item, ld * item))


def _fake_cublas(cupy):
    import types

    calls = []

    def strided_batched(dtype):
        def gemm(handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                 batch):
            if cupy.cuda.get_current_stream().ptr in cupy.capturing:  # as CuPy's wrappers do
                raise NotImplementedError("calling cuBLAS API during stream capture is "
                                          "currently unsupported")
            calls.append((ta, tb, m, n, k, lda, ldb, ldc, batch))
            al = np.frombuffer((ctypes.c_char * 8).from_address(alpha), dtype=dtype, count=1)[0]
            be = np.frombuffer((ctypes.c_char * 8).from_address(beta), dtype=dtype, count=1)[0]
            item = np.dtype(dtype).itemsize
            for p in range(batch):
                A = _host_matrix(a + p * sa * item, *((m, k) if ta == 0 else (k, m)), lda, dtype)
                B = _host_matrix(b + p * sb * item, *((k, n) if tb == 0 else (n, k)), ldb, dtype)
                C = _host_matrix(c + p * sc * item, m, n, ldc, dtype)
                prod = (A if ta == 0 else A.T) @ (B if tb == 0 else B.T)
                C[...] = al * prod + (be * C if be != 0 else 0)
        return gemm

    def strided_batched_ex(handle, ta, tb, m, n, k, alpha, a, atype, lda, sa, b, btype, ldb, sb,
                           beta, c, ctype, ldc, sc, batch, compute, algo):
        # float32, float16 (2) and bfloat16 (14) operands, float32 scalars and accumulation
        # (compute types 68 and 77; TF32 rounding of the inputs is not modelled)
        if cupy.cuda.get_current_stream().ptr in cupy.capturing:
            raise NotImplementedError("calling cuBLAS API during stream capture is "
                                      "currently unsupported")
        assert atype == btype == ctype and compute in (68, 77), (atype, compute)
        calls.append((ta, tb, m, n, k, lda, ldb, ldc, batch, atype, compute))
        al = np.frombuffer((ctypes.c_char * 4).from_address(alpha), np.float32, count=1)[0]
        be = np.frombuffer((ctypes.c_char * 4).from_address(beta), np.float32, count=1)[0]
        store = {0: np.float32, 2: np.float16, 14: np.uint16}[atype]
        item = np.dtype(store).itemsize

        def load(x):
            if atype == 14:
                return (x.astype(np.uint32) << 16).view(np.float32)
            return x.astype(np.float32)

        def round_to(v):
            if atype != 14:
                return v.astype(store)
            bits = np.ascontiguousarray(v, np.float32).view(np.uint32)
            return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)

        for p in range(batch):
            A = _host_matrix(a + p * sa * item, *((m, k) if ta == 0 else (k, m)), lda, store)
            B = _host_matrix(b + p * sb * item, *((k, n) if tb == 0 else (n, k)), ldb, store)
            C = _host_matrix(c + p * sc * item, m, n, ldc, store)
            prod = (load(A) if ta == 0 else load(A).T) @ (load(B) if tb == 0 else load(B).T)
            C[...] = round_to(al * prod + (be * load(C) if be != 0 else 0))

    return types.SimpleNamespace(
        sgemmStridedBatched=strided_batched(np.float32),
        dgemmStridedBatched=strided_batched(np.float64),
        gemmStridedBatchedEx=strided_batched_ex,
        setPointerMode=lambda h, mode: None, CUBLAS_POINTER_MODE_HOST=0, calls=calls)


class _FakeLib:
    """Kernels under the CUDA ABI: every kernel takes a trailing stream. With the CPU library
    (takes_stream=False) the stream is checked and dropped; the emulated CUDA library takes it."""

    def __init__(self, kernels, ffi, capturing, takes_stream=False):
        self._kernels, self._ffi = kernels, ffi
        self._takes_stream = takes_stream
        self.error = None  # the next "launch error" to report
        self.streams = []
        self._capturing = capturing

    def st_cuda_device_count(self):
        return 1

    def st_cuda_last_error(self):
        err, self.error = self.error, None
        if err is None and self._takes_stream:
            return self._kernels.st_cuda_last_error()
        return self._ffi.NULL if err is None else self._ffi.new("char[]", err.encode())

    def st_cuda_clear_error(self):
        self.error = None
        if self._takes_stream:
            self._kernels.st_cuda_clear_error()

    def __getattr__(self, symbol):
        fn = getattr(self._kernels, symbol)  # AttributeError: no such kernel
        if not symbol.startswith("st_") or symbol.startswith(("st_alloc", "st_free")):
            raise AttributeError(symbol)
        streams, capturing, ffi = self.streams, self._capturing, self._ffi
        returns = ffi.typeof(fn).result is not ffi.typeof("void")
        keep = None if self._takes_stream else -1

        def launch(*args):
            stream = args[-1]
            assert ffi.typeof(stream) is ffi.typeof("void *"), stream
            streams.append(stream)
            captured = capturing.get(int(ffi.cast("uintptr_t", stream)))
            if captured is not None:
                if returns:  # its result would need the host to wait for the device
                    raise FakeCudaError(f"{symbol}: waiting on a capturing stream")
                captured.append((fn, args[:keep]))
                return None
            return fn(*args[:keep])

        setattr(self, symbol, launch)
        return launch


_fakes: dict = {}  # kernels -> the stand-in backend module


def install_fake_cuda(pool_limit: int = 1 << 34, kernels: str | None = None):
    """Make "cuda:0" the stand-in device (see above); returns its backend module. kernels is
    "cpu" (the CPU library's) or "emulated" (the CUDA library's, built for the CPU); by default
    the session's (SINGA_TENSOR_DEVICE), else "cpu". Idempotent: the session-wide install and
    the test fixture share it."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    from singa_tensor import backend
    from singa_tensor.backend import cpu

    kernels = kernels or STAND_IN or "cpu"
    fake = _fakes.get(kernels)
    if fake is None:
        cupy = _fake_cupy(pool_limit)
        ffi_mod = types.ModuleType("singa_tensor.backend._cuda_ffi")
        if kernels == "emulated":
            ffi_mod.ffi, lib = emulated_cuda_library()
            ffi_mod.lib = _FakeLib(lib, ffi_mod.ffi, cupy.capturing, takes_stream=True)
        else:
            ffi_mod.ffi, ffi_mod.lib = cpu.ffi, _FakeLib(cpu.lib, cpu.ffi, cupy.capturing)
        names = ("cupy", "singa_tensor.backend._cuda_ffi")
        saved = {n: sys.modules.get(n) for n in names}
        sys.modules.update(dict(zip(names, (cupy, ffi_mod))))
        try:
            path = Path(backend.__file__).with_name("cuda.py")
            spec = importlib.util.spec_from_file_location("singa_tensor.backend._fake_cuda",
                                                          path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
        cublas = _fake_cublas(cupy)
        mod._load_cublas = lambda: (cublas, lambda: 1)
        mod.fake_cupy, mod.fake_lib, mod.fake_cublas = cupy, ffi_mod.lib, cublas
        mod.fake_kernels = kernels
        fake = _fakes[kernels] = mod
    _forget_cuda()
    backend._loaded["cuda"] = fake
    _hide_nccl(True)
    return fake


_nccl_usable = None


def _hide_nccl(hide: bool) -> None:
    """The stand-in device has no NCCL: with it installed, init_process_group("auto") must not
    pick NCCL because an installed CuPy has the module."""
    global _nccl_usable
    from singa_tensor import distributed

    if hide and _nccl_usable is None:
        _nccl_usable = distributed._nccl_usable
        distributed._nccl_usable = lambda: False
    elif not hide and _nccl_usable is not None:
        distributed._nccl_usable, _nccl_usable = _nccl_usable, None


_emulated = None
_emu_tools = None


def cuda_emu_tools():
    """tools/cuda_emu/build.py as a module (the translator, compile_library, build, load)."""
    global _emu_tools
    if _emu_tools is None:
        import importlib.util
        from pathlib import Path

        path = Path(__file__).resolve().parent.parent / "tools" / "cuda_emu" / "build.py"
        spec = importlib.util.spec_from_file_location("_cuda_emu_build", path)
        _emu_tools = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_emu_tools)
    return _emu_tools


def emulated_cuda_library():
    """(ffi, lib) of the CUDA library's kernels built for the CPU (tools/cuda_emu/build.py;
    the first call in a checkout compiles it, about a minute on two cores)."""
    global _emulated
    if _emulated is None:
        # e.g. "address" (run Python with libasan preloaded) checks every access of the kernels
        _emulated = cuda_emu_tools().load(sanitize=os.environ.get("SINGA_TENSOR_EMU_SANITIZE", ""))
    return _emulated


def uninstall_fake_cuda() -> None:
    from singa_tensor import backend, creation

    if backend._loaded.get("cuda") in _fakes.values():
        del backend._loaded["cuda"]
    _hide_nccl(False)
    _forget_cuda()
    if creation.get_default_device().type == "cuda":
        creation.set_default_device("cpu")


def _forget_cuda() -> None:
    """Drop every cache entry that holds a CUDA backend or tensor."""
    from singa_tensor import backend, creation
    from singa_tensor.ops import _registry

    for k in [k for k in backend._by_key if k[0] == "cuda"]:
        del backend._by_key[k]
    for k in [k for k in _registry._kernel_cache if getattr(k[0], "name", "") == "cuda"]:
        del _registry._kernel_cache[k]
    for k in [k for k in creation._scalar_cache if st.device(k[3]).type == "cuda"]:
        del creation._scalar_cache[k]
