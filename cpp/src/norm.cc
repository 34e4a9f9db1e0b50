// Batch normalization over [outer, c, inner] (channels in the middle). Statistics are summed
// per (outer, channel) plane in the element type, where the loop vectorises, and across planes
// in double, so a float32 mean over millions of elements keeps its precision.
#include <cmath>
#include <vector>

#include "common.h"

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

template <class T>
void bn_backward(const T* x, const T* dy, const T* mean, const T* var, const T* w, T* dx, T* dw,
                 T* db, int64_t outer, int64_t c, int64_t inner, double eps) {
  std::vector<T> sum_dy(c), sum_dy_xhat(c), invstd(c);
  parallel_for(c, 2 * outer * inner, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      const T m = mean[ch];
      double s1 = 0, s2 = 0;
      for (int64_t o = 0; o < outer; ++o) {
        const T* xr = x + (o * c + ch) * inner;
        const T* gr = dy + (o * c + ch) * inner;
        T a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
        for (int64_t i = 0; i < inner; ++i) {
          a1 += gr[i];
          a2 += gr[i] * (xr[i] - m);
        }
        s1 += double(a1);
        s2 += double(a2);
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

}  // namespace
}  // namespace st

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
