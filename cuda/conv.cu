// Patch extraction for convolution (im2col), its adjoint (col2im), and max-pooling indices; the
// CUDA twin of cpp/src/conv.cc.
#include "common.cuh"

namespace st {
namespace {

using cuda::thread_count;
using cuda::thread_index;

// One thread per element of cols [B, C*kh*kw, OH*OW].
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ cols, int64_t total,
                              Geometry g) {
  const int64_t npos = g.oh * g.ow, taps = g.kh * g.kw;
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t br = k / npos, pos = k - br * npos;
    int64_t plane = br / taps, t = br - plane * taps;  // plane = image * C + channel
    int64_t i = t / g.kw, j = t - i * g.kw;
    int64_t y = pos / g.ow, xo = pos - y * g.ow;
    int64_t iy = y * g.sh - g.pt + i * g.dh, ix = xo * g.sw - g.pl + j * g.dw;
    cols[k] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? x[(plane * g.h + iy) * g.w + ix]
                                                           : T(0);
  }
}

// The adjoint as a gather: each image element sums the column entries of the taps that read
// it, in increasing tap order, which is the order in which the CPU's scatter adds them. So
// the result is deterministic, needs no atomics and matches the CPU bit for bit.
template <class T>
__global__ void col2im_kernel(const T* __restrict__ cols, T* __restrict__ x, int64_t total,
                              Geometry g) {
  const int64_t npos = g.oh * g.ow, taps = g.kh * g.kw, hw = g.h * g.w;
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t plane = k / hw, p = k - plane * hw;
    int64_t iy = p / g.w, ix = p - iy * g.w;
    const T* src = cols + plane * taps * npos;
    T acc = T(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t ty = iy + g.pt - i * g.dh;  // = y * sh for the output row y that tap row i maps here
      if (ty < 0) break;                  // ty only falls as i grows
      int64_t y = ty / g.sh;
      if (y * g.sh != ty || y >= g.oh) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t tx = ix + g.pl - j * g.dw;
        if (tx < 0) break;
        int64_t xo = tx / g.sw;
        if (xo * g.sw != tx || xo >= g.ow) continue;
        acc += src[(i * g.kw + j) * npos + y * g.ow + xo];
      }
    }
    x[k] = acc;
  }
}

// One thread per output window; the comparison is the CPU's, so ties keep the first position in
// row-major window order, NaN wins, and a window over padding only yields -1.
template <class T>
__global__ void maxpool_index_kernel(const T* __restrict__ x, int64_t* __restrict__ idx,
                                     T* __restrict__ vals, int64_t total, Geometry g) {
  const int64_t npos = g.oh * g.ow;
  for (int64_t k = thread_index(); k < total; k += thread_count()) {
    int64_t plane = k / npos, pos = k - plane * npos;
    int64_t y = pos / g.ow, xo = pos - y * g.ow;
    const T* px = x + plane * g.h * g.w;
    int64_t best = -1;
    T bv = T(0);
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t iy = y * g.sh - g.pt + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t ix = xo * g.sw - g.pl + j * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        T v = px[iy * g.w + ix];
        if (best < 0 || (!is_nan(bv) && (v > bv || is_nan(v)))) {
          best = iy * g.w + ix;
          bv = v;
        }
      }
    }
    if (idx != nullptr) idx[k] = best;
    if (vals != nullptr) vals[k] = best < 0 ? T(-INFINITY) : bv;
  }
}

template <class T>
void im2col(const T* x, T* cols, int64_t b, const Geometry& g, void* stream) {
  const int64_t total = b * g.c * g.kh * g.kw * g.oh * g.ow;
  cuda::launch_1d(im2col_kernel<T>, total, stream, x, cols, total, g);
}

template <class T>
void col2im(const T* cols, T* x, int64_t b, const Geometry& g, void* stream) {
  const int64_t total = b * g.c * g.h * g.w;
  cuda::launch_1d(col2im_kernel<T>, total, stream, cols, x, total, g);
}

// vals, when not null, receives the maxima themselves; idx may then be null
template <class T>
void maxpool_index(const T* x, int64_t* idx, T* vals, int64_t planes, const Geometry& g,
                   void* stream) {
  const int64_t total = planes * g.oh * g.ow;
  cuda::launch_1d(maxpool_index_kernel<T>, total, stream, x, idx, vals, total, g);
}

}  // namespace
}  // namespace st

// the geometry arguments of every kernel below, and the Geometry they give (c channels of h x w)
#define ST_CONV_ARGS                                                                         \
  int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh,         \
      int64_t dw, int64_t oh, int64_t ow, void* stream
#define ST_CONV_GEOMETRY(c) st::Geometry{c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow}

// im2col only moves bits (a zero is 0 in every float format), so one definition serves all
#define ST_CUDA_DEF_IM2COL(sfx, T, _)                                                         \
  void st_im2col_##sfx(const T* x, T* cols, int64_t b, int64_t c, int64_t h, int64_t w,       \
                       ST_CONV_ARGS) {                                                        \
    st::im2col<T>(x, cols, b, ST_CONV_GEOMETRY(c), stream);                                   \
  }

extern "C" {
ST_FLOAT_HALF_TYPES(ST_CUDA_DEF_IM2COL, _)

#define ST_CUDA_DEF_CONV(sfx, T, _)                                                           \
  void st_col2im_##sfx(const T* cols, T* x, int64_t b, int64_t c, int64_t h, int64_t w,       \
                       ST_CONV_ARGS) {                                                        \
    st::col2im<T>(cols, x, b, ST_CONV_GEOMETRY(c), stream);                                   \
  }                                                                                           \
  void st_maxpool2d_index_##sfx(const T* x, int64_t* idx, int64_t planes, int64_t h,          \
                                int64_t w, ST_CONV_ARGS) {                                    \
    st::maxpool_index<T>(x, idx, static_cast<T*>(nullptr), planes, ST_CONV_GEOMETRY(1),        \
                         stream);                                                             \
  }                                                                                           \
  void st_maxpool2d_##sfx(const T* x, T* y, int64_t* idx, int64_t planes, int64_t h,          \
                          int64_t w, ST_CONV_ARGS) {                                          \
    st::maxpool_index<T>(x, idx, y, planes, ST_CONV_GEOMETRY(1), stream);                     \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_CONV, _)
}

// float16 / bfloat16: col2im sums and the pooling index compares in float32 (half.cuh)
#include "half.cuh"

extern "C" {
#define ST_CUDA_DEF_CONV_HALF(sfx, T, _)                                                      \
  void st_col2im_##sfx(const T* cols, T* x, int64_t b, int64_t c, int64_t h, int64_t w,       \
                       ST_CONV_ARGS) {                                                        \
    const int64_t nx = b * c * h * w;                                                         \
    st::cuda::Widened<ST_TAG_##sfx> cf(cols, b * c * kh * kw * oh * ow, stream);              \
    st::cuda::FloatScratch xf(nx, stream);                                                    \
    if (!cf.ok() || !xf.ok()) return;                                                         \
    st::col2im<float>(cf.p, xf.p, b, ST_CONV_GEOMETRY(c), stream);                            \
    st::cuda::narrow<ST_TAG_##sfx>(xf.p, x, nx, stream);                                      \
  }                                                                                           \
  void st_maxpool2d_index_##sfx(const T* x, int64_t* idx, int64_t planes, int64_t h,          \
                                int64_t w, ST_CONV_ARGS) {                                    \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, planes * h * w, stream);                            \
    if (!xf.ok()) return;                                                                     \
    st::maxpool_index<float>(xf.p, idx, static_cast<float*>(nullptr), planes,                 \
                             ST_CONV_GEOMETRY(1), stream);                                    \
  }
ST_HALF_TYPES(ST_CUDA_DEF_CONV_HALF, _)
}
