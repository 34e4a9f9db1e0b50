// Matrix products with few rows (a recurrent layer's batch: m of 1 to 32), float32, computed
// where the operands lie. A BLAS packs both operands into blocks on every call; with a handful
// of rows the packing of the large right operand (a 1024 x 256 recurrent weight is 1 MiB)
// costs more than the product, and a recurrent loop repeats it at every time step. These
// kernels read the right operand where it lies, once per tile of rows, instead:
//
//   nt: C = A B^T (+ C), A (m, k), B (n, k): dot products of rows, four of B at a time
//       against up to three rows of A, reduced across lanes at the end
//   nn: C = A B (+ C),   A (m, k), B (k, n): each row of B scaled by A's entries and
//       accumulated into up to four rows of C, 24 columns at a time
//
// All operands are row-major with leading dimensions; the columns of C (rows of B for nt,
// columns of B for nn) are split over threads. Available on AVX2 + FMA builds (the default
// x86-64-v3 baseline); `available()` is false elsewhere and the callers keep BLAS. Where the CPU
// has AVX-512, the same tiles run 16 lanes wide (`wide`).
#ifndef SINGA_TENSOR_CPU_SMALL_GEMM_H_
#define SINGA_TENSOR_CPU_SMALL_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ST_SMALL_GEMM 1
#else
#define ST_SMALL_GEMM 0
#endif

namespace st {
namespace small_gemm {

// the largest m these kernels take; above it a BLAS's packing pays for itself
constexpr int64_t kMaxRows = 32;

inline bool available() { return ST_SMALL_GEMM != 0; }

// Whether a float32 product C = op(A) op(B) * alpha + C * beta goes to these kernels: A not
// transposed, alpha 1, beta 0 or 1, few rows, and B small enough to stay in cache while it is
// read once per tile of rows. Measured against OpenBLAS split over two threads: 0.5x its time
// for the recurrent forward step 8 x 1024 x 256 (nt), the same time for the backward step
// 8 x 256 x 1024 (nn), but up to 4x slower with a B of many megabytes, which a BLAS packs for
// good reason; so the recurrent layers use these, general matrix products do not.
inline bool suits(int32_t ta, int64_t m, int64_t n, int64_t k, double alpha, double beta) {
  return available() && !ta && m > 0 && m <= kMaxRows && n > 0 && k > 0 &&
         n * k <= (int64_t(1) << 20) && alpha == 1 && (beta == 0 || beta == 1);
}

#if ST_SMALL_GEMM

// lanes [0, r) of a load or store, for the last partial vector of a row
inline __m256i tail_mask(int64_t r) {
  alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - r));
}

// the sums of the lanes of x0..x3, in that order
inline __m128 hsum4(__m256 x0, __m256 x1, __m256 x2, __m256 x3) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// C[0:MR, 0:NR] (+)= A[0:MR, :] . B[0:NR, :]^T over k
template <int MR, int NR>
inline void nt_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, bool accumulate) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm256_loadu_ps(a + i * lda + p);
    for (int j = 0; j < NR; ++j) {
      const __m256 bv = _mm256_loadu_ps(b + j * ldb + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(av[i], bv, acc[i][j]);
    }
  }
  if (p < k) {
    const __m256i mask = tail_mask(k - p);
    __m256 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm256_maskload_ps(a + i * lda + p, mask);
    for (int j = 0; j < NR; ++j) {
      const __m256 bv = _mm256_maskload_ps(b + j * ldb + p, mask);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(av[i], bv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    __m256 x[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int j = 0; j < NR; ++j) x[j] = acc[i][j];
    alignas(16) float s[4];
    _mm_store_ps(s, hsum4(x[0], x[1], x[2], x[3]));
    float* ci = c + i * ldc;
    for (int j = 0; j < NR; ++j) ci[j] = accumulate ? ci[j] + s[j] : s[j];
  }
}

template <int MR>
inline void nt_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, int64_t nb, int64_t ne, bool accumulate) {
  int64_t j = nb;
  for (; j + 4 <= ne; j += 4) nt_tile<MR, 4>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate);
  switch (ne - j) {
    case 3: nt_tile<MR, 3>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    case 2: nt_tile<MR, 2>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    case 1: nt_tile<MR, 1>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    default: break;
  }
}

// C[0:MR, :NV*8 columns] (+)= A[0:MR, :] . B[:, same columns]; `mask` set: the last vector is
// partial (NV == 1 only)
template <int MR, int NV>
inline void nn_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, bool accumulate, const __m256i* mask) {
  __m256 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = mask ? _mm256_maskload_ps(bp + 8 * v, *mask) : _mm256_loadu_ps(bp + 8 * v);
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float* ci = c + i * ldc + 8 * v;
      if (mask) {
        __m256 r = acc[i][v];
        if (accumulate) r = _mm256_add_ps(r, _mm256_maskload_ps(ci, *mask));
        _mm256_maskstore_ps(ci, *mask, r);
      } else {
        _mm256_storeu_ps(ci, accumulate ? _mm256_add_ps(acc[i][v], _mm256_loadu_ps(ci))
                                        : acc[i][v]);
      }
    }
}

template <int MR>
inline void nn_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, int64_t nb, int64_t ne, bool accumulate) {
  int64_t j = nb;
  for (; j + 24 <= ne; j += 24)
    nn_tile<MR, 3>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, nullptr);
  for (; j + 8 <= ne; j += 8) nn_tile<MR, 1>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, nullptr);
  if (j < ne) {
    const __m256i mask = tail_mask(ne - j);
    nn_tile<MR, 1>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, &mask);
  }
}

// rows(tile rows, A's first row, C's first row, nb, ne) over every tile of up to R rows of C
// and the columns [nb, ne), the columns split over threads in blocks of `unit`
template <int R, class Rows>
inline void tiles(int64_t m, int64_t n, int64_t k, int64_t unit, const float* a, int64_t lda,
                  float* c, int64_t ldc, Rows&& rows) {
  parallel_for((n + unit - 1) / unit, unit * m * k, [&](int64_t ub, int64_t ue) {
    const int64_t nb = unit * ub, ne = std::min(n, unit * ue);
    int64_t i = 0;
    for (; i + R <= m; i += R)
      rows(std::integral_constant<int, R>{}, a + i * lda, c + i * ldc, nb, ne);
    switch (m - i) {
      case 3: rows(std::integral_constant<int, 3>{}, a + i * lda, c + i * ldc, nb, ne); break;
      case 2: rows(std::integral_constant<int, 2>{}, a + i * lda, c + i * ldc, nb, ne); break;
      case 1: rows(std::integral_constant<int, 1>{}, a + i * lda, c + i * ldc, nb, ne); break;
      default: break;
    }
  });
}

// ---- the same kernels 16 lanes wide, for CPUs with AVX-512 (taken at run time) ---------------
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl")
namespace wide {

// lanes [0, r) of a 16-lane vector
inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

template <int MR, int NR>
inline void nt_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, bool accumulate) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    __m512 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm512_loadu_ps(a + i * lda + p);
    for (int j = 0; j < NR; ++j) {
      const __m512 bv = _mm512_loadu_ps(b + j * ldb + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
    }
  }
  if (p < k) {
    const __mmask16 mask = tail_mask(k - p);
    __m512 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm512_maskz_loadu_ps(mask, a + i * lda + p);
    for (int j = 0; j < NR; ++j) {
      const __m512 bv = _mm512_maskz_loadu_ps(mask, b + j * ldb + p);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    for (int j = 0; j < NR; ++j) {
      const float s = _mm512_reduce_add_ps(acc[i][j]);
      ci[j] = accumulate ? ci[j] + s : s;
    }
  }
}

template <int MR>
inline void nt_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, int64_t nb, int64_t ne, bool accumulate) {
  int64_t j = nb;
  for (; j + 4 <= ne; j += 4) nt_tile<MR, 4>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate);
  switch (ne - j) {
    case 3: nt_tile<MR, 3>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    case 2: nt_tile<MR, 2>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    case 1: nt_tile<MR, 1>(a, lda, b + j * ldb, ldb, c + j, ldc, k, accumulate); break;
    default: break;
  }
}

// C[0:MR, NV*16 columns] (+)= A[0:MR, :] . B[:, same columns]; mask: the lanes of the last
// vector that exist (all 16 but at the right edge, where NV == 1)
template <int MR, int NV>
inline void nn_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, bool accumulate, __mmask16 mask) {
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_ps(mask, bp + 16 * v);
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + p]);
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float* ci = c + i * ldc + 16 * v;
      __m512 r = acc[i][v];
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, ci));
      _mm512_mask_storeu_ps(ci, mask, r);
    }
}

template <int MR>
inline void nn_rows(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k, int64_t nb, int64_t ne, bool accumulate) {
  const __mmask16 all = 0xffff;
  int64_t j = nb;
  for (; j + 48 <= ne; j += 48) nn_tile<MR, 3>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, all);
  for (; j + 16 <= ne; j += 16) nn_tile<MR, 1>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, all);
  if (j < ne) nn_tile<MR, 1>(a, lda, b + j, ldb, c + j, ldc, k, accumulate, tail_mask(ne - j));
}

// C[0:MR, 0:48] (+)= A[0:MR, :] . P, P a packed panel (k rows of 48 contiguous columns);
// only C's first `cols` columns are stored
template <int MR>
inline void panel_tile(const float* a, int64_t lda, const float* panel, float* c, int64_t ldc,
                       int64_t k, bool accumulate, int64_t cols) {
  __m512 acc[MR][3];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < 3; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p, panel += 48) {
    const __m512 b0 = _mm512_loadu_ps(panel), b1 = _mm512_loadu_ps(panel + 16),
                 b2 = _mm512_loadu_ps(panel + 32);
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + p]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(av, b2, acc[i][2]);
    }
  }
  for (int v = 0; v < 3; ++v) {
    const int64_t lanes = std::min<int64_t>(16, std::max<int64_t>(0, cols - 16 * v));
    if (!lanes) break;
    const __mmask16 mask = tail_mask(lanes);
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc + 16 * v;
      __m512 r = acc[i][v];
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, ci));
      _mm512_mask_storeu_ps(ci, mask, r);
    }
  }
}

}  // namespace wide
#pragma GCC pop_options

// C (m, n) = A (m, k) . B (n, k)^T, plus C when `accumulate`; columns split over threads in
// blocks of 4, each thread's slice of B read once per tile of three rows of A. 16 lanes wide
// where the CPU has AVX-512 (avx512_enabled), else 8; the two sum k in different orders.
inline void nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (avx512_enabled()) {
    tiles<3>(m, n, k, 4, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci, int64_t nb,
                                              int64_t ne) {
      wide::nt_rows<decltype(mr)::value>(ai, lda, b, ldb, ci, ldc, k, nb, ne, accumulate);
    });
    return;
  }
  tiles<3>(m, n, k, 4, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci, int64_t nb,
                                            int64_t ne) {
    nt_rows<decltype(mr)::value>(ai, lda, b, ldb, ci, ldc, k, nb, ne, accumulate);
  });
}

// C (m, n) = A (m, k) . B (k, n), plus C when `accumulate`; columns split over threads in
// blocks of 8 (16 with AVX-512), each thread's slice of B read once per tile of four rows of A
inline void nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (avx512_enabled()) {
    tiles<4>(m, n, k, 16, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci, int64_t nb,
                                               int64_t ne) {
      wide::nn_rows<decltype(mr)::value>(ai, lda, b, ldb, ci, ldc, k, nb, ne, accumulate);
    });
    return;
  }
  tiles<4>(m, n, k, 8, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci, int64_t nb,
                                            int64_t ne) {
    nn_rows<decltype(mr)::value>(ai, lda, b, ldb, ci, ldc, k, nb, ne, accumulate);
  });
}

// C[0:MR, 0:24] (+)= A[0:MR, :] . P, P a packed panel (k rows of 24 contiguous columns); only
// C's first `cols` columns are stored
template <int MR>
inline void panel_tile(const float* a, int64_t lda, const float* panel, float* c, int64_t ldc,
                       int64_t k, bool accumulate, int64_t cols) {
  __m256 acc[MR][3];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < 3; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p, panel += 24) {
    const __m256 b0 = _mm256_loadu_ps(panel), b1 = _mm256_loadu_ps(panel + 8),
                 b2 = _mm256_loadu_ps(panel + 16);
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
      acc[i][2] = _mm256_fmadd_ps(av, b2, acc[i][2]);
    }
  }
  for (int v = 0; v < 3; ++v) {
    const int64_t lanes = std::min<int64_t>(8, std::max<int64_t>(0, cols - 8 * v));
    if (!lanes) break;
    const __m256i mask = tail_mask(lanes);
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc + 8 * v;
      __m256 r = acc[i][v];
      if (accumulate) r = _mm256_add_ps(r, _mm256_maskload_ps(ci, mask));
      _mm256_maskstore_ps(ci, mask, r);
    }
  }
}

// The right operand of products repeated with one weight (a recurrent layer's steps), packed
// once. Read where it lies, a tile of C's columns walks B down its rows, a whole row apart:
// every k is a new 4 KiB page, which the hardware prefetchers do not follow, so the kernels
// above wait on the cache. Packed into panels of `width` columns (48 with AVX-512, else 24),
// each k rows of contiguous columns and the last one padded with zeros, the steps stream it.
// Measured on a 2-core AVX-512 machine, 8 x 1024 x 256 and 8 x 256 x 1024: 28 and 30 us a
// product against 50-55 us read in place; packing the 1 MiB weight costs about 100 us (as
// B^T) or 40 us (as B), so it pays from a few steps on.
class Packed {
 public:
  // B for C = A B (B k x n, row stride ldb) or, when `transposed`, for C = A B^T (B n x k)
  void pack(bool transposed, int64_t n, int64_t k, const float* b, int64_t ldb) {
    width_ = avx512_enabled() ? 48 : 24;
    n_ = n;
    k_ = k;
    source_ = b;
    transposed_ = transposed;
    const int64_t panels = (n + width_ - 1) / width_, w = width_;
    data_.resize(size_t(panels * w * k));
    float* out = data_.data();
    parallel_for(panels, w * k, [&](int64_t ub, int64_t ue) {
      for (int64_t u = ub; u < ue; ++u) {
        float* panel = out + u * w * k;
        const int64_t j0 = u * w, cols = std::min(w, n - j0);
        if (transposed) {  // column jj of the panel is row j0 + jj of B
          if (cols < w) std::fill(panel, panel + w * k, 0.0f);
          for (int64_t jj = 0; jj < cols; ++jj) {
            const float* row = b + (j0 + jj) * ldb;
            for (int64_t p = 0; p < k; ++p) panel[p * w + jj] = row[p];
          }
        } else {
          for (int64_t p = 0; p < k; ++p) {
            const float* row = b + p * ldb + j0;
            float* dst = panel + p * w;
            std::copy(row, row + cols, dst);
            std::fill(dst + cols, dst + w, 0.0f);
          }
        }
      }
    });
  }

  // whether this holds B as pack() was last called with these operands
  bool holds(bool transposed, int64_t n, int64_t k, const float* b) const {
    return source_ == b && transposed_ == transposed && n_ == n && k_ == k &&
           width_ == (avx512_enabled() ? 48 : 24);
  }

  // C (m, n) = A (m, k) . B, plus C when `accumulate`; panels split over threads
  void multiply(int64_t m, const float* a, int64_t lda, float* c, int64_t ldc,
                bool accumulate) const {
    const int64_t w = width_, k = k_, n = n_;
    const int64_t panels = (n + w - 1) / w;
    const float* data = data_.data();
    const bool wide = w == 48;
    parallel_for(panels, w * m * k, [&](int64_t ub, int64_t ue) {
      for (int64_t u = ub; u < ue; ++u) {
        const float* panel = data + u * w * k;
        const int64_t cols = std::min(w, n - u * w);
        if (wide)
          rows<8>(m, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci) {
            wide::panel_tile<decltype(mr)::value>(ai, lda, panel, ci + u * w, ldc, k, accumulate,
                                                  cols);
          });
        else
          rows<4>(m, a, lda, c, ldc, [&](auto mr, const float* ai, float* ci) {
            panel_tile<decltype(mr)::value>(ai, lda, panel, ci + u * w, ldc, k, accumulate,
                                            cols);
          });
      }
    });
  }

 private:
  // tile(rows, A's first row, C's first row) over tiles of up to R rows
  template <int R, class Tile>
  static void rows(int64_t m, const float* a, int64_t lda, float* c, int64_t ldc, Tile&& tile) {
    int64_t i = 0;
    for (; i + R <= m; i += R) tile(std::integral_constant<int, R>{}, a + i * lda, c + i * ldc);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (m - i) {
      case 7: if constexpr (R > 7) tile(std::integral_constant<int, 7>{}, ai, ci); break;
      case 6: if constexpr (R > 6) tile(std::integral_constant<int, 6>{}, ai, ci); break;
      case 5: if constexpr (R > 5) tile(std::integral_constant<int, 5>{}, ai, ci); break;
      case 4: if constexpr (R > 4) tile(std::integral_constant<int, 4>{}, ai, ci); break;
      case 3: tile(std::integral_constant<int, 3>{}, ai, ci); break;
      case 2: tile(std::integral_constant<int, 2>{}, ai, ci); break;
      case 1: tile(std::integral_constant<int, 1>{}, ai, ci); break;
      default: break;
    }
  }

  std::vector<float> data_;
  const float* source_ = nullptr;
  bool transposed_ = false;
  int64_t n_ = 0, k_ = 0, width_ = 0;
};

#else  // no AVX2 + FMA: never called (available() is false)

inline void nt(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*,
               int64_t, bool) {}
inline void nn(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*,
               int64_t, bool) {}
class Packed {
 public:
  void pack(bool, int64_t, int64_t, const float*, int64_t) {}
  bool holds(bool, int64_t, int64_t, const float*) const { return false; }
  void multiply(int64_t, const float*, int64_t, float*, int64_t, bool) const {}
};

#endif  // ST_SMALL_GEMM

}  // namespace small_gemm
}  // namespace st

#endif  // SINGA_TENSOR_CPU_SMALL_GEMM_H_
