// Matrix products: float types through OpenBLAS, integer types by a cache-friendly loop, the
// 16-bit floats by widening their operands to float for sgemm (float accumulation, one rounding
// on store). Python sends bfloat16/float16 products to oneDNN first where it computes them
// natively; this is the path everywhere else.
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "blas.h"
#include "common.h"

namespace st {
namespace {

template <class T>
void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, double beta, T* c, int64_t ldc, int64_t batch,
          int64_t sa, int64_t sb, int64_t sc) {
  if constexpr (std::is_floating_point<T>::value) {
    if (k == 0) {  // BLAS leaves C untouched when k is 0 only if beta is 1; be explicit
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            T& v = c[p * sc + i * ldc + j];
            v = beta == 0 ? T(0) : T(beta) * v;
          }
      return;
    }
    const int64_t work = m * n * k;
    const int max_t = omp_get_max_threads();
    if (batch > 1 && (work < (int64_t(1) << 18) ||
                      (batch >= max_t && work < (int64_t(1) << 22)))) {
      // Many small or mid-sized products (attention heads, batched layers): one product per
      // thread beats splitting each product over threads, which costs a fork and a join per
      // product.
      int nt = threads_for(batch * work / 64);
#pragma omp parallel for num_threads(nt) if (nt > 1)
      for (int64_t p = 0; p < batch; ++p) {
        blas::gemm(ta, tb, m, n, k, T(alpha), a + p * sa, lda, b + p * sb, ldb, T(beta),
                   c + p * sc, ldc);
      }
      return;
    }
    for (int64_t p = 0; p < batch; ++p)
      blas::gemm_mt(ta, tb, m, n, k, T(alpha), a + p * sa, lda, b + p * sb, ldb, T(beta),
                    c + p * sc, ldc);
  } else {
    using A = Wrap<T>;  // products and sums wrap on overflow (dtypes.h), as on CUDA
    const A ia = A(T(alpha)), ib = A(T(beta));
    parallel_for(batch * m, n * k, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        int64_t p = r / m, i = r % m;
        T* crow = c + p * sc + i * ldc;
        for (int64_t j = 0; j < n; ++j) crow[j] = ib == 0 ? T(0) : T(ib * A(crow[j]));
        for (int64_t q = 0; q < k; ++q) {
          const A av = A(ta ? a[p * sa + q * lda + i] : a[p * sa + i * lda + q]) * ia;
          const T* bp = b + p * sb;
          for (int64_t j = 0; j < n; ++j)
            crow[j] = T(A(crow[j]) + av * A(tb ? bp[j * ldb + q] : bp[q * ldb + j]));
        }
      }
    });
  }
}

// rows x cols elements of a 16-bit matrix with row stride ld, widened to contiguous floats
template <class Tag>
void widen(const uint16_t* x, int64_t ld, int64_t rows, int64_t cols, float* y, bool par) {
  auto body = [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const uint16_t* src = x + r * ld;
      float* dst = y + r * cols;
      int64_t j = 0;
#if defined(__F16C__)
      if constexpr (std::is_same<Tag, F16>::value) {
        for (; j + 8 <= cols; j += 8)
          _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(
                                        reinterpret_cast<const __m128i*>(src + j))));
      }
#endif
      for (; j < cols; ++j) dst[j] = cast_load<Tag>(src[j]);
    }
  };
  if (par) parallel_for(rows, cols, body);
  else if (rows > 0) body(0, rows);
}

// contiguous floats rounded once into an m x n 16-bit matrix with row stride ld
template <class Tag>
void narrow(const float* x, int64_t rows, int64_t cols, uint16_t* y, int64_t ld, bool par) {
  auto body = [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const float* src = x + r * cols;
      uint16_t* dst = y + r * ld;
      int64_t j = 0;
#if defined(__F16C__)
      if constexpr (std::is_same<Tag, F16>::value) {
        for (; j + 8 <= cols; j += 8)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j),
                           _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
      }
#endif
      for (; j < cols; ++j) dst[j] = cast_store<Tag>(src[j]);
    }
  };
  if (par) parallel_for(rows, cols, body);
  else if (rows > 0) body(0, rows);
}

// One product of the batch in float buffers: the stored operands (op(A) is m x k, stored
// k x m when transposed; likewise B) are widened as they lie, so sgemm keeps the transpose
// flags. `same_b`: B is the one widened last time (a shared right operand), kept as it is.
template <class Tag>
struct HalfGemm {
  int32_t ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  std::vector<float> af, bf, cf;
  void run(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, uint16_t* c,
           int64_t ldc, bool same_b, bool par) {
    const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
    af.resize(size_t(ra * ca));
    cf.resize(size_t(m * n));
    widen<Tag>(a, lda, ra, ca, af.data(), par);
    if (!same_b) {
      bf.resize(size_t(rb * cb));
      widen<Tag>(b, ldb, rb, cb, bf.data(), par);
    }
    if (beta != 0) widen<Tag>(c, ldc, m, n, cf.data(), par);
    blas::gemm_mt(ta, tb, m, n, k, alpha, af.data(), std::max<int64_t>(ca, 1), bf.data(),
                  std::max<int64_t>(cb, 1), beta, cf.data(), std::max<int64_t>(n, 1));
    narrow<Tag>(cf.data(), m, n, c, ldc, par);
  }
};

template <class Tag>
void gemm_half(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,
               const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, double beta,
               uint16_t* c, int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  if (k == 0) {  // no product: C = beta * C, rounded once (beta == 0 never reads C)
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          uint16_t& v = c[p * sc + i * ldc + j];
          v = cast_store<Tag>(beta == 0 ? 0.0f : float(beta) * cast_load<Tag>(v));
        }
    return;
  }
  const HalfGemm<Tag> proto{ta, tb, m, n, k, float(alpha), float(beta), {}, {}, {}};
  const int64_t work = m * n * k;
  if (batch > 1 && work < (int64_t(1) << 22)) {
    // many small products: one product per thread with its own buffers (as the float path)
    const int nt = std::max(1, std::min<int>(threads_for(batch * work / 64), int(batch)));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      HalfGemm<Tag> g = proto;
      const int t = omp_get_thread_num(), T = omp_get_num_threads();
      const int64_t chunk = (batch + T - 1) / T;
      const int64_t pb = std::min<int64_t>(batch, t * chunk),
                    pe = std::min<int64_t>(batch, pb + chunk);
      for (int64_t p = pb; p < pe; ++p)
        g.run(a + p * sa, lda, b + p * sb, ldb, c + p * sc, ldc, p > pb && sb == 0, false);
    }
    return;
  }
  HalfGemm<Tag> g = proto;
  for (int64_t p = 0; p < batch; ++p)
    g.run(a + p * sa, lda, b + p * sb, ldb, c + p * sc, ldc, p > 0 && sb == 0, true);
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_DEF_GEMM(sfx, T, _)                                                                  \
  void st_gemm_##sfx(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,     \
                     const T* a, int64_t lda, const T* b, int64_t ldb, double beta, T* c,       \
                     int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {          \
    st::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch, sa, sb, sc);       \
  }
ST_NUM_TYPES(ST_DEF_GEMM, _)
#define ST_DEF_GEMM_HALF(sfx, T, _)                                                             \
  void st_gemm_##sfx(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,     \
                     const T* a, int64_t lda, const T* b, int64_t ldb, double beta, T* c,       \
                     int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {          \
    st::gemm_half<ST_TAG_##sfx>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch,    \
                                sa, sb, sc);                                                    \
  }
ST_HALF_TYPES(ST_DEF_GEMM_HALF, _)
}
