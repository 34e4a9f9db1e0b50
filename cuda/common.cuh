// Launch machinery shared by the CUDA kernels: grid sizing, grid-stride loops, broadcast
// indexing through host stride arrays, warp/block reductions, and launch-error recording.
#ifndef SINGA_TENSOR_CUDA_COMMON_CUH_
#define SINGA_TENSOR_CUDA_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "extra.h"
#include "singa_tensor/dtypes.h"
#include "singa_tensor/functors.h"
#include "singa_tensor/shapes.h"
#include "singa_tensor/singa_tensor.h"

// Records cudaGetLastError() (if any) as the thread's pending error, which Python reads through
// st_cuda_last_error() and raises. Call after every launch.
void st_cuda_check_launch();
// Records e when it is not cudaSuccess; returns whether the call succeeded. For runtime calls
// other than launches (memcpy, synchronize) whose failure a kernel entry point must report.
bool st_cuda_check(cudaError_t e);

namespace st {
namespace cuda {

constexpr int kThreads = 256;

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Multiprocessor count of the current device, looked up once per device: grids are sized as a
// multiple of it so that grid-stride loops keep every SM busy without launching millions of
// blocks for large tensors.
int sm_count();

// Blocks for n work items of `per_block` items each, capped at enough blocks to fill the device
// (the kernels loop grid-stride over the rest). Never 0: callers return early when n == 0.
inline unsigned grid_for(int64_t n, int64_t per_block = kThreads) {
  int64_t want = (n + per_block - 1) / per_block;
  int64_t cap = int64_t(sm_count()) * 8;  // 8 x 256 threads = the 2048-thread SM limit
  if (want > cap) want = cap;
  return unsigned(want < 1 ? 1 : want);
}

__device__ __forceinline__ int64_t thread_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() { return int64_t(gridDim.x) * blockDim.x; }

// Launches kernel<<<grid_for(n), kThreads>>> on the stream for n grid-stride items, then records
// any launch error. Does nothing when n <= 0 (a zero-sized grid is a launch error).
template <class... KArgs, class... Args>
void launch_1d(void (*kernel)(KArgs...), int64_t n, void* stream, Args... args) {
  if (n <= 0) return;
  kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(args...);
  st_cuda_check_launch();
}

// The merged layout of shapes.h (most broadcasts index through one or two dims), built on the
// host and passed to kernels by value, with the unravelling of a position on the device.
template <int K>
struct StridedIndexer : MergedStrides<K> {
  using Base = MergedStrides<K>;
  using Base::Base;
  using Base::nd;
  using Base::shape;
  using Base::stride;

  // element offsets of the operands at row-major position i; I is the index type of the
  // unravelling (uint32_t when numel fits: 32-bit divisions are several times cheaper)
  template <class I = int64_t>
  __device__ __forceinline__ void offsets(I i, int64_t (&off)[K]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      I s = I(shape[d]);
      I q = i / s;
      I r = i - q * s;
      i = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += int64_t(r) * stride[k][d];
    }
  }
};

// 16-byte vectors for the contiguous fast paths: one load or store instruction per vector.
template <class T>
struct Vec {
  static constexpr int N = sizeof(T) >= 16 ? 1 : int(16 / sizeof(T));
  struct alignas(16) Type {
    T v[N];
  };
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// ---- reductions --------------------------------------------------------------------------------
// Sum/max/... across a warp with shuffles; every lane gets the result.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if constexpr (sizeof(T) < 4) {  // shuffles move 32 or 64 bits
      v = op(v, T(__shfl_xor_sync(0xffffffffu, int(v), o)));
    } else {
      v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
  }
  return v;
}

// Reduction across a whole block (blockDim.x a multiple of 32, at most 1024) through 32 shared
// slots; every thread gets the result. `identity` fills the slots of absent warps.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? partial[lane] : identity;  // every warp finishes the same
  return warp_reduce(v, op);
}

}  // namespace cuda
}  // namespace st

#endif  // SINGA_TENSOR_CUDA_COMMON_CUH_
