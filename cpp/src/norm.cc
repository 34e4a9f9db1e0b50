// Batch normalization over [outer, c, inner] (channels in the middle). Statistics are summed
// per (outer, channel) plane in the element type, where the loop vectorises, and across planes
// in double, so a float32 mean over millions of elements keeps its precision.
// Layer and group normalization over rows: each row's statistics in two passes in double, the
// rows split over threads; the affine gradients sum each column (channel) in row order, so
// their bits do not depend on the thread count.
#include <cmath>
#include <vector>

#include "common.h"
#include "half.h"

namespace st {
namespace {

template <class T>
void bn_stats(const T* x, T* mean, T* var, int64_t outer, int64_t c, int64_t inner) {
  const double count = double(outer) * double(inner);
  parallel_for(c, outer * inner, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      double s = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = x + (o * c + ch) * inner;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < inner; ++i) acc += row[i];
        s += double(acc);
      }
      const double mu = count > 0 ? s / count : 0.0;
      const T m = T(mu);
      double ss = 0;  // second pass about the mean: no cancellation
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = x + (o * c + ch) * inner;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < inner; ++i) acc += (row[i] - m) * (row[i] - m);
        ss += double(acc);
      }
      mean[ch] = m;
      var[ch] = T(count > 0 ? ss / count : 0.0);
    }
  });
}

template <class T>
void bn_apply(const T* x, const T* mean, const T* var, const T* w, const T* b, T* y,
              int64_t outer, int64_t c, int64_t inner, double eps) {
  std::vector<T> scale(c), shift(c);
  for (int64_t ch = 0; ch < c; ++ch)
    bn_scale_shift(mean[ch], var[ch], w, b, ch, eps, &scale[ch], &shift[ch]);
  const T* sc = scale.data();
  const T* sh = shift.data();
  parallel_for(outer * c, inner, [&](int64_t pb, int64_t pe) {
    for (int64_t pl = pb; pl < pe; ++pl) {
      const int64_t ch = pl % c;
      const T a = sc[ch], d = sh[ch];
      const T* xr = x + pl * inner;
      T* yr = y + pl * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * a + d;
    }
  });
}

// batch norm's backward sums over one run of a channel: s1 += sum dy, s2 += sum dy (x - mean)
template <class T>
inline void add_dy_sums(const T* xr, const T* gr, int64_t inner, T m, double& s1, double& s2) {
  T a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
  for (int64_t i = 0; i < inner; ++i) {
    a1 += gr[i];
    a2 += gr[i] * (xr[i] - m);
  }
  s1 += double(a1);
  s2 += double(a2);
}

template <class T>
void bn_backward(const T* x, const T* dy, const T* mean, const T* var, const T* w, T* dx, T* dw,
                 T* db, int64_t outer, int64_t c, int64_t inner, double eps) {
  std::vector<T> sum_dy(c), sum_dy_xhat(c), invstd(c);
  parallel_for(c, 2 * outer * inner, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      const T m = mean[ch];
      double s1 = 0, s2 = 0;
      for (int64_t o = 0; o < outer; ++o) {
        add_dy_sums(x + (o * c + ch) * inner, dy + (o * c + ch) * inner, inner, m, s1, s2);
      }
      const double is = 1 / std::sqrt(double(var[ch]) + eps);
      invstd[ch] = T(is);
      sum_dy[ch] = T(s1);
      sum_dy_xhat[ch] = T(s2 * is);
      if (db) db[ch] = T(s1);
      if (dw) dw[ch] = T(s2 * is);
    }
  });
  if (dx == nullptr) return;
  const T count = T(double(outer) * double(inner));
  parallel_for(outer * c, 2 * inner, [&](int64_t pb, int64_t pe) {
    for (int64_t pl = pb; pl < pe; ++pl) {
      const int64_t ch = pl % c;
      const T is = invstd[ch], m = mean[ch];
      const T k = (w ? w[ch] : T(1)) * is;
      const T mean_dy = sum_dy[ch] / count;
      const T mean_dy_xhat = sum_dy_xhat[ch] / count;
      const T* xr = x + pl * inner;
      const T* gr = dy + pl * inner;
      T* o = dx + pl * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i)
        o[i] = bn_input_grad(gr[i], xr[i], k, m, is, mean_dy, mean_dy_xhat);
    }
  });
}

// ---- layer and group normalization -------------------------------------------------------------

// mean and 1 / sqrt(biased var + eps) of the n elements at x: the mean in a first pass, the
// variance in a second about it, both summed in double
template <class T>
void row_stats(const T* x, int64_t n, double eps, T* mean, T* rstd) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += double(x[j]);
  const double mu = n > 0 ? s / double(n) : 0.0;
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < n; ++j) {
    const double d = double(x[j]) - mu;
    ss += d * d;
  }
  *mean = T(mu);
  *rstd = T(1 / std::sqrt((n > 0 ? ss / double(n) : 0.0) + eps));
}

// y = (x - m) * rs * w + b over one row, weight and bias per element (either may be null)
template <class T>
void ln_row(const T* x, const T* w, const T* b, T* y, int64_t n, T m, T rs) {
  if (w && b) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) * rs * w[j] + b[j];
  } else if (w) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) * rs * w[j];
  } else if (b) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) * rs + b[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) * rs;
  }
}

template <class T>
void ln_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                int64_t n, double eps) {
  parallel_for(rows, 3 * n, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      T m, rs;
      row_stats(x + r * n, n, eps, &m, &rs);
      mean[r] = m;
      rstd[r] = rs;
      ln_row(x + r * n, w, b, y + r * n, n, m, rs);
    }
  });
}

// dx of one row of n elements: gw = dy * w (w per element, or the scalar ws when w is null),
// dx = rs * (gw - mean gw - xhat * mean(gw * xhat)); sums in double
template <class T>
void ln_row_dx(const T* x, const T* dy, const T* w, T ws, T* dx, int64_t n, T m, T rs) {
  double s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
  for (int64_t j = 0; j < n; ++j) {
    const T gw = dy[j] * (w ? w[j] : ws);
    s1 += double(gw);
    s2 += double(gw * ((x[j] - m) * rs));
  }
  const T a = T(s1 / double(n)), c = T(s2 / double(n));
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const T xh = (x[j] - m) * rs;
    dx[j] = rs * (dy[j] * (w ? w[j] : ws) - a - xh * c);
  }
}

template <class T>
void ln_backward(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                 T* db, int64_t rows, int64_t n) {
  if (dx)
    parallel_for(rows, 4 * n, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r)
        ln_row_dx(x + r * n, dy + r * n, w, T(1), dx + r * n, n, mean[r], rstd[r]);
    });
  if (dw == nullptr && db == nullptr) return;
  // threads own column ranges and walk every row in order
  parallel_for(n, 2 * rows, [&](int64_t jb, int64_t je) {
    const int64_t len = je - jb;
    std::vector<double> aw(len, 0.0), ab(len, 0.0);
    double* pw = aw.data();
    double* pb = ab.data();
    for (int64_t r = 0; r < rows; ++r) {
      const T m = mean[r], rs = rstd[r];
      const T* xr = x + r * n + jb;
      const T* gr = dy + r * n + jb;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        pw[j] += double(gr[j] * ((xr[j] - m) * rs));
        pb[j] += double(gr[j]);
      }
    }
    for (int64_t j = 0; j < len; ++j) {
      if (dw) dw[jb + j] = T(pw[j]);
      if (db) db[jb + j] = T(pb[j]);
    }
  });
}

// group norm: rows of [batch * groups, cpg * inner], each channel's plane of inner elements
// taking its own weight and bias
template <class T>
void gn_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t batch,
                int64_t channels, int64_t groups, int64_t inner, double eps) {
  const int64_t cpg = channels / groups, n = cpg * inner;
  parallel_for(batch * groups, 3 * n, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      T m, rs;
      row_stats(x + r * n, n, eps, &m, &rs);
      mean[r] = m;
      rstd[r] = rs;
      const int64_t c0 = (r % groups) * cpg;
      for (int64_t k = 0; k < cpg; ++k) {
        const T* wc = w ? w + c0 + k : nullptr;
        const T* bc = b ? b + c0 + k : nullptr;
        const T* xp = x + r * n + k * inner;
        T* yp = y + r * n + k * inner;
        const T wv = wc ? *wc : T(1), bv = bc ? *bc : T(0);
        if (wc && bc) {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * rs * wv + bv;
        } else if (wc) {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * rs * wv;
        } else if (bc) {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * rs + bv;
        } else {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - m) * rs;
        }
      }
    }
  });
}

template <class T>
void gn_backward(const T* x, const T* dy, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                 T* db, int64_t batch, int64_t channels, int64_t groups, int64_t inner) {
  const int64_t cpg = channels / groups, n = cpg * inner;
  if (dx)
    parallel_for(batch * groups, 4 * n, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const T m = mean[r], rs = rstd[r];
        const int64_t c0 = (r % groups) * cpg;
        const T* xr = x + r * n;
        const T* gr = dy + r * n;
        double s1 = 0, s2 = 0;
        for (int64_t k = 0; k < cpg; ++k) {
          const T wv = w ? w[c0 + k] : T(1);
          const T* xp = xr + k * inner;
          const T* gp = gr + k * inner;
#pragma omp simd reduction(+ : s1, s2)
          for (int64_t i = 0; i < inner; ++i) {
            const T gw = gp[i] * wv;
            s1 += double(gw);
            s2 += double(gw * ((xp[i] - m) * rs));
          }
        }
        const T a = T(s1 / double(n)), c = T(s2 / double(n));
        for (int64_t k = 0; k < cpg; ++k) {
          const T wv = w ? w[c0 + k] : T(1);
          const T* xp = xr + k * inner;
          const T* gp = gr + k * inner;
          T* op = dx + r * n + k * inner;
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i)
            op[i] = rs * (gp[i] * wv - a - ((xp[i] - m) * rs) * c);
        }
      }
    });
  if (dw == nullptr && db == nullptr) return;
  parallel_for(channels, 2 * batch * inner, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      const int64_t g = ch / cpg;
      double sw = 0, sb = 0;
      for (int64_t o = 0; o < batch; ++o) {
        const int64_t r = o * groups + g;
        const T m = mean[r], rs = rstd[r];
        const T* xp = x + (o * channels + ch) * inner;
        const T* gp = dy + (o * channels + ch) * inner;
#pragma omp simd reduction(+ : sw, sb)
        for (int64_t i = 0; i < inner; ++i) {
          sw += double(gp[i] * ((xp[i] - m) * rs));
          sb += double(gp[i]);
        }
      }
      if (dw) dw[ch] = T(sw);
      if (db) db[ch] = T(sb);
    }
  });
}

}  // namespace
}  // namespace st

#define ST_DEF_LNORM(sfx, T, _)                                                                \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t rows, int64_t n, double eps) {                              \
    st::ln_forward(x, weight, bias, y, mean, rstd, rows, n, eps);                              \
  }                                                                                            \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias, int64_t rows, \
                                    int64_t n) {                                               \
    st::ln_backward(x, dy, mean, rstd, weight, dx, dweight, dbias, rows, n);                   \
  }                                                                                            \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, \
                           int64_t batch, int64_t channels, int64_t groups, int64_t inner,     \
                           double eps) {                                                       \
    st::gn_forward(x, weight, bias, y, mean, rstd, batch, channels, groups, inner, eps);       \
  }                                                                                            \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* rstd,     \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t batch, int64_t channels, int64_t groups,           \
                                    int64_t inner) {                                           \
    st::gn_backward(x, dy, mean, rstd, weight, dx, dweight, dbias, batch, channels, groups,    \
                    inner);                                                                    \
  }
ST_FLOAT_TYPES(ST_DEF_LNORM, _)

#define ST_DEF_BNORM(sfx, T, _)                                                                \
  void st_batch_norm_stats_##sfx(const T* x, T* mean, T* var, int64_t outer, int64_t c,        \
                                 int64_t inner) {                                              \
    st::bn_stats(x, mean, var, outer, c, inner);                                               \
  }                                                                                            \
  void st_batch_norm_apply_##sfx(const T* x, const T* mean, const T* var, const T* weight,     \
                                 const T* bias, T* y, int64_t outer, int64_t c, int64_t inner, \
                                 double eps) {                                                 \
    st::bn_apply(x, mean, var, weight, bias, y, outer, c, inner, eps);                         \
  }                                                                                            \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const T* mean, const T* var,      \
                                    const T* weight, T* dx, T* dweight, T* dbias,              \
                                    int64_t outer, int64_t c, int64_t inner, double eps) {     \
    st::bn_backward(x, dy, mean, var, weight, dx, dweight, dbias, outer, c, inner, eps);       \
  }
ST_FLOAT_TYPES(ST_DEF_BNORM, _)

// ---- float16 / bfloat16 -----------------------------------------------------------------------
// Consecutive chunks of whole rows (batch-norm planes of all channels, group-norm images) are
// loaded into float32 (half.h) and the float32 loops above run on them, the statistics kept in
// float32. The sums over rows (a channel's or a column's) run over the chunks in row order in
// double, the order of the float32 kernels; every stored element is rounded once.
namespace st {
namespace {

constexpr int64_t kNormChunk = 8 * kHalfChunk;  // elements per chunk: threads share a chunk

// fn(first, count) over consecutive chunks of whole slabs of `slab` elements, in order
template <class F>
void slab_chunks(int64_t count, int64_t slab, F&& fn) {
  const int64_t per = std::max<int64_t>(1, kNormChunk / std::max<int64_t>(slab, 1));
  for (int64_t s0 = 0; s0 < count; s0 += per) fn(s0, std::min(per, count - s0));
}

template <class Tag>
std::vector<float> widened(const uint16_t* p, int64_t n) {
  std::vector<float> v(p ? size_t(n) : 0);
  if (p) widen<Tag>(p, v.data(), n);
  return v;
}

inline const float* or_null(const uint16_t* p, const std::vector<float>& v) {
  return p ? v.data() : nullptr;
}

// float32 copies of x (and dy) for a chunk, reused across chunks
struct Chunk {
  std::vector<float> x, g, out;
  template <class Tag>
  void load(const uint16_t* xs, const uint16_t* gs, int64_t n) {
    x.resize(size_t(n));
    widen<Tag>(xs, x.data(), n);
    if (gs) {
      g.resize(size_t(n));
      widen<Tag>(gs, g.data(), n);
    }
    out.resize(size_t(n));
  }
};

template <class Tag>
void bn_stats_half(const uint16_t* x, float* mean, float* var, int64_t outer, int64_t c,
                   int64_t inner) {
  const double count = double(outer) * double(inner);
  const int64_t slab = c * inner;
  std::vector<double> s(static_cast<size_t>(c), 0.0), ss(static_cast<size_t>(c), 0.0);
  std::vector<float> m(static_cast<size_t>(c));
  Chunk ck;
  for (int pass = 0; pass < 2; ++pass) {  // the mean, then squares about it
    slab_chunks(outer, slab, [&](int64_t o0, int64_t cnt) {
      ck.load<Tag>(x + o0 * slab, nullptr, cnt * slab);
      const float* xs = ck.x.data();
      parallel_for(c, cnt * inner, [&](int64_t cb, int64_t ce) {
        for (int64_t ch = cb; ch < ce; ++ch) {
          for (int64_t o = 0; o < cnt; ++o) {
            const float* row = xs + (o * c + ch) * inner;
            float acc = 0;
            if (pass == 0) {
#pragma omp simd reduction(+ : acc)
              for (int64_t i = 0; i < inner; ++i) acc += row[i];
              s[ch] += double(acc);
            } else {
              const float mc = m[ch];
#pragma omp simd reduction(+ : acc)
              for (int64_t i = 0; i < inner; ++i) acc += (row[i] - mc) * (row[i] - mc);
              ss[ch] += double(acc);
            }
          }
        }
      });
    });
    if (pass == 0)
      for (int64_t ch = 0; ch < c; ++ch) m[ch] = float(count > 0 ? s[ch] / count : 0.0);
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    mean[ch] = m[ch];
    var[ch] = float(count > 0 ? ss[ch] / count : 0.0);
  }
}

template <class Tag>
void bn_apply_half(const uint16_t* x, const float* mean, const float* var, const uint16_t* w,
                   const uint16_t* b, uint16_t* y, int64_t outer, int64_t c, int64_t inner,
                   double eps) {
  const auto wf = widened<Tag>(w, c), bf = widened<Tag>(b, c);
  const int64_t slab = c * inner;
  Chunk ck;
  slab_chunks(outer, slab, [&](int64_t o0, int64_t cnt) {
    ck.load<Tag>(x + o0 * slab, nullptr, cnt * slab);
    bn_apply<float>(ck.x.data(), mean, var, or_null(w, wf), or_null(b, bf), ck.out.data(), cnt,
                    c, inner, eps);
    narrow<Tag>(ck.out.data(), y + o0 * slab, cnt * slab);
  });
}

template <class Tag>
void bn_backward_half(const uint16_t* x, const uint16_t* dy, const float* mean, const float* var,
                      const uint16_t* w, uint16_t* dx, uint16_t* dw, uint16_t* db,
                      int64_t outer, int64_t c, int64_t inner, double eps) {
  const auto wf = widened<Tag>(w, c);
  const int64_t slab = c * inner;
  std::vector<double> s1(static_cast<size_t>(c), 0.0), s2(static_cast<size_t>(c), 0.0);
  Chunk ck;
  slab_chunks(outer, slab, [&](int64_t o0, int64_t cnt) {
    ck.load<Tag>(x + o0 * slab, dy + o0 * slab, cnt * slab);
    const float* xs = ck.x.data();
    const float* gs = ck.g.data();
    parallel_for(c, 2 * cnt * inner, [&](int64_t cb, int64_t ce) {
      for (int64_t ch = cb; ch < ce; ++ch) {
        const float m = mean[ch];
        for (int64_t o = 0; o < cnt; ++o) {
          add_dy_sums(xs + (o * c + ch) * inner, gs + (o * c + ch) * inner, inner, m, s1[ch],
                      s2[ch]);
        }
      }
    });
  });
  const size_t nc = static_cast<size_t>(c);
  std::vector<float> invstd(nc), sum_dy(nc), sum_dy_xhat(nc);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double is = 1 / std::sqrt(double(var[ch]) + eps);
    invstd[ch] = float(is);
    sum_dy[ch] = float(s1[ch]);
    sum_dy_xhat[ch] = float(s2[ch] * is);
    if (db) db[ch] = cast_store<Tag>(sum_dy[ch]);
    if (dw) dw[ch] = cast_store<Tag>(sum_dy_xhat[ch]);
  }
  if (dx == nullptr) return;
  const float count = float(double(outer) * double(inner));
  slab_chunks(outer, slab, [&](int64_t o0, int64_t cnt) {
    ck.load<Tag>(x + o0 * slab, dy + o0 * slab, cnt * slab);
    const float* xs = ck.x.data();
    const float* gs = ck.g.data();
    float* os = ck.out.data();
    parallel_for(cnt * c, 2 * inner, [&](int64_t pb, int64_t pe) {
      for (int64_t pl = pb; pl < pe; ++pl) {
        const int64_t ch = pl % c;
        const float is = invstd[ch], m = mean[ch];
        const float k = (w ? wf[ch] : 1.0f) * is;
        const float mean_dy = sum_dy[ch] / count, mean_dy_xhat = sum_dy_xhat[ch] / count;
        const float* xr = xs + pl * inner;
        const float* gr = gs + pl * inner;
        float* o = os + pl * inner;
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i)
          o[i] = bn_input_grad(gr[i], xr[i], k, m, is, mean_dy, mean_dy_xhat);
      }
    });
    narrow<Tag>(os, dx + o0 * slab, cnt * slab);
  });
}

template <class Tag>
void ln_forward_half(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y,
                     float* mean, float* rstd, int64_t rows, int64_t n, double eps) {
  const auto wf = widened<Tag>(w, n), bf = widened<Tag>(b, n);
  Chunk ck;
  slab_chunks(rows, n, [&](int64_t r0, int64_t cnt) {
    ck.load<Tag>(x + r0 * n, nullptr, cnt * n);
    ln_forward<float>(ck.x.data(), or_null(w, wf), or_null(b, bf), ck.out.data(), mean + r0,
                      rstd + r0, cnt, n, eps);
    narrow<Tag>(ck.out.data(), y + r0 * n, cnt * n);
  });
}

template <class Tag>
void ln_backward_half(const uint16_t* x, const uint16_t* dy, const float* mean,
                      const float* rstd, const uint16_t* w, uint16_t* dx, uint16_t* dw,
                      uint16_t* db, int64_t rows, int64_t n) {
  const auto wf = widened<Tag>(w, n);
  const bool affine = dw != nullptr || db != nullptr;
  std::vector<double> aw(affine ? size_t(n) : 0), ab(affine ? size_t(n) : 0);
  Chunk ck;
  slab_chunks(rows, n, [&](int64_t r0, int64_t cnt) {
    ck.load<Tag>(x + r0 * n, dy + r0 * n, cnt * n);
    const float* xs = ck.x.data();
    const float* gs = ck.g.data();
    if (dx) {
      ln_backward<float>(xs, gs, mean + r0, rstd + r0, or_null(w, wf), ck.out.data(), nullptr,
                         nullptr, cnt, n);
      narrow<Tag>(ck.out.data(), dx + r0 * n, cnt * n);
    }
    if (!affine) return;
    double* pw = aw.data();
    double* pb = ab.data();
    parallel_for(n, 2 * cnt, [&](int64_t jb, int64_t je) {  // columns, each in row order
      for (int64_t r = 0; r < cnt; ++r) {
        const float m = mean[r0 + r], rs = rstd[r0 + r];
        const float* xr = xs + r * n;
        const float* gr = gs + r * n;
#pragma omp simd
        for (int64_t j = jb; j < je; ++j) {
          pw[j] += double(gr[j] * ((xr[j] - m) * rs));
          pb[j] += double(gr[j]);
        }
      }
    });
  });
  for (int64_t j = 0; affine && j < n; ++j) {
    if (dw) dw[j] = cast_store<Tag>(float(aw[j]));
    if (db) db[j] = cast_store<Tag>(float(ab[j]));
  }
}

template <class Tag>
void gn_forward_half(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y,
                     float* mean, float* rstd, int64_t batch, int64_t channels, int64_t groups,
                     int64_t inner, double eps) {
  const auto wf = widened<Tag>(w, channels), bf = widened<Tag>(b, channels);
  const int64_t slab = channels * inner;
  Chunk ck;
  slab_chunks(batch, slab, [&](int64_t b0, int64_t cnt) {
    ck.load<Tag>(x + b0 * slab, nullptr, cnt * slab);
    gn_forward<float>(ck.x.data(), or_null(w, wf), or_null(b, bf), ck.out.data(),
                      mean + b0 * groups, rstd + b0 * groups, cnt, channels, groups, inner, eps);
    narrow<Tag>(ck.out.data(), y + b0 * slab, cnt * slab);
  });
}

template <class Tag>
void gn_backward_half(const uint16_t* x, const uint16_t* dy, const float* mean,
                      const float* rstd, const uint16_t* w, uint16_t* dx, uint16_t* dw,
                      uint16_t* db, int64_t batch, int64_t channels, int64_t groups,
                      int64_t inner) {
  const auto wf = widened<Tag>(w, channels);
  const int64_t slab = channels * inner, cpg = channels / groups;
  const bool affine = dw != nullptr || db != nullptr;
  std::vector<double> aw(affine ? size_t(channels) : 0), ab(affine ? size_t(channels) : 0);
  Chunk ck;
  slab_chunks(batch, slab, [&](int64_t b0, int64_t cnt) {
    ck.load<Tag>(x + b0 * slab, dy + b0 * slab, cnt * slab);
    const float* xs = ck.x.data();
    const float* gs = ck.g.data();
    const float* mc = mean + b0 * groups;
    const float* rc = rstd + b0 * groups;
    if (dx) {
      gn_backward<float>(xs, gs, mc, rc, or_null(w, wf), ck.out.data(), nullptr, nullptr, cnt,
                         channels, groups, inner);
      narrow<Tag>(ck.out.data(), dx + b0 * slab, cnt * slab);
    }
    if (!affine) return;
    parallel_for(channels, 2 * cnt * inner, [&](int64_t cb, int64_t ce) {
      for (int64_t ch = cb; ch < ce; ++ch) {
        const int64_t g = ch / cpg;
        double sw = aw[ch], sb = ab[ch];
        for (int64_t o = 0; o < cnt; ++o) {
          const float m = mc[o * groups + g], rs = rc[o * groups + g];
          const float* xp = xs + (o * channels + ch) * inner;
          const float* gp = gs + (o * channels + ch) * inner;
#pragma omp simd reduction(+ : sw, sb)
          for (int64_t i = 0; i < inner; ++i) {
            sw += double(gp[i] * ((xp[i] - m) * rs));
            sb += double(gp[i]);
          }
        }
        aw[ch] = sw;
        ab[ch] = sb;
      }
    });
  });
  for (int64_t ch = 0; affine && ch < channels; ++ch) {
    if (dw) dw[ch] = cast_store<Tag>(float(aw[ch]));
    if (db) db[ch] = cast_store<Tag>(float(ab[ch]));
  }
}

}  // namespace
}  // namespace st

#define ST_DEF_NORM_HALF(sfx, T, _)                                                            \
  void st_batch_norm_stats_##sfx(const T* x, float* mean, float* var, int64_t outer, int64_t c, \
                                 int64_t inner) {                                              \
    st::bn_stats_half<ST_TAG_##sfx>(x, mean, var, outer, c, inner);                            \
  }                                                                                            \
  void st_batch_norm_apply_##sfx(const T* x, const float* mean, const float* var,              \
                                 const T* weight, const T* bias, T* y, int64_t outer,          \
                                 int64_t c, int64_t inner, double eps) {                       \
    st::bn_apply_half<ST_TAG_##sfx>(x, mean, var, weight, bias, y, outer, c, inner, eps);      \
  }                                                                                            \
  void st_batch_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* var, const T* weight, T* dx, T* dweight,      \
                                    T* dbias, int64_t outer, int64_t c, int64_t inner,         \
                                    double eps) {                                              \
    st::bn_backward_half<ST_TAG_##sfx>(x, dy, mean, var, weight, dx, dweight, dbias, outer, c, \
                                       inner, eps);                                            \
  }                                                                                            \
  void st_layer_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t rows, int64_t n, double eps) {                 \
    st::ln_forward_half<ST_TAG_##sfx>(x, weight, bias, y, mean, rstd, rows, n, eps);           \
  }                                                                                            \
  void st_layer_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t rows, int64_t n) {                       \
    st::ln_backward_half<ST_TAG_##sfx>(x, dy, mean, rstd, weight, dx, dweight, dbias, rows,    \
                                       n);                                                     \
  }                                                                                            \
  void st_group_norm_##sfx(const T* x, const T* weight, const T* bias, T* y, float* mean,      \
                           float* rstd, int64_t batch, int64_t channels, int64_t groups,       \
                           int64_t inner, double eps) {                                        \
    st::gn_forward_half<ST_TAG_##sfx>(x, weight, bias, y, mean, rstd, batch, channels, groups, \
                                      inner, eps);                                             \
  }                                                                                            \
  void st_group_norm_backward_##sfx(const T* x, const T* dy, const float* mean,                \
                                    const float* rstd, const T* weight, T* dx, T* dweight,     \
                                    T* dbias, int64_t batch, int64_t channels, int64_t groups, \
                                    int64_t inner) {                                           \
    st::gn_backward_half<ST_TAG_##sfx>(x, dy, mean, rstd, weight, dx, dweight, dbias, batch,   \
                                       channels, groups, inner);                               \
  }
ST_HALF_TYPES(ST_DEF_NORM_HALF, _)
