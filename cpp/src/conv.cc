// Patch extraction for convolution (im2col), its adjoint (col2im), and max-pooling indices.
#include <limits>
#include <vector>

#include "common.h"
#include "half.h"

namespace st {
namespace {

// cols row r = (ch, i, j) holds, for every output position, the input value that kernel tap
// (i, j) of channel ch sees there
// The output columns [first, last) at which kernel column j reads inside the input row: the
// loops over them need no bounds checks, and with stride 1 they are plain contiguous loops
struct TapSpan {
  int64_t first, last, offset;  // input column = xo * sw + offset
};

inline TapSpan tap_span(const Geometry& g, int64_t j) {
  const int64_t offset = j * g.dw - g.pl;
  int64_t first = 0, last = g.ow;
  while (first < last && first * g.sw + offset < 0) ++first;
  while (last > first && (last - 1) * g.sw + offset >= g.w) --last;
  return {first, last, offset};
}

template <class T>
void im2col(const T* x, T* cols, int64_t b, const Geometry& g) {
  const int64_t rows = g.c * g.kh * g.kw, npos = g.oh * g.ow;
  parallel_for(b * rows, npos, [&](int64_t s, int64_t e) {
    const int64_t oh = g.oh, ow = g.ow, sw = g.sw;
    for (int64_t br = s; br < e; ++br) {
      int64_t n = br / rows, r = br % rows;
      int64_t ch = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
      const T* plane = x + (n * g.c + ch) * g.h * g.w;
      T* out = cols + br * npos;
      const TapSpan t = tap_span(g, j);
      for (int64_t y = 0; y < oh; ++y) {
        int64_t iy = y * g.sh - g.pt + i * g.dh;
        T* __restrict orow = out + y * ow;
        if (iy < 0 || iy >= g.h) {
          for (int64_t xo = 0; xo < ow; ++xo) orow[xo] = T(0);
          continue;
        }
        const T* __restrict irow = plane + iy * g.w;
        const int64_t off = t.offset;
        for (int64_t xo = 0; xo < t.first; ++xo) orow[xo] = T(0);
        if (sw == 1) {
          for (int64_t xo = t.first; xo < t.last; ++xo) orow[xo] = irow[xo + off];
        } else {
          for (int64_t xo = t.first; xo < t.last; ++xo) orow[xo] = irow[xo * sw + off];
        }
        for (int64_t xo = t.last; xo < ow; ++xo) orow[xo] = T(0);
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
        const TapSpan span = tap_span(g, j);
        const int64_t ow = g.ow, sw = g.sw;
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          T* __restrict prow = plane + iy * g.w;
          const T* __restrict srow = src + y * ow;
          const int64_t off = span.offset;
          if (sw == 1) {
            for (int64_t xo = span.first; xo < span.last; ++xo) prow[xo + off] += srow[xo];
          } else {
            for (int64_t xo = span.first; xo < span.last; ++xo) prow[xo * sw + off] += srow[xo];
          }
        }
      }
    }
  });
}

// The taps of a window that fall inside the input, along one axis: [lo, hi) of the tap index
// for each output position, so the inner loops need no bounds checks
inline void valid_taps(int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t n,
                       int64_t* lo, int64_t* hi) {
  for (int64_t o = 0; o < out; ++o) {
    int64_t a = 0, b = k;
    while (a < b && o * s - p + a * d < 0) ++a;
    while (b > a && o * s - p + (b - 1) * d >= n) --b;
    lo[o] = a;
    hi[o] = b;
  }
}

// Every window inside the input (no padding, none overhanging): a row of outputs at a time,
// one tap after another, with the choice made by masks so that the compiler vectorises the
// loop over the row (a per-window loop with selects ran 3.4x slower, its branches mispredicted
// on real data). Taps go in the same (i, j) order as the general path below.
template <class T>
void maxpool_index_inside(const T* __restrict x, int64_t* __restrict idx, T* __restrict vals,
                          int64_t planes, const Geometry& g) {
  parallel_for(planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t s, int64_t e) {
    // locals, not captures: stores through orow must not look as if they could change them
    const int64_t h = g.h, w = g.w, kh = g.kh, kw = g.kw, sh = g.sh, sw = g.sw, dh = g.dh,
                  dw = g.dw, oh = g.oh, ow = g.ow;
    std::vector<T> best_values(static_cast<size_t>(ow));
    T* __restrict bv = best_values.data();
    for (int64_t p = s; p < e; ++p) {
      const T* plane = x + p * h * w;
      for (int64_t y = 0; y < oh; ++y) {
        int64_t* __restrict orow = idx + (p * oh + y) * ow;
        const int64_t y0 = y * sh * w;
        for (int64_t xo = 0; xo < ow; ++xo) {
          orow[xo] = y0 + xo * sw;
          bv[xo] = plane[y0 + xo * sw];
        }
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t base = y0 + i * dh * w;
          const T* row = plane + base;
          for (int64_t j = (i == 0 ? 1 : 0); j < kw; ++j) {
            for (int64_t xo = 0; xo < ow; ++xo) {
              const int64_t at = xo * sw + j * dw;
              const T v = row[at];
              const T b = bv[xo];
              // greater, or NaN, while the best so far is not NaN (a NaN best stays)
              const bool take = !(v <= b) & (b == b);
              const int64_t m = -int64_t(take);
              orow[xo] = (orow[xo] & ~m) | ((base + at) & m);
              bv[xo] = take ? v : b;
            }
          }
        }
        if (vals != nullptr) {
          T* __restrict vrow = vals + (p * oh + y) * ow;
          for (int64_t xo = 0; xo < ow; ++xo) vrow[xo] = bv[xo];
        }
      }
    }
  });
}

// The maxima alone, every window inside the input: the tap loop over a row of outputs is
// a max with the NaN rule and nothing else, which the compiler vectorises.
template <class T>
void maxpool_values_inside(const T* __restrict x, T* __restrict vals, int64_t planes,
                           const Geometry& g) {
  parallel_for(planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t s, int64_t e) {
    const int64_t h = g.h, w = g.w, kh = g.kh, kw = g.kw, sh = g.sh, sw = g.sw, dh = g.dh,
                  dw = g.dw, oh = g.oh, ow = g.ow;
    for (int64_t p = s; p < e; ++p) {
      const T* plane = x + p * h * w;
      for (int64_t y = 0; y < oh; ++y) {
        T* __restrict orow = vals + (p * oh + y) * ow;
        const T* first = plane + y * sh * w;
        for (int64_t xo = 0; xo < ow; ++xo) orow[xo] = first[xo * sw];
        for (int64_t i = 0; i < kh; ++i) {
          const T* row = plane + (y * sh + i * dh) * w;
          for (int64_t j = (i == 0 ? 1 : 0); j < kw; ++j) {
            const T* tap = row + j * dw;
            for (int64_t xo = 0; xo < ow; ++xo) {
              const T v = tap[xo * sw];
              const T b = orow[xo];
              // greater, or NaN, while the best so far is not NaN (a NaN best stays)
              orow[xo] = (!(v <= b) & (b == b)) ? v : b;
            }
          }
        }
      }
    }
  });
}

// The maxima alone, with padding or overhanging windows: a row of outputs at a time, the
// outputs whose taps all fall inside the row in one vectorisable loop per tap, the few at the
// edges tap by tap. Starting from -inf gives each window's maximum over its valid taps (NaN
// still wins), and -inf for a window over padding only.
template <class T>
void maxpool_values_edges(const T* __restrict x, T* __restrict vals, int64_t planes,
                          const Geometry& g, const int64_t* ylo, const int64_t* yhi,
                          const int64_t* xlo, const int64_t* xhi) {
  const int64_t kw = g.kw, ow = g.ow;
  int64_t a = 0;  // outputs [a, b) read all kw column taps
  while (a < ow && !(xlo[a] == 0 && xhi[a] == kw)) ++a;
  int64_t b = a;
  while (b < ow && xlo[b] == 0 && xhi[b] == kw) ++b;
  parallel_for(planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t s, int64_t e) {
    const int64_t h = g.h, w = g.w, sh = g.sh, sw = g.sw, dh = g.dh, dw = g.dw, oh = g.oh,
                  pt = g.pt, pl = g.pl;
    const T lowest = -std::numeric_limits<T>::infinity();
    for (int64_t p = s; p < e; ++p) {
      const T* plane = x + p * h * w;
      for (int64_t y = 0; y < oh; ++y) {
        T* __restrict orow = vals + (p * oh + y) * ow;
        for (int64_t xo = 0; xo < ow; ++xo) orow[xo] = lowest;
        for (int64_t i = ylo[y]; i < yhi[y]; ++i) {
          const T* row = plane + (y * sh - pt + i * dh) * w;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t off = j * dw - pl;  // column of output xo's tap j: xo * sw + off
            for (int64_t xo = a; xo < b; ++xo) {
              const T v = row[xo * sw + off];
              const T m = orow[xo];
              orow[xo] = (!(v <= m) & (m == m)) ? v : m;
            }
            auto edge = [&](int64_t from, int64_t to) {
              for (int64_t xo = from; xo < to; ++xo) {
                if (j < xlo[xo] || j >= xhi[xo]) continue;
                const T v = row[xo * sw + off];
                const T m = orow[xo];
                orow[xo] = (!(v <= m) & (m == m)) ? v : m;
              }
            };
            edge(0, a);
            edge(b, ow);
          }
        }
      }
    }
  });
}

// idx[p, y, x] = the flat index in plane p of the window's maximum; the first maximum wins
// ties, and the first NaN wins over everything (max propagates NaN). vals, when not null,
// receives the maximum itself (-inf for a window over padding only); idx may be null when
// vals is not (the maxima alone)
template <class T>
void maxpool_index(const T* x, int64_t* idx, T* vals, int64_t planes, const Geometry& g) {
  if (g.pt == 0 && g.pl == 0 && (g.oh - 1) * g.sh + (g.kh - 1) * g.dh < g.h &&
      (g.ow - 1) * g.sw + (g.kw - 1) * g.dw < g.w) {
    if (idx == nullptr)
      maxpool_values_inside(x, vals, planes, g);
    else
      maxpool_index_inside(x, idx, vals, planes, g);
    return;
  }
  std::vector<int64_t> taps(2 * (g.oh + g.ow));
  int64_t *ylo = taps.data(), *yhi = ylo + g.oh, *xlo = yhi + g.oh, *xhi = xlo + g.ow;
  valid_taps(g.oh, g.kh, g.sh, g.pt, g.dh, g.h, ylo, yhi);
  valid_taps(g.ow, g.kw, g.sw, g.pl, g.dw, g.w, xlo, xhi);
  if (idx == nullptr) {
    maxpool_values_edges(x, vals, planes, g, ylo, yhi, xlo, xhi);
    return;
  }
  parallel_for(planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t s, int64_t e) {
    for (int64_t p = s; p < e; ++p) {
      const T* plane = x + p * g.h * g.w;
      int64_t* out = idx + p * g.oh * g.ow;
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t y0 = y * g.sh - g.pt;
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          const int64_t x0 = xo * g.sw - g.pl;
          int64_t best = -1;
          T bv = T(0);
          for (int64_t i = ylo[y]; i < yhi[y]; ++i) {
            const int64_t row = (y0 + i * g.dh) * g.w;
            for (int64_t j = xlo[xo]; j < xhi[xo]; ++j) {
              const int64_t at = row + x0 + j * g.dw;
              const T v = plane[at];
              // greater, or NaN, while the best so far is not NaN (a NaN best stays)
              if (best < 0 || (!(v <= bv) && bv == bv)) {
                best = at;
                bv = v;
              }
            }
          }
          out[y * g.ow + xo] = best;
          if (vals != nullptr)
            vals[(p * g.oh + y) * g.ow + xo] =
                best < 0 ? -std::numeric_limits<T>::infinity() : bv;
        }
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
    st::maxpool_index<T>(x, idx, static_cast<T*>(nullptr), planes,                              \
                         st::Geometry{1, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});        \
  }                                                                                             \
  void st_maxpool2d_##sfx(const T* x, T* y, int64_t* idx, int64_t planes, int64_t h, int64_t w, \
                          int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt,           \
                          int64_t pl, int64_t dh, int64_t dw, int64_t oh, int64_t ow) {         \
    st::maxpool_index<T>(x, idx, y, planes,                                                     \
                         st::Geometry{1, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});        \
  }
ST_FLOAT_TYPES(ST_DEF_CONV, _)
}

// float16 / bfloat16: im2col only moves bits (a zero is 0 in both formats); col2im sums patches
// in float32 one image at a time, and the pooling index compares in float32 (exact), each
// through half.h's chunks
extern "C" {
#define ST_DEF_CONV_HALF(sfx, T, _)                                                             \
  void st_im2col_##sfx(const T* x, T* cols, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow) {                         \
    st::im2col<T>(x, cols, b, st::Geometry{c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow});   \
  }                                                                                             \
  void st_col2im_##sfx(const T* cols, T* x, int64_t b, int64_t c, int64_t h, int64_t w,         \
                       int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,   \
                       int64_t dh, int64_t dw, int64_t oh, int64_t ow) {                         \
    const st::Geometry g{c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow};                      \
    const int64_t img = c * h * w;                                                              \
    st::by_float_slabs<ST_TAG_##sfx>(                                                           \
        cols, b, c * kh * kw * oh * ow, [&](const float* cf, int64_t b0, int64_t cnt) {         \
          std::vector<float> xf(size_t(cnt * img > 0 ? cnt * img : 1));                         \
          st::col2im<float>(cf, xf.data(), cnt, g);                                             \
          st::narrow<ST_TAG_##sfx>(xf.data(), x + b0 * img, cnt * img);                         \
        });                                                                                     \
  }                                                                                             \
  void st_maxpool2d_index_##sfx(const T* x, int64_t* idx, int64_t planes, int64_t h, int64_t w, \
                                int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt,     \
                                int64_t pl, int64_t dh, int64_t dw, int64_t oh, int64_t ow) {   \
    const st::Geometry g{1, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow};                      \
    st::by_float_slabs<ST_TAG_##sfx>(                                                           \
        x, planes, h * w, [&](const float* xf, int64_t p0, int64_t cnt) {                       \
          st::maxpool_index<float>(xf, idx + p0 * oh * ow, nullptr, cnt, g);                    \
        });                                                                                     \
  }
ST_HALF_TYPES(ST_DEF_CONV_HALF, _)
}
