// The one place that knows OpenBLAS from the scipy-openblas32 wheel prefixes its symbols.
#ifndef SINGA_TENSOR_CPU_BLAS_H_
#define SINGA_TENSOR_CPU_BLAS_H_

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace st {
namespace blas {

inline CBLAS_TRANSPOSE trans(int32_t t) { return t ? CblasTrans : CblasNoTrans; }

inline void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  scipy_cblas_sgemm(CblasRowMajor, trans(ta), trans(tb), blasint(m), blasint(n), blasint(k),
                    alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

inline void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                 double* c, int64_t ldc) {
  scipy_cblas_dgemm(CblasRowMajor, trans(ta), trans(tb), blasint(m), blasint(n), blasint(k),
                    alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

// OpenBLAS's own thread pool. The library keeps it at one thread (elementwise.cc): gemm_mt
// splits the products worth sharing over OpenMP's threads instead, so that one pool, whose
// threads wait for work by spinning briefly, serves every kernel (oneDNN's included). Two
// pools would each need their idle threads to sleep at once, to leave the cores to the other,
// and then pay a wake-up (tens of microseconds on a virtual machine) per kernel call.
inline void set_num_threads(int n) { scipy_openblas_set_num_threads(n); }

// below this many multiply-adds a product runs on the calling thread
constexpr int64_t kSplitWork = int64_t(1) << 20;

// below this many rows a product is not split: OpenBLAS computes it as matrix-vector products,
// whose rounding may depend on a column's position in the call, and equal columns of C must
// come out equal wherever a split puts them
constexpr int64_t kSplitRows = 16;

// gemm with the rows of C (or, when C is wider than tall, its columns) split over OpenMP's
// threads in blocks of 16; each thread's OpenBLAS call runs on that thread.
template <class T>
void gemm_mt(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
             int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t work = m * n * k;
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  int nt = work < kSplitWork || m < kSplitRows
               ? 1
               : std::min<int>(omp_get_max_threads(), int(len / 16));
  if (nt <= 1 || omp_in_parallel()) {
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), tn = omp_get_num_threads();
    const int64_t chunk = ((len + tn - 1) / tn + 15) / 16 * 16;
    const int64_t lo = std::min<int64_t>(len, t * chunk), hi = std::min<int64_t>(len, lo + chunk);
    if (lo < hi) {
      if (by_rows)
        gemm(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta,
             c + lo * ldc, ldc);
      else
        gemm(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta,
             c + lo, ldc);
    }
  }
}

}  // namespace blas
}  // namespace st

#endif  // SINGA_TENSOR_CPU_BLAS_H_
