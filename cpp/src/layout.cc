// Layout kernels: strided copies, dtype conversion and ranges.
#include "common.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace st {
namespace {

template <class T>
void copy(const T* x, T* y, int ndim, const int64_t* shape, const int64_t* sx,
          const int64_t* sy) {
  const int64_t* strides[2] = {sy, sx};
  Strided<2> it(ndim, shape, strides);
  it.for_each_row([&](const int64_t* off, int64_t len, const int64_t* st) {
    T* o = y + off[0];
    const T* p = x + off[1];
    if (st[0] == 1 && st[1] == 1) {
      std::memcpy(o, p, size_t(len) * sizeof(T));
    } else if (st[0] == 1 && st[1] == 0) {
      const T v = *p;
      for (int64_t i = 0; i < len; ++i) o[i] = v;
    } else {
      for (int64_t i = 0; i < len; ++i) o[i * st[0]] = p[i * st[1]];
    }
  });
}

// the conversion rules (convert, cast_load, cast_store) live in functors.h, shared with CUDA
template <class SrcTag, class DstTag>
void cast(const typename CastStorage<SrcTag>::type* x, typename CastStorage<DstTag>::type* y,
          int64_t n) {
#if defined(__F16C__)
  // float <-> float16, the conversion every float16 op pays: the F16C instructions of the
  // x86-64-v3 baseline convert 8 elements at once with the same round-to-nearest-even rule
  // (only a NaN's payload bits may differ from f32_to_f16's canonical NaN)
  if constexpr (std::is_same<SrcTag, float>::value && std::is_same<DstTag, F16>::value) {
    parallel_for(n, 1, [&](int64_t s, int64_t e) {
      int64_t i = s;
      for (; i + 8 <= e; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
      for (; i < e; ++i) y[i] = f32_to_f16(x[i]);
    });
    return;
  }
  if constexpr (std::is_same<SrcTag, F16>::value && std::is_same<DstTag, float>::value) {
    parallel_for(n, 1, [&](int64_t s, int64_t e) {
      int64_t i = s;
      for (; i + 8 <= e; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
      for (; i < e; ++i) y[i] = f16_to_f32(x[i]);
    });
    return;
  }
#endif
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) y[i] = cast_store<DstTag>(cast_load<SrcTag>(x[i]));
  });
}

template <class T>
void arange(T* y, int64_t n, double start, double step) {
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) y[i] = T(start + double(i) * step);
  });
}

// the 16-bit floats: st_arange_f32's values rounded once
template <class Tag>
void arange_low(uint16_t* y, int64_t n, double start, double step) {
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) y[i] = cast_store<Tag>(float(start + double(i) * step));
  });
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_DEF_COPY(sfx, T, _)                                                            \
  void st_copy_##sfx(const void* x, void* y, int32_t ndim, const int64_t* shape,            \
                     const int64_t* sx, const int64_t* sy) {                               \
    st::copy<T>(static_cast<const T*>(x), static_cast<T*>(y), ndim, shape, sx, sy);       \
  }
ST_WIDTH_TYPES(ST_DEF_COPY, _)

#define ST_DEF_CAST_TO(dsfx, D, ssfx, S)                              \
  void st_cast_##ssfx##_##dsfx(const S* x, D* y, int64_t n) {         \
    st::cast<ST_TAG_##ssfx, ST_TAG_##dsfx>(x, y, n);                  \
  }
#define ST_DEF_CAST_FROM(ssfx, S, _) ST_CAST_TYPES_INNER(ST_DEF_CAST_TO, ssfx, S)
ST_CAST_TYPES(ST_DEF_CAST_FROM, _)

#define ST_DEF_ARANGE(sfx, T, _)                                              \
  void st_arange_##sfx(T* y, int64_t n, double start, double step) {          \
    st::arange<T>(y, n, start, step);                                         \
  }
ST_NUM_TYPES(ST_DEF_ARANGE, _)
#define ST_DEF_ARANGE_LOW(sfx, T, _)                                          \
  void st_arange_##sfx(T* y, int64_t n, double start, double step) {          \
    st::arange_low<ST_TAG_##sfx>(y, n, start, step);                          \
  }
ST_HALF_TYPES(ST_DEF_ARANGE_LOW, _)

}  // extern "C"
