"""The CUDA emulator of tools/cuda_emu, which runs the CUDA library's kernels on the CPU: its
source translation, and its runtime's model of threads, barriers, warp collectives and launch
limits, checked on small kernels written here. (The CUDA library itself runs on it in
test_cuda_emulated.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from . import helpers

emu = helpers.cuda_emu_tools()

KERNELS = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void warp_sum(const float* x, float* y) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[t];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) y[t / 32] = v;
}

__global__ void lane_scan(const int* x, int* y) {  // inclusive prefix sums within each warp
  const int lane = threadIdx.x & 31;
  int v = x[threadIdx.x];
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  y[threadIdx.x] = v;
}

__global__ void ballots(const int* flags, unsigned* out) {
  const unsigned b = __ballot_sync(0xffffffffu, flags[threadIdx.x] != 0);
  if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = b;
}

template <bool kBarrier>
__global__ void reverse(const int* x, int* y) {
  __shared__ int buf[1024];
  buf[threadIdx.x] = x[threadIdx.x];
  if (kBarrier) __syncthreads();
  y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__global__ void broadcast(const int* x, int* y) {  // no barrier between the write and the reads
  __shared__ int v;
  if (threadIdx.x == 0) v = x[0];
  y[threadIdx.x] = v;
}

__global__ void dynamic_reverse(const double* x, double* y) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* buf = reinterpret_cast<double*>(smem);
  buf[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__global__ void coordinates(int* out) {  // every thread writes its (block, thread) position
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  int* o = out + 6 * (block * threads + thread);
  o[0] = blockIdx.x; o[1] = blockIdx.y; o[2] = blockIdx.z;
  o[3] = threadIdx.x; o[4] = threadIdx.y; o[5] = threadIdx.z;
}

__global__ void sync_after_return(int* y) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  y[threadIdx.x] = 1;
}

__global__ void divergent_collective(int* y) {
  if (threadIdx.x < 16) y[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 0);
  else __syncthreads();
}

__global__ void atomic_count(int* counter) { atomicAdd(counter, 1); }

extern "C" {
int run_warp_sum(const float* x, float* y, int blocks, int threads) {
  warp_sum<<<blocks, threads>>>(x, y);
  return cudaGetLastError();
}
int run_lane_scan(const int* x, int* y, int n) {
  lane_scan<<<1, n>>>(x, y);
  return cudaGetLastError();
}
int run_ballots(const int* f, unsigned* out, int n) {
  ballots<<<1, n>>>(f, out);
  return cudaGetLastError();
}
int run_reverse(const int* x, int* y, int n, int barrier) {
  if (barrier) reverse<true><<<1, n>>>(x, y);
  else reverse<false><<<1, n>>>(x, y);
  return cudaGetLastError();
}
int run_broadcast(const int* x, int* y, int n) {
  broadcast<<<1, n>>>(x, y);
  return cudaGetLastError();
}
int run_dynamic_reverse(const double* x, double* y, int n, size_t bytes) {
  dynamic_reverse<<<1, n, bytes, nullptr>>>(x, y);
  return cudaGetLastError();
}
int run_coordinates(int* out, int gx, int gy, int gz, int bx, int by, int bz) {
  coordinates<<<dim3(gx, gy, gz), dim3(bx, by, bz)>>>(out);
  return cudaGetLastError();
}
int run_sync_after_return(int* y) {
  sync_after_return<<<1, 64>>>(y);
  return cudaGetLastError();
}
int run_divergent_collective(int* y) {
  divergent_collective<<<1, 32>>>(y);
  return cudaGetLastError();
}
int run_atomic_count(int* c, int blocks, int threads) {
  atomic_count<<<blocks, threads>>>(c);
  return cudaGetLastError();
}
const char* error_text(int e) { return cudaGetErrorString(cudaError_t(e)); }
}
"""

DECLS = """
int run_warp_sum(const float* x, float* y, int blocks, int threads);
int run_lane_scan(const int* x, int* y, int n);
int run_ballots(const int* f, unsigned* out, int n);
int run_reverse(const int* x, int* y, int n, int barrier);
int run_dynamic_reverse(const double* x, double* y, int n, size_t bytes);
int run_broadcast(const int* x, int* y, int n);
int emu_set_descending(int descending);
int run_coordinates(int* out, int gx, int gy, int gz, int bx, int by, int bz);
int run_sync_after_return(int* y);
int run_divergent_collective(int* y);
int run_atomic_count(int* c, int blocks, int threads);
const char* error_text(int e);
"""

INVALID_CONFIGURATION, LAUNCH_FAILURE = 9, 719


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cffi = pytest.importorskip("cffi")
    d = tmp_path_factory.mktemp("emu")
    (d / "kernels.cu").write_text(KERNELS)
    path = emu.compile_library([d / "kernels.cu"], d / "libkernels.so")
    ffi = cffi.FFI()
    ffi.cdef(DECLS)
    return _Lib(ffi, ffi.dlopen(str(path)))


class _Lib:
    def __init__(self, ffi, lib):
        self.ffi, self._lib = ffi, lib

    def __getattr__(self, name):
        return getattr(self._lib, name)


def _p(lib, a):
    return lib.ffi.cast("void *", a.ctypes.data)


def _error(lib, code):
    return lib.ffi.string(lib.error_text(code)).decode()


def test_warp_shuffles_reduce_each_warp(lib):
    x = np.random.default_rng(0).standard_normal(3 * 128).astype(np.float32)
    y = np.zeros(12, np.float32)
    assert lib.run_warp_sum(_p(lib, x), _p(lib, y), 3, 128) == 0
    np.testing.assert_allclose(y, x.reshape(12, 32).sum(1), rtol=1e-5)


def test_shuffle_up_scans_and_ballot_gathers_each_warp(lib):
    x = np.arange(1, 65, dtype=np.int32)
    y = np.zeros(64, np.int32)
    assert lib.run_lane_scan(_p(lib, x), _p(lib, y), 64) == 0
    np.testing.assert_array_equal(y, np.concatenate([np.cumsum(x[:32]), np.cumsum(x[32:])]))
    flags = (np.arange(64) % 3 == 0).astype(np.int32)
    out = np.zeros(2, np.uint32)
    assert lib.run_ballots(_p(lib, flags), _p(lib, out), 64) == 0
    want = [sum(1 << lane for lane in range(32) if flags[32 * w + lane]) for w in range(2)]
    assert out.tolist() == want


def test_barrier_orders_shared_memory_and_its_absence_shows(lib):
    n = 256
    first, second = np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32) + 1000
    y = np.zeros(n, np.int32)
    assert lib.run_reverse(_p(lib, first), _p(lib, y), n, 1) == 0
    np.testing.assert_array_equal(y, first[::-1])
    # without __syncthreads, the first threads read shared memory before the last ones wrote
    # it, as a racing GPU thread may: they read the emulator's fill pattern, not old values
    assert lib.run_reverse(_p(lib, second), _p(lib, y), n, 0) == 0
    pattern = np.frombuffer(b"\xab" * 4, np.int32)[0]
    assert (y[: n // 2] == pattern).all()
    np.testing.assert_array_equal(y[n // 2:], second[::-1][n // 2:])
    assert lib.run_reverse(_p(lib, first), _p(lib, y), n, 0) == 0  # not the last launch's
    assert (y[: n // 2] == pattern).all()


def test_descending_order_shows_a_missing_barrier_after_a_low_thread_writes(lib):
    # thread 0 writes, the others read without a barrier: in index order the write comes
    # first and the bug hides; in reverse order every other thread reads the fill pattern
    x, y = np.array([7], np.int32), np.zeros(64, np.int32)
    was = lib.emu_set_descending(0)
    try:
        assert lib.run_broadcast(_p(lib, x), _p(lib, y), 64) == 0
        assert (y == 7).all()
        lib.emu_set_descending(1)
        assert lib.run_broadcast(_p(lib, x), _p(lib, y), 64) == 0
        pattern = np.frombuffer(b"\xab" * 4, np.int32)[0]
        assert y[0] == 7 and (y[1:] == pattern).all()
        # the correct kernels give the same results in either order
        v = np.random.default_rng(2).standard_normal(64).astype(np.float32)
        s = np.zeros(2, np.float32)
        assert lib.run_warp_sum(_p(lib, v), _p(lib, s), 1, 64) == 0
        np.testing.assert_allclose(s, v.reshape(2, 32).sum(1), rtol=1e-5)
    finally:
        lib.emu_set_descending(was)


def test_dynamic_shared_memory_and_its_limit(lib):
    n = 512
    x = np.random.default_rng(1).standard_normal(n)
    y = np.zeros(n)
    assert lib.run_dynamic_reverse(_p(lib, x), _p(lib, y), n, n * 8) == 0
    np.testing.assert_array_equal(y, x[::-1])
    code = lib.run_dynamic_reverse(_p(lib, x), _p(lib, y), n, 48 * 1024 + 1)
    assert code == INVALID_CONFIGURATION
    assert "dynamic_reverse<<<(1,1,1), (512,1,1), 49153>>>: invalid configuration" in \
        _error(lib, code)


def test_indices_cover_three_dimensional_grids(lib):
    g, b = (2, 3, 2), (4, 2, 3)
    out = np.full((12, 24, 6), -1, np.int32)
    assert lib.run_coordinates(_p(lib, out), *g, *b) == 0
    want = [[bx, by, bz, tx, ty, tz]
            for bz in range(g[2]) for by in range(g[1]) for bx in range(g[0])
            for tz in range(b[2]) for ty in range(b[1]) for tx in range(b[0])]
    np.testing.assert_array_equal(out.reshape(-1, 6), np.array(want))


@pytest.mark.parametrize("grid,block", [((1, 1, 1), (2048, 1, 1)), ((1, 1, 1), (8, 8, 32)),
                                        ((1, 65536, 1), (1, 1, 1)), ((0, 1, 1), (32, 1, 1)),
                                        ((1, 1, 1), (1, 1, 65))])
def test_launch_limits_are_configuration_errors(lib, grid, block):
    out = np.zeros(6 * 2048, np.int32)
    code = lib.run_coordinates(_p(lib, out), *grid, *block)
    assert code == INVALID_CONFIGURATION
    assert "coordinates<<<" in _error(lib, code)
    assert not out.any()  # nothing ran


def test_barrier_after_some_threads_returned_is_reported(lib):
    y = np.zeros(64, np.int32)
    code = lib.run_sync_after_return(_p(lib, y))
    assert code == LAUNCH_FAILURE
    assert "__syncthreads reached by some threads" in _error(lib, code)
    assert "sync_after_return, block (0,0,0)" in _error(lib, code)


def test_collective_that_half_a_warp_skips_is_a_deadlock(lib):
    y = np.zeros(32, np.int32)
    code = lib.run_divergent_collective(_p(lib, y))
    assert code == LAUNCH_FAILURE
    assert "deadlock" in _error(lib, code)
    # the emulator recovers: the next launch runs normally
    x = np.arange(32, dtype=np.float32)
    s = np.zeros(1, np.float32)
    assert lib.run_warp_sum(_p(lib, x), _p(lib, s), 1, 32) == 0
    assert s[0] == x.sum()


def test_atomics_count_every_thread(lib):
    c = np.zeros(1, np.int32)
    assert lib.run_atomic_count(_p(lib, c), 5, 96) == 0
    assert c[0] == 480


def test_translation_rewrites_launches_and_keeps_lines():
    src = (
        "// kernel<<<1, 2>>>(a) in a comment stays\n"
        "const char* s = \"x<<<y>>>(z)\";\n"
        "  reduce<Op, 32,\n"
        "         kWrite>\n"
        "      <<<grid_for(n), dim3(4, 2), 0, as_stream(st)>>>(\n"
        "          f(a, b), c);\n"
        "  ns::k<<<1, 1>>>(x);\n"
        "  extern __shared__ __align__(16) unsigned char smem[];\n")
    out = emu.translate(src, "t.cu")
    body = out.split("\n", 1)[1]
    assert out.startswith('#line 1 "t.cu"\n')
    assert body.count("\n") == src.count("\n")
    lines = body.split("\n")
    assert lines[0] == "// kernel<<<1, 2>>>(a) in a comment stays"
    assert lines[1] == "const char* s = \"x<<<y>>>(z)\";"
    assert lines[2] == ('  ::emu::launch("reduce<Op, 32, kWrite>", [=]() { reduce<Op, 32, kWrite>('
                        '           f(a, b), c); }, grid_for(n), dim3(4, 2), 0, as_stream(st))')
    assert lines[3:6] == ["", "", ";"]
    assert lines[6] == '  ::emu::launch("ns::k", [=]() { ns::k(x); }, 1, 1);'
    assert lines[7] == ("  unsigned char* smem = "
                        "reinterpret_cast<unsigned char*>(::emu::dynamic_shared());")


def test_translation_fills_each_shared_declaration_per_block():
    out = emu.translate("  __shared__ Tile<T, 4> xs, ys[2][3];\n  __shared__ int n;\n", "t.cu")
    assert out.split("\n")[1:3] == [
        "  static Tile<T, 4> xs, ys[2][3]; ::emu::fresh_shared(&xs, sizeof(xs)); "
        "::emu::fresh_shared(&ys, sizeof(ys));",
        "  static int n; ::emu::fresh_shared(&n, sizeof(n));"]


def test_translation_rejects_a_launch_without_arguments():
    with pytest.raises(emu.TranslationError, match="no argument list after >>> of k"):
        emu.translate("k<<<1, 1>>>;\n", "bad.cu")
