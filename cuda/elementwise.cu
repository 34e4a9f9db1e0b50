// Elementwise kernels: unary math, broadcasting binary ops, comparisons, where. The math is the
// functors of functors.h, the same code the CPU kernels run.
#include "common.cuh"

namespace st {
namespace cuda {
namespace {

// a unary functor with its two scalar parameters bound
template <class T, class F>
struct Bound {
  T a, b;
  __device__ __forceinline__ T operator()(T x) const { return F()(x, a, b); }
};

struct IsNan {
  template <class T>
  __device__ __forceinline__ uint8_t operator()(T x) const {
    return uint8_t(x != x);
  }
};
struct IsInf {
  template <class T>
  __device__ __forceinline__ uint8_t operator()(T x) const {
    return uint8_t(x == T(INFINITY) || x == T(-INFINITY));
  }
};

// the 16-bit floats (Tag st::F16 or st::BF16, stored as uint16_t): each element loaded into
// float, the float functor, rounded once on store
template <class Tag, class F>
struct LowBound {
  float a, b;
  __device__ __forceinline__ uint16_t operator()(uint16_t x) const {
    return cast_store<Tag>(F()(cast_load<Tag>(x), a, b));
  }
};
template <class Tag, class F>
struct LowBinary {
  __device__ __forceinline__ uint16_t operator()(uint16_t x, uint16_t y) const {
    return cast_store<Tag>(F()(cast_load<Tag>(x), cast_load<Tag>(y)));
  }
};
template <class Tag, class F>
struct LowCompare {
  __device__ __forceinline__ uint8_t operator()(uint16_t x, uint16_t y) const {
    return F()(cast_load<Tag>(x), cast_load<Tag>(y));
  }
};
// NaN and infinity by their bits: an all-ones exponent with a non-zero or zero mantissa
template <class Tag, bool kNan>
struct LowFloatTest {
  __device__ __forceinline__ uint8_t operator()(uint16_t x) const {
    const unsigned inf = std::is_same<Tag, F16>::value ? 0x7C00u : 0x7F80u;
    const unsigned m = unsigned(x) & 0x7FFFu;
    return uint8_t(kNan ? m > inf : m == inf);
  }
};

// N consecutive elements moved by one load/store instruction
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// y[i] = f(x[i]) over contiguous arrays; with N > 1 both pointers are sizeof(T) * N aligned and
// the body moves whole packs, the last n % N elements one by one.
template <int N, class T, class R, class F>
__global__ void map_kernel(const T* x, R* y, int64_t n, F f) {
  const int64_t np = n / N;
  const Pack<T, N>* xp = reinterpret_cast<const Pack<T, N>*>(x);
  Pack<R, N>* yp = reinterpret_cast<Pack<R, N>*>(y);
  for (int64_t i = thread_index(); i < np; i += thread_count()) {
    Pack<T, N> v = xp[i];
    Pack<R, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = f(v.v[k]);
    yp[i] = r;
  }
  for (int64_t i = np * N + thread_index(); i < n; i += thread_count()) y[i] = f(x[i]);
}

template <class T, class R, class F>
void map(const T* x, R* y, int64_t n, F f, void* stream) {
  constexpr int N = Vec<T>::N;
  if (n >= 4 * N && aligned16(x) && reinterpret_cast<uintptr_t>(y) % (sizeof(R) * N) == 0) {
    launch_1d(map_kernel<N, T, R, F>, n / N, stream, x, y, n, f);
  } else {
    launch_1d(map_kernel<1, T, R, F>, n, stream, x, y, n, f);
  }
}

template <class T, class F>
void unary(const T* x, T* y, int64_t n, double alpha, double beta, void* stream) {
  map(x, y, n, Bound<T, F>{T(alpha), T(beta)}, stream);
}

// dx = g * f'(x), F one of the unary gradient functors of functors.h
template <class T, class F>
__global__ void unary_grad_kernel(const T* x, const T* g, T* dx, int64_t n, T a, T b) {
  F f;
  for (int64_t i = thread_index(); i < n; i += thread_count()) dx[i] = f(x[i], g[i], a, b);
}

template <class T, class F>
void unary_grad(const T* x, const T* g, T* dx, int64_t n, double alpha, double beta,
                void* stream) {
  launch_1d(unary_grad_kernel<T, F>, n, stream, x, g, dx, n, T(alpha), T(beta));
}

template <class Tag, class F>
__global__ void unary_grad_low_kernel(const uint16_t* x, const uint16_t* g, uint16_t* dx,
                                      int64_t n, float a, float b) {
  F f;
  for (int64_t i = thread_index(); i < n; i += thread_count())
    dx[i] = cast_store<Tag>(f(cast_load<Tag>(x[i]), cast_load<Tag>(g[i]), a, b));
}

// ---- binary: out (contiguous) = f(a, b), a and b strided views broadcast to shape ------------
template <int N, class T, class R, class F>
__global__ void binary_contiguous_kernel(const T* a, const T* b, R* out, int64_t n) {
  F f;
  const int64_t np = n / N;
  const Pack<T, N>* ap = reinterpret_cast<const Pack<T, N>*>(a);
  const Pack<T, N>* bp = reinterpret_cast<const Pack<T, N>*>(b);
  Pack<R, N>* op = reinterpret_cast<Pack<R, N>*>(out);
  for (int64_t i = thread_index(); i < np; i += thread_count()) {
    Pack<T, N> va = ap[i], vb = bp[i];
    Pack<R, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = f(va.v[k], vb.v[k]);
    op[i] = r;
  }
  for (int64_t i = np * N + thread_index(); i < n; i += thread_count()) out[i] = f(a[i], b[i]);
}

// one merged dim: each operand walks with its own stride (0 for a broadcast scalar)
template <class T, class R, class F>
__global__ void binary_1d_kernel(const T* a, const T* b, R* out, int64_t n, int64_t sa,
                                 int64_t sb) {
  F f;
  for (int64_t i = thread_index(); i < n; i += thread_count()) out[i] = f(a[i * sa], b[i * sb]);
}

// any layout; I is uint32_t when every position fits, which makes the unravelling divisions
// several times cheaper than 64-bit ones
template <class I, class T, class R, class F>
__global__ void binary_strided_kernel(const T* a, const T* b, R* out, StridedIndexer<3> it) {
  F f;
  for (int64_t i = thread_index(); i < it.numel; i += thread_count()) {
    int64_t off[3];
    it.offsets<I>(I(i), off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <class T, class R, class F>
void binary(const T* a, const T* b, R* out, int ndim, const int64_t* shape, const int64_t* sa,
            const int64_t* sb, void* stream) {
  int64_t so[kMaxDims];
  contiguous_strides(ndim, shape, so);
  const int64_t* strides[3] = {so, sa, sb};
  StridedIndexer<3> it(ndim, shape, strides);
  const int64_t n = it.numel;
  if (n <= 0) return;
  if (it.nd == 1) {
    const int64_t s1 = it.stride[1][0], s2 = it.stride[2][0];
    constexpr int N = Vec<T>::N;
    if (s1 == 1 && s2 == 1 && n >= 4 * N && aligned16(a) && aligned16(b) &&
        reinterpret_cast<uintptr_t>(out) % (sizeof(R) * N) == 0) {
      launch_1d(binary_contiguous_kernel<N, T, R, F>, n / N, stream, a, b, out, n);
    } else if (s1 == 1 && s2 == 1) {
      launch_1d(binary_contiguous_kernel<1, T, R, F>, n, stream, a, b, out, n);
    } else {
      launch_1d(binary_1d_kernel<T, R, F>, n, stream, a, b, out, n, s1, s2);
    }
  } else if (n <= int64_t(UINT32_MAX)) {
    launch_1d(binary_strided_kernel<uint32_t, T, R, F>, n, stream, a, b, out, it);
  } else {
    launch_1d(binary_strided_kernel<int64_t, T, R, F>, n, stream, a, b, out, it);
  }
}

// ---- where: out (contiguous) = cond ? a : b, all three broadcast ------------------------------
template <class T>
__global__ void where_1d_kernel(const uint8_t* c, const T* a, const T* b, T* out, int64_t n,
                                int64_t sc, int64_t sa, int64_t sb) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    out[i] = c[i * sc] ? a[i * sa] : b[i * sb];
}

template <class I, class T>
__global__ void where_strided_kernel(const uint8_t* c, const T* a, const T* b, T* out,
                                     StridedIndexer<4> it) {
  for (int64_t i = thread_index(); i < it.numel; i += thread_count()) {
    int64_t off[4];
    it.offsets<I>(I(i), off);
    out[off[0]] = c[off[1]] ? a[off[2]] : b[off[3]];
  }
}

template <class T>
void where(const uint8_t* c, const T* a, const T* b, T* out, int ndim, const int64_t* shape,
           const int64_t* sc, const int64_t* sa, const int64_t* sb, void* stream) {
  int64_t so[kMaxDims];
  contiguous_strides(ndim, shape, so);
  const int64_t* strides[4] = {so, sc, sa, sb};
  StridedIndexer<4> it(ndim, shape, strides);
  const int64_t n = it.numel;
  if (n <= 0) return;
  if (it.nd == 1) {
    launch_1d(where_1d_kernel<T>, n, stream, c, a, b, out, n, it.stride[1][0], it.stride[2][0],
              it.stride[3][0]);
  } else if (n <= int64_t(UINT32_MAX)) {
    launch_1d(where_strided_kernel<uint32_t, T>, n, stream, c, a, b, out, it);
  } else {
    launch_1d(where_strided_kernel<int64_t, T>, n, stream, c, a, b, out, it);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {

#define ST_DEF_UNARY(op, sfx, T)                                                        \
  void st_##op##_##sfx(const T* x, T* y, int64_t n, double alpha, double beta,          \
                       void* stream) {                                                  \
    st::cuda::unary<T, st::fn::op>(x, y, n, alpha, beta, stream);                       \
  }
#define ST_DEF_UNARY_FLOAT(sfx, T, _) ST_UNARY_FLOAT_OPS(ST_DEF_UNARY, sfx, T)
#define ST_DEF_UNARY_INT(sfx, T, _) ST_UNARY_INT_OPS(ST_DEF_UNARY, sfx, T)
ST_FLOAT_TYPES(ST_DEF_UNARY_FLOAT, _)
ST_INT_TYPES(ST_DEF_UNARY_INT, _)
ST_DEF_UNARY(logical_not, u8, uint8_t)
#define ST_DEF_UNARY_LOW(op, sfx, T)                                                      \
  void st_##op##_##sfx(const T* x, T* y, int64_t n, double alpha, double beta,            \
                       void* stream) {                                                    \
    st::cuda::map(x, y, n, st::cuda::LowBound<ST_TAG_##sfx, st::fn::op>{float(alpha),     \
                                                                         float(beta)},    \
                  stream);                                                                \
  }
#define ST_DEF_UNARY_LOW_T(sfx, T, _) ST_UNARY_FLOAT_OPS(ST_DEF_UNARY_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_UNARY_LOW_T, _)

#define ST_DEF_UNARY_GRAD(op, sfx, T)                                                   \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,   \
                                double beta, void* stream) {                              \
    st::cuda::unary_grad<T, st::fn::op##_backward>(x, g, dx, n, alpha, beta, stream);     \
  }
#define ST_DEF_UNARY_GRAD_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DEF_UNARY_GRAD, sfx, T)
ST_FLOAT_TYPES(ST_DEF_UNARY_GRAD_T, _)
#define ST_DEF_UNARY_GRAD_LOW(op, sfx, T)                                                   \
  void st_##op##_backward_##sfx(const T* x, const T* g, T* dx, int64_t n, double alpha,     \
                                double beta, void* stream) {                                \
    st::cuda::launch_1d(st::cuda::unary_grad_low_kernel<ST_TAG_##sfx, st::fn::op##_backward>, \
                        n, stream, x, g, dx, n, float(alpha), float(beta));                 \
  }
#define ST_DEF_UNARY_GRAD_LOW_T(sfx, T, _) ST_UNARY_GRAD_OPS(ST_DEF_UNARY_GRAD_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_UNARY_GRAD_LOW_T, _)

#define ST_DEF_FLOAT_TEST(sfx, T, _)                                                      \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n, void* stream) {                 \
    st::cuda::map(x, y, n, st::cuda::IsNan(), stream);                                   \
  }                                                                                      \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n, void* stream) {                 \
    st::cuda::map(x, y, n, st::cuda::IsInf(), stream);                                   \
  }
ST_FLOAT_TYPES(ST_DEF_FLOAT_TEST, _)
#define ST_DEF_FLOAT_TEST_LOW(sfx, T, _)                                                  \
  void st_isnan_##sfx(const T* x, uint8_t* y, int64_t n, void* stream) {                 \
    st::cuda::map(x, y, n, st::cuda::LowFloatTest<ST_TAG_##sfx, true>(), stream);        \
  }                                                                                      \
  void st_isinf_##sfx(const T* x, uint8_t* y, int64_t n, void* stream) {                 \
    st::cuda::map(x, y, n, st::cuda::LowFloatTest<ST_TAG_##sfx, false>(), stream);       \
  }
ST_HALF_TYPES(ST_DEF_FLOAT_TEST_LOW, _)

#define ST_DEF_BINARY(op, sfx, T)                                                          \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape,  \
                       const int64_t* sa, const int64_t* sb, void* stream) {               \
    st::cuda::binary<T, T, st::fn::op>(a, b, out, ndim, shape, sa, sb, stream);            \
  }
#define ST_DEF_BINARY_T(sfx, T, _) ST_BINARY_OPS(ST_DEF_BINARY, sfx, T)
ST_NUM_TYPES(ST_DEF_BINARY_T, _)
ST_LOGICAL_OPS(ST_DEF_BINARY, u8, uint8_t)
#define ST_DEF_BINARY_LOW(op, sfx, T)                                                      \
  void st_##op##_##sfx(const T* a, const T* b, T* out, int32_t ndim, const int64_t* shape,  \
                       const int64_t* sa, const int64_t* sb, void* stream) {               \
    st::cuda::binary<T, T, st::cuda::LowBinary<ST_TAG_##sfx, st::fn::op>>(                 \
        a, b, out, ndim, shape, sa, sb, stream);                                           \
  }
#define ST_DEF_BINARY_LOW_T(sfx, T, _) ST_BINARY_OPS(ST_DEF_BINARY_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_BINARY_LOW_T, _)

#define ST_DEF_COMPARE(op, sfx, T)                                                              \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb, void* stream) {                    \
    st::cuda::binary<T, uint8_t, st::fn::op>(a, b, out, ndim, shape, sa, sb, stream);           \
  }
#define ST_DEF_COMPARE_T(sfx, T, _) ST_COMPARE_OPS(ST_DEF_COMPARE, sfx, T)
ST_ALL_TYPES(ST_DEF_COMPARE_T, _)
#define ST_DEF_COMPARE_LOW(op, sfx, T)                                                          \
  void st_##op##_##sfx(const T* a, const T* b, uint8_t* out, int32_t ndim, const int64_t* shape, \
                       const int64_t* sa, const int64_t* sb, void* stream) {                    \
    st::cuda::binary<T, uint8_t, st::cuda::LowCompare<ST_TAG_##sfx, st::fn::op>>(               \
        a, b, out, ndim, shape, sa, sb, stream);                                                \
  }
#define ST_DEF_COMPARE_LOW_T(sfx, T, _) ST_COMPARE_OPS(ST_DEF_COMPARE_LOW, sfx, T)
ST_HALF_TYPES(ST_DEF_COMPARE_LOW_T, _)

#define ST_DEF_WHERE(sfx, T, _)                                                           \
  void st_where_##sfx(const uint8_t* c, const T* a, const T* b, T* out, int32_t ndim,      \
                      const int64_t* shape, const int64_t* sc, const int64_t* sa,          \
                      const int64_t* sb, void* stream) {                                   \
    st::cuda::where<T>(c, a, b, out, ndim, shape, sc, sa, sb, stream);                     \
  }
ST_ALL_TYPES(ST_DEF_WHERE, _)
ST_HALF_TYPES(ST_DEF_WHERE, _)  // a selection moves bits: the uint16_t kernel serves both formats

}  // extern "C"
