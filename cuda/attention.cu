// Scaled dot-product attention without the (L, S) score matrix; the CUDA twin of
// cpp/src/attention.cc. A block of 32 x 8 threads owns a tile of 32 query rows (forward, dq) or
// of 32 keys (dk, dv) and walks the other side 32 rows at a time. Lane x of warp w holds the
// tile entries (w + 8 r, x), r < 4: the score of row w + 8 r against key x, and the output
// columns x + 32 t, t < 8, in registers (hence E, Ev <= 256). Every product goes through
// shared memory in 32 x 32 chunks, so shared memory stays the same for any E, Ev and dtype.
// Each block writes only the rows of its own tile: no atomics.
#include <cmath>
#include <limits>

#include "common.cuh"

namespace st {
namespace {

constexpr int kTile = 32;                // tile rows; one key (or query) per lane
constexpr int kWarps = 8;                // warps per block
constexpr int kRows = kTile / kWarps;    // tile rows per warp
constexpr int kChunks = 8;               // 32-column chunks of E and Ev: at most 256 columns

struct Sum {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct Max {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};

// a 32 x 32 tile, padded so that a warp reading one column hits 32 different banks
template <class T>
using Tile = T[kTile][kTile + 1];

template <class T>
__device__ __forceinline__ T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

// acc[r] = sum_c x[w + 8 r][c] y[lane][c] over n columns, x and y row-major with n columns and
// xrows, yrows valid rows (the others read as 0). Every thread of the block must call it.
template <class T>
__device__ void tile_dot(const T* __restrict__ x, int64_t xrows, const T* __restrict__ y,
                         int64_t yrows, int64_t n, Tile<T>& xs, Tile<T>& ys, T (&acc)[kRows]) {
  const int lane = threadIdx.x, w = threadIdx.y;
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = T(0);
  for (int64_t c0 = 0; c0 < n; c0 += kTile) {
    const int64_t c = c0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = w + kWarps * r;
      xs[row][lane] = (row < xrows && c < n) ? x[row * n + c] : T(0);
      ys[row][lane] = (row < yrows && c < n) ? y[row * n + c] : T(0);
    }
    __syncthreads();
#pragma unroll 8
    for (int cc = 0; cc < kTile; ++cc) {
      const T yv = ys[lane][cc];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] += xs[w + kWarps * r][cc] * yv;
    }
    __syncthreads();
  }
}

// acc[r][t] += sum_j p[w + 8 r][j] y[j][32 t + lane] for y row-major with n columns and yrows
// valid rows. p was written before the call by any thread. Every thread of the block calls it.
template <class T>
__device__ void tile_accumulate(const Tile<T>& p, const T* __restrict__ y, int64_t yrows,
                                int64_t n, Tile<T>& ys, T (&acc)[kRows][kChunks]) {
  const int lane = threadIdx.x, w = threadIdx.y;
#pragma unroll
  for (int t = 0; t < kChunks; ++t) {
    if (t * kTile >= n) break;  // the same for the whole block
    const int64_t c = t * kTile + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = w + kWarps * r;
      ys[row][lane] = (row < yrows && c < n) ? y[row * n + c] : T(0);
    }
    __syncthreads();
#pragma unroll 8
    for (int j = 0; j < kTile; ++j) {
      const T yv = ys[j][lane];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][t] += p[w + kWarps * r][j] * yv;
    }
    __syncthreads();
  }
}

template <class T>
__device__ __forceinline__ void zero(T (&acc)[kRows][kChunks]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kChunks; ++t) acc[r][t] = T(0);
}

// rows w + 8 r < nrows of acc, times a, into dst (row-major, n columns)
template <class T>
__device__ void store(const T (&acc)[kRows][kChunks], T* __restrict__ dst, int64_t nrows,
                      int64_t n, T a) {
  const int lane = threadIdx.x, w = threadIdx.y;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = w + kWarps * r;
    if (row >= nrows) continue;
#pragma unroll
    for (int t = 0; t < kChunks; ++t) {
      const int64_t c = t * kTile + lane;
      if (c < n) dst[row * n + c] = acc[r][t] * a;
    }
  }
}

// One block per (batch entry, tile of 32 query rows): the online softmax keeps each row's
// running maximum m and sum l, rescaling the output accumulator when the maximum grows.
template <class T>
__global__ void __launch_bounds__(kTile* kWarps)
    attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     T* __restrict__ out, T* __restrict__ lse, AttentionDims d, T scale) {
  __shared__ Tile<T> xs, ys, ps;
  const int lane = threadIdx.x, w = threadIdx.y;
  const int64_t tiles = (d.l + kTile - 1) / kTile;
  const int64_t b = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kTile;
  const int64_t nq = d.l - i0 < kTile ? d.l - i0 : kTile;
  const T ninf = neg_inf<T>();
  const T* qt = q + (b * d.l + i0) * d.e;
  T m[kRows], l[kRows], acc[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = ninf;
    l[r] = T(0);
  }
  zero(acc);
  const int64_t kend = d.causal && i0 + nq < d.s ? i0 + nq : d.s;
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    const int64_t nk = kend - j0 < kTile ? kend - j0 : kTile;
    T s[kRows];
    tile_dot(qt, nq, k + (b * d.s + j0) * d.e, nk, d.e, xs, ys, s);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = i0 + w + kWarps * r, j = j0 + lane;
      const bool ok = lane < nk && (!d.causal || j <= i);
      const T x = ok ? s[r] * scale : ninf;
      const T mnew = Max{}(m[r], cuda::warp_reduce(x, Max{}));
      // a NaN score poisons its row's sum, as softmax would, even when no score is finite
      const T p = (ok && (mnew != ninf || x != x)) ? st_exp(x - mnew) : T(0);
      const T alpha = m[r] == ninf ? T(0) : st_exp(m[r] - mnew);
      l[r] = l[r] * alpha + cuda::warp_reduce(p, Sum{});
      m[r] = mnew;
#pragma unroll
      for (int t = 0; t < kChunks; ++t) acc[r][t] *= alpha;
      ps[w + kWarps * r][lane] = p;
    }
    tile_accumulate(ps, v + (b * d.s + j0) * d.ev, nk, d.ev, ys, acc);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = w + kWarps * r;
    const bool none = l[r] == T(0);
    // NaN (a NaN or +inf score) passes on to lse and, through 1 / l, to the row's output
    if (row < nq && lane == 0) lse[b * d.l + i0 + row] = none ? ninf : m[r] + st_log(l[r]);
    // a row that saw no key has acc == 0 and l == 0: scaling by 0 writes the zeros it must give
    l[r] = none ? T(0) : T(1) / l[r];
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kChunks; ++t) acc[r][t] *= l[r];
  store(acc, out + (b * d.l + i0) * d.ev, nq, d.ev, T(1));
}

// delta[i] = sum_c dout[i, c] out[i, c], one warp per row
template <class T>
__global__ void delta_kernel(const T* __restrict__ out, const T* __restrict__ dout,
                             T* __restrict__ delta, int64_t rows, int64_t ev) {
  const int lane = threadIdx.x & 31;
  // the row index is the same on every lane of a warp, so the whole warp reduces together
  for (int64_t i = cuda::thread_index() >> 5; i < rows; i += cuda::thread_count() >> 5) {
    T acc = T(0);
    for (int64_t c = lane; c < ev; c += 32) acc += out[i * ev + c] * dout[i * ev + c];
    acc = cuda::warp_reduce(acc, Sum{});
    if (lane == 0) delta[i] = acc;
  }
}

// dq for one (batch entry, tile of 32 query rows): ds = p (dout v^T - delta) per key tile, then
// dq += scale ds k.
template <class T>
__global__ void __launch_bounds__(kTile* kWarps)
    attention_dq_kernel(const T* __restrict__ q, const T* __restrict__ k,
                        const T* __restrict__ v, const T* __restrict__ dout,
                        const T* __restrict__ lse, const T* __restrict__ delta,
                        T* __restrict__ dq, AttentionDims d, T scale) {
  __shared__ Tile<T> xs, ys, ps;
  const int lane = threadIdx.x, w = threadIdx.y;
  const int64_t tiles = (d.l + kTile - 1) / kTile;
  const int64_t b = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kTile;
  const int64_t nq = d.l - i0 < kTile ? d.l - i0 : kTile;
  const T ninf = neg_inf<T>();
  const T* qt = q + (b * d.l + i0) * d.e;
  const T* dot = dout + (b * d.l + i0) * d.ev;
  T li[kRows], di[kRows], acc[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = w + kWarps * r;
    li[r] = row < nq ? lse[b * d.l + i0 + row] : ninf;
    di[r] = row < nq ? delta[b * d.l + i0 + row] : T(0);
  }
  zero(acc);
  const int64_t kend = d.causal && i0 + nq < d.s ? i0 + nq : d.s;
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    const int64_t nk = kend - j0 < kTile ? kend - j0 : kTile;
    const T* kt = k + (b * d.s + j0) * d.e;
    T s[kRows], dp[kRows];
    tile_dot(qt, nq, kt, nk, d.e, xs, ys, s);
    tile_dot(dot, nq, v + (b * d.s + j0) * d.ev, nk, d.ev, xs, ys, dp);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = i0 + w + kWarps * r, j = j0 + lane;
      const bool ok = lane < nk && (!d.causal || j <= i) && li[r] != ninf;
      const T p = ok ? st_exp(s[r] * scale - li[r]) : T(0);
      ps[w + kWarps * r][lane] = p * (dp[r] - di[r]);
    }
    tile_accumulate(ps, kt, nk, d.e, ys, acc);
  }
  store(acc, dq + (b * d.l + i0) * d.e, nq, d.e, scale);
}

// dk and dv for one (batch entry, tile of 32 keys), over the query tiles that can see it:
// with p and ds transposed (key rows, query columns), dv += p dout and dk += scale ds q.
template <class T>
__global__ void __launch_bounds__(kTile* kWarps)
    attention_dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k,
                          const T* __restrict__ v, const T* __restrict__ dout,
                          const T* __restrict__ lse, const T* __restrict__ delta,
                          T* __restrict__ dk, T* __restrict__ dv, AttentionDims d, T scale) {
  __shared__ Tile<T> xs, ys, ps, dss;
  const int lane = threadIdx.x, w = threadIdx.y;
  const int64_t tiles = (d.s + kTile - 1) / kTile;
  const int64_t b = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * kTile;
  const int64_t nk = d.s - j0 < kTile ? d.s - j0 : kTile;
  const T ninf = neg_inf<T>();
  const T* kt = k + (b * d.s + j0) * d.e;
  const T* vt = v + (b * d.s + j0) * d.ev;
  T dka[kRows][kChunks], dva[kRows][kChunks];
  zero(dka);
  zero(dva);
  // under the causal rule no query before key j0 sees this tile
  const int64_t first = d.causal ? j0 : 0;
  for (int64_t i0 = first; i0 < d.l; i0 += kTile) {
    const int64_t nq = d.l - i0 < kTile ? d.l - i0 : kTile;
    const T* qt = q + (b * d.l + i0) * d.e;
    const T* dot = dout + (b * d.l + i0) * d.ev;
    T st[kRows], dpt[kRows];  // key w + 8 r against query lane
    tile_dot(kt, nk, qt, nq, d.e, xs, ys, st);
    tile_dot(vt, nk, dot, nq, d.ev, xs, ys, dpt);
    const int64_t i = i0 + lane;
    const T li = lane < nq ? lse[b * d.l + i] : ninf;
    const T di = lane < nq ? delta[b * d.l + i] : T(0);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = w + kWarps * r;
      const int64_t j = j0 + row;
      const bool ok = lane < nq && row < nk && (!d.causal || j <= i) && li != ninf;
      const T p = ok ? st_exp(st[r] * scale - li) : T(0);
      ps[row][lane] = p;
      dss[row][lane] = p * (dpt[r] - di);
    }
    tile_accumulate(ps, dot, nq, d.ev, ys, dva);
    tile_accumulate(dss, qt, nq, d.e, ys, dka);
  }
  store(dka, dk + (b * d.s + j0) * d.e, nk, d.e, scale);
  store(dva, dv + (b * d.s + j0) * d.ev, nk, d.ev, T(1));
}

inline unsigned tile_blocks(int64_t batch, int64_t n) {
  return unsigned(batch * ((n + kTile - 1) / kTile));
}

template <class T>
void attention(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& d,
               double scale, void* stream) {
  if (d.batch * d.l == 0) return;
  attention_kernel<T><<<tile_blocks(d.batch, d.l), dim3(kTile, kWarps), 0,
                        cuda::as_stream(stream)>>>(q, k, v, out, lse, d, T(scale));
  st_cuda_check_launch();
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* dout,
                        const T* lse, T* delta, T* dq, T* dk, T* dv, const AttentionDims& d,
                        double scale, void* stream) {
  if (d.batch * d.l > 0) {
    cuda::launch_1d(delta_kernel<T>, d.batch * d.l * 32, stream, out, dout, delta,
                    d.batch * d.l, d.ev);
    attention_dq_kernel<T><<<tile_blocks(d.batch, d.l), dim3(kTile, kWarps), 0,
                             cuda::as_stream(stream)>>>(q, k, v, dout, lse, delta, dq, d,
                                                        T(scale));
    st_cuda_check_launch();
  }
  if (d.batch * d.s > 0) {
    attention_dkdv_kernel<T><<<tile_blocks(d.batch, d.s), dim3(kTile, kWarps), 0,
                               cuda::as_stream(stream)>>>(q, k, v, dout, lse, delta, dk, dv,
                                                          d, T(scale));
    st_cuda_check_launch();
  }
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_ATTENTION(sfx, T, _)                                                       \
  void st_attention_##sfx(const T* q, const T* k, const T* v, T* out, T* lse, int64_t batch,   \
                          int64_t l, int64_t s, int64_t e, int64_t ev, double scale,           \
                          int32_t causal, void* stream) {                                      \
    st::attention(q, k, v, out, lse, st::AttentionDims{batch, l, s, e, ev, causal != 0},       \
                  scale, stream);                                                              \
  }                                                                                            \
  void st_attention_backward_##sfx(const T* q, const T* k, const T* v, const T* out,           \
                                   const T* dout, const T* lse, T* delta, T* dq, T* dk, T* dv, \
                                   int64_t batch, int64_t l, int64_t s, int64_t e, int64_t ev, \
                                   double scale, int32_t causal, void* stream) {               \
    st::attention_backward(q, k, v, out, dout, lse, delta, dq, dk, dv,                         \
                           st::AttentionDims{batch, l, s, e, ev, causal != 0}, scale,          \
                           stream);                                                            \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_ATTENTION, _)
}
