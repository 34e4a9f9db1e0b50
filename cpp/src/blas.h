// The one place that knows OpenBLAS from the scipy-openblas32 wheel prefixes its symbols.
#ifndef SINGA_TENSOR_CPU_BLAS_H_
#define SINGA_TENSOR_CPU_BLAS_H_

#include <cblas.h>

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

// OpenBLAS's own thread pool (separate from OpenMP's)
inline int num_threads() { return scipy_openblas_get_num_threads(); }
inline void set_num_threads(int n) { scipy_openblas_set_num_threads(n); }

}  // namespace blas
}  // namespace st

#endif  // SINGA_TENSOR_CPU_BLAS_H_
