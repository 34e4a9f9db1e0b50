// The CUDA runtime as seen by the emulated build of cuda/: the kernels of cuda/*.cu compiled by
// the host C++ compiler and run on the CPU, one block at a time, each CUDA thread a fiber.
// build.py puts this directory first on the include path, so `#include <cuda_runtime.h>` finds
// this file, and rewrites `kernel<<<grid, block, shmem, stream>>>(args)` into emu::launch.
//
// What it models: thread/block indices and dimensions; __syncthreads as a barrier of the
// block's threads; warp shuffles and ballots as collectives of the warp's lanes (a lane waits
// there until every lane of the mask arrives); launch-configuration limits (threads per block,
// grid dimensions, 48 KiB of shared memory), reported through cudaGetLastError as a real launch
// would be; the memory and error API the library calls. A thread runs until it reaches a
// barrier or a collective, then the next one runs, so code that relies on lanes of a warp
// running in step without a barrier reads stale values here as it may on a GPU.
//
// Shared memory: a __shared__ variable is a static of its function that the first thread of
// each block to reach its declaration fills with the byte 0xAB (build.py adds the call), and
// dynamic shared memory is filled so at the start of each block, so a read of shared memory
// that no thread of the block wrote shows the pattern instead of a previous block's values.
//
// What it does not model: concurrency between blocks (they run one after another), memory
// spaces (device pointers are host pointers), and timing.
#ifndef SINGA_TENSOR_CUDA_EMU_RUNTIME_H_
#define SINGA_TENSOR_CUDA_EMU_RUNTIME_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// ---- qualifiers -------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static

// ---- types and enums of the runtime API -------------------------------------------------------
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};

struct CUstream_st;
typedef CUstream_st* cudaStream_t;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMultiProcessorCount = 16,
};

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* dev);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev);
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s);
cudaError_t cudaFreeAsync(void* p, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);

namespace emu {

// ---- the thread being run ---------------------------------------------------------------------
struct Lane {
  uint3 idx;  // threadIdx
};
extern Lane* g_lane;
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

// Block barrier (__syncthreads) and warp collective (each lane of `mask` contributes `bytes`
// bytes of `value`; the call returns once all of them have, with every lane's contribution in
// `all`, indexed by lane).
void sync_block();
void warp_exchange(unsigned mask, const void* value, size_t bytes, unsigned char (*all)[8]);
unsigned lane_id();
unsigned char* dynamic_shared();
void fresh_shared(void* p, size_t bytes);

// Runs the kernel body f as every thread of the grid (build.py writes the calls).
void launch_impl(const char* kernel, const std::function<void()>& f, dim3 grid, dim3 block,
                 size_t shared_bytes);
template <class F>
void launch(const char* kernel, F f, dim3 grid, dim3 block, size_t shared_bytes = 0,
            cudaStream_t = nullptr) {
  launch_impl(kernel, std::function<void()>(f), grid, block, shared_bytes);
}

template <class T>
T shuffle(unsigned mask, T v, int src, int width, bool keep_if_outside) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a word");
  unsigned char all[32][8];
  warp_exchange(mask, &v, sizeof(T), all);
  const int lane = int(lane_id());
  const int base = lane & ~(width - 1);
  if (keep_if_outside && (src < base || src >= base + width)) return v;
  src = base + (src & (width - 1));
  T out;
  std::memcpy(&out, all[src], sizeof(T));
  return out;
}

}  // namespace emu

#define threadIdx (::emu::g_lane->idx)
#define blockIdx (::emu::g_block_idx)
#define blockDim (::emu::g_block_dim)
#define gridDim (::emu::g_grid_dim)
#define warpSize 32

inline void __syncthreads() { ::emu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  unsigned char all[32][8];
  const unsigned char none = 0;
  ::emu::warp_exchange(mask, &none, 1, all);
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::emu::shuffle(mask, v, src, width, false);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::emu::shuffle(mask, v, int(::emu::lane_id()) ^ lane_mask, width, true);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::emu::shuffle(mask, v, int(::emu::lane_id()) - int(delta), width, true);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::emu::shuffle(mask, v, int(::emu::lane_id()) + int(delta), width, true);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  unsigned char all[32][8];
  const unsigned char p = predicate != 0;
  ::emu::warp_exchange(mask, &p, 1, all);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) bits |= unsigned(all[l][0]) << l;
  return bits;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return unsigned((static_cast<unsigned long long>(a) * b) >> 32);
}
inline float __fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dadd_rn(double a, double b) { return a + b; }

// Threads of a block never run at the same time, so a read-modify-write is atomic as written.
template <class T>
T atomicAdd(T* p, T v) {
  T old = *p;
  *p = T(old + v);
  return old;
}
template <class T>
T atomicCAS(T* p, T compare, T value) {
  T old = *p;
  if (old == compare) *p = value;
  return old;
}
template <class T>
T atomicExch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  T old = *p;
  if (v < old) *p = v;
  return old;
}

#endif  // SINGA_TENSOR_CUDA_EMU_RUNTIME_H_
