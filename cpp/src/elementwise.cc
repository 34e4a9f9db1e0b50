// Elementwise kernels: unary math, broadcasting binary ops, comparisons, where.
#include "blas.h"
#include "common.h"

namespace st {
namespace {

template <class T, class F>
void unary(const T* x, T* y, int64_t n, double alpha, double beta) {
  const T a = T(alpha), b = T(beta);
  F f;
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) y[i] = f(x[i], a, b);
  });
}

// dx = g * f'(x) in one pass, F a functor of functors.h's unary gradients
template <class T, class F>
void unary_grad(const T* x, const T* g, T* dx, int64_t n, double alpha, double beta) {
  const T a = T(alpha), b = T(beta);
  F f;
  parallel_for(n, 2, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) dx[i] = f(x[i], g[i], a, b);
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

}  // namespace
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

#define ST_DEF_UNARY_GRAD(op, sfx, T)                                                   \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,   \
                                double beta) {                                            \
    st::unary_grad<T, st::fn::op##_backward>(x, g, dx, n, alpha, beta);                   \
  }
#define ST_DEF_UNARY_GRAD_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DEF_UNARY_GRAD, sfx, T)
ST_FLOAT_TYPES(ST_DEF_UNARY_GRAD_T, _)

#define ST_DEF_FLOAT_TEST(sfx, T, _)                                                            \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n) { st::float_test<T>(x, y, n, 0); } \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n) { st::float_test<T>(x, y, n, 1); }
ST_FLOAT_TYPES(ST_DEF_FLOAT_TEST, _)

#define ST_DEF_BINARY(op, sfx, T)                                                         \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                            \
    st::binary<T, T, st::fn::op>(a, b, out, ndim, shape, sa, sb);                         \
  }
#define ST_DEF_BINARY_T(sfx, T, _) ST_BINARY_OPS(ST_DEF_BINARY, sfx, T)
ST_NUM_TYPES(ST_DEF_BINARY_T, _)
ST_LOGICAL_OPS(ST_DEF_BINARY, u8, uint8_t)

#define ST_DEF_COMPARE(op, sfx, T)                                                              \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb) {                                  \
    st::binary<T, uint8_t, st::fn::op>(a, b, out, ndim, shape, sa, sb);                         \
  }
#define ST_DEF_COMPARE_T(sfx, T, _) ST_COMPARE_OPS(ST_DEF_COMPARE, sfx, T)
ST_ALL_TYPES(ST_DEF_COMPARE_T, _)

#define ST_DEF_WHERE(sfx, T, _)                                                           \
  void st_where_##sfx(const uint8_t* c, const T* a, const T* b, T* out, int32_t ndim,      \
                      const int64_t* shape, const int64_t* sc, const int64_t* sa,          \
                      const int64_t* sb) {                                                 \
    st::where<T>(c, a, b, out, ndim, shape, sc, sa, sb);                                   \
  }
ST_ALL_TYPES(ST_DEF_WHERE, _)

int32_t st_num_threads(void) { return omp_get_max_threads(); }
void st_set_num_threads(int32_t n) {
  // both pools: our OpenMP kernels and OpenBLAS's matrix products
  omp_set_num_threads(n > 0 ? n : 1);
  st::blas::set_num_threads(n > 0 ? n : 1);
}

}  // extern "C"
