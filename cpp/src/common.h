// Loop machinery shared by the CPU kernels: parallel ranges and strided iteration.
#ifndef SINGA_TENSOR_CPU_COMMON_H_
#define SINGA_TENSOR_CPU_COMMON_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "singa_tensor/dtypes.h"
#include "singa_tensor/functors.h"
#include "singa_tensor/shapes.h"
#include "singa_tensor/singa_tensor.h"

namespace st {

// Whether the kernels that also come compiled for AVX-512 run that build: the CPU and the OS
// support it and st_cpu_avx512 has not turned it off (elementwise.cc).
bool avx512_enabled();

// A function's AVX-512 build (taken where avx512_enabled()), beside the baseline one
#define ST_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,prefer-vector-width=512")))
// every call inside inlined, so that each loop vectorises whole: with two builds calling them,
// the functors' helpers (exp, tanh) are no longer called once, and GCC stops inlining them
#define ST_FLAT __attribute__((flatten))
// a body shared by the two builds, inlined into each
#define ST_INLINE inline __attribute__((always_inline))

// below this many elements a kernel runs on one thread: forking costs more than it saves
constexpr int64_t kGrain = 1 << 15;

inline int threads_for(int64_t work) {
  if (work < kGrain) return 1;
  int64_t t = work / kGrain;
  int max_t = omp_get_max_threads();
  return int(std::min<int64_t>(t, max_t));
}

// Run body(begin, end) over [0, n) split into contiguous chunks, one per thread.
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& body) {
  int nt = threads_for(n * cost_per_item);
  if (nt <= 1) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    int64_t chunk = (n + T - 1) / T;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) body(b, e);
  }
}

// The merged layout of shapes.h, walked a row at a time.
template <int K>
struct Strided : MergedStrides<K> {
  using Base = MergedStrides<K>;
  using Base::Base;
  using Base::nd;
  using Base::numel;
  using Base::shape;
  using Base::stride;

  // Calls row(offsets[K], len, inner_strides[K]) for every innermost row, rows split over
  // threads. Fewer rows than threads (a contiguous tensor merges into one row) are cut into
  // pieces that the threads share, so `row` may be called on part of a row: the callers work
  // element by element. A float add of two contiguous 16M-element tensors went from 14.3 to
  // 8.3 ms on two threads this way (bench/bench_core.py).
  template <class F>
  void for_each_row(F&& row) const {
    if (numel == 0) return;
    const int64_t len = shape[nd - 1];
    const int64_t rows = numel / len;
    int64_t inner[K];
    for (int k = 0; k < K; ++k) inner[k] = stride[k][nd - 1];
    const int nt = threads_for(numel);
    if (rows < nt) {
      const int64_t pieces = (nt + rows - 1) / rows, plen = (len + pieces - 1) / pieces;
      parallel_for(rows * pieces, plen, [&](int64_t ub, int64_t ue) {
        for (int64_t u = ub; u < ue; ++u) {
          const int64_t c0 = (u % pieces) * plen;
          if (c0 >= len) continue;
          int64_t off[K] = {0};
          int64_t r = u / pieces;
          for (int d = nd - 2; d >= 0; --d) {
            for (int k = 0; k < K; ++k) off[k] += (r % shape[d]) * stride[k][d];
            r /= shape[d];
          }
          for (int k = 0; k < K; ++k) off[k] += c0 * inner[k];
          row(off, std::min(plen, len - c0), inner);
        }
      });
      return;
    }
    parallel_for(rows, len, [&](int64_t rb, int64_t re) {
      int64_t idx[kMaxDims] = {0};
      int64_t off[K] = {0};
      int64_t r = rb;  // unravel the first row index of this chunk
      for (int d = nd - 2; d >= 0; --d) {
        idx[d] = r % shape[d];
        r /= shape[d];
        for (int k = 0; k < K; ++k) off[k] += idx[d] * stride[k][d];
      }
      for (int64_t i = rb; i < re; ++i) {
        row(off, len, inner);
        for (int d = nd - 2; d >= 0; --d) {  // odometer step to the next row
          ++idx[d];
          for (int k = 0; k < K; ++k) off[k] += stride[k][d];
          if (idx[d] < shape[d]) break;
          for (int k = 0; k < K; ++k) off[k] -= stride[k][d] * shape[d];
          idx[d] = 0;
        }
      }
    });
  }
};

}  // namespace st

#endif  // SINGA_TENSOR_CPU_COMMON_H_
