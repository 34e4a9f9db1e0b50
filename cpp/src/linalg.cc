// Matrix products: float types through OpenBLAS, integer types by a cache-friendly loop.
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
      // product. OpenBLAS runs products under 2^18 on the calling thread by itself; above that
      // its own pool would take them, so it is held to one thread while ours run.
      int nt = threads_for(batch * work / 64);
      const bool hold = nt > 1 && work >= (int64_t(1) << 18);
      const int blas_threads = hold ? blas::num_threads() : 0;
      if (hold) blas::set_num_threads(1);
#pragma omp parallel for num_threads(nt) if (nt > 1)
      for (int64_t p = 0; p < batch; ++p) {
        blas::gemm(ta, tb, m, n, k, T(alpha), a + p * sa, lda, b + p * sb, ldb, T(beta),
                   c + p * sc, ldc);
      }
      if (hold) blas::set_num_threads(blas_threads);
      return;
    }
    for (int64_t p = 0; p < batch; ++p)
      blas::gemm(ta, tb, m, n, k, T(alpha), a + p * sa, lda, b + p * sb, ldb, T(beta),
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
}
