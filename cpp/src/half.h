// The 16-bit float formats on the CPU, a block at a time: kernels on float16/bfloat16 widen a
// block of elements into a float buffer, run the float loop of the op over it, and narrow the
// result, so each element is computed in float registers and rounded once. Widening and
// narrowing are whole-block loops the compiler vectorizes (bfloat16 is a shift and a
// rounding add; float16 uses the F16C instructions of the x86-64-v3 baseline).
#ifndef SINGA_TENSOR_CPU_HALF_H_
#define SINGA_TENSOR_CPU_HALF_H_

#include <type_traits>

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

}  // namespace st

#endif  // SINGA_TENSOR_CPU_HALF_H_
