// Indexing kernels along the middle axis of [outer, n, inner]; the CUDA twin of cpp/src/index.cc.
// Indices arrive validated and wrapped to [0, n) by Python.
#include "common.cuh"

namespace st {
namespace {

using cuda::thread_count;
using cuda::thread_index;

template <class T>
__global__ void gather_kernel(const T* __restrict__ x, const int64_t* __restrict__ idx,
                              T* __restrict__ y, int64_t total, int64_t nx, int64_t ni,
                              int64_t inner) {
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t r = k / inner, i = k - r * inner, o = r / ni;
    y[k] = x[(o * nx + idx[k]) * inner + i];
  }
}

template <class T>
__global__ void index_select_kernel(const T* __restrict__ x, const int64_t* __restrict__ idx,
                                    T* __restrict__ y, int64_t total, int64_t nx, int64_t ni,
                                    int64_t inner) {
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t r = k / inner, i = k - r * inner, o = r / ni, j = r - o * ni;
    y[k] = x[(o * nx + idx[j]) * inner + i];
  }
}

// A read-modify-write of a 1- or 2-byte element, atomic through a compare-and-swap of the
// aligned 32-bit word that holds it: the word's other bytes are written back unchanged (CuPy
// rounds allocations up to 512 bytes, so that word never leaves mapped memory). f maps the
// element's old bits to its new ones.
template <class E, class F>
__device__ __forceinline__ void atomic_update_in_word(E* d, F f) {
  constexpr unsigned kMask = (1u << (8 * sizeof(E))) - 1u;
  uintptr_t a = reinterpret_cast<uintptr_t>(d);
  unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
  const unsigned shift = unsigned(a & 3) * 8u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned next = unsigned(f(E((assumed >> shift) & kMask))) & kMask;
    old = atomicCAS(word, assumed, (assumed & ~(kMask << shift)) | (next << shift));
  } while (assumed != old);
}

// Addition with the CPU's wrap-around for every dtype; u8 has no hardware atomic, so it is
// added mod 256 inside its word
__device__ __forceinline__ void atomic_add(float* d, float v) { atomicAdd(d, v); }
__device__ __forceinline__ void atomic_add(double* d, double v) { atomicAdd(d, v); }
__device__ __forceinline__ void atomic_add(int32_t* d, int32_t v) { atomicAdd(d, v); }
__device__ __forceinline__ void atomic_add(int64_t* d, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(d), static_cast<unsigned long long>(v));
}
__device__ __forceinline__ void atomic_add(uint8_t* d, uint8_t v) {
  atomic_update_in_word(d, [v](uint8_t cur) { return uint8_t(cur + v); });
}

// the 16-bit floats add in float and round once, inside their word
template <class Tag>
__device__ __forceinline__ void atomic_add_low(uint16_t* d, uint16_t v) {
  atomic_update_in_word(
      d, [v](uint16_t cur) { return cast_store<Tag>(cast_load<Tag>(cur) + cast_load<Tag>(v)); });
}

// d + s in T, or in float rounded once for the 16-bit floats (Tag F16 or BF16)
template <class Tag, class T>
__device__ __forceinline__ T add_elem(T d, T s) {
  if constexpr (std::is_same<Tag, F16>::value || std::is_same<Tag, BF16>::value)
    return cast_store<Tag>(cast_load<Tag>(d) + cast_load<Tag>(s));
  else
    return T(d + s);
}
template <class Tag, class T>
__device__ __forceinline__ void atomic_add_elem(T* d, T v) {
  if constexpr (std::is_same<Tag, F16>::value || std::is_same<Tag, BF16>::value)
    atomic_add_low<Tag>(d, v);
  else
    atomic_add(d, v);
}

// Every write of a scatter lands in the (o, i) column it reads from, so one thread per column,
// walking j in order, reproduces the CPU exactly: last writer wins, sums in the same order.
// kShared: one index per j (index_add) instead of one per element (scatter, scatter_add).
template <class T, bool kAdd, bool kShared, class Tag>
__global__ void scatter_columns_kernel(const T* __restrict__ src, const int64_t* __restrict__ idx,
                                       T* __restrict__ y, int64_t cols, int64_t ny, int64_t ni,
                                       int64_t inner) {
  for (int64_t c = thread_index(); c < cols; c += thread_count()) {
    int64_t o = c / inner, i = c - o * inner;
    for (int64_t j = 0; j < ni; ++j) {
      int64_t s = (o * ni + j) * inner + i;
      T& d = y[(o * ny + (kShared ? idx[j] : idx[s])) * inner + i];
      d = kAdd ? add_elem<Tag>(d, src[s]) : src[s];
    }
  }
}

// One thread per source element, for shapes with too few columns to fill the device. Sums go
// through atomics, so float sums are not bitwise reproducible; a plain scatter with repeated
// indices keeps an unspecified one of the colliding values (the CPU keeps the last; PyTorch
// leaves it undefined too).
template <class T, bool kAdd, bool kShared, class Tag>
__global__ void scatter_elements_kernel(const T* __restrict__ src,
                                        const int64_t* __restrict__ idx, T* __restrict__ y,
                                        int64_t total, int64_t ny, int64_t ni, int64_t inner) {
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t r = k / inner, i = k - r * inner, o = r / ni, j = r - o * ni;
    T* d = y + (o * ny + (kShared ? idx[j] : idx[k])) * inner + i;
    if (kAdd)
      atomic_add_elem<Tag>(d, src[k]);
    else
      *d = src[k];
  }
}

// The column walk is deterministic and needs no atomics; it is the right choice whenever the
// columns alone give the device enough threads, or the walk is short.
constexpr int64_t kEnoughColumns = int64_t(1) << 16;
constexpr int64_t kShortWalk = 4;

template <class T, bool kAdd, bool kShared, class Tag = T>
void scatter(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, int64_t ni,
             int64_t inner, void* stream) {
  const int64_t cols = outer * inner, total = cols * ni;
  if (total == 0) return;
  if (cols >= kEnoughColumns || ni <= kShortWalk)
    cuda::launch_1d(scatter_columns_kernel<T, kAdd, kShared, Tag>, cols, stream, src, idx, y, cols, ny,
                    ni, inner);
  else
    cuda::launch_1d(scatter_elements_kernel<T, kAdd, kShared, Tag>, total, stream, src, idx, y, total,
                    ny, ni, inner);
}

template <class T>
void gather(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx, int64_t ni,
            int64_t inner, void* stream) {
  const int64_t total = outer * ni * inner;
  cuda::launch_1d(gather_kernel<T>, total, stream, x, idx, y, total, nx, ni, inner);
}

template <class T>
void index_select(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx, int64_t ni,
                  int64_t inner, void* stream) {
  const int64_t total = outer * ni * inner;
  cuda::launch_1d(index_select_kernel<T>, total, stream, x, idx, y, total, nx, ni, inner);
}

// ---- nonzero: positions in increasing order, like the CPU's sequential walk ----------------
// Each block owns one contiguous chunk. Pass 1 counts the non-zeros of every chunk; pass 2 lets
// each block find its output offset by summing the counts before it (at most kNzBlocks of
// them), then walks its chunk tile by tile, ranking the flags of a tile with warp ballots.
constexpr int kNzThreads = 256;
constexpr int kNzBlocks = 1024;

__global__ void nonzero_count_kernel(const uint8_t* __restrict__ x, int64_t n, int64_t chunk,
                                     int64_t* __restrict__ counts) {
  const int64_t b = blockIdx.x * chunk, e = b + chunk < n ? b + chunk : n;
  int64_t c = 0;
  for (int64_t k = b + threadIdx.x; k < e; k += blockDim.x) c += x[k] != 0;
  c = cuda::block_reduce(c, fn::add{}, int64_t(0));
  if (threadIdx.x == 0) counts[blockIdx.x] = c;
}

__global__ void nonzero_write_kernel(const uint8_t* __restrict__ x, int64_t n, int64_t chunk,
                                     const int64_t* __restrict__ counts, int64_t* __restrict__ out,
                                     int64_t cap, int64_t* __restrict__ total) {
  __shared__ int warp_counts[kNzThreads / 32];
  int64_t before = 0;
  for (int64_t k = threadIdx.x; k < blockIdx.x; k += blockDim.x) before += counts[k];
  int64_t base = cuda::block_reduce(before, fn::add{}, int64_t(0));
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) *total = base + counts[blockIdx.x];
  const int64_t b = blockIdx.x * chunk, e = b + chunk < n ? b + chunk : n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // base and the tile bounds are the same for the whole block, so every thread runs every
  // iteration and the full-mask ballot is legal
  for (int64_t t0 = b; t0 < e && base < cap; t0 += blockDim.x) {
    const int64_t k = t0 + threadIdx.x;
    const bool flag = k < e && x[k] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int64_t rank = __popc(ballot & ((1u << lane) - 1u)), tile = 0;
    for (int w = 0; w < kNzThreads / 32; ++w) {
      if (w < warp) rank += warp_counts[w];
      tile += warp_counts[w];
    }
    if (flag && base + rank < cap) out[base + rank] = k;
    base += tile;
    __syncthreads();  // warp_counts is rewritten by the next tile
  }
}

int64_t nonzero(const uint8_t* x, int64_t n, int64_t* out, int64_t cap, void* stream) {
  if (n <= 0 || cap <= 0) return 0;
  cudaStream_t s = cuda::as_stream(stream);
  int64_t blocks = (n + kNzThreads - 1) / kNzThreads;
  if (blocks > kNzBlocks) blocks = kNzBlocks;
  // chunks are whole tiles, so only the last block sees a partial one
  int64_t chunk = (n + blocks - 1) / blocks;
  chunk = (chunk + kNzThreads - 1) / kNzThreads * kNzThreads;
  blocks = (n + chunk - 1) / chunk;
  int64_t* scratch = nullptr;  // counts[blocks], then the total
  if (!st_cuda_check(
          cudaMallocAsync(reinterpret_cast<void**>(&scratch), (blocks + 1) * sizeof(int64_t), s)))
    return 0;
  nonzero_count_kernel<<<unsigned(blocks), kNzThreads, 0, s>>>(x, n, chunk, scratch);
  st_cuda_check_launch();
  nonzero_write_kernel<<<unsigned(blocks), kNzThreads, 0, s>>>(x, n, chunk, scratch, out, cap,
                                                               scratch + blocks);
  st_cuda_check_launch();
  int64_t count = 0;
  bool ok = st_cuda_check(
      cudaMemcpyAsync(&count, scratch + blocks, sizeof(count), cudaMemcpyDeviceToHost, s));
  st_cuda_check(cudaFreeAsync(scratch, s));
  ok = st_cuda_check(cudaStreamSynchronize(s)) && ok;  // the caller sizes its result from it
  if (!ok) return 0;
  return count < cap ? count : cap;
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_INDEX(sfx, T, _)                                                           \
  void st_gather_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,        \
                       int64_t ni, int64_t inner, void* stream) {                              \
    st::gather<T>(x, idx, y, outer, nx, ni, inner, stream);                                    \
  }                                                                                            \
  void st_scatter_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,     \
                        int64_t ni, int64_t inner, void* stream) {                             \
    st::scatter<T, false, false>(src, idx, y, outer, ny, ni, inner, stream);                   \
  }                                                                                            \
  void st_scatter_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, \
                            int64_t ni, int64_t inner, void* stream) {                         \
    st::scatter<T, true, false>(src, idx, y, outer, ny, ni, inner, stream);                    \
  }                                                                                            \
  void st_index_select_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,  \
                             int64_t ni, int64_t inner, void* stream) {                        \
    st::index_select<T>(x, idx, y, outer, nx, ni, inner, stream);                              \
  }                                                                                            \
  void st_index_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,   \
                          int64_t ni, int64_t inner, void* stream) {                           \
    st::scatter<T, true, true>(src, idx, y, outer, ny, ni, inner, stream);                     \
  }
ST_ALL_TYPES(ST_CUDA_DEF_INDEX, _)
// the 16-bit floats: the copies move bits; the sums add in float and round once
#define ST_CUDA_DEF_INDEX_LOW(sfx, T, _)                                                       \
  void st_gather_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,        \
                       int64_t ni, int64_t inner, void* stream) {                              \
    st::gather<T>(x, idx, y, outer, nx, ni, inner, stream);                                    \
  }                                                                                            \
  void st_scatter_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,     \
                        int64_t ni, int64_t inner, void* stream) {                             \
    st::scatter<T, false, false, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner, stream);     \
  }                                                                                            \
  void st_scatter_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, \
                            int64_t ni, int64_t inner, void* stream) {                         \
    st::scatter<T, true, false, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner, stream);      \
  }                                                                                            \
  void st_index_select_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,  \
                             int64_t ni, int64_t inner, void* stream) {                        \
    st::index_select<T>(x, idx, y, outer, nx, ni, inner, stream);                              \
  }                                                                                            \
  void st_index_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,   \
                          int64_t ni, int64_t inner, void* stream) {                           \
    st::scatter<T, true, true, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner, stream);       \
  }
ST_HALF_TYPES(ST_CUDA_DEF_INDEX_LOW, _)

int64_t st_nonzero_u8(const uint8_t* x, int64_t n, int64_t* out, int64_t cap, void* stream) {
  return st::nonzero(x, n, out, cap, stream);
}
}
