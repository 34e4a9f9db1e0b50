// Reductions, arg-reductions, softmax and scans over the middle axis of [outer, n, inner].
#include <vector>

#include "common.h"

namespace st {
namespace {

template <class T>
struct Acc {  // accumulate floats in double-free blocks, integers in int64
  using type = typename std::conditional<std::is_floating_point<T>::value, T, int64_t>::type;
};

struct SumOp {
  template <class T>
  static T init() { return T(0); }
  template <class T>
  static T step(T a, T b) { return a + b; }
};
struct ProdOp {
  template <class T>
  static T init() { return T(1); }
  template <class T>
  static T step(T a, T b) { return a * b; }
};
// floats start from -inf/+inf (not lowest()/max()) so a line of infinities reduces to itself
template <class T>
T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <class T>
T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

struct MaxOp {
  template <class T>
  static T init() { return lowest_value<T>(); }
  template <class T>
  static T step(T a, T b) { return is_nan(a) ? a : (is_nan(b) || b > a ? b : a); }
};
struct MinOp {
  template <class T>
  static T init() { return highest_value<T>(); }
  template <class T>
  static T step(T a, T b) { return is_nan(a) ? a : (is_nan(b) || b < a ? b : a); }
};

// sum of a contiguous row: blocks of 8 lanes for speed, block sums added in order, so that
// float32 rounding error grows with the number of blocks rather than the number of elements
template <class T>
T row_sum(const T* x, int64_t n) {
  if constexpr (std::is_floating_point<T>::value) {
    double total = 0;
    constexpr int64_t kBlock = 4096;
    for (int64_t b = 0; b < n; b += kBlock) {
      int64_t e = std::min(n, b + kBlock);
      T lanes[16] = {0};
      int64_t i = b;
      for (; i + 16 <= e; i += 16)
#pragma omp simd
        for (int l = 0; l < 16; ++l) lanes[l] += x[i + l];
      T s = 0;
      for (int l = 0; l < 16; ++l) s += lanes[l];
      for (; i < e; ++i) s += x[i];
      total += double(s);
    }
    return T(total);
  } else {
    T s = 0;
    for (int64_t i = 0; i < n; ++i) s = T(s + x[i]);
    return s;
  }
}

template <class T, class Op>
void reduce(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    if (outer == 1 && n >= 2 * kGrain) {  // one long row: split it across threads
      int nt = threads_for(n);
      std::vector<T> part(size_t(nt), Op::template init<T>());
      int64_t chunk = (n + nt - 1) / nt;
#pragma omp parallel for num_threads(nt)
      for (int t = 0; t < nt; ++t) {
        int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
        if constexpr (std::is_same<Op, SumOp>::value) {
          part[t] = row_sum(x + b, e - b);
        } else {
          T a = Op::template init<T>();
          for (int64_t i = b; i < e; ++i) a = Op::step(a, x[i]);
          part[t] = a;
        }
      }
      T a = Op::template init<T>();
      for (int t = 0; t < nt; ++t) a = Op::step(a, part[t]);
      y[0] = a;
      return;
    }
    parallel_for(outer, n, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) {
        const T* row = x + o * n;
        if constexpr (std::is_same<Op, SumOp>::value) {
          y[o] = row_sum(row, n);
        } else {
          T a = Op::template init<T>();
          for (int64_t i = 0; i < n; ++i) a = Op::step(a, row[i]);
          y[o] = a;
        }
      }
    });
    return;
  }
  // reduce across rows of length inner: vectorises along inner
  parallel_for(outer * inner, n, [&](int64_t b, int64_t e) {
    for (int64_t o = b / inner; o <= (e - 1) / inner; ++o) {
      int64_t i0 = std::max(b, o * inner) - o * inner;
      int64_t i1 = std::min(e, (o + 1) * inner) - o * inner;
      T* yo = y + o * inner;
      for (int64_t i = i0; i < i1; ++i) yo[i] = Op::template init<T>();
      for (int64_t k = 0; k < n; ++k) {
        const T* row = x + (o * n + k) * inner;
        for (int64_t i = i0; i < i1; ++i) yo[i] = Op::step(yo[i], row[i]);
      }
    }
  });
}

template <class T, bool kMax>
void arg_reduce(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  parallel_for(outer * inner, n, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      int64_t o = j / inner, i = j % inner;
      const T* p = x + o * n * inner + i;
      int64_t best = 0;
      T bv = p[0];
      if (!is_nan(bv)) {
        for (int64_t k = 1; k < n; ++k) {
          T v = p[k * inner];
          if (is_nan(v)) {
            best = k;
            break;
          }
          if (kMax ? v > bv : v < bv) {
            bv = v;
            best = k;
          }
        }
      }
      y[j] = best;
    }
  });
}

// Apply fn(line offset, stride, line index) to each of the outer*inner lines along the middle
// axis; the line index o * inner + i is where a reduction of that line is stored.
template <class F>
void for_each_line(int64_t outer, int64_t n, int64_t inner, F&& fn) {
  parallel_for(outer * inner, n > 0 ? n : 1, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      int64_t o = j / inner, i = j % inner;
      fn(o * n * inner + i, inner, j);
    }
  });
}

template <class T, bool kLog>
void softmax(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for_each_line(outer, n, inner, [&](int64_t off, int64_t s, int64_t) {
    const T* p = x + off;
    T* q = y + off;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < n; ++k) m = MaxOp::step(m, p[k * s]);
    if (std::isinf(m) && m < 0) m = 0;  // all -inf: keep exp(-inf - 0) = 0 rather than NaN
    T sum = 0;
    if (s == 1) {
      if (kLog) {
#pragma omp simd reduction(+ : sum)
        for (int64_t k = 0; k < n; ++k) sum += st_exp(p[k] - m);
        T lse = m + std::log(sum);
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) q[k] = p[k] - lse;
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t k = 0; k < n; ++k) {
          T e = st_exp(p[k] - m);
          q[k] = e;
          sum += e;
        }
        T inv = T(1) / sum;
#pragma omp simd
        for (int64_t k = 0; k < n; ++k) q[k] *= inv;
      }
      return;
    }
    for (int64_t k = 0; k < n; ++k) sum += st_exp(p[k * s] - m);
    if (kLog) {
      T lse = m + std::log(sum);
      for (int64_t k = 0; k < n; ++k) q[k * s] = p[k * s] - lse;
    } else {
      for (int64_t k = 0; k < n; ++k) q[k * s] = st_exp(p[k * s] - m) / sum;
    }
  });
}

template <class T>
void logsumexp(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for_each_line(outer, n, inner, [&](int64_t off, int64_t s, int64_t j) {
    const T* p = x + off;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < n; ++k) m = MaxOp::step(m, p[k * s]);
    if (std::isinf(m) || is_nan(m)) {  // +inf, -inf (all -inf or empty) and NaN pass through
      y[j] = m;
      return;
    }
    T sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += st_exp(p[k * s] - m);
    y[j] = m + std::log(sum);
  });
}

template <class T>
void variance(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, double correction) {
  for_each_line(outer, n, inner, [&](int64_t off, int64_t s, int64_t j) {
    const T* p = x + off;
    double mean = 0;
    for (int64_t k = 0; k < n; ++k) mean += double(p[k * s]);
    mean /= double(n);
    double ss = 0;
    for (int64_t k = 0; k < n; ++k) {
      double d = double(p[k * s]) - mean;
      ss += d * d;
    }
    double dof = double(n) - correction;
    y[j] = T(dof > 0 ? ss / dof : (ss / 0.0));  // no degrees of freedom: inf or NaN, as numpy
  });
}

template <class T, bool kProd>
void scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for_each_line(outer, n, inner, [&](int64_t off, int64_t s, int64_t) {
    const T* p = x + off;
    T* q = y + off;
    T a = kProd ? T(1) : T(0);
    for (int64_t k = 0; k < n; ++k) {
      a = kProd ? T(a * p[k * s]) : T(a + p[k * s]);
      q[k * s] = a;
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_OPCLASS_sum st::SumOp
#define ST_OPCLASS_prod st::ProdOp
#define ST_OPCLASS_max st::MaxOp
#define ST_OPCLASS_min st::MinOp
#define ST_DEF_REDUCE(op, sfx, T)                                                       \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {     \
    st::reduce<T, ST_OPCLASS_##op>(x, y, outer, n, inner);                              \
  }
#define ST_DEF_REDUCE_T(sfx, T, _) ST_REDUCE_OPS(ST_DEF_REDUCE, sfx, T)
ST_ALL_TYPES(ST_DEF_REDUCE_T, _)

#define ST_ISMAX_argmax true
#define ST_ISMAX_argmin false
#define ST_DEF_ARG(op, sfx, T)                                                               \
  void st_##op##_##sfx(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {    \
    st::arg_reduce<T, ST_ISMAX_##op>(x, y, outer, n, inner);                                 \
  }
#define ST_DEF_ARG_T(sfx, T, _) ST_ARG_REDUCE_OPS(ST_DEF_ARG, sfx, T)
ST_ALL_TYPES(ST_DEF_ARG_T, _)

#define ST_LOG_softmax false
#define ST_LOG_log_softmax true
#define ST_DEF_SOFTMAX(op, sfx, T)                                                    \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {   \
    st::softmax<T, ST_LOG_##op>(x, y, outer, n, inner);                               \
  }
#define ST_DEF_SOFTMAX_T(sfx, T, _) ST_SCAN_FLOAT_OPS(ST_DEF_SOFTMAX, sfx, T)
ST_FLOAT_TYPES(ST_DEF_SOFTMAX_T, _)

#define ST_PROD_cumsum false
#define ST_PROD_cumprod true
#define ST_DEF_SCAN(op, sfx, T)                                                       \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {   \
    st::scan<T, ST_PROD_##op>(x, y, outer, n, inner);                                 \
  }
#define ST_DEF_SCAN_T(sfx, T, _) ST_SCAN_OPS(ST_DEF_SCAN, sfx, T)
ST_NUM_TYPES(ST_DEF_SCAN_T, _)

#define ST_DEF_FLOAT_REDUCE(sfx, T, _)                                                         \
  void st_logsumexp_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {         \
    st::logsumexp<T>(x, y, outer, n, inner);                                                   \
  }                                                                                            \
  void st_var_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, double corr) {  \
    st::variance<T>(x, y, outer, n, inner, corr);                                              \
  }
ST_FLOAT_TYPES(ST_DEF_FLOAT_REDUCE, _)

}  // extern "C"
