// Elementwise kernels: unary math, broadcasting binary ops, comparisons, where.
#include "blas.h"
#include "common.h"
#include "half.h"

#include <atomic>
#include <type_traits>

namespace st {
namespace {

// The float32 unary kernels and their gradients also come compiled for AVX-512 (16 lanes
// instead of AVX2's 8), taken at run time where the CPU and the OS support it. The loops are
// the same functors, with the same operations in the same order for each element, so both
// widths give the same bits; the polynomial exp, tanh and log behind sigmoid, SiLU, GELU and
// softmax-like ops run in about half the time (elementwise-only loops gain nothing: they wait
// on memory).
// (ST_AVX512 and ST_FLAT: common.h)

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
const bool kHasAvx512 = cpu_has_avx512();
std::atomic<bool> use_avx512{kHasAvx512};

template <class F, class T>
ST_FLAT void unary_span(const T* x, T* y, int64_t s, int64_t e, T a, T b) {
  F f;
#pragma omp simd
  for (int64_t i = s; i < e; ++i) y[i] = f(x[i], a, b);
}

template <class F, class T>
ST_FLAT ST_AVX512 void unary_span512(const T* x, T* y, int64_t s, int64_t e, T a, T b) {
  F f;
#pragma omp simd
  for (int64_t i = s; i < e; ++i) y[i] = f(x[i], a, b);
}

template <class F, class T>
ST_FLAT void unary_grad_span(const T* x, const T* g, T* dx, int64_t s, int64_t e, T a, T b) {
  F f;
#pragma omp simd
  for (int64_t i = s; i < e; ++i) dx[i] = f(x[i], g[i], a, b);
}

template <class F, class T>
ST_FLAT ST_AVX512 void unary_grad_span512(const T* x, const T* g, T* dx, int64_t s, int64_t e, T a,
                                  T b) {
  F f;
#pragma omp simd
  for (int64_t i = s; i < e; ++i) dx[i] = f(x[i], g[i], a, b);
}

template <class T, class F>
void unary(const T* x, T* y, int64_t n, double alpha, double beta) {
  const T a = T(alpha), b = T(beta);
  const bool wide = std::is_same<T, float>::value && avx512_enabled();
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    if (wide)
      unary_span512<F>(x, y, s, e, a, b);
    else
      unary_span<F>(x, y, s, e, a, b);
  });
}

// dx = g * f'(x) in one pass, F a functor of functors.h's unary gradients
template <class T, class F>
void unary_grad(const T* x, const T* g, T* dx, int64_t n, double alpha, double beta) {
  const T a = T(alpha), b = T(beta);
  const bool wide = std::is_same<T, float>::value && avx512_enabled();
  parallel_for(n, 2, [&](int64_t s, int64_t e) {
    if (wide)
      unary_grad_span512<F>(x, g, dx, s, e, a, b);
    else
      unary_grad_span<F>(x, g, dx, s, e, a, b);
  });
}

// out (contiguous) = f(a, b) where a and b are strided views broadcast to shape
template <class T, class R, class F>
void binary(const T* a, const T* b, R* out, int ndim, const int64_t* shape, const int64_t* sa,
            const int64_t* sb) {
  F f;
  int64_t so[kMaxDims];
  contiguous_strides(ndim, shape, so);
  const int64_t* strides[3] = {so, sa, sb};
  Strided<3> it(ndim, shape, strides);
  it.for_each_row([&](const int64_t* off, int64_t len, const int64_t* st) {
    R* o = out + off[0];
    const T* pa = a + off[1];
    const T* pb = b + off[2];
    if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) o[i] = f(pa[i], pb[i]);
    } else if (st[1] == 1 && st[2] == 0) {
      const T vb = *pb;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) o[i] = f(pa[i], vb);
    } else if (st[1] == 0 && st[2] == 1) {
      const T va = *pa;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) o[i] = f(va, pb[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) o[i] = f(pa[i * st[1]], pb[i * st[2]]);
    }
  });
}

template <class T>
void where(const uint8_t* c, const T* a, const T* b, T* out, int ndim, const int64_t* shape,
           const int64_t* sc, const int64_t* sa, const int64_t* sb) {
  int64_t so[kMaxDims];
  contiguous_strides(ndim, shape, so);
  const int64_t* strides[4] = {so, sc, sa, sb};
  Strided<4> it(ndim, shape, strides);
  it.for_each_row([&](const int64_t* off, int64_t len, const int64_t* st) {
    T* o = out + off[0];
    const uint8_t* pc = c + off[1];
    const T* pa = a + off[2];
    const T* pb = b + off[3];
    for (int64_t i = 0; i < len; ++i) o[i] = pc[i * st[1]] ? pa[i * st[2]] : pb[i * st[3]];
  });
}

template <class T>
void float_test(const T* x, uint8_t* y, int64_t n, int which) {
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i)
      y[i] = which == 0 ? uint8_t(x[i] != x[i]) : uint8_t(std::isinf(x[i]));
  });
}

// ---- float16 / bfloat16: each block widened to float, the float loop, rounded once ----------
template <class Tag, class F>
void unary_low(const uint16_t* x, uint16_t* y, int64_t n, double alpha, double beta) {
  const float a = float(alpha), b = float(beta);
  F f;
  for_each_block(n, 1, [&](int64_t s, int64_t len) {
    alignas(64) float fx[kHalfBlock];
    widen<Tag>(x + s, 1, fx, len);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) fx[i] = f(fx[i], a, b);
    narrow<Tag>(fx, y + s, len);
  });
}

template <class Tag, class F>
void unary_grad_low(const uint16_t* x, const uint16_t* g, uint16_t* dx, int64_t n, double alpha,
                    double beta) {
  const float a = float(alpha), b = float(beta);
  F f;
  for_each_block(n, 2, [&](int64_t s, int64_t len) {
    alignas(64) float fx[kHalfBlock], fg[kHalfBlock];
    widen<Tag>(x + s, 1, fx, len);
    widen<Tag>(g + s, 1, fg, len);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) fx[i] = f(fx[i], fg[i], a, b);
    narrow<Tag>(fx, dx + s, len);
  });
}

// R is uint16_t (a result in the format, rounded once) or uint8_t (a comparison)
template <class Tag, class R, class F>
void binary_low(const uint16_t* a, const uint16_t* b, R* out, int ndim, const int64_t* shape,
                const int64_t* sa, const int64_t* sb) {
  F f;
  int64_t so[kMaxDims];
  contiguous_strides(ndim, shape, so);
  const int64_t* strides[3] = {so, sa, sb};
  Strided<3> it(ndim, shape, strides);
  it.for_each_row([&](const int64_t* off, int64_t len, const int64_t* st) {
    alignas(64) float fa[kHalfBlock], fb[kHalfBlock];
    for (int64_t s = 0; s < len; s += kHalfBlock) {
      const int64_t m = std::min(kHalfBlock, len - s);
      widen<Tag>(a + off[1] + s * st[1], st[1], fa, m);
      widen<Tag>(b + off[2] + s * st[2], st[2], fb, m);
      R* o = out + off[0] + s;
      if constexpr (std::is_same<R, uint8_t>::value) {
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) o[i] = f(fa[i], fb[i]);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) fa[i] = f(fa[i], fb[i]);
        narrow<Tag>(fa, o, m);
      }
    }
  });
}

// NaN and infinity by their bits: all-ones exponent with a non-zero or zero mantissa
template <class Tag>
void float_test_low(const uint16_t* x, uint8_t* y, int64_t n, int which) {
  const uint16_t inf = std::is_same<Tag, F16>::value ? 0x7C00 : 0x7F80;
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    if (which == 0) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) y[i] = uint8_t((x[i] & 0x7FFF) > inf);
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) y[i] = uint8_t((x[i] & 0x7FFF) == inf);
    }
  });
}

// OpenBLAS runs on the calling thread from the library's load on (blas.h)
[[maybe_unused]] const bool kBlasOnCaller = (blas::set_num_threads(1), true);

}  // namespace

bool avx512_enabled() { return use_avx512.load(std::memory_order_relaxed); }
}  // namespace st

extern "C" {

#define ST_DEF_UNARY(op, sfx, T)                                                   \
  void st_##op##_##sfx(const T* x, T* y, int64_t n, double alpha, double beta) {   \
    st::unary<T, st::fn::op>(x, y, n, alpha, beta);                                \
  }
#define ST_DEF_UNARY_FLOAT(sfx, T, _) ST_UNARY_FLOAT_OPS(ST_DEF_UNARY, sfx, T)
#define ST_DEF_UNARY_INT(sfx, T, _) ST_UNARY_INT_OPS(ST_DEF_UNARY, sfx, T)
ST_FLOAT_TYPES(ST_DEF_UNARY_FLOAT, _)
ST_INT_TYPES(ST_DEF_UNARY_INT, _)
ST_DEF_UNARY(logical_not, u8, uint8_t)
#define ST_DEF_UNARY_LOW(op, sfx, T)                                               \
  void st_##op##_##sfx(const T* x, T* y, int64_t n, double alpha, double beta) {   \
    st::unary_low<ST_TAG_##sfx, st::fn::op>(x, y, n, alpha, beta);                 \
  }
#define ST_DEF_UNARY_LOW_T(sfx, T, _) ST_UNARY_FLOAT_OPS(ST_DEF_UNARY_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_UNARY_LOW_T, _)

#define ST_DEF_UNARY_GRAD(op, sfx, T)                                                   \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,   \
                                double beta) {                                            \
    st::unary_grad<T, st::fn::op##_backward>(x, g, dx, n, alpha, beta);                   \
  }
#define ST_DEF_UNARY_GRAD_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DEF_UNARY_GRAD, sfx, T)
ST_FLOAT_TYPES(ST_DEF_UNARY_GRAD_T, _)
#define ST_DEF_UNARY_GRAD_LOW(op, sfx, T)                                               \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,   \
                                double beta) {                                            \
    st::unary_grad_low<ST_TAG_##sfx, st::fn::op##_backward>(x, g, dx, n, alpha, beta);    \
  }
#define ST_DEF_UNARY_GRAD_LOW_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DEF_UNARY_GRAD_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_UNARY_GRAD_LOW_T, _)

#define ST_DEF_FLOAT_TEST(sfx, T, _)                                                            \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n) { st::float_test<T>(x, y, n, 0); } \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n) { st::float_test<T>(x, y, n, 1); }
ST_FLOAT_TYPES(ST_DEF_FLOAT_TEST, _)
#define ST_DEF_FLOAT_TEST_LOW(sfx, T, _)                                     \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n) {                   \
    st::float_test_low<ST_TAG_##sfx>(x, y, n, 0);                            \
  }                                                                          \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n) {                   \
    st::float_test_low<ST_TAG_##sfx>(x, y, n, 1);                            \
  }
ST_HALF_TYPES(ST_DEF_FLOAT_TEST_LOW, _)

#define ST_DEF_BINARY(op, sfx, T)                                                         \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                            \
    st::binary<T, T, st::fn::op>(a, b, out, ndim, shape, sa, sb);                         \
  }
#define ST_DEF_BINARY_T(sfx, T, _) ST_BINARY_OPS(ST_DEF_BINARY, sfx, T)
ST_NUM_TYPES(ST_DEF_BINARY_T, _)
ST_LOGICAL_OPS(ST_DEF_BINARY, u8, uint8_t)
#define ST_DEF_BINARY_LOW(op, sfx, T)                                                     \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                            \
    st::binary_low<ST_TAG_##sfx, T, st::fn::op>(a, b, out, ndim, shape, sa, sb);          \
  }
#define ST_DEF_BINARY_LOW_T(sfx, T, _) ST_BINARY_OPS(ST_DEF_BINARY_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_BINARY_LOW_T, _)

#define ST_DEF_COMPARE(op, sfx, T)                                                              \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                                  \
    st::binary<T, uint8_t, st::fn::op>(a, b, out, ndim, shape, sa, sb);                         \
  }
#define ST_DEF_COMPARE_T(sfx, T, _) ST_COMPARE_OPS(ST_DEF_COMPARE, sfx, T)
ST_ALL_TYPES(ST_DEF_COMPARE_T, _)
#define ST_DEF_COMPARE_LOW(op, sfx, T)                                                          \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                                  \
    st::binary_low<ST_TAG_##sfx, uint8_t, st::fn::op>(a, b, out, ndim, shape, sa, sb);          \
  }
#define ST_DEF_COMPARE_LOW_T(sfx, T, _) ST_COMPARE_OPS(ST_DEF_COMPARE_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_COMPARE_LOW_T, _)

#define ST_DEF_WHERE(sfx, T, _)                                                           \
  void st_where_##sfx(const uint8_t* c, const T* a, const T* b, T* out, int32_t ndim,      \
                      const int64_t* shape, const int64_t* sc, const int64_t* sa,          \
                      const int64_t* sb) {                                                 \
    st::where<T>(c, a, b, out, ndim, shape, sc, sa, sb);                                   \
  }
ST_ALL_TYPES(ST_DEF_WHERE, _)
ST_HALF_TYPES(ST_DEF_WHERE, _)  // a selection moves bits: the uint16_t loop serves both formats

int32_t st_num_threads(void) { return omp_get_max_threads(); }

int32_t st_cpu_avx512(int32_t enable) {
  if (enable >= 0) st::use_avx512.store(enable != 0 && st::kHasAvx512);
  return st::use_avx512.load() ? 1 : 0;
}
void st_set_num_threads(int32_t n) {
  // OpenBLAS stays on one thread: its products are split over these (blas::gemm_mt)
  omp_set_num_threads(n > 0 ? n : 1);
}

}  // extern "C"
