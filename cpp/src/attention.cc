// Scaled dot-product attention without the (L, S) score matrix. Each task owns a block of query
// rows (or, in the backward, of keys) and walks the other side a block at a time: the scores of
// one block pair live in a per-thread scratch of kQueryBlock x kKeyBlock, so memory is O(L * Ev)
// plus that scratch, whatever L and S are. The block products go through BLAS on the calling
// thread (OpenBLAS held to one thread while ours run, as in linalg.cc); the softmax steps
// between them are flat loops over contiguous rows, which vectorise.
#include <cmath>
#include <limits>
#include <vector>

#include "blas.h"
#include "common.h"
#include "half.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace st {
namespace {

constexpr int64_t kQueryBlock = 64;
// rows per score product under the causal rule (forward_rows)
constexpr int64_t kCausalStrip = 16;
constexpr int64_t kKeyBlock = 128;

// Keys j0 .. j0 + n - 1 of a block that query row i may attend to: all n, or under the causal
// rule (j <= i) a prefix of them, possibly empty.
inline int64_t allowed_keys(const AttentionDims& d, int64_t i, int64_t j0, int64_t n) {
  if (!d.causal) return n;
  return std::max<int64_t>(0, std::min<int64_t>(n, i - j0 + 1));
}

// Last key (exclusive) that any of the query rows i0 .. i0 + nq - 1 may attend to.
inline int64_t key_end(const AttentionDims& d, int64_t i0, int64_t nq) {
  return d.causal ? std::min<int64_t>(d.s, i0 + nq) : d.s;
}

// Where one tensor's rows lie: batch entry b = outer * heads + head starts at
// (b / heads) * outer_stride + (b % heads) * head_stride, and its rows are row_stride apart, each
// row contiguous. Contiguous [B, rows, cols]: heads 1, outer rows * cols, row cols. A projected
// (N, L, 3, H, D) tensor gives q, k and v as views of this kind, with no copy.
struct Lay {
  int64_t heads, outer, head, row;
  int64_t at(int64_t b, int64_t r) const { return (b / heads) * outer + (b % heads) * head + r * row; }
};

inline Lay dense(int64_t rows, int64_t cols) { return {1, rows * cols, 0, cols}; }

// the layouts of q, k, v, out, dout, dq, dk, dv (the forward reads the first four)
struct Lays {
  Lay q, k, v, o, dout, dq, dk, dv;
};

inline Lays dense_lays(const AttentionDims& d) {
  const Lay q = dense(d.l, d.e), k = dense(d.s, d.e), v = dense(d.s, d.ev), o = dense(d.l, d.ev);
  return {q, k, v, o, o, q, k, v};
}

// rows [r0, r0 + n) of one batch entry of a laid-out tensor set to zero
template <class T>
inline void zero_rows(T* x, const Lay& lay, int64_t b, int64_t r0, int64_t n, int64_t cols) {
  for (int64_t r = r0; r < r0 + n; ++r) {
    T* row = x + lay.at(b, r);
    std::fill(row, row + cols, T(0));
  }
}

// dst (cols x rows, contiguous) = the transpose of rows x cols elements at src, rows `ld`
// apart. The score products q k^T and dout v^T run as plain products on transposed key and
// value blocks, and the backward's p^T dout and ds^T q on transposed p and ds: OpenBLAS takes a
// transposed operand of these small sizes at about a third of its plain speed (9 us against 3
// for 64 x 64 x 32 on an AVX-512 core). Forward and backward of 32 heads of 64 x 32 went from
// 1.28 to 1.20 ms (two threads, alternating in one process) with the key and value blocks
// transposed; see transpose_block<float> for the cost of the copies.
template <class T>
ST_INLINE void transpose_block(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * ld;
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = row[c];
  }
}

#if defined(__AVX2__)
// dst[c * ldd + r] = src[r * ld + c] for an 8 x 8 tile, in registers: pairs of rows
// interleaved, then pairs of pairs, then the 128-bit halves swapped into place
ST_INLINE void transpose8x8(const float* src, int64_t ld, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

// The float transpose in 8 x 8 tiles, the edges element by element (the element loop stores
// a strided column of dst per row of src, one scalar at a time)
template <>
ST_INLINE void transpose_block<float>(const float* src, int64_t ld, int64_t rows, int64_t cols,
                                      float* dst) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8)
      transpose8x8(src + r * ld + c, ld, dst + c * rows + r, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = src + r * ld;
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) dst[c * rows + r] = row[c];
  }
}
#endif

// Runs body(task, scratch) for every task in [0, n), spread over threads with a dynamic
// schedule (causal tasks differ in size); each thread gets its own scratch of `scratch` elements.
template <class T, class F>
void for_tasks(int64_t n, int64_t cost, int64_t scratch, F&& body) {
  const int nt = threads_for(n * cost);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<T> work(scratch);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < n; ++t) body(t, work.data());
  }
}

template <class T>
inline void scale_row(T* x, int64_t n, T a) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) x[c] *= a;
}

// row[j] = exp(row[j] - shift) for j < n; returns their sum, kept in 16 partial sums that are
// then added pairwise. A vector loop's reduction adds its lanes one after another at the end,
// 16 dependent additions, which on rows of 64 cost about as much as the loop.
template <class T>
ST_INLINE T exp_and_sum(T* row, int64_t n, T shift) {
  constexpr int kLanes = 16;
  T part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int u = 0; u < kLanes; ++u) {
      const T p = st_exp(row[j + u] - shift);
      row[j + u] = p;
      part[u] += p;
    }
  }
  for (int u = 0; j < n; ++j, ++u) {
    const T p = st_exp(row[j] - shift);
    row[j] = p;
    part[u] += p;
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int u = 0; u < w; ++u) part[u] += part[u + w];
  return part[0];
}

// Query rows i0 .. i0 + nq - 1 of batch b: out accumulates p v over the key blocks while m and
// l hold each row's running maximum and sum of exponentials (the online softmax).
template <class T>
ST_INLINE void forward_rows(const AttentionDims& d, const Lays& L, const T* q, const T* k,
                            const T* v, T* out, T* lse, T scale, int64_t b, int64_t i0,
                            int64_t nq, T* work) {
  const T ninf = -std::numeric_limits<T>::infinity();
  T* sc = work;  // kQueryBlock x kKeyBlock scores, then probabilities
  T* m = sc + kQueryBlock * kKeyBlock;
  T* l = m + kQueryBlock;
  T* kt = l + kQueryBlock;  // the key block transposed, e x kKeyBlock
  const T* qb = q + L.q.at(b, i0);
  T* ob = out + L.o.at(b, i0);
  const int64_t ldo = L.o.row;
  for (int64_t r = 0; r < nq; ++r) {
    m[r] = ninf;
    l[r] = 0;
  }
  zero_rows(out, L.o, b, i0, nq, d.ev);
  const int64_t kend = key_end(d, i0, nq);
  for (int64_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, kend - j0);
    transpose_block(k + L.k.at(b, j0), L.k.row, nk, d.e, kt);
    // Where the causal rule cuts through the block, each row sees more of its keys than the
    // one before: the products run a strip of rows at a time, over the keys that the strip's
    // last row sees. The scores past a strip's keys are never read (the rows below mask them).
    const int64_t strip = allowed_keys(d, i0, j0, nk) < nk ? kCausalStrip : nq;
    auto strip_keys = [&](int64_t r0, int64_t ns) {
      return allowed_keys(d, i0 + r0 + ns - 1, j0, nk);
    };
    for (int64_t r0 = 0; r0 < nq; r0 += strip) {
      const int64_t ns = std::min(strip, nq - r0), nks = strip_keys(r0, ns);
      if (nks > 0)
        blas::gemm(0, 0, ns, nks, d.e, scale, qb + r0 * L.q.row, L.q.row, kt, nk, T(0),
                   sc + r0 * nk, nk);
    }
    for (int64_t r = 0; r < nq; ++r) {
      T* row = sc + r * nk;
      const int64_t lim = allowed_keys(d, i0 + r, j0, nk);
      if (lim == 0) {
        std::fill(row, row + nk, T(0));
        continue;
      }
      // keys past the causal limit count as scores of -inf, whose probability is 0: the loops
      // below run over whole rows in vector lanes instead of stopping at a ragged limit with
      // a scalar tail (which made the causal forward of 64 x 64 heads 1.4x the full one's time)
      std::fill(row + lim, row + nk, ninf);
      // the maximum in vector lanes, blind to NaN: a NaN score reaches the output through
      // its probability
      T mx = ninf;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < nk; ++j) mx = row[j] > mx ? row[j] : mx;
      const T mnew = std::max(m[r], mx);
      if (mnew == ninf) {  // every score so far is -inf or NaN: nothing to weigh yet
        bool nan = false;
        for (int64_t j = 0; j < lim; ++j) nan |= row[j] != row[j];
        if (nan) l[r] = std::numeric_limits<T>::quiet_NaN();  // the row's output is NaN
        std::fill(row, row + nk, T(0));
        continue;
      }
      const T sum = exp_and_sum(row, nk, mnew);
      if (m[r] != mnew) {
        const T alpha = m[r] == ninf ? T(0) : st_exp(m[r] - mnew);
        scale_row(ob + r * ldo, d.ev, alpha);
        l[r] *= alpha;
      }
      l[r] += sum;
      m[r] = mnew;
    }
    for (int64_t r0 = 0; r0 < nq; r0 += strip) {
      const int64_t ns = std::min(strip, nq - r0), nks = strip_keys(r0, ns);
      if (nks > 0)
        blas::gemm(0, 0, ns, d.ev, nks, T(1), sc + r0 * nk, nk, v + L.v.at(b, j0), L.v.row,
                   T(1), ob + r0 * ldo, ldo);
    }
  }
  for (int64_t r = 0; r < nq; ++r) {
    T* orow = ob + r * ldo;
    if (l[r] > T(0)) {
      scale_row(orow, d.ev, T(1) / l[r]);
      lse[b * d.l + i0 + r] = m[r] + st_log(l[r]);
    } else if (l[r] == T(0)) {  // no key to attend to: zeros, as the composition's masked rows
      std::fill(orow, orow + d.ev, T(0));
      lse[b * d.l + i0 + r] = ninf;
    } else {  // a NaN or +inf score (then inf - inf): NaN, as softmax gives
      std::fill(orow, orow + d.ev, l[r]);
      lse[b * d.l + i0 + r] = l[r];
    }
  }
}

// forward_rows and backward_pair in two builds, as the unary kernels: 16 lanes wide where the
// CPU has AVX-512 (avx512_enabled), else the baseline's 8. Their row loops (maximum,
// exponentials, sums) are most of a small head's time; the block products are BLAS calls.
template <class T>
ST_AVX512 ST_FLAT void forward_rows_wide(const AttentionDims& d, const Lays& L, const T* q,
                                         const T* k, const T* v, T* out, T* lse, T scale,
                                         int64_t b, int64_t i0, int64_t nq, T* work) {
  forward_rows(d, L, q, k, v, out, lse, scale, b, i0, nq, work);
}
template <class T>
ST_FLAT void forward_rows_narrow(const AttentionDims& d, const Lays& L, const T* q, const T* k,
                                 const T* v, T* out, T* lse, T scale, int64_t b, int64_t i0,
                                 int64_t nq, T* work) {
  forward_rows(d, L, q, k, v, out, lse, scale, b, i0, nq, work);
}

template <class T>
void attention(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& d,
               const Lays& L, T scale) {
  const int64_t qblocks = (d.l + kQueryBlock - 1) / kQueryBlock;
  const int64_t scratch = kQueryBlock * kKeyBlock + 2 * kQueryBlock + d.e * kKeyBlock;
  const bool wide = avx512_enabled();
  for_tasks<T>(d.batch * qblocks, kQueryBlock * d.s * (d.e + d.ev), scratch,
               [&](int64_t t, T* work) {
                 const int64_t b = t / qblocks, i0 = (t % qblocks) * kQueryBlock;
                 const int64_t nq = std::min(kQueryBlock, d.l - i0);
                 if (wide)
                   forward_rows_wide(d, L, q, k, v, out, lse, scale, b, i0, nq, work);
                 else
                   forward_rows_narrow(d, L, q, k, v, out, lse, scale, b, i0, nq, work);
               });
}

template <class T>
void attention(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& d,
               T scale) {
  attention(q, k, v, out, lse, d, dense_lays(d), scale);
}

// What one (query block, key block) pair contributes to the gradients: p = exp(s - lse) and
// ds = p (dout v^T - delta) are rebuilt in the scratch, then added into dq (rows i0..) and/or
// dk, dv (rows j0..).
template <class T>
ST_INLINE void backward_pair(const AttentionDims& d, const Lays& L, const T* q, const T* k,
                             const T* v, const T* dout, const T* lse, const T* delta, T* dq,
                             T* dk, T* dv, T scale, int64_t b, int64_t i0, int64_t nq,
                             int64_t j0, int64_t nk, bool want_dq, bool want_dkdv, T* work) {
  const T ninf = -std::numeric_limits<T>::infinity();
  T* p = work;
  T* ds = work + kQueryBlock * kKeyBlock;
  T* kt = ds + kQueryBlock * kKeyBlock;  // the key and value blocks transposed
  T* vt = kt + d.e * kKeyBlock;
  T* pt = vt + d.ev * kKeyBlock;  // p and ds transposed, for the products into dv and dk
  T* dst = pt + kQueryBlock * kKeyBlock;
  const T* qb = q + L.q.at(b, i0);
  const T* dob = dout + L.dout.at(b, i0);
  const T* kb = k + L.k.at(b, j0);
  const T* vb = v + L.v.at(b, j0);
  transpose_block(kb, L.k.row, nk, d.e, kt);
  transpose_block(vb, L.v.row, nk, d.ev, vt);
  blas::gemm(0, 0, nq, nk, d.e, scale, qb, L.q.row, kt, nk, T(0), p, nk);
  blas::gemm(0, 0, nq, nk, d.ev, T(1), dob, L.dout.row, vt, nk, T(0), ds, nk);
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t i = b * d.l + i0 + r;
    T* prow = p + r * nk;
    T* dsrow = ds + r * nk;
    const int64_t lim = lse[i] == ninf ? 0 : allowed_keys(d, i0 + r, j0, nk);
    const T li = lse[i], di = delta[i];
    // whole rows in vector lanes (see forward_rows); the keys past the limit are zeroed below
    const int64_t span = lim == 0 ? 0 : nk;
#pragma omp simd
    for (int64_t j = 0; j < span; ++j) {
      const T pj = st_exp(prow[j] - li);
      prow[j] = pj;
      dsrow[j] = pj * (dsrow[j] - di);
    }
    std::fill(prow + lim, prow + nk, T(0));
    std::fill(dsrow + lim, dsrow + nk, T(0));
  }
  if (want_dkdv) {
    transpose_block(p, nk, nq, nk, pt);
    transpose_block(ds, nk, nq, nk, dst);
    blas::gemm(0, 0, nk, d.ev, nq, T(1), pt, nq, dob, L.dout.row, T(1), dv + L.dv.at(b, j0),
               L.dv.row);
    blas::gemm(0, 0, nk, d.e, nq, scale, dst, nq, qb, L.q.row, T(1), dk + L.dk.at(b, j0),
               L.dk.row);
  }
  if (want_dq)
    blas::gemm(0, 0, nq, d.e, nk, scale, ds, nk, kb, L.k.row, T(1), dq + L.dq.at(b, i0),
               L.dq.row);
}

template <class T>
ST_AVX512 ST_FLAT void backward_pair_wide(const AttentionDims& d, const Lays& L, const T* q,
                                          const T* k, const T* v, const T* dout, const T* lse,
                                          const T* delta, T* dq, T* dk, T* dv, T scale, int64_t b,
                                          int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                                          bool want_dq, bool want_dkdv, T* work) {
  backward_pair(d, L, q, k, v, dout, lse, delta, dq, dk, dv, scale, b, i0, nq, j0, nk, want_dq,
                want_dkdv, work);
}
template <class T>
ST_FLAT void backward_pair_narrow(const AttentionDims& d, const Lays& L, const T* q, const T* k,
                                  const T* v, const T* dout, const T* lse, const T* delta,
                                  T* dq, T* dk, T* dv, T scale, int64_t b, int64_t i0,
                                  int64_t nq, int64_t j0, int64_t nk, bool want_dq,
                                  bool want_dkdv, T* work) {
  backward_pair(d, L, q, k, v, dout, lse, delta, dq, dk, dv, scale, b, i0, nq, j0, nk, want_dq,
                want_dkdv, work);
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* dout,
                        const T* lse, T* delta, T* dq, T* dk, T* dv, const AttentionDims& d,
                        const Lays& L, T scale) {
  parallel_for(d.batch * d.l, d.ev, [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      const T* o = out + L.o.at(i / d.l, i % d.l);
      const T* g = dout + L.dout.at(i / d.l, i % d.l);
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t c = 0; c < d.ev; ++c) acc += o[c] * g[c];
      delta[i] = acc;
    }
  });
  const int64_t qblocks = (d.l + kQueryBlock - 1) / kQueryBlock;
  const int64_t kblocks = (d.s + kKeyBlock - 1) / kKeyBlock;
  const int64_t scratch = 4 * kQueryBlock * kKeyBlock + (d.e + d.ev) * kKeyBlock;
  const int64_t pair_cost = kQueryBlock * kKeyBlock * (d.e + d.ev);
  const bool wide = avx512_enabled();
  auto pair = [&](int64_t b, int64_t i0, int64_t j0, bool want_dq, bool want_dkdv, T* work) {
    const int64_t nq = std::min(kQueryBlock, d.l - i0), nk = std::min(kKeyBlock, d.s - j0);
    if (wide)
      backward_pair_wide(d, L, q, k, v, dout, lse, delta, dq, dk, dv, scale, b, i0, nq, j0, nk,
                         want_dq, want_dkdv, work);
    else
      backward_pair_narrow(d, L, q, k, v, dout, lse, delta, dq, dk, dv, scale, b, i0, nq, j0,
                           nk, want_dq, want_dkdv, work);
  };
  if (d.batch >= omp_get_max_threads()) {
    // enough batch entries to keep every thread busy: one task per entry, one pass over the
    // block pairs that adds into dq, dk and dv at once
    for_tasks<T>(d.batch, qblocks * kblocks * pair_cost, scratch, [&](int64_t b, T* work) {
      zero_rows(dq, L.dq, b, 0, d.l, d.e);
      zero_rows(dk, L.dk, b, 0, d.s, d.e);
      zero_rows(dv, L.dv, b, 0, d.s, d.ev);
      for (int64_t i0 = 0; i0 < d.l; i0 += kQueryBlock) {
        const int64_t kend = key_end(d, i0, std::min(kQueryBlock, d.l - i0));
        for (int64_t j0 = 0; j0 < kend; j0 += kKeyBlock) pair(b, i0, j0, true, true, work);
      }
    });
    return;
  }
  // few batch entries: query blocks (dq) and key blocks (dk, dv) in two passes, so that each
  // task writes only rows it owns; the scores are recomputed in each
  for_tasks<T>(d.batch * qblocks, kblocks * pair_cost, scratch, [&](int64_t t, T* work) {
    const int64_t b = t / qblocks, i0 = (t % qblocks) * kQueryBlock;
    const int64_t nq = std::min(kQueryBlock, d.l - i0);
    zero_rows(dq, L.dq, b, i0, nq, d.e);
    for (int64_t j0 = 0; j0 < key_end(d, i0, nq); j0 += kKeyBlock)
      pair(b, i0, j0, true, false, work);
  });
  for_tasks<T>(d.batch * kblocks, qblocks * pair_cost, scratch, [&](int64_t t, T* work) {
    const int64_t b = t / kblocks, j0 = (t % kblocks) * kKeyBlock;
    const int64_t nk = std::min(kKeyBlock, d.s - j0);
    zero_rows(dk, L.dk, b, j0, nk, d.e);
    zero_rows(dv, L.dv, b, j0, nk, d.ev);
    // under the causal rule no query before key j0 sees this block
    const int64_t first = d.causal ? j0 / kQueryBlock * kQueryBlock : 0;
    for (int64_t i0 = first; i0 < d.l; i0 += kQueryBlock) pair(b, i0, j0, false, true, work);
  });
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* dout,
                        const T* lse, T* delta, T* dq, T* dk, T* dv, const AttentionDims& d,
                        T scale) {
  attention_backward(q, k, v, out, dout, lse, delta, dq, dk, dv, d, dense_lays(d), scale);
}

// The layouts of a strided call: `lay` holds (heads, outer stride, head stride, row stride) for
// each of the `n` tensors in Lays order
inline Lays lays_from(const int64_t* lay, int n, const AttentionDims& d) {
  Lays L = dense_lays(d);
  Lay* dst[8] = {&L.q, &L.k, &L.v, &L.o, &L.dout, &L.dq, &L.dk, &L.dv};
  for (int i = 0; i < n; ++i) *dst[i] = Lay{lay[4 * i], lay[4 * i + 1], lay[4 * i + 2], lay[4 * i + 3]};
  return L;
}

// ---- float16 / bfloat16: groups of whole batch entries are widened into float buffers of about
// kAttnChunk elements, the float kernels above run on them, and the results are rounded once.
// The row statistics (lse, delta) stay float. Memory holds one group, never a float copy of
// the tensors.
constexpr int64_t kAttnChunk = int64_t(1) << 20;

inline int64_t entries_per_group(int64_t per_entry, int64_t batch) {
  const int64_t fit = kAttnChunk / std::max<int64_t>(per_entry, 1);
  return std::max<int64_t>(1, std::min<int64_t>(batch, fit));
}

// widen `count` elements of x starting at element `first` into y (threads share the copy)
template <class Tag>
void widen_part(const uint16_t* x, int64_t first, int64_t count, float* y) {
  for_each_block(count, 1,
                 [&](int64_t s, int64_t len) { widen<Tag>(x + first + s, y + s, len); });
}

template <class Tag>
void narrow_part(const float* x, int64_t count, uint16_t* y, int64_t first) {
  for_each_block(count, 1,
                 [&](int64_t s, int64_t len) { narrow<Tag>(x + s, y + first + s, len); });
}

// One tensor of a 16-bit call: its elements per batch entry, read from `in` (widened) and/or
// written to `out` (rounded) around each group
struct Part {
  const uint16_t* in;
  uint16_t* out;
  int64_t per;
};

// fn(f, b0, cnt) for groups of cnt batch entries from b0: f[i] holds part i's elements of the
// group in float32, widened before and rounded back after, as the part says
template <class Tag, size_t N, class F>
void by_entry_groups(int64_t batch, const Part (&parts)[N], F&& fn) {
  int64_t per = 0;
  for (const Part& p : parts) per += p.per;
  const int64_t g = entries_per_group(per, batch);
  std::vector<float> buf(static_cast<size_t>(g * per));
  float* f[N];
  f[0] = buf.data();
  for (size_t i = 1; i < N; ++i) f[i] = f[i - 1] + g * parts[i - 1].per;
  for (int64_t b0 = 0; b0 < batch; b0 += g) {
    const int64_t cnt = std::min(g, batch - b0);
    for (size_t i = 0; i < N; ++i)
      if (parts[i].in) widen_part<Tag>(parts[i].in, b0 * parts[i].per, cnt * parts[i].per, f[i]);
    fn(f, b0, cnt);
    for (size_t i = 0; i < N; ++i)
      if (parts[i].out)
        narrow_part<Tag>(f[i], cnt * parts[i].per, parts[i].out, b0 * parts[i].per);
  }
}

template <class Tag>
void attention_half(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                    float* lse, const AttentionDims& d, float scale) {
  const int64_t nq = d.l * d.e, nk = d.s * d.e, nv = d.s * d.ev, no = d.l * d.ev;
  const Part parts[] = {
      {q, nullptr, nq}, {k, nullptr, nk}, {v, nullptr, nv}, {nullptr, out, no}};
  by_entry_groups<Tag>(d.batch, parts, [&](float* const* f, int64_t b0, int64_t cnt) {
    AttentionDims dg = d;
    dg.batch = cnt;
    attention<float>(f[0], f[1], f[2], f[3], lse + b0 * d.l, dg, scale);
  });
}

template <class Tag>
void attention_backward_half(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                             const uint16_t* out, const uint16_t* dout, const float* lse,
                             float* delta, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                             const AttentionDims& d, float scale) {
  const int64_t nq = d.l * d.e, nk = d.s * d.e, nv = d.s * d.ev, no = d.l * d.ev;
  const Part parts[] = {{q, nullptr, nq},    {k, nullptr, nk},     {v, nullptr, nv},
                        {out, nullptr, no},  {dout, nullptr, no},  {nullptr, dq, nq},
                        {nullptr, dk, nk},   {nullptr, dv, nv}};
  by_entry_groups<Tag>(d.batch, parts, [&](float* const* f, int64_t b0, int64_t cnt) {
    AttentionDims dg = d;
    dg.batch = cnt;
    attention_backward<float>(f[0], f[1], f[2], f[3], f[4], lse + b0 * d.l, delta + b0 * d.l,
                              f[5], f[6], f[7], dg, scale);
  });
}

}  // namespace
}  // namespace st

#define ST_DEF_ATTENTION(sfx, T, _)                                                            \
  void st_attention_##sfx(const T* q, const T* k, const T* v, T* out, T* lse, int64_t batch,   \
                          int64_t l, int64_t s, int64_t e, int64_t ev, double scale,           \
                          int32_t causal) {                                                    \
    st::attention(q, k, v, out, lse, st::AttentionDims{batch, l, s, e, ev, causal != 0},       \
                  T(scale));                                                                   \
  }                                                                                            \
  void st_attention_backward_##sfx(const T* q, const T* k, const T* v, const T* out,           \
                                   const T* dout, const T* lse, T* delta, T* dq, T* dk, T* dv, \
                                   int64_t batch, int64_t l, int64_t s, int64_t e, int64_t ev, \
                                   double scale, int32_t causal) {                             \
    st::attention_backward(q, k, v, out, dout, lse, delta, dq, dk, dv,                         \
                           st::AttentionDims{batch, l, s, e, ev, causal != 0}, T(scale));      \
  }
ST_FLOAT_TYPES(ST_DEF_ATTENTION, _)

#define ST_DEF_ATTENTION_STRIDED(sfx, T, _)                                                    \
  void st_attention_strided_##sfx(const T* q, const T* k, const T* v, T* out, T* lse,          \
                                  const int64_t* lay, int64_t batch, int64_t l, int64_t s,     \
                                  int64_t e, int64_t ev, double scale, int32_t causal) {       \
    const st::AttentionDims d{batch, l, s, e, ev, causal != 0};                                \
    st::attention(q, k, v, out, lse, d, st::lays_from(lay, 4, d), T(scale));                   \
  }                                                                                            \
  void st_attention_backward_strided_##sfx(                                                    \
      const T* q, const T* k, const T* v, const T* out, const T* dout, const T* lse, T* delta, \
      T* dq, T* dk, T* dv, const int64_t* lay, int64_t batch, int64_t l, int64_t s, int64_t e, \
      int64_t ev, double scale, int32_t causal) {                                              \
    const st::AttentionDims d{batch, l, s, e, ev, causal != 0};                                \
    st::attention_backward(q, k, v, out, dout, lse, delta, dq, dk, dv, d,                      \
                           st::lays_from(lay, 8, d), T(scale));                                \
  }
ST_FLOAT_TYPES(ST_DEF_ATTENTION_STRIDED, _)

#define ST_DEF_ATTENTION_HALF(sfx, T, _)                                                       \
  void st_attention_##sfx(const T* q, const T* k, const T* v, T* out, float* lse,             \
                          int64_t batch, int64_t l, int64_t s, int64_t e, int64_t ev,         \
                          double scale, int32_t causal) {                                     \
    st::attention_half<ST_TAG_##sfx>(q, k, v, out, lse,                                       \
                                     st::AttentionDims{batch, l, s, e, ev, causal != 0},      \
                                     float(scale));                                           \
  }                                                                                           \
  void st_attention_backward_##sfx(const T* q, const T* k, const T* v, const T* out,          \
                                   const T* dout, const float* lse, float* delta, T* dq,      \
                                   T* dk, T* dv, int64_t batch, int64_t l, int64_t s,         \
                                   int64_t e, int64_t ev, double scale, int32_t causal) {     \
    st::attention_backward_half<ST_TAG_##sfx>(                                                \
        q, k, v, out, dout, lse, delta, dq, dk, dv,                                           \
        st::AttentionDims{batch, l, s, e, ev, causal != 0}, float(scale));                    \
  }
ST_HALF_TYPES(ST_DEF_ATTENTION_HALF, _)
