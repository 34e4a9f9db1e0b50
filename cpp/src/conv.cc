// Patch extraction for convolution (im2col), its adjoint (col2im), and max-pooling indices.
#include "common.h"

namespace st {
namespace {

struct Geometry {
  int64_t c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
};

// cols row r = (ch, i, j) holds, for every output position, the input value that kernel tap
// (i, j) of channel ch sees there
template <class T>
void im2col(const T* x, T* cols, int64_t b, const Geometry& g) {
  const int64_t rows = g.c * g.kh * g.kw, npos = g.oh * g.ow;
  parallel_for(b * rows, npos, [&](int64_t s, int64_t e) {
    for (int64_t br = s; br < e; ++br) {
      int64_t n = br / rows, r = br % rows;
      int64_t ch = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
      const T* plane = x + (n * g.c + ch) * g.h * g.w;
      T* out = cols + br * npos;
      for (int64_t y = 0; y < g.oh; ++y) {
        int64_t iy = y * g.sh - g.pt + i * g.dh;
        T* orow = out + y * g.ow;
        if (iy < 0 || iy >= g.h) {
          for (int64_t xo = 0; xo < g.ow; ++xo) orow[xo] = T(0);
          continue;
        }
        const T* irow = plane + iy * g.w;
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          int64_t ix = xo * g.sw - g.pl + j * g.dw;
          orow[xo] = (ix >= 0 && ix < g.w) ? irow[ix] : T(0);
        }
      }
    }
  });
}

// threads own whole (image, channel) planes, so the scattered adds never race
template <class T>
void col2im(const T* cols, T* x, int64_t b, const Geometry& g) {
  const int64_t npos = g.oh * g.ow, taps = g.kh * g.kw;
  parallel_for(b * g.c, taps * npos, [&](int64_t s, int64_t e) {
    for (int64_t bc = s; bc < e; ++bc) {
      T* plane = x + bc * g.h * g.w;
      for (int64_t k = 0; k < g.h * g.w; ++k) plane[k] = T(0);
      for (int64_t t = 0; t < taps; ++t) {
        int64_t i = t / g.kw, j = t % g.kw;
        const T* src = cols + (bc * taps + t) * npos;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t xo = 0; xo < g.ow; ++xo) {
            int64_t ix = xo * g.sw - g.pl + j * g.dw;
            if (ix >= 0 && ix < g.w) plane[iy * g.w + ix] += src[y * g.ow + xo];
          }
        }
      }
    }
  });
}

template <class T>
void maxpool_index(const T* x, int64_t* idx, int64_t planes, const Geometry& g) {
  parallel_for(planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t s, int64_t e) {
    for (int64_t p = s; p < e; ++p) {
      const T* plane = x + p * g.h * g.w;
      int64_t* out = idx + p * g.oh * g.ow;
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          int64_t best = -1;
          T bv = T(0);
          for (int64_t i = 0; i < g.kh; ++i) {
            int64_t iy = y * g.sh - g.pt + i * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t j = 0; j < g.kw; ++j) {
              int64_t ix = xo * g.sw - g.pl + j * g.dw;
              if (ix < 0 || ix >= g.w) continue;
              T v = plane[iy * g.w + ix];
              if (best < 0 || (!is_nan(bv) && (v > bv || is_nan(v)))) {
                best = iy * g.w + ix;
                bv = v;
              }
            }
          }
          out[y * g.ow + xo] = best;
        }
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_DEF_CONV(sfx, T, _)                                                                  \
  void st_im2col_##sfx(const T* x, T* cols, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow) {                         \
    st::im2col<T>(x, cols, b, st::Geometry{c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});   \
  }                                                                                             \
  void st_col2im_##sfx(const T* cols, T* x, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow) {                         \
    st::col2im<T>(cols, x, b, st::Geometry{c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});   \
  }                                                                                             \
  void st_maxpool2d_index_##sfx(const T* x, int64_t* idx, int64_t planes, int64_t h, int64_t w, \
                                int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt,     \
                                int64_t pl, int64_t dh, int64_t dw, int64_t oh, int64_t ow) {   \
    st::maxpool_index<T>(x, idx, planes,                                                        \
                         st::Geometry{1, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});        \
  }
ST_FLOAT_TYPES(ST_DEF_CONV, _)
}
