// Batch normalization over [outer, c, inner] (channels in the middle), the CUDA twin of
// cpp/src/norm.cc. Statistics and gradient sums take one block per channel: each thread sums
// its share in the element type, the block combines the shares in double (as the CPU combines
// its per-plane sums), and the variance is a second pass about the rounded mean, like the CPU's.
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
}
