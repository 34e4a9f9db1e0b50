// Softmax cross entropy with class-index targets, fused: one pass finds the row maximum, one
// sums the exponentials, and the loss needs only the target's logit and (with label smoothing)
// the weighted sum of the logits, so the log-probabilities are never stored.
#include <cmath>
#include <limits>
#include <type_traits>

#include "common.h"
#include "half.h"

namespace st {
namespace {

// Rows are walked in blocks of kTail lanes; the last, partial block runs in masked vector lanes
// too. A loop's scalar remainder computes exp one element at a time, at several times the cost
// per element: with 10 classes, that was all of a row's work. (A padded copy on the stack, read
// back as a vector, cost about as much again: 64 rows of 10 classes took 7 us, now under 4.)
constexpr int64_t kTail = 16;

// o[j] = a * exp(x[j] - l) - b * w[j] over a row (kWeighted), else - b
template <bool kWeighted, class T>
ST_INLINE void exp_scaled(const T* xr, T* o, int64_t c, T l, T a, T b, const T* w) {
  const int64_t body = c - c % kTail;
#pragma omp simd
  for (int64_t j = 0; j < body; ++j) o[j] = a * st_exp(xr[j] - l) - (kWeighted ? b * w[j] : b);
  if (body < c) {  // the last partial block in masked lanes
    const int64_t rem = c - body;
    const T* xt = xr + body;
    const T* wt = kWeighted ? w + body : w;
    T* ot = o + body;
#pragma omp simd
    for (int64_t j = 0; j < kTail; ++j)
      if (j < rem) ot[j] = a * st_exp(xt[j] - l) - (kWeighted ? b * wt[j] : b);
  }
}

// The row's log(sum_j exp(x[j])) for the log-probabilities x - lse: NaN when any x is NaN or
// +inf (x - lse is then inf - inf for the largest, as in PyTorch's log_softmax)
template <class T>
ST_INLINE T row_lse(const T* xr, int64_t c) {
  const T inf = std::numeric_limits<T>::infinity();
  const int64_t body = c - c % kTail, rem = c - body;
  const T* tail = xr + body;
  // the maximum in vector lanes, blind to NaN: a NaN reaches the result through the sum below;
  // the row's last partial block in masked lanes (-inf past the row's end: no effect on the
  // maximum, and exp gives 0 below)
  T mx = -inf;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < body; ++j) mx = xr[j] > mx ? xr[j] : mx;
  if (rem) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < kTail; ++j) {
      const T v = j < rem ? tail[j] : -inf;
      mx = v > mx ? v : mx;
    }
  }
  if (mx == inf) return std::numeric_limits<T>::quiet_NaN();
  const T shift = mx == -inf ? T(0) : mx;  // all -inf: the sum is 0 and lse is -inf, not NaN
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < body; ++j) s += st_exp(xr[j] - shift);
  if (rem) {
    T t = 0;
#pragma omp simd reduction(+ : t)
    for (int64_t j = 0; j < kTail; ++j) t += st_exp((j < rem ? tail[j] : -inf) - shift);
    s += t;
  }
  return shift + st_log(s);
}

// The loss of rows [rb, re); inlined into one build per vector width below
template <class T>
ST_INLINE void xent_rows(const T* x, const int64_t* target, const T* w, T* loss, T* lse,
                         int64_t rb, int64_t re, int64_t c, int64_t ignore, T s, T keep, T per,
                         T wsum) {
  for (int64_t r = rb; r < re; ++r) {
    const T* xr = x + r * c;
    const T l = row_lse(xr, c);
    lse[r] = l;
    const int64_t t = target[r];
    if (t == ignore) {
      loss[r] = 0;
      continue;
    }
    const T wt = w ? w[t] : T(1);
    T out = keep * wt * (l - xr[t]);
    if (s != T(0)) {
      T wx = 0;  // sum_j w_j x_j
      if (w) {
#pragma omp simd reduction(+ : wx)
        for (int64_t j = 0; j < c; ++j) wx += w[j] * xr[j];
      } else {
#pragma omp simd reduction(+ : wx)
        for (int64_t j = 0; j < c; ++j) wx += xr[j];
      }
      out += per * (wsum * l - wx);
    }
    loss[r] = out;
  }
}

// dx of rows [rb, re)
template <class T>
ST_INLINE void xent_backward_rows(const T* x, const int64_t* target, const T* w, const T* lse,
                                  const T* dloss, T* dx, int64_t rb, int64_t re, int64_t c,
                                  int64_t ignore, T keep, T per, T wsum) {
  for (int64_t r = rb; r < re; ++r) {
    const T* xr = x + r * c;
    T* o = dx + r * c;
    const int64_t t = target[r];
    if (t == ignore) {
      for (int64_t j = 0; j < c; ++j) o[j] = 0;
      continue;
    }
    const T d = dloss[r], l = lse[r];
    const T wt = w ? w[t] : T(1);
    const T a = d * (keep * wt + per * wsum);
    if (w)
      exp_scaled<true>(xr, o, c, l, a, d * per, w);
    else
      exp_scaled<false>(xr, o, c, l, a, d * per, w);
    o[t] -= d * keep * wt;
  }
}

// The two builds of each: the exponentials dominate, and with AVX-512 they run 16 lanes wide
// in about half the time (512 rows of 1000 float32 logits: 0.40 ms against 0.25 forward, two
// threads). The sums of a row then add in a different order, so the two builds agree to
// rounding, not bit for bit.
template <class T, class... A>
ST_FLAT void xent_rows_narrow(A... a) {
  xent_rows<T>(a...);
}
template <class T, class... A>
ST_FLAT ST_AVX512 void xent_rows_wide(A... a) {
  xent_rows<T>(a...);
}
template <class T, class... A>
ST_FLAT void xent_backward_rows_narrow(A... a) {
  xent_backward_rows<T>(a...);
}
template <class T, class... A>
ST_FLAT ST_AVX512 void xent_backward_rows_wide(A... a) {
  xent_backward_rows<T>(a...);
}

template <class T>
T weight_sum(const T* w, int64_t c) {
  if (!w) return T(c);
  T wsum = 0;
  for (int64_t j = 0; j < c; ++j) wsum += w[j];
  return wsum;
}

template <class T>
void xent(const T* x, const int64_t* target, const T* w, T* loss, T* lse, int64_t rows,
          int64_t c, int64_t ignore, double smoothing) {
  const T s = T(smoothing), keep = T(1 - smoothing), per = T(smoothing / double(c));
  const T wsum = weight_sum(w, c);
  const bool wide = std::is_same<T, float>::value && avx512_enabled();
  parallel_for(rows, c, [&](int64_t rb, int64_t re) {
    if (wide)
      xent_rows_wide<T>(x, target, w, loss, lse, rb, re, c, ignore, s, keep, per, wsum);
    else
      xent_rows_narrow<T>(x, target, w, loss, lse, rb, re, c, ignore, s, keep, per, wsum);
  });
}

template <class T>
void xent_backward(const T* x, const int64_t* target, const T* w, const T* lse, const T* dloss,
                   T* dx, int64_t rows, int64_t c, int64_t ignore, double smoothing) {
  const T keep = T(1 - smoothing), per = T(smoothing / double(c));
  const T wsum = weight_sum(w, c);
  const bool wide = std::is_same<T, float>::value && avx512_enabled();
  parallel_for(rows, 2 * c, [&](int64_t rb, int64_t re) {
    if (wide)
      xent_backward_rows_wide<T>(x, target, w, lse, dloss, dx, rb, re, c, ignore, keep, per,
                                 wsum);
    else
      xent_backward_rows_narrow<T>(x, target, w, lse, dloss, dx, rb, re, c, ignore, keep, per,
                                   wsum);
  });
}

}  // namespace
}  // namespace st

#define ST_DEF_XENT(sfx, T, _)                                                                 \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, T* loss,      \
                             T* lse, int64_t rows, int64_t c, int64_t ignore_index,            \
                             double smoothing) {                                               \
    st::xent(x, target, weight, loss, lse, rows, c, ignore_index, smoothing);                  \
  }                                                                                            \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const T* lse, const T* dloss, T* dx, int64_t rows,       \
                                      int64_t c, int64_t ignore_index, double smoothing) {     \
    st::xent_backward(x, target, weight, lse, dloss, dx, rows, c, ignore_index, smoothing);    \
  }
ST_FLOAT_TYPES(ST_DEF_XENT, _)

// float16 / bfloat16 logits: rows through float32 (half.h); the per-row loss and log-sum-exp
// stay float32 (the caller reduces the rows in float32 and rounds once; the backward's
// probabilities exp(x - lse) would lose bits with a rounded lse), dx is rounded once
#define ST_DEF_XENT_HALF(sfx, T, _)                                                            \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, float* loss,  \
                             float* lse, int64_t rows, int64_t c, int64_t ignore_index,        \
                             double smoothing) {                                               \
    std::vector<float> wf(size_t(weight ? c : 0));                                             \
    if (weight) st::widen<ST_TAG_##sfx>(weight, wf.data(), c);                                 \
    st::by_float_slabs<ST_TAG_##sfx>(x, rows, c, [&](const float* xf, int64_t r0, int64_t k) { \
      st::xent<float>(xf, target + r0, weight ? wf.data() : nullptr, loss + r0, lse + r0, k, c, \
                      ignore_index, smoothing);                                                \
    });                                                                                        \
  }                                                                                            \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const float* lse, const float* dloss, T* dx,             \
                                      int64_t rows, int64_t c, int64_t ignore_index,           \
                                      double smoothing) {                                      \
    std::vector<float> wf(size_t(weight ? c : 0));                                             \
    if (weight) st::widen<ST_TAG_##sfx>(weight, wf.data(), c);                                 \
    st::by_float_slabs<ST_TAG_##sfx>(x, rows, c, [&](const float* xf, int64_t r0, int64_t k) { \
      std::vector<float> df(size_t(k * c));                                                    \
      st::xent_backward<float>(xf, target + r0, weight ? wf.data() : nullptr, lse + r0,        \
                               dloss + r0, df.data(), k, c, ignore_index, smoothing);          \
      st::narrow<ST_TAG_##sfx>(df.data(), dx + r0 * c, k * c);                                 \
    });                                                                                        \
  }
ST_HALF_TYPES(ST_DEF_XENT_HALF, _)
