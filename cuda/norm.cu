// Batch normalization over [outer, c, inner] (channels in the middle), the CUDA twin of
// cpp/src/norm.cc. Statistics and gradient sums take one block per channel: each thread sums
// its share in the element type, the block combines the shares in double (as the CPU combines
// its per-plane sums), and the variance is a second pass about the rounded mean, like the CPU's.
// Layer and group normalization take one block per row, summing in double in two passes as the
// CPU does; the affine gradients are summed in a fixed order (bits independent of the grid).
#include <cmath>

#include "common.cuh"

namespace st {
namespace {

constexpr int kChannelThreads = 512;  // few channels means few blocks: make each one wide
constexpr int64_t kMaxChannelBlocks = 65535;  // also the limit of gridDim.y

// Calls f(offset) for the elements start, start + stride, ... of channel ch's outer * inner
// elements in row-major order, so consecutive threads touch consecutive addresses. (o, i)
// advance by the stride without a division per element. Requires inner > 0.
template <class F>
__device__ __forceinline__ void walk_channel(int64_t outer, int64_t c, int64_t inner, int64_t ch,
                                             int64_t start, int64_t stride, F&& f) {
  const int64_t so = stride / inner, si = stride - so * inner;
  int64_t o = start / inner, i = start - o * inner;
  while (o < outer) {
    f((o * c + ch) * inner + i);
    o += so;
    i += si;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
}

template <class T>
__global__ void stats_kernel(const T* __restrict__ x, T* __restrict__ mean, T* __restrict__ var,
                             int64_t outer, int64_t c, int64_t inner) {
  const double count = double(outer) * double(inner);
  const bool any = outer > 0 && inner > 0;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    T acc = T(0);
    if (any)
      walk_channel(outer, c, inner, ch, threadIdx.x, blockDim.x, [&](int64_t k) { acc += x[k]; });
    const double s = cuda::block_reduce(double(acc), fn::add{}, 0.0);
    const T m = T(any ? s / count : 0.0);
    T acc2 = T(0);
    if (any)
      walk_channel(outer, c, inner, ch, threadIdx.x, blockDim.x, [&](int64_t k) {
        const T d = x[k] - m;
        acc2 += d * d;
      });
    const double ss = cuda::block_reduce(double(acc2), fn::add{}, 0.0);
    if (threadIdx.x == 0) {
      mean[ch] = m;
      var[ch] = T(any ? ss / count : 0.0);
    }
  }
}

// y = x * scale + shift with the channel's factors from bn_scale_shift (functors.h), as on the
// CPU; blockIdx.y picks the channel, so each thread computes them once per channel, not once per
// element.
template <class T>
__global__ void apply_kernel(const T* __restrict__ x, const T* __restrict__ mean,
                             const T* __restrict__ var, const T* __restrict__ w,
                             const T* __restrict__ b, T* __restrict__ y, int64_t outer, int64_t c,
                             int64_t inner, double eps) {
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t ch = blockIdx.y; ch < c; ch += gridDim.y) {
    T sc, sh;
    bn_scale_shift(mean[ch], var[ch], w, b, ch, eps, &sc, &sh);
    walk_channel(outer, c, inner, ch, start, stride, [&](int64_t k) { y[k] = x[k] * sc + sh; });
  }
}

template <class T>
__global__ void backward_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                const T* __restrict__ mean, const T* __restrict__ var,
                                const T* __restrict__ w, T* __restrict__ dx, T* __restrict__ dw,
                                T* __restrict__ db, int64_t outer, int64_t c, int64_t inner,
                                double eps) {
  const bool any = outer > 0 && inner > 0;
  const T count = T(double(outer) * double(inner));
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const T m = mean[ch];
    T a1 = T(0), a2 = T(0);
    if (any)
      walk_channel(outer, c, inner, ch, threadIdx.x, blockDim.x, [&](int64_t k) {
        const T g = dy[k];
        a1 += g;
        a2 += g * (x[k] - m);
      });
    const double s1 = cuda::block_reduce(double(a1), fn::add{}, 0.0);
    const double s2 = cuda::block_reduce(double(a2), fn::add{}, 0.0);
    const double is = 1 / std::sqrt(double(var[ch]) + eps);
    if (threadIdx.x == 0) {
      if (db) db[ch] = T(s1);
      if (dw) dw[ch] = T(s2 * is);
    }
    if (dx == nullptr || !any) continue;
    const T ist = T(is);
    const T kk = (w ? w[ch] : T(1)) * ist;
    const T mean_dy = T(s1) / count, mean_dy_xhat = T(s2 * is) / count;
    // this block just read the channel, so the second read mostly hits in L2
    walk_channel(outer, c, inner, ch, threadIdx.x, blockDim.x, [&](int64_t k) {
      dx[k] = bn_input_grad(dy[k], x[k], kk, m, ist, mean_dy, mean_dy_xhat);
    });
  }
}

unsigned channel_blocks(int64_t c) {
  return unsigned(c < kMaxChannelBlocks ? c : kMaxChannelBlocks);
}

// ---- layer and group normalization over rows ---------------------------------------------------
constexpr int kColRows = 8;  // rows of threads in a block of the column-sum kernel

// threads for a block that walks a row of n elements: a multiple of 32, at most 256
int row_threads(int64_t n) {
  const int64_t t = (n + 31) / 32 * 32;
  return int(t < 32 ? 32 : (t > cuda::kThreads ? cuda::kThreads : t));
}

// mean and 1 / sqrt(biased var + eps) of the row at x, in two passes summed in double; every
// thread of the block gets them
template <class T>
__device__ __forceinline__ void row_stats(const T* x, int64_t n, double eps, T* mean, T* rstd) {
  double s = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += double(x[j]);
  const double mu = cuda::block_reduce(s, fn::add{}, 0.0) / double(n);
  double ss = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const double d = double(x[j]) - mu;
    ss += d * d;
  }
  const double var = cuda::block_reduce(ss, fn::add{}, 0.0) / double(n);
  *mean = T(mu);
  *rstd = T(1 / std::sqrt(var + eps));
}

// one row of group norm, whose element j takes the weight and bias of channel c0 + j / inner,
// c0 = (row % groups) * cpg; layer norm's row is groups = 1, cpg = n, inner = 1
template <class T>
__global__ void rownorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                       const T* __restrict__ b, T* __restrict__ y,
                                       T* __restrict__ mean, T* __restrict__ rstd, int64_t rows,
                                       int64_t n, int64_t groups, int64_t cpg, int64_t inner,
                                       double eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T m, rs;
    row_stats(xr, n, eps, &m, &rs);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    const int64_t c0 = (r % groups) * cpg;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const int64_t c = inner == 1 ? c0 + j : c0 + j / inner;
      T v = (xr[j] - m) * rs;
      if (w) v = v * w[c];
      if (b) v = v + b[c];
      yr[j] = v;
    }
  }
}

template <class T>
__global__ void rownorm_dx_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                  const T* __restrict__ mean, const T* __restrict__ rstd,
                                  const T* __restrict__ w, T* __restrict__ dx, int64_t rows,
                                  int64_t n, int64_t groups, int64_t cpg, int64_t inner) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    const T* gr = dy + r * n;
    const T m = mean[r], rs = rstd[r];
    const int64_t c0 = (r % groups) * cpg;
    double s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T gw = w ? gr[j] * w[inner == 1 ? c0 + j : c0 + j / inner] : gr[j];
      s1 += double(gw);
      s2 += double(gw * ((xr[j] - m) * rs));
    }
    s1 = cuda::block_reduce(s1, fn::add{}, 0.0);
    s2 = cuda::block_reduce(s2, fn::add{}, 0.0);
    const T a = T(s1 / double(n)), c = T(s2 / double(n));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T gw = w ? gr[j] * w[inner == 1 ? c0 + j : c0 + j / inner] : gr[j];
      dx[r * n + j] = rs * (gw - a - ((xr[j] - m) * rs) * c);
    }
  }
}

// layer norm's dweight, dbias: a block of 32 columns x kColRows rows of threads; thread (tx, ty)
// sums the rows ty, ty + kColRows, ... of its column in double, and the kColRows partial sums
// are added in order
template <class T>
__global__ void ln_affine_grad_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                      const T* __restrict__ mean, const T* __restrict__ rstd,
                                      T* __restrict__ dw, T* __restrict__ db, int64_t rows,
                                      int64_t n) {
  __shared__ double pw[kColRows][32], pb[kColRows][32];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  double aw = 0, ab = 0;
  if (j < n)
    for (int64_t r = threadIdx.y; r < rows; r += kColRows) {
      const T g = dy[r * n + j];
      aw += double(g * ((x[r * n + j] - mean[r]) * rstd[r]));
      ab += double(g);
    }
  pw[threadIdx.y][threadIdx.x] = aw;
  pb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y != 0 || j >= n) return;
  double sw = 0, sb = 0;
  for (int k = 0; k < kColRows; ++k) {
    sw += pw[k][threadIdx.x];
    sb += pb[k][threadIdx.x];
  }
  if (dw) dw[j] = T(sw);
  if (db) db[j] = T(sb);
}

// group norm's dweight, dbias: one block per channel over its batch * inner elements
template <class T>
__global__ void gn_affine_grad_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                      const T* __restrict__ mean, const T* __restrict__ rstd,
                                      T* __restrict__ dw, T* __restrict__ db, int64_t batch,
                                      int64_t channels, int64_t groups, int64_t inner) {
  const int64_t cpg = channels / groups, count = batch * inner;
  for (int64_t ch = blockIdx.x; ch < channels; ch += gridDim.x) {
    double aw = 0, ab = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t o = k / inner, i = k - o * inner;
      const int64_t r = o * groups + ch / cpg, at = (o * channels + ch) * inner + i;
      const T g = dy[at];
      aw += double(g * ((x[at] - mean[r]) * rstd[r]));
      ab += double(g);
    }
    aw = cuda::block_reduce(aw, fn::add{}, 0.0);
    ab = cuda::block_reduce(ab, fn::add{}, 0.0);
    if (threadIdx.x == 0) {
      if (dw) dw[ch] = T(aw);
      if (db) db[ch] = T(ab);
    }
  }
}

template <class T>
void rownorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                     int64_t n, int64_t groups, int64_t cpg, int64_t inner, double eps,
                     void* stream) {
  if (rows <= 0 || n <= 0) return;
  rownorm_forward_kernel<T><<<channel_blocks(rows), row_threads(n), 0, cuda::as_stream(stream)>>>(
      x, w, b, y, mean, rstd, rows, n, groups, cpg, inner, eps);
  st_cuda_check_launch();
}

template <class T>
void rownorm_dx(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx,
                int64_t rows, int64_t n, int64_t groups, int64_t cpg, int64_t inner,
                void* stream) {
  if (dx == nullptr || rows <= 0 || n <= 0) return;
  rownorm_dx_kernel<T><<<channel_blocks(rows), row_threads(n), 0, cuda::as_stream(stream)>>>(
      x, dy, mean, rstd, w, dx, rows, n, groups, cpg, inner);
  st_cuda_check_launch();
}

template <class T>
void ln_backward(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                 T* db, int64_t rows, int64_t n, void* stream) {
  if (n <= 0) return;
  rownorm_dx(x, dy, mean, rstd, w, dx, rows, n, int64_t(1), n, int64_t(1), stream);
  if (dw == nullptr && db == nullptr) return;
  ln_affine_grad_kernel<T><<<unsigned((n + 31) / 32), dim3(32, kColRows), 0,
                             cuda::as_stream(stream)>>>(x, dy, mean, rstd, dw, db, rows, n);
  st_cuda_check_launch();
}

template <class T>
void gn_backward(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                 T* db, int64_t batch, int64_t channels, int64_t groups, int64_t inner,
                 void* stream) {
  const int64_t cpg = channels / groups;
  rownorm_dx(x, dy, mean, rstd, w, dx, batch * groups, cpg * inner, groups, cpg, inner, stream);
  if ((dw == nullptr && db == nullptr) || channels <= 0) return;
  gn_affine_grad_kernel<T><<<channel_blocks(channels), row_threads(batch * inner), 0,
                             cuda::as_stream(stream)>>>(x, dy, mean, rstd, dw, db, batch,
                                                        channels, groups, inner);
  st_cuda_check_launch();
}

template <class T>
void stats(const T* x, T* mean, T* var, int64_t outer, int64_t c, int64_t inner, void* stream) {
  if (c <= 0) return;  // an empty batch still writes mean 0 and var 0 per channel
  stats_kernel<T><<<channel_blocks(c), kChannelThreads, 0, cuda::as_stream(stream)>>>(
      x, mean, var, outer, c, inner);
  st_cuda_check_launch();
}

template <class T>
void apply(const T* x, const T* mean, const T* var, const T* w, const T* b, T* y, int64_t outer,
           int64_t c, int64_t inner, double eps, void* stream) {
  if (outer <= 0 || c <= 0 || inner <= 0) return;
  const unsigned cy = channel_blocks(c);
  // split each channel over enough blocks that the whole grid fills the device, no more
  const int64_t per_channel = (outer * inner + cuda::kThreads - 1) / cuda::kThreads;
  int64_t cx = int64_t(cuda::sm_count()) * 8 / cy;
  cx = cx < 1 ? 1 : (cx < per_channel ? cx : per_channel);
  apply_kernel<T><<<dim3(unsigned(cx), cy), cuda::kThreads, 0, cuda::as_stream(stream)>>>(
      x, mean, var, w, b, y, outer, c, inner, eps);
  st_cuda_check_launch();
}

template <class T>
void backward(const T* x, const T* dy, const T* mean, const T* var, const T* w, T* dx, T* dw,
              T* db, int64_t outer, int64_t c, int64_t inner, double eps, void* stream) {
  if (c <= 0) return;
  backward_kernel<T><<<channel_blocks(c), kChannelThreads, 0, cuda::as_stream(stream)>>>(
      x, dy, mean, var, w, dx, dw, db, outer, c, inner, eps);
  st_cuda_check_launch();
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_BNORM(sfx, T, _)                                                           \
  void st_batch_norm_stats_##sfx(const T* x, T* mean, T* var, int64_t outer, int64_t c,        \
                                 int64_t inner, void* stream) {                                \
    st::stats(x, mean, var, outer, c, inner, stream);                                          \
  }                                                                                            \
  void st_batch_norm_apply_##sfx(const T* x, const T* mean, const T* var, const T* weight,     \
                                 const T* bias, T* y, int64_t outer, int64_t c, int64_t inner, \
                                 double eps, void* stream) {                                   \
    st::apply(x, mean, var, weight, bias, y, outer, c, inner, eps, stream);                    \
  }                                                                                            \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* var,      \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t outer, int64_t c, int64_t inner, double eps,       \
                                    void* stream) {                                            \
    st::backward(x, dy, mean, var, weight, dx, dweight, dbias, outer, c, inner, eps, stream);  \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_BNORM, _)

#define ST_CUDA_DEF_LNORM(sfx, T, _)                                                           \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t rows, int64_t n, double eps, void* stream) {                \
    st::rownorm_forward(x, weight, bias, y, mean, rstd, rows, n, int64_t(1), n, int64_t(1),    \
                        eps, stream);                                                          \
  }                                                                                            \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias, int64_t rows, \
                                    int64_t n, void* stream) {                                 \
    st::ln_backward(x, dy, mean, rstd, weight, dx, dweight, dbias, rows, n, stream);           \
  }                                                                                            \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t batch, int64_t channels, int64_t groups, int64_t inner,     \
                           double eps, void* stream) {                                         \
    const int64_t cpg = channels / groups;                                                     \
    st::rownorm_forward(x, weight, bias, y, mean, rstd, batch * groups, cpg * inner, groups,   \
                        cpg, inner, eps, stream);                                              \
  }                                                                                            \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t batch, int64_t channels, int64_t groups,           \
                                    int64_t inner, void* stream) {                             \
    st::gn_backward(x, dy, mean, rstd, weight, dx, dweight, dbias, batch, channels, groups,    \
                    inner, stream);                                                            \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_LNORM, _)
}

// float16 / bfloat16: the operands widened into float32 scratch (half.cuh), the float32
// kernels run with float32 statistics, the outputs rounded once
#include "half.cuh"

extern "C" {
#define ST_CUDA_DEF_NORM_HALF(sfx, T, _)                                                       \
  void st_batch_norm_stats_##sfx(const T* x, float* mean, float* var, int64_t outer, int64_t c, \
                                 int64_t inner, void* stream) {                                \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, outer * c * inner, stream);                          \
    if (xf.ok()) st_batch_norm_stats_f32(xf.p, mean, var, outer, c, inner, stream);            \
  }                                                                                            \
  void st_batch_norm_apply_##sfx(const T* x, const float* mean, const float* var,              \
                                 const T* weight, const T* bias, T* y, int64_t outer,          \
                                 int64_t c, int64_t inner, double eps, void* stream) {         \
    const int64_t n = outer * c * inner;                                                       \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, n, stream), wf(weight, c, stream),                   \
        bf(bias, c, stream);                                                                   \
    st::cuda::FloatScratch yf(n, stream);                                                      \
    if (!xf.ok() || !wf.ok() || !bf.ok() || !yf.ok()) return;                                  \
    st_batch_norm_apply_f32(xf.p, mean, var, wf.p, bf.p, yf.p, outer, c, inner, eps, stream);  \
    st::cuda::narrow<ST_TAG_##sfx>(yf.p, y, n, stream);                                        \
  }                                                                                            \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* var, const T* weight, T* dx, T* dweight,      \
                                    T* dbias, int64_t outer, int64_t c, int64_t inner,         \
                                    double eps, void* stream) {                                \
    const int64_t n = outer * c * inner;                                                       \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, n, stream), gf(dy, n, stream), wf(weight, c, stream); \
    st::cuda::FloatScratch dxf(dx ? n : 0, stream), dwf(dweight ? c : 0, stream),              \
        dbf(dbias ? c : 0, stream);                                                            \
    if (!xf.ok() || !gf.ok() || !wf.ok() || !dxf.ok() || !dwf.ok() || !dbf.ok()) return;       \
    st_batch_norm_backward_f32(xf.p, gf.p, mean, var, wf.p, dxf.p, dwf.p, dbf.p, outer, c,     \
                               inner, eps, stream);                                            \
    if (dx) st::cuda::narrow<ST_TAG_##sfx>(dxf.p, dx, n, stream);                              \
    if (dweight) st::cuda::narrow<ST_TAG_##sfx>(dwf.p, dweight, c, stream);                    \
    if (dbias) st::cuda::narrow<ST_TAG_##sfx>(dbf.p, dbias, c, stream);                        \
  }                                                                                            \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t rows, int64_t n, double eps, void* stream) {   \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, rows * n, stream), wf(weight, n, stream),            \
        bf(bias, n, stream);                                                                   \
    st::cuda::FloatScratch yf(rows * n, stream);                                               \
    if (!xf.ok() || !wf.ok() || !bf.ok() || !yf.ok()) return;                                  \
    st_layer_norm_f32(xf.p, wf.p, bf.p, yf.p, mean, rstd, rows, n, eps, stream);               \
    st::cuda::narrow<ST_TAG_##sfx>(yf.p, y, rows * n, stream);                                 \
  }                                                                                            \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t rows, int64_t n, void* stream) {         \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, rows * n, stream), gf(dy, rows * n, stream),         \
        wf(weight, n, stream);                                                                 \
    st::cuda::FloatScratch dxf(dx ? rows * n : 0, stream), dwf(dweight ? n : 0, stream),       \
        dbf(dbias ? n : 0, stream);                                                            \
    if (!xf.ok() || !gf.ok() || !wf.ok() || !dxf.ok() || !dwf.ok() || !dbf.ok()) return;       \
    st_layer_norm_backward_f32(xf.p, gf.p, mean, rstd, wf.p, dxf.p, dwf.p, dbf.p, rows, n,     \
                               stream);                                                        \
    if (dx) st::cuda::narrow<ST_TAG_##sfx>(dxf.p, dx, rows * n, stream);                       \
    if (dweight) st::cuda::narrow<ST_TAG_##sfx>(dwf.p, dweight, n, stream);                    \
    if (dbias) st::cuda::narrow<ST_TAG_##sfx>(dbf.p, dbias, n, stream);                        \
  }                                                                                            \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t batch, int64_t channels, int64_t groups,       \
                           int64_t inner, double eps, void* stream) {                          \
    const int64_t n = batch * channels * inner;                                                \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, n, stream), wf(weight, channels, stream),            \
        bf(bias, channels, stream);                                                            \
    st::cuda::FloatScratch yf(n, stream);                                                      \
    if (!xf.ok() || !wf.ok() || !bf.ok() || !yf.ok()) return;                                  \
    st_group_norm_f32(xf.p, wf.p, bf.p, yf.p, mean, rstd, batch, channels, groups, inner, eps, \
                      stream);                                                                 \
    st::cuda::narrow<ST_TAG_##sfx>(yf.p, y, n, stream);                                        \
  }                                                                                            \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t batch, int64_t channels, int64_t groups, \
                                    int64_t inner, void* stream) {                             \
    const int64_t n = batch * channels * inner;                                                \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, n, stream), gf(dy, n, stream),                       \
        wf(weight, channels, stream);                                                          \
    st::cuda::FloatScratch dxf(dx ? n : 0, stream), dwf(dweight ? channels : 0, stream),       \
        dbf(dbias ? channels : 0, stream);                                                     \
    if (!xf.ok() || !gf.ok() || !wf.ok() || !dxf.ok() || !dwf.ok() || !dbf.ok()) return;       \
    st_group_norm_backward_f32(xf.p, gf.p, mean, rstd, wf.p, dxf.p, dwf.p, dbf.p, batch,       \
                               channels, groups, inner, stream);                               \
    if (dx) st::cuda::narrow<ST_TAG_##sfx>(dxf.p, dx, n, stream);                              \
    if (dweight) st::cuda::narrow<ST_TAG_##sfx>(dwf.p, dweight, channels, stream);             \
    if (dbias) st::cuda::narrow<ST_TAG_##sfx>(dbf.p, dbias, channels, stream);                 \
  }
ST_HALF_TYPES(ST_CUDA_DEF_NORM_HALF, _)
}
