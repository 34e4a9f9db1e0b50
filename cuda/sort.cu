// Sorting along the middle axis of [outer, n, inner]; the CUDA twin of cpp/src/sort.cc.
// A bitonic sort on (key, index) pairs. Pairs compare by key, then by index, so the order is
// total and equals a stable sort. Each line is padded to the next power of two with entries
// whose index is n or more; those sort after every real entry ("larger than everything") by
// index alone, whatever the keys hold, so no sentinel key value is needed.
#include <algorithm>

#include "common.cuh"

namespace st {
namespace {

using cuda::thread_count;
using cuda::thread_index;

// Lines padded to at most this many pairs are sorted in shared memory by one block: 4096 keys
// of 8 bytes plus 4096 32-bit indices fill the 48 KiB a block gets without opting in.
constexpr int64_t kSharedPairs = 4096;
constexpr int kSortThreads = 1024;

// NaN counts as larger than every number: last ascending, first descending
template <class T>
__device__ __forceinline__ bool before_value(T a, T b, bool descending) {
  if (descending) return (is_nan(a) && !is_nan(b)) || a > b;
  return (!is_nan(a) && is_nan(b)) || a < b;
}

template <class T, class I>
__device__ __forceinline__ bool before(T a, I ia, T b, I ib, int64_t n, bool descending) {
  if (ia >= n || ib >= n) return ia < ib;  // padding goes last
  if (before_value(a, b, descending)) return true;
  if (before_value(b, a, descending)) return false;
  return ia < ib;
}

// One compare-exchange of the bitonic network: i and its partner i ^ stride, ordered up or
// down by the bit `size` of i.
template <class T, class I>
__device__ __forceinline__ void exchange(T* key, I* idx, int64_t i, int64_t stride,
                                         int64_t size, int64_t n, bool descending) {
  const int64_t j = i ^ stride;
  if (j <= i) return;
  const bool up = (i & size) == 0;
  const bool swap = up ? before(key[j], idx[j], key[i], idx[i], n, descending)
                       : before(key[i], idx[i], key[j], idx[j], n, descending);
  if (swap) {
    T tk = key[i];
    key[i] = key[j];
    key[j] = tk;
    I ti = idx[i];
    idx[i] = idx[j];
    idx[j] = ti;
  }
}

// line l of [outer, n, inner] begins at x + base(l) and steps by inner
__device__ __forceinline__ int64_t line_base(int64_t l, int64_t n, int64_t inner) {
  return (l / inner) * n * inner + l % inner;
}

// The indices follow the keys in shared memory, aligned (a few u8 keys leave an odd offset)
template <class T>
__host__ __device__ __forceinline__ int64_t shared_index_offset(int64_t p) {
  return (p * int64_t(sizeof(T)) + 7) & ~int64_t(7);
}

// One block per line, the whole padded line (p pairs) in shared memory.
template <class T>
__global__ void __launch_bounds__(kSortThreads)
    sort_shared_kernel(const T* __restrict__ x, T* __restrict__ values,
                       int64_t* __restrict__ indices, int64_t first, int64_t n,
                       int64_t inner, int64_t k, int64_t p, bool descending) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* key = reinterpret_cast<T*>(smem);
  int32_t* idx = reinterpret_cast<int32_t*>(smem + shared_index_offset<T>(p));
  const int64_t l = first + blockIdx.x;
  const T* src = x + line_base(l, n, inner);
  for (int64_t i = threadIdx.x; i < p; i += blockDim.x) {
    key[i] = i < n ? src[i * inner] : T(0);
    idx[i] = int32_t(i);
  }
  __syncthreads();
  for (int64_t size = 2; size <= p; size <<= 1) {
    for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (int64_t i = threadIdx.x; i < p; i += blockDim.x)
        exchange(key, idx, i, stride, size, n, descending);
      __syncthreads();
    }
  }
  const int64_t out = (l / inner) * k * inner + l % inner;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    values[out + j * inner] = key[j];
    indices[out + j * inner] = idx[j];
  }
}

// Longer lines: the padded lines live in global scratch ([lines, p] keys and indices) and each
// step of the network is one grid-wide launch over every pair of every line.
template <class T>
__global__ void load_kernel(const T* __restrict__ x, T* __restrict__ key,
                            int64_t* __restrict__ idx, int64_t total, int64_t n, int64_t inner,
                            int64_t p) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t l = e / p, i = e % p;
    key[e] = i < n ? x[line_base(l, n, inner) + i * inner] : T(0);
    idx[e] = i;
  }
}

template <class T>
__global__ void step_kernel(T* __restrict__ key, int64_t* __restrict__ idx, int64_t total,
                            int64_t p, int64_t stride, int64_t size, int64_t n,
                            bool descending) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t l = e / p;
    exchange(key + l * p, idx + l * p, e % p, stride, size, n, descending);
  }
}

template <class T>
__global__ void store_kernel(const T* __restrict__ key, const int64_t* __restrict__ idx,
                             T* __restrict__ values, int64_t* __restrict__ indices,
                             int64_t total, int64_t k, int64_t inner, int64_t p) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    // e runs over [outer, k, inner] of the output
    const int64_t i = e % inner, j = (e / inner) % k, o = e / (inner * k);
    const int64_t src = (o * inner + i) * p + j;
    values[e] = key[src];
    indices[e] = idx[src];
  }
}

template <class T>
void sort_lines(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,
                int64_t inner, int64_t k, bool descending, void* stream) {
  const int64_t lines = outer * inner;
  if (lines <= 0 || k <= 0) return;
  const cudaStream_t s = cuda::as_stream(stream);
  int64_t p = 1;
  while (p < n) p <<= 1;
  if (p <= kSharedPairs) {
    const int threads = int(std::min<int64_t>(kSortThreads, std::max<int64_t>(32, p)));
    const size_t bytes = size_t(shared_index_offset<T>(p) + p * int64_t(sizeof(int32_t)));
    // one block per line; a 1-d grid holds at most 2^31 - 1 blocks
    constexpr int64_t kMaxBlocks = 0x7fffffff;
    for (int64_t first = 0; first < lines; first += kMaxBlocks) {
      const int64_t count = std::min<int64_t>(lines - first, kMaxBlocks);
      sort_shared_kernel<T><<<unsigned(count), threads, bytes, s>>>(
          x, values, indices, first, n, inner, k, p, descending);
      st_cuda_check_launch();
    }
    return;
  }
  const int64_t total = lines * p;
  void* buf = nullptr;
  if (!st_cuda_check(cudaMallocAsync(&buf, size_t(total) * (sizeof(T) + sizeof(int64_t)), s)))
    return;
  T* key = static_cast<T*>(buf);
  int64_t* idx = reinterpret_cast<int64_t*>(static_cast<char*>(buf) +
                                            size_t(total) * sizeof(T));
  cuda::launch_1d(load_kernel<T>, total, stream, x, key, idx, total, n, inner, p);
  for (int64_t size = 2; size <= p; size <<= 1)
    for (int64_t stride = size >> 1; stride > 0; stride >>= 1)
      cuda::launch_1d(step_kernel<T>, total, stream, key, idx, total, p, stride, size, n,
                      descending);
  const int64_t out = outer * k * inner;
  cuda::launch_1d(store_kernel<T>, out, stream, key, idx, values, indices, out, k, inner, p);
  st_cuda_check(cudaFreeAsync(buf, s));
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_CU_SORT(sfx, T, _)                                                                  \
  void st_sort_##sfx(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,        \
                     int64_t inner, int64_t k, int32_t descending, void* stream) {             \
    st::sort_lines<T>(x, values, indices, outer, n, inner, k, descending != 0, stream);        \
  }
ST_ALL_TYPES(ST_CU_SORT, _)

}  // extern "C"

// float16 / bfloat16: sorted as float32 (exact, the same order), values narrowed back
// without rounding (half.cuh)
#include "half.cuh"

extern "C" {

#define ST_CU_SORT_HALF(sfx, T, _)                                                             \
  void st_sort_##sfx(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,        \
                     int64_t inner, int64_t k, int32_t descending, void* stream) {             \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, outer * n * inner, stream);                          \
    st::cuda::FloatScratch vf(outer * k * inner, stream);                                      \
    if (!xf.ok() || !vf.ok()) return;                                                          \
    st_sort_f32(xf.p, vf.p, indices, outer, n, inner, k, descending, stream);                  \
    st::cuda::narrow<ST_TAG_##sfx>(vf.p, values, outer * k * inner, stream);                   \
  }
ST_HALF_TYPES(ST_CU_SORT_HALF, _)

}  // extern "C"
