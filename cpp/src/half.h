// The 16-bit float formats on the CPU, a block at a time: kernels on float16/bfloat16 widen a
// block of elements into a float buffer, run the float loop of the op over it, and narrow the
// result, so each element is computed in float registers and rounded once. Widening and
// narrowing are whole-block loops the compiler vectorizes (bfloat16 is a shift and a
// rounding add; float16 uses the F16C instructions of the x86-64-v3 baseline).
#ifndef SINGA_TENSOR_CPU_HALF_H_
#define SINGA_TENSOR_CPU_HALF_H_

#include <type_traits>
#include <vector>

#include "common.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace st {

// elements per block: the float buffers of a kernel stay in L1
constexpr int64_t kHalfBlock = 256;

template <class Tag>
constexpr bool is_half_tag = std::is_same<Tag, F16>::value || std::is_same<Tag, BF16>::value;

// y[i] = float(x[i * stride]), i < n
template <class Tag>
inline void widen(const uint16_t* x, int64_t stride, float* y, int64_t n) {
  if (stride == 0) {
    const float v = cast_load<Tag>(x[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
    return;
  }
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (std::is_same<Tag, F16>::value) {
    if (stride == 1)
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
#endif
  if (stride == 1) {
#pragma omp simd
    for (int64_t k = i; k < n; ++k) y[k] = cast_load<Tag>(x[k]);
  } else {
    for (; i < n; ++i) y[i] = cast_load<Tag>(x[i * stride]);
  }
}

// y[i] = round(x[i]) to the format, i < n (contiguous)
template <class Tag>
inline void narrow(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  // the same round-to-nearest-even as f32_to_f16 (only a NaN's payload may differ)
  if constexpr (std::is_same<Tag, F16>::value)
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#pragma omp simd
  for (int64_t k = i; k < n; ++k) y[k] = cast_store<Tag>(x[k]);
}

// x[i] = float(round(x[i])) in place, i < n: what storing a float result and loading it again
// gives, without the store
template <class Tag>
inline void round_through(float* x, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (std::is_same<Tag, F16>::value)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                              _MM_FROUND_TO_NEAREST_INT)));
#endif
#pragma omp simd
  for (int64_t k = i; k < n; ++k) x[k] = cast_load<Tag>(cast_store<Tag>(x[k]));
}

// body(s, len) over [0, n) in blocks of at most kHalfBlock, blocks split over threads
template <class F>
void for_each_block(int64_t n, int64_t cost_per_item, F&& body) {
  const int64_t nb = (n + kHalfBlock - 1) / kHalfBlock;
  parallel_for(nb, kHalfBlock * cost_per_item, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t s = k * kHalfBlock;
      body(s, std::min(kHalfBlock, n - s));
    }
  });
}

// ---- whole lines at a time ----------------------------------------------------------------
// The float16/bfloat16 forms of the kernels whose lines are independent (reductions, scans, sorts,
// pooling indices, cross entropy rows): a cache-sized chunk of whole lines is loaded into
// float32 (widen above), the float32 kernel runs on it, accumulating in float32 or wider, and each result is rounded to
// the 16-bit format once when stored. Memory holds only the chunk, never a float32 copy of the
// tensor, unless one outer slice ([n, inner], or a row) is larger than a chunk: such slices are
// copied one at a time (sums, products, max and min of them read their tiles directly instead,
// see reduce.cc).
template <class Tag>
inline void widen(const uint16_t* x, float* y, int64_t n) {
  widen<Tag>(x, 1, y, n);
}

// elements per chunk: two float32 chunks (input and output) stay in a core's L2
constexpr int64_t kHalfChunk = 1 << 14;

// fn(xf, first, count) for consecutive groups of the `outer` slabs of x (slab elements each),
// xf holding the group in float32; groups run in parallel, or one slab at a time (the kernel
// then parallel inside) when slabs are large.
template <class Tag, class F>
void by_float_slabs(const uint16_t* x, int64_t outer, int64_t slab, F&& fn) {
  if (outer <= 0) return;
  if (slab == 0) {  // empty lines: the kernel only writes its identities
    float none = 0;
    fn(static_cast<const float*>(&none), int64_t(0), outer);
    return;
  }
  if (slab >= kHalfChunk / 2 || outer == 1) {
    std::vector<float> buf(static_cast<size_t>(slab));
    for (int64_t o = 0; o < outer; ++o) {
      widen<Tag>(x + o * slab, buf.data(), slab);
      fn(static_cast<const float*>(buf.data()), o, int64_t(1));
    }
    return;
  }
  const int64_t per = kHalfChunk / slab;
  const int64_t groups = (outer + per - 1) / per;
  parallel_for(groups, per * slab, [&](int64_t gb, int64_t ge) {
    std::vector<float> buf(size_t(per * slab));
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t o0 = g * per, cnt = std::min(per, outer - o0);
      widen<Tag>(x + o0 * slab, buf.data(), cnt * slab);
      fn(static_cast<const float*>(buf.data()), o0, cnt);
    }
  });
}

}  // namespace st

#endif  // SINGA_TENSOR_CPU_HALF_H_
