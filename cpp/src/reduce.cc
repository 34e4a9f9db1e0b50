// Reductions, arg-reductions, softmax and scans over the middle axis of [outer, n, inner].
#include <vector>

#include "common.h"
#include "half.h"

namespace st {
namespace {

// Integer sums and products wrap on overflow (Wrap, dtypes.h), in the reductions and the scans
// alike, as on CUDA.
struct SumOp {
  template <class T>
  static T init() { return T(0); }
  template <class T>
  static T step(T a, T b) { return T(Wrap<T>(a) + Wrap<T>(b)); }
};
struct ProdOp {
  template <class T>
  static T init() { return T(1); }
  template <class T>
  static T step(T a, T b) { return T(Wrap<T>(a) * Wrap<T>(b)); }
};

// NaN wins, then the first of equal values; written as selects (no branch on the data) so the
// loops below vectorise: once a lane holds NaN no comparison with it is true and it stays
struct MaxOp {
  template <class T>
  static T init() { return lowest_value<T>(); }
  template <class T>
  static T step(T a, T b) { return (b > a || b != b) ? b : a; }
};
struct MinOp {
  template <class T>
  static T init() { return highest_value<T>(); }
  template <class T>
  static T step(T a, T b) { return (b < a || b != b) ? b : a; }
};

// sum of a contiguous row: blocks of 16 lanes for speed, block sums added in order, so that
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
    for (int64_t i = 0; i < n; ++i) s = SumOp::step(s, x[i]);
    return s;
  }
}

// max or min of a contiguous row in independent lanes (a single running value would make every
// step wait for the previous one); lanes are combined with the same NaN-winning step
template <class T, class Op>
T row_extreme(const T* x, int64_t n) {
  constexpr int kLanes = 64 / int(sizeof(T));  // two AVX2 registers
  T lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = Op::template init<T>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) lanes[l] = Op::step(lanes[l], x[i + l]);
  T a = Op::template init<T>();
  for (int l = 0; l < kLanes; ++l) a = Op::step(a, lanes[l]);
  for (; i < n; ++i) a = Op::step(a, x[i]);
  return a;
}

template <class T, class Op>
T row_reduce(const T* x, int64_t n) {
  if constexpr (std::is_same<Op, SumOp>::value) {
    return row_sum(x, n);
  } else if constexpr (std::is_same<Op, MaxOp>::value || std::is_same<Op, MinOp>::value) {
    return row_extreme<T, Op>(x, n);
  } else {  // prod stays in order: reordering could overflow or underflow where numpy does not
    T a = Op::template init<T>();
    for (int64_t i = 0; i < n; ++i) a = Op::step(a, x[i]);
    return a;
  }
}

// Lines along a non-last axis ([outer, n, inner] with inner > 1) are walked a tile of adjacent
// lines at a time: each step over k reads a contiguous piece of a row, which vectorises along
// the tile, with the tile's per-line state on the stack (at most a few tens of KiB). Wide
// tiles read long runs per row; narrow ones measured 2-3x slower on a 4096 x 4096 reduction.
constexpr int64_t kTile = 4096;

// fn(o, i0, i1) for the tiles of columns [i0, i1) of each outer index, split over threads
template <class F>
void for_each_tile(int64_t outer, int64_t n, int64_t inner, F&& fn) {
  parallel_for(outer * inner, n > 0 ? n : 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b / inner; o <= (e - 1) / inner; ++o) {
      int64_t lo = std::max(b, o * inner) - o * inner;
      int64_t hi = std::min(e, (o + 1) * inner) - o * inner;
      for (int64_t i0 = lo; i0 < hi; i0 += kTile) fn(o, i0, std::min(hi, i0 + kTile));
    }
  });
}

// float sums of a tile accumulate in double: a column sum has no blocks to split into
template <class T, class Op>
using TileAcc = typename std::conditional<std::is_same<Op, SumOp>::value &&
                                              std::is_floating_point<T>::value,
                                          double, T>::type;

// One long row (outer == 1) is split across threads, since there are no rows to share out.
inline bool is_long_row(int64_t outer, int64_t n) { return outer == 1 && n >= 2 * kGrain; }

// part(b, e) over contiguous pieces of [0, n), one per thread, folded with combine in piece
// order so that the result does not depend on scheduling
template <class R, class Part, class Combine>
R split_row(int64_t n, R init, Part&& part, Combine&& combine) {
  const int nt = threads_for(n);
  std::vector<R> parts(size_t(nt), init);
  const int64_t chunk = (n + nt - 1) / nt;
#pragma omp parallel for num_threads(nt)
  for (int t = 0; t < nt; ++t) {
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    parts[size_t(t)] = part(b, e);
  }
  R a = init;
  for (int t = 0; t < nt; ++t) a = combine(a, parts[size_t(t)]);
  return a;
}

template <class T, class Op>
T split_extreme(const T* x, int64_t n) {
  return split_row(
      n, Op::template init<T>(),
      [&](int64_t b, int64_t e) { return row_extreme<T, Op>(x + b, e - b); },
      [](T a, T b) { return Op::step(a, b); });
}

template <class T, class Op>
void reduce(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    if (is_long_row(outer, n)) {
      y[0] = split_row(
          n, Op::template init<T>(),
          [&](int64_t b, int64_t e) { return row_reduce<T, Op>(x + b, e - b); },
          [](T a, T b) { return Op::step(a, b); });
      return;
    }
    parallel_for(outer, n, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) y[o] = row_reduce<T, Op>(x + o * n, n);
    });
    return;
  }
  using A = TileAcc<T, Op>;
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const T* base = x + o * n * inner + i0;
    A acc[kTile];
    for (int64_t i = 0; i < w; ++i) acc[i] = A(Op::template init<T>());
    for (int64_t k = 0; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) acc[i] = Op::step(acc[i], A(row[i]));
    }
    T* yo = y + o * inner + i0;
    for (int64_t i = 0; i < w; ++i) yo[i] = T(acc[i]);
  });
}

// First index holding the extreme value m (or the first NaN when m is NaN), checked a chunk
// at a time so the comparisons vectorise; n when there is none.
template <class T, bool kNan>
int64_t first_match_in(const T* p, int64_t n, T m) {
  auto match = [m](T v) { return kNan ? v != v : v == m; };
  constexpr int kChunk = 64 / int(sizeof(T));
  int64_t k = 0;
  for (; k + kChunk <= n; k += kChunk) {
    int hits = 0;
#pragma omp simd reduction(+ : hits)
    for (int l = 0; l < kChunk; ++l) hits += match(p[k + l]) ? 1 : 0;
    if (hits) break;
  }
  for (; k < n; ++k)
    if (match(p[k])) return k;
  return n;
}

template <class T>
int64_t first_match(const T* p, int64_t n, T m) {
  return is_nan(m) ? first_match_in<T, true>(p, n, m) : first_match_in<T, false>(p, n, m);
}

template <class T, bool kMax>
void arg_reduce(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  using Op = typename std::conditional<kMax, MaxOp, MinOp>::type;
  if (inner == 1) {
    // the extreme value (vectorised), then its first position: ties go to the first index
    if (is_long_row(outer, n)) {
      const T m = split_extreme<T, Op>(x, n);
      y[0] = split_row(
          n, n,
          [&](int64_t b, int64_t e) {
            int64_t k = first_match(x + b, e - b, m);
            return k < e - b ? b + k : n;
          },
          [](int64_t a, int64_t b) { return std::min(a, b); });
      return;
    }
    parallel_for(outer, n, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) {
        const T* row = x + o * n;
        y[o] = first_match(row, n, row_extreme<T, Op>(row, n));
      }
    });
    return;
  }
  if (n == 0) return;  // no line to search (callers reject this; never read past x)
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const T* base = x + o * n * inner + i0;
    T bv[kTile];
    int64_t bi[kTile];
    for (int64_t i = 0; i < w; ++i) {
      bv[i] = base[i];
      bi[i] = 0;
    }
    for (int64_t k = 1; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        T v = row[i];
        // a NaN already held is never replaced, so it stays the first NaN
        bool take = bv[i] == bv[i] && ((kMax ? v > bv[i] : v < bv[i]) || v != v);
        bv[i] = take ? v : bv[i];
        bi[i] = take ? k : bi[i];
      }
    }
    int64_t* yo = y + o * inner + i0;
    for (int64_t i = 0; i < w; ++i) yo[i] = bi[i];
  });
}

// sum of exp(p[k] - m) over a contiguous row, storing each term in q when given; in blocks
// whose sums are added in double, like row_sum
template <class T>
double exp_sum(const T* p, T* q, int64_t n, T m) {
  constexpr int64_t kBlock = 2048;
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    T s = 0;
    if (q) {
#pragma omp simd reduction(+ : s)
      for (int64_t k = b; k < e; ++k) {
        T t = st_exp(p[k] - m);
        q[k] = t;
        s += t;
      }
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t k = b; k < e; ++k) s += st_exp(p[k] - m);
    }
    total += double(s);
  }
  return total;
}

template <class T>
T softmax_shift(T m) {  // all -inf: keep exp(-inf - 0) = 0 rather than NaN
  return (std::isinf(m) && m < 0) ? T(0) : m;
}

// exp_sum over a long row, split across threads
template <class T>
double split_exp_sum(const T* p, T* q, int64_t n, T m) {
  return split_row(
      n, 0.0, [&](int64_t b, int64_t e) { return exp_sum<T>(p + b, q ? q + b : nullptr, e - b, m); },
      [](double a, double b) { return a + b; });
}

template <class T, bool kLog>
void softmax(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1 && is_long_row(outer, n)) {
    const T m = softmax_shift(split_extreme<T, MaxOp>(x, n));
    const T f = kLog ? m + T(std::log(split_exp_sum<T>(x, nullptr, n, m)))
                     : T(1) / T(split_exp_sum<T>(x, y, n, m));
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      if (kLog) {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) y[k] = x[k] - f;
      } else {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) y[k] *= f;
      }
    });
    return;
  }
  if (inner == 1) {
    parallel_for(outer, n > 0 ? n : 1, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) {
        const T* p = x + o * n;
        T* q = y + o * n;
        const T m = softmax_shift(row_extreme<T, MaxOp>(p, n));
        if (kLog) {
          const T lse = m + T(std::log(exp_sum<T>(p, nullptr, n, m)));
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) q[k] = p[k] - lse;
        } else {
          const T inv = T(1) / T(exp_sum<T>(p, q, n, m));
#pragma omp simd
          for (int64_t k = 0; k < n; ++k) q[k] *= inv;
        }
      }
    });
    return;
  }
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const int64_t off = o * n * inner + i0;
    T m[kTile], f[kTile];  // f: 1/sum for softmax, log(sum) + m for log_softmax
    double s[kTile];
    for (int64_t i = 0; i < w; ++i) {
      m[i] = MaxOp::init<T>();
      s[i] = 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      const T* row = x + off + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) m[i] = MaxOp::step(m[i], row[i]);
    }
    for (int64_t i = 0; i < w; ++i) m[i] = softmax_shift(m[i]);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = x + off + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) s[i] += double(st_exp(row[i] - m[i]));
    }
    for (int64_t i = 0; i < w; ++i) f[i] = kLog ? m[i] + T(std::log(s[i])) : T(1) / T(s[i]);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = x + off + k * inner;
      T* out = y + off + k * inner;
      if (kLog) {
#pragma omp simd
        for (int64_t i = 0; i < w; ++i) out[i] = row[i] - f[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < w; ++i) out[i] = st_exp(row[i] - m[i]) * f[i];
      }
    }
  });
}

template <class T>
T logsumexp_finish(T m, double sum) {
  // +inf, -inf (all -inf or empty) and NaN pass through
  return (std::isinf(m) || is_nan(m)) ? m : T(m + T(std::log(sum)));
}

template <class T>
void logsumexp(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1 && is_long_row(outer, n)) {
    const T m = split_extreme<T, MaxOp>(x, n);
    const bool finite = !(std::isinf(m) || is_nan(m));
    y[0] = logsumexp_finish(m, finite ? split_exp_sum<T>(x, nullptr, n, m) : 0.0);
    return;
  }
  if (inner == 1) {
    parallel_for(outer, n > 0 ? n : 1, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) {
        const T* p = x + o * n;
        const T m = row_extreme<T, MaxOp>(p, n);
        const bool finite = !(std::isinf(m) || is_nan(m));  // else exp_sum is not needed
        y[o] = logsumexp_finish(m, finite ? exp_sum<T>(p, nullptr, n, m) : 0.0);
      }
    });
    return;
  }
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const T* base = x + o * n * inner + i0;
    T m[kTile];
    double s[kTile];
    for (int64_t i = 0; i < w; ++i) {
      m[i] = MaxOp::init<T>();
      s[i] = 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) m[i] = MaxOp::step(m[i], row[i]);
    }
    T shift[kTile];  // an infinite or NaN max would make every term NaN; its result is m anyway
    for (int64_t i = 0; i < w; ++i) shift[i] = std::isfinite(m[i]) ? m[i] : T(0);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) s[i] += double(st_exp(row[i] - shift[i]));
    }
    T* yo = y + o * inner + i0;
    for (int64_t i = 0; i < w; ++i) yo[i] = logsumexp_finish(m[i], s[i]);
  });
}

// Two passes in double (mean, then squared deviations): float32 data of any size and offset
// keeps full float32 accuracy, which a one-pass formula would not.
template <class T>
T variance_result(double ss, int64_t n, double correction) {
  double dof = double(n) - correction;
  return T(dof > 0 ? ss / dof : (ss / 0.0));  // no degrees of freedom: inf or NaN, as numpy
}

template <class T>
double sum_double(const T* p, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t k = 0; k < n; ++k) sum += double(p[k]);
  return sum;
}

template <class T>
double squared_deviations(const T* p, int64_t n, double mean) {
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t k = 0; k < n; ++k) {
    double d = double(p[k]) - mean;
    ss += d * d;
  }
  return ss;
}

template <class T>
void variance(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, double correction) {
  if (inner == 1 && is_long_row(outer, n)) {
    auto add = [](double a, double b) { return a + b; };
    const double mean =
        split_row(n, 0.0, [&](int64_t b, int64_t e) { return sum_double(x + b, e - b); }, add) /
        double(n);
    const double ss = split_row(
        n, 0.0, [&](int64_t b, int64_t e) { return squared_deviations(x + b, e - b, mean); }, add);
    y[0] = variance_result<T>(ss, n, correction);
    return;
  }
  if (inner == 1) {
    parallel_for(outer, n > 0 ? n : 1, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o) {
        const T* p = x + o * n;
        const double mean = sum_double(p, n) / double(n);
        y[o] = variance_result<T>(squared_deviations(p, n, mean), n, correction);
      }
    });
    return;
  }
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const T* base = x + o * n * inner + i0;
    double mean[kTile], ss[kTile];
    for (int64_t i = 0; i < w; ++i) mean[i] = ss[i] = 0;
    for (int64_t k = 0; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) mean[i] += double(row[i]);
    }
    for (int64_t i = 0; i < w; ++i) mean[i] /= double(n);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = base + k * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        double d = double(row[i]) - mean[i];
        ss[i] += d * d;
      }
    }
    T* yo = y + o * inner + i0;
    for (int64_t i = 0; i < w; ++i) yo[i] = variance_result<T>(ss[i], n, correction);
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

template <class T, bool kProd>
void scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for_each_line(outer, n, inner, [&](int64_t off, int64_t s, int64_t) {
    const T* p = x + off;
    T* q = y + off;
    T a = kProd ? T(1) : T(0);
    for (int64_t k = 0; k < n; ++k) {
      a = kProd ? ProdOp::step(a, p[k * s]) : SumOp::step(a, p[k * s]);
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

// ---- float16 / bfloat16: chunks of whole lines through float32 (half.h) ----------------------
namespace st {
namespace {

// one long row (a full reduction): blocks of it in float32, folded in order, sums in double
template <class Tag, class Op>
uint16_t long_row_half(const uint16_t* x, int64_t n) {
  using A = typename std::conditional<std::is_same<Op, SumOp>::value, double, float>::type;
  constexpr int64_t kBlk = 4096;
  const A init = A(Op::template init<float>());
  auto part = [&](int64_t b, int64_t e) {
    float buf[kBlk];
    A a = init;
    for (int64_t s = b; s < e; s += kBlk) {
      const int64_t m = std::min(kBlk, e - s);
      widen<Tag>(x + s, buf, m);
      a = Op::step(a, A(row_reduce<float, Op>(buf, m)));
    }
    return a;
  };
  return cast_store<Tag>(split_row(n, init, part, [](A a, A b) { return Op::step(a, b); }));
}

// lines along a non-last axis whose slabs are larger than a chunk (a sum over the batch):
// the tiles of reduce() above, each row of a tile loaded into float32 as it is read, so that
// no float32 copy of the slab is made
template <class Tag, class Op>
void reduce_tiles_half(const uint16_t* x, uint16_t* y, int64_t outer, int64_t n,
                       int64_t inner) {
  using A = TileAcc<float, Op>;
  for_each_tile(outer, n, inner, [&](int64_t o, int64_t i0, int64_t i1) {
    const int64_t w = i1 - i0;
    const uint16_t* base = x + o * n * inner + i0;
    A acc[kTile];
    float row[kTile];
    for (int64_t i = 0; i < w; ++i) acc[i] = A(Op::template init<float>());
    for (int64_t k = 0; k < n; ++k) {
      widen<Tag>(base + k * inner, row, w);
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) acc[i] = Op::step(acc[i], A(row[i]));
    }
    uint16_t* yo = y + o * inner + i0;
    for (int64_t i = 0; i < w; ++i) yo[i] = cast_store<Tag>(float(acc[i]));
  });
}

template <class Tag, class Op>
void reduce_half(const uint16_t* x, uint16_t* y, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1 && is_long_row(outer, n)) {
    y[0] = long_row_half<Tag, Op>(x, n);
    return;
  }
  if (inner > 1 && n * inner > kHalfChunk) {
    reduce_tiles_half<Tag, Op>(x, y, outer, n, inner);
    return;
  }
  by_float_slabs<Tag>(x, outer, n * inner, [&](const float* xf, int64_t o0, int64_t cnt) {
    std::vector<float> yf(size_t(cnt * inner));
    reduce<float, Op>(xf, yf.data(), cnt, n, inner);
    narrow<Tag>(yf.data(), y + o0 * inner, cnt * inner);
  });
}

template <class Tag, bool kMax>
void arg_reduce_half(const uint16_t* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  by_float_slabs<Tag>(x, outer, n * inner, [&](const float* xf, int64_t o0, int64_t cnt) {
    arg_reduce<float, kMax>(xf, y + o0 * inner, cnt, n, inner);
  });
}

// kernels whose output has `out_n` elements per outer slab: fn(xf, yf, count)
template <class Tag, class F>
void map_half(const uint16_t* x, uint16_t* y, int64_t outer, int64_t slab, int64_t out_n,
              F&& fn) {
  by_float_slabs<Tag>(x, outer, slab, [&](const float* xf, int64_t o0, int64_t cnt) {
    std::vector<float> yf(size_t(cnt * out_n > 0 ? cnt * out_n : 1));
    fn(xf, yf.data(), cnt);
    narrow<Tag>(yf.data(), y + o0 * out_n, cnt * out_n);
  });
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_DEF_REDUCE_HALF(op, sfx, T)                                                  \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {     \
    st::reduce_half<ST_TAG_##sfx, ST_OPCLASS_##op>(x, y, outer, n, inner);              \
  }
#define ST_DEF_REDUCE_HALF_T(sfx, T, _) ST_REDUCE_OPS(ST_DEF_REDUCE_HALF, sfx, T)
ST_HALF_TYPES(ST_DEF_REDUCE_HALF_T, _)

#define ST_DEF_ARG_HALF(op, sfx, T)                                                          \
  void st_##op##_##sfx(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {    \
    st::arg_reduce_half<ST_TAG_##sfx, ST_ISMAX_##op>(x, y, outer, n, inner);                 \
  }
#define ST_DEF_ARG_HALF_T(sfx, T, _) ST_ARG_REDUCE_OPS(ST_DEF_ARG_HALF, sfx, T)
ST_HALF_TYPES(ST_DEF_ARG_HALF_T, _)

// the row kernels on widened slabs of (outer, n, inner): x's slab of in_len elements in float,
// the float kernel (the rest of the arguments, on xf, yf and cnt rows) writes y's slab of out_len
#define ST_HALF_ROWS(sfx, in_len, out_len, ...)                                               \
  st::map_half<ST_TAG_##sfx>(x, y, outer, in_len, out_len,                                    \
                             [&](const float* xf, float* yf, int64_t cnt) { __VA_ARGS__; })

#define ST_DEF_SOFTMAX_HALF(op, sfx, T)                                                       \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {           \
    ST_HALF_ROWS(sfx, n * inner, n * inner,                                                   \
                 st::softmax<float, ST_LOG_##op>(xf, yf, cnt, n, inner));                     \
  }
#define ST_DEF_SOFTMAX_HALF_T(sfx, T, _) ST_SCAN_FLOAT_OPS(ST_DEF_SOFTMAX_HALF, sfx, T)
ST_HALF_TYPES(ST_DEF_SOFTMAX_HALF_T, _)

#define ST_DEF_SCAN_HALF(op, sfx, T)                                                          \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {           \
    ST_HALF_ROWS(sfx, n * inner, n * inner,                                                   \
                 st::scan<float, ST_PROD_##op>(xf, yf, cnt, n, inner));                       \
  }
#define ST_DEF_SCAN_HALF_T(sfx, T, _) ST_SCAN_OPS(ST_DEF_SCAN_HALF, sfx, T)
ST_HALF_TYPES(ST_DEF_SCAN_HALF_T, _)

#define ST_DEF_FLOAT_REDUCE_HALF(sfx, T, _)                                                   \
  void st_logsumexp_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {        \
    ST_HALF_ROWS(sfx, n * inner, inner, st::logsumexp<float>(xf, yf, cnt, n, inner));         \
  }                                                                                           \
  void st_var_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, double corr) { \
    ST_HALF_ROWS(sfx, n * inner, inner, st::variance<float>(xf, yf, cnt, n, inner, corr));    \
  }
ST_HALF_TYPES(ST_DEF_FLOAT_REDUCE_HALF, _)

}  // extern "C"
