// Reductions, arg-reductions, softmax, log-sum-exp, variance and scans over the middle axis of
// [outer, n, inner]: the CUDA twin of cpp/src/reduce.cc, with the same results (NaN wins,
// arg-reductions return the first occurrence, integers wrap, bool is u8 holding 0 or 1).
//
// Every reduction is written once as an "op" (thread-local accumulator, fold to a combinable
// state, combine, output) and run by one of two layouts:
//   rows (inner == 1): a warp (short rows) or a block (long rows) per row, 16-byte loads;
//   cols (inner > 1):  a block per tile of adjacent lines, threads along x over inner (so a warp
//                      reads contiguous memory) and along y over slices of n.
// When those leave most of the device idle (few long lines, e.g. a full reduction), each line is
// split into pieces whose states go to stream-ordered scratch and are combined by a second
// kernel. Combines never depend on the order of pieces: arg-reductions break ties by index.
// Softmax, log_softmax and logsumexp along the last axis have their own kernels (see
// softmax_family): a row cached in registers, or three passes over rows too long for that.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common.cuh"

namespace st {
namespace cuda {
namespace {

// ---- helpers -------------------------------------------------------------------------------------
template <class T>
ST_HD bool finite(T x) {
  return x - x == T(0);  // false for +-inf and NaN
}

// Sums and products accumulate floats in double (free next to the memory traffic, and the CPU
// sums in double too) and integers wrapping (Wrap, dtypes.h) as on the CPU; u8 in 32 bits,
// truncated at the end (the same modulo 256).
template <class T>
using Wide = std::conditional_t<std::is_floating_point<T>::value, double,
                                std::conditional_t<std::is_same<T, uint8_t>::value, uint32_t,
                                                   Wrap<T>>>;

// shuffles of any trivially copyable state, 32 bits at a time
template <class S>
__device__ __forceinline__ S shfl_xor_state(S s, int mask) {
  constexpr int kWords = int((sizeof(S) + 3) / 4);
  int w[kWords] = {};
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  memcpy(&s, w, sizeof(S));
  return s;
}
template <class S>
__device__ __forceinline__ S shfl_state(S s, int lane) {
  constexpr int kWords = int((sizeof(S) + 3) / 4);
  int w[kWords] = {};
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(0xffffffffu, w[i], lane);
  memcpy(&s, w, sizeof(S));
  return s;
}

template <class Op, class S>
__device__ __forceinline__ S warp_combine(const Op& op, S s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = op.combine(s, shfl_xor_state(s, o));
  return s;
}

// The combined state of a group of kGroup threads (a warp or the whole 1-D block), the same
// value in every thread: softmax scales every element of a line by it.
template <int kGroup, class Op, class S>
__device__ __forceinline__ S group_combine(const Op& op, S s) {
  s = warp_combine(op, s);
  if constexpr (kGroup == 32) {
    return shfl_state(s, 0);
  } else {
    __shared__ S slots[33];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // slots may still be read by the previous line
    if (lane == 0) slots[warp] = s;
    __syncthreads();
    if (warp == 0) {
      S t = lane < int(blockDim.x >> 5) ? slots[lane] : op.identity();
      t = warp_combine(op, t);
      if (lane == 0) slots[32] = t;
    }
    __syncthreads();
    return slots[32];
  }
}

// f(value, k) for the elements of a contiguous row that thread t of nt (nt >= 16) owns: 16-byte
// loads over the aligned middle, thread t taking every nt-th vector, so a warp reads 512
// contiguous bytes per step; the unaligned head and the tail are single elements.
template <class T, class F>
__device__ __forceinline__ void for_row(const T* row, int64_t n, int64_t t, int64_t nt, F&& f) {
  constexpr int kV = Vec<T>::N;
  using V = typename Vec<T>::Type;
  int64_t head = int64_t((16 - (reinterpret_cast<uintptr_t>(row) & 15)) & 15) / int64_t(sizeof(T));
  if (head > n) head = n;
  if (t < head) f(row[t], t);
  const int64_t nv = (n - head) / kV;
  const V* vp = reinterpret_cast<const V*>(row + head);
#pragma unroll 2
  for (int64_t j = t; j < nv; j += nt) {
    const V w = vp[j];
#pragma unroll
    for (int l = 0; l < kV; ++l) f(w.v[l], head + j * kV + l);
  }
  const int64_t k = head + nv * kV + t;
  if (k < n) f(row[k], k);
}

// yr[k] = f(xr[k]) over a contiguous row for thread t of nt; vectorised when both rows share
// their alignment (the usual case), else element by element (still coalesced)
template <class T, class F>
__device__ __forceinline__ void map_row(const T* xr, T* yr, int64_t n, int64_t t, int64_t nt,
                                        F&& f) {
  constexpr int kV = Vec<T>::N;
  using V = typename Vec<T>::Type;
  if (((reinterpret_cast<uintptr_t>(xr) ^ reinterpret_cast<uintptr_t>(yr)) & 15) != 0) {
    for (int64_t k = t; k < n; k += nt) yr[k] = f(xr[k]);
    return;
  }
  int64_t head = int64_t((16 - (reinterpret_cast<uintptr_t>(xr) & 15)) & 15) / int64_t(sizeof(T));
  if (head > n) head = n;
  if (t < head) yr[t] = f(xr[t]);
  const int64_t nv = (n - head) / kV;
  const V* xv = reinterpret_cast<const V*>(xr + head);
  V* yv = reinterpret_cast<V*>(yr + head);
  for (int64_t j = t; j < nv; j += nt) {
    V w = xv[j];
#pragma unroll
    for (int l = 0; l < kV; ++l) w.v[l] = f(w.v[l]);
    yv[j] = w;
  }
  const int64_t k = head + nv * kV + t;
  if (k < n) yr[k] = f(xr[k]);
}

// ---- ops -----------------------------------------------------------------------------------------
// An op has: In, Out; L (a thread's accumulator) with start() and step(l, v, k) for the element
// at index k of the line; S (a combinable state) with fold(l), identity() and combine(a, b),
// where the result must not depend on which argument holds lower indices; out(s). Ops that
// rewrite the line (softmax) have instead F (per-line coefficients) with prepare(s) and
// write(v, f).
template <class T, class Self, class State>
struct SimpleOp {  // ops whose accumulator is their state
  using In = T;
  using L = State;
  using S = State;
  using F = State;
  ST_HD L start() const { return static_cast<const Self*>(this)->identity(); }
  ST_HD S fold(L l) const { return l; }
};

template <class T>
struct SumOp : SimpleOp<T, SumOp<T>, Wide<T>> {
  using A = Wide<T>;
  using Out = T;
  ST_HD A identity() const { return A(0); }
  ST_HD void step(A& l, T v, int64_t) const { l = A(l + A(v)); }
  ST_HD A combine(A a, A b) const { return A(a + b); }
  ST_HD T out(A s) const { return T(s); }
};

// a product's rounding depends on its order; in double for float32 the difference is far below
// float32 resolution, and wrapping integer products do not depend on it at all
template <class T>
struct ProdOp : SimpleOp<T, ProdOp<T>, Wide<T>> {
  using A = Wide<T>;
  using Out = T;
  ST_HD A identity() const { return A(1); }
  ST_HD void step(A& l, T v, int64_t) const { l = A(l * A(v)); }
  ST_HD A combine(A a, A b) const { return A(a * b); }
  ST_HD T out(A s) const { return T(s); }
};

// NaN wins, as in the CPU's MaxOp/MinOp
template <class T, bool kMax>
struct ExtremeOp : SimpleOp<T, ExtremeOp<T, kMax>, T> {
  using Out = T;
  ST_HD T identity() const { return kMax ? lowest_value<T>() : highest_value<T>(); }
  ST_HD T combine(T a, T b) const {
    return ((kMax ? b > a : b < a) || is_nan(b)) ? b : a;
  }
  ST_HD void step(T& l, T v, int64_t) const { l = combine(l, v); }
  ST_HD T out(T s) const { return s; }
};

template <class T>
struct ArgState {
  T v;
  int64_t i;  // -1: no element yet
};

// the first index of the extreme value, or of the first NaN when there is one
template <class T, bool kMax>
struct ArgOp : SimpleOp<T, ArgOp<T, kMax>, ArgState<T>> {
  using S = ArgState<T>;
  using Out = int64_t;
  ST_HD S identity() const { return S{T(0), -1}; }
  // whether a is the answer over b: any element over none, NaN over numbers, the extreme
  // value, and the lower index between equals
  ST_HD static bool beats(const S& a, const S& b) {
    if (a.i < 0) return false;
    if (b.i < 0) return true;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) return an && (!bn || a.i < b.i);
    if (a.v == b.v) return a.i < b.i;
    return kMax ? a.v > b.v : a.v < b.v;
  }
  ST_HD S combine(S a, S b) const { return beats(b, a) ? b : a; }
  ST_HD void step(S& l, T v, int64_t k) const { l = combine(l, S{v, k}); }
  ST_HD int64_t out(S s) const { return s.i < 0 ? 0 : s.i; }
};

// Variance in double: each thread sums deviations from the first value it sees (so the sums
// stay small), folds them into (count, mean, M2), and states combine by Chan's formula; this
// keeps float32 results at full float32 accuracy whatever the offset, like the CPU's two passes.
struct VarLocal {
  double k, c, s1, s2;
};
struct VarState {
  double c, mean, m2;
};
template <class T>
struct VarOp {
  using In = T;
  using Out = T;
  using L = VarLocal;
  using S = VarState;
  using F = VarState;
  int64_t n;
  double correction;
  ST_HD L start() const { return L{0, 0, 0, 0}; }
  ST_HD void step(L& l, T v, int64_t) const {
    const double x = double(v);
    if (l.c == 0) l.k = x;
    const double d = x - l.k;
    l.c += 1;
    l.s1 += d;
    l.s2 += d * d;
  }
  ST_HD S fold(L l) const {
    if (l.c == 0) return identity();
    double m2 = l.s2 - l.s1 * l.s1 / l.c;
    m2 = m2 < 0 ? 0.0 : m2;  // rounding; NaN stays NaN
    return S{l.c, l.k + l.s1 / l.c, m2};
  }
  ST_HD S identity() const { return S{0, 0, 0}; }
  ST_HD S combine(S a, S b) const {
    if (a.c == 0) return b;
    if (b.c == 0) return a;
    const double c = a.c + b.c, d = b.mean - a.mean;
    return S{c, a.mean + d * (b.c / c), a.m2 + b.m2 + d * d * (a.c * (b.c / c))};
  }
  ST_HD T out(S s) const {
    const double ss = n > 0 ? s.m2 : 0.0;
    const double dof = double(n) - correction;
    // no degrees of freedom: ss / 0, i.e. inf or NaN, as numpy (ss is >= 0 or NaN)
    return T(dof > 0 ? ss / dof : (ss > 0 ? double(INFINITY) : double(NAN)));
  }
};

// Online log-sum-exp: m is the NaN-winning maximum so far and, while m is finite,
// s = sum exp(x - m). Once m is +inf or NaN the result is m whatever follows, and s is 0.
// Terms are float32 exps (st_exp, as on the CPU) summed in double, also as on the CPU, so that
// log_softmax's x - lse rounds the same way. Rescales (when the maximum grows, and in every
// combine) use st_exp too: a double exp there made short-row softmax several times slower.
template <class T>
struct LseState {
  T m;
  double s;
};
template <class T>
ST_HD double rescale(T from, T to) {
  return double(st_exp(T(from - to)));
}
template <class T>
struct LseOp : SimpleOp<T, LseOp<T>, LseState<T>> {
  using S = LseState<T>;
  using Out = T;
  ST_HD S identity() const { return S{T(-INFINITY), 0.0}; }
  ST_HD void step(S& l, T v, int64_t) const {
    if (v > l.m || is_nan(v)) {
      if (!finite(v)) {
        l = S{v, 0.0};
      } else {
        l.s = (finite(l.m) ? l.s * rescale(l.m, v) : 0.0) + 1.0;
        l.m = v;
      }
    } else if (finite(l.m)) {
      l.s += double(st_exp(T(v - l.m)));
    }
  }
  ST_HD S combine(S a, S b) const {
    const T m = (b.m > a.m || is_nan(b.m)) ? b.m : a.m;
    if (!finite(m)) return S{m, 0.0};
    // a finite m is one of the two maxima; the other is finite or -inf (and adds nothing)
    return S{m, (finite(a.m) ? a.s * rescale(a.m, m) : 0.0) +
                    (finite(b.m) ? b.s * rescale(b.m, m) : 0.0)};
  }
  // +inf, -inf (all -inf, or no element) and NaN pass through, as on the CPU
  ST_HD T out(S s) const { return finite(s.m) ? T(s.m + T(log(s.s))) : s.m; }
};

template <class T>
struct SoftmaxCoef {
  T a, b;  // softmax: max and 1/sum; log_softmax: log-sum-exp
  bool ok;  // false when the max is not finite: the CPU's result is then NaN throughout
};
template <class T, bool kLog>
struct SoftmaxOp : LseOp<T> {
  using F = SoftmaxCoef<T>;
  ST_HD F prepare(LseState<T> s) const {
    if (!finite(s.m)) return F{T(0), T(0), false};
    if (kLog) return F{T(s.m + T(log(s.s))), T(0), true};
    return F{s.m, T(1) / T(s.s), true};
  }
  ST_HD T write(T v, const F& f) const {
    if (!f.ok) return T(NAN);
    return kLog ? T(v - f.a) : T(st_exp(v - f.a) * f.b);
  }
};

// A float32 op over float16/bfloat16 elements: each element loaded into float32 as it is read,
// the op's state as in float32 (sums and products in double), a float result rounded once
template <class Tag, class Inner>
struct HalfOp {
  using In = uint16_t;
  using Out = std::conditional_t<std::is_same<typename Inner::Out, float>::value, uint16_t,
                                 typename Inner::Out>;
  using L = typename Inner::L;
  using S = typename Inner::S;
  using F = typename Inner::F;
  Inner inner;
  ST_HD L start() const { return inner.start(); }
  ST_HD void step(L& l, uint16_t v, int64_t k) const { inner.step(l, cast_load<Tag>(v), k); }
  ST_HD S fold(L l) const { return inner.fold(l); }
  ST_HD S identity() const { return inner.identity(); }
  ST_HD S combine(S a, S b) const { return inner.combine(a, b); }
  ST_HD Out out(S s) const {
    if constexpr (std::is_same<Out, uint16_t>::value) return cast_store<Tag>(inner.out(s));
    else return inner.out(s);
  }
};

// ---- kernels ---------------------------------------------------------------------------------------
template <class Op, bool kWrite>
using OutType = typename std::conditional<kWrite, typename Op::In, typename Op::Out>::type;

// inner == 1: a group of kGroup threads per (row, piece); pieces > 1 writes states to partial
template <class Op, int kGroup, bool kWrite, int kBlock = kThreads>
__global__ void __launch_bounds__(kBlock)
    reduce_rows(Op op, const typename Op::In* __restrict__ x, OutType<Op, kWrite>* __restrict__ y,
                typename Op::S* __restrict__ partial, int64_t outer, int64_t n, int64_t pieces) {
  using In = typename Op::In;
  constexpr int kGroups = kBlock / kGroup;
  const int lane = int(threadIdx.x) % kGroup;
  const int64_t tasks = outer * pieces;
  // for whole-block groups the task is the same in every thread, as group_combine's barriers need
  for (int64_t task = int64_t(blockIdx.x) * kGroups + threadIdx.x / kGroup; task < tasks;
       task += int64_t(gridDim.x) * kGroups) {
    const int64_t row = task / pieces, piece = task - row * pieces;
    const In* p = x + row * n;
    typename Op::L l = op.start();
    for_row(p, n, piece * kGroup + lane, pieces * kGroup,
            [&](In v, int64_t k) { op.step(l, v, k); });
    const typename Op::S s = group_combine<kGroup>(op, op.fold(l));
    if (pieces > 1) {
      if (lane == 0) partial[task] = s;
    } else if constexpr (kWrite) {
      const typename Op::F f = op.prepare(s);
      map_row(p, y + row * n, n, lane, kGroup, [&](In v) { return op.write(v, f); });
    } else {
      if (lane == 0) y[row] = op.out(s);
    }
  }
}

// inner > 1: a block of (bx, by) threads per (outer, tile of bx lines, piece); thread (tx, ty)
// steps through k = piece * by + ty, then slices are combined in shared memory
template <class Op, bool kWrite>
__global__ void __launch_bounds__(kThreads)
    reduce_cols(Op op, const typename Op::In* __restrict__ x, OutType<Op, kWrite>* __restrict__ y,
                typename Op::S* __restrict__ partial, int64_t outer, int64_t n, int64_t inner,
                int64_t pieces) {
  using In = typename Op::In;
  using S = typename Op::S;
  __shared__ S sh[kThreads];
  const int bx = int(blockDim.x), by = int(blockDim.y), tx = int(threadIdx.x);
  const int ty = int(threadIdx.y);
  const int64_t tiles = (inner + bx - 1) / bx;
  const int64_t tasks = outer * tiles * pieces;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t piece = task % pieces, rest = task / pieces;
    const int64_t o = rest / tiles, i = (rest % tiles) * bx + tx;
    const bool valid = i < inner;
    const In* line = x + o * n * inner + (valid ? i : 0);
    typename Op::L l = op.start();
    if (valid) {
      // four loads in flight per thread: one 4-byte load at a time cannot cover DRAM latency
      const int64_t step = pieces * by;
      int64_t k = piece * by + ty;
      for (; k + 3 * step < n; k += 4 * step) {
        const In v0 = line[k * inner], v1 = line[(k + step) * inner];
        const In v2 = line[(k + 2 * step) * inner], v3 = line[(k + 3 * step) * inner];
        op.step(l, v0, k);
        op.step(l, v1, k + step);
        op.step(l, v2, k + 2 * step);
        op.step(l, v3, k + 3 * step);
      }
      for (; k < n; k += step) op.step(l, line[k * inner], k);
    }
    S s = op.fold(l);
    if (by > 1) {  // the same for the whole block
      S* slot = sh + ty * bx + tx;
      *slot = s;
      __syncthreads();
      for (int h = by >> 1; h > 0; h >>= 1) {
        if (ty < h) *slot = op.combine(*slot, slot[h * bx]);
        __syncthreads();
      }
      s = sh[tx];
    }
    if (pieces > 1) {
      if (ty == 0 && valid) partial[(o * inner + i) * pieces + piece] = s;
    } else if constexpr (kWrite) {
      if (valid) {
        const typename Op::F f = op.prepare(s);
        In* out = y + o * n * inner + i;
        for (int64_t k = ty; k < n; k += by) out[k * inner] = op.write(line[k * inner], f);
      }
    } else {
      if (ty == 0 && valid) y[o * inner + i] = op.out(s);
    }
    if (by > 1) __syncthreads();  // sh is rewritten by the next task
  }
}

// a warp per line combines its pieces' states; writes the result, or softmax coefficients
template <class Op, bool kCoef, class D>
__global__ void __launch_bounds__(kThreads)
    combine_pieces(Op op, const typename Op::S* __restrict__ partial, D* __restrict__ dst,
                   int64_t lines, int64_t pieces) {
  const int lane = int(threadIdx.x) & 31;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  for (int64_t line = thread_index() / 32; line < lines; line += warps) {
    typename Op::S s = op.identity();
    for (int64_t p = lane; p < pieces; p += 32) s = op.combine(s, partial[line * pieces + p]);
    s = warp_combine(op, s);
    if (lane == 0) {
      if constexpr (kCoef) {
        dst[line] = op.prepare(s);
      } else {
        dst[line] = op.out(s);
      }
    }
  }
}

template <class Op>
__global__ void __launch_bounds__(kThreads)
    write_lines(Op op, const typename Op::In* __restrict__ x, typename Op::In* __restrict__ y,
                const typename Op::F* __restrict__ coef, int64_t total, int64_t n, int64_t inner) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t line = (e / (n * inner)) * inner + e % inner;
    y[e] = op.write(x[e], coef[line]);
  }
}

// Stream-ordered scratch for the pieces' states; nullptr when it cannot be had (the caller then
// does not split, which is slower but needs nothing)
void* scratch(size_t bytes, cudaStream_t s) {
  void* p = nullptr;
  if (cudaMallocAsync(&p, bytes, s) != cudaSuccess) {
    cudaGetLastError();  // not an error of the kernel: it falls back
    return nullptr;
  }
  return p;
}

constexpr int64_t kWarpRowMax = 1024;  // rows up to this long get a warp, longer ones a block
constexpr int64_t kMaxPieces = 1024;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// y = reduction of each line of x (kWrite: y = x rewritten line by line, as softmax)
template <class Op, bool kWrite>
void run(const Op& op, const typename Op::In* x, OutType<Op, kWrite>* y, int64_t outer,
         int64_t n, int64_t inner, void* stream) {
  using S = typename Op::S;
  using F = typename Op::F;
  if (outer <= 0 || inner <= 0 || (kWrite && n <= 0)) return;
  const cudaStream_t s = as_stream(stream);
  const int64_t fill = int64_t(sm_count()) * 8;  // blocks that fill the device
  if (inner == 1 && n <= kWarpRowMax) {
    const int64_t blocks = std::min(ceil_div(outer, kThreads / 32), fill);
    reduce_rows<Op, 32, kWrite><<<unsigned(blocks), kThreads, 0, s>>>(op, x, y, nullptr, outer, n, 1);
    st_cuda_check_launch();
    return;
  }
  int bx = 1;
  while (bx < inner && bx < 32) bx <<= 1;
  int by = kThreads / bx;
  // Short lines (a sum over a batch of a few per-sample gradients): fewer thread rows and wider
  // tiles, about four elements per thread, so that rows of threads do not idle and fewer tiles
  // pay for the fold in shared memory (none with one row).
  while (by > 1 && int64_t(by) * 4 > n && bx < inner) {
    by >>= 1;
    bx <<= 1;
  }
  // groups that work independently before any split, and the fewest elements worth a piece
  const int64_t groups = inner == 1 ? outer : outer * ceil_div(inner, bx);
  const int64_t min_piece = inner == 1 ? int64_t(kThreads) * Vec<typename Op::In>::N * 4 : by * 16;
  int64_t pieces = 1;
  if (groups < fill / 2)
    pieces = std::max<int64_t>(1, std::min({ceil_div(fill, groups), n / min_piece, kMaxPieces}));
  const int64_t lines = outer * inner;
  void* buf = nullptr;
  S* partial = nullptr;
  // the pieces' states, then (softmax) each line's coefficients
  const size_t states = size_t(ceil_div(lines * pieces * int64_t(sizeof(S)), 16) * 16);
  if (pieces > 1) {
    buf = scratch(states + (kWrite ? size_t(lines) * sizeof(F) : 0), s);
    if (buf) {
      partial = static_cast<S*>(buf);
    } else {
      pieces = 1;
    }
  }
  const unsigned blocks = unsigned(std::min(groups * pieces, fill));
  if (kWrite && inner == 1 && pieces == 1) {
    // softmax reads each row twice; 1024-thread blocks keep few enough rows in flight that the
    // second read hits L2 (256-thread blocks measured 1.5 ms for 16384 x 16384 float32)
    constexpr int kBig = 1024;
    reduce_rows<Op, kBig, kWrite, kBig><<<unsigned(std::min(outer, fill / 4)), kBig, 0, s>>>(
        op, x, y, partial, outer, n, pieces);
  } else if (inner == 1) {
    reduce_rows<Op, kThreads, kWrite><<<blocks, kThreads, 0, s>>>(op, x, y, partial, outer, n,
                                                                    pieces);
  } else {
    reduce_cols<Op, kWrite><<<blocks, dim3(unsigned(bx), unsigned(by)), 0, s>>>(
        op, x, y, partial, outer, n, inner, pieces);
  }
  st_cuda_check_launch();
  if (pieces == 1) return;
  const unsigned cblocks = unsigned(std::min(ceil_div(lines, kThreads / 32), fill));
  if constexpr (kWrite) {
    F* coef = reinterpret_cast<F*>(static_cast<char*>(buf) + states);
    combine_pieces<Op, true><<<cblocks, kThreads, 0, s>>>(op, partial, coef, lines, pieces);
    st_cuda_check_launch();
    const int64_t total = lines * n;
    write_lines<Op><<<grid_for(total), kThreads, 0, s>>>(op, x, y, coef, total, n, inner);
  } else {
    combine_pieces<Op, false><<<cblocks, kThreads, 0, s>>>(op, partial, y, lines, pieces);
  }
  st_cuda_check_launch();
  st_cuda_check(cudaFreeAsync(buf, s));
}

// ---- softmax, log_softmax and logsumexp along the last axis (inner == 1) -------------------------
// The online state above pays a second exp whenever a thread's running maximum grows and adds
// every term in double, which made softmax compute bound. Here each row is read once into
// registers (rows up to 128 KiB), so the maximum is known before any exp: every element costs one
// exp in the sum (softmax keeps it and scales it in the output pass), and the row is written from
// the registers. Longer rows take three passes over global memory (max, sum, write), the later
// reads served mostly from L2. The formulas are the CPU's (reduce.cc) term for term: the shift is
// the NaN-winning maximum, or 0 when that is -inf; terms are st_exp(x - shift) summed in T per
// thread, then in double; softmax is term * (1 / T(sum)), log_softmax x - (shift + T(log(sum))),
// so all -inf, +inf and NaN rows give the CPU's NaNs without special cases.
enum LastMode { kSoftmaxMode, kLogSoftmaxMode, kLseMode };

template <class T>
ST_HD T max_nan(T a, T b) {
  return (b > a || is_nan(b)) ? b : a;
}
struct MaxNan {
  template <class T>
  ST_HD T operator()(T a, T b) const {
    return max_nan(a, b);
  }
};
struct Plus {
  ST_HD double operator()(double a, double b) const { return a + b; }
};

// The combination of v over a group of kGroup threads (a power of two: lanes of one warp, or a
// whole block), the same value in every thread. All 32 lanes of every warp must call it (groups
// of fewer than 32 lanes shuffle only among themselves). Blocks go through one shared slot per
// warp; the caller alternates two slot arrays, so the barrier of one combine also orders the
// reads of the other array before its next writes.
template <int kGroup, class A, class F>
__device__ __forceinline__ A group_all(A v, A* slots, F f) {
  constexpr int kLanes = kGroup < 32 ? kGroup : 32;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (kGroup > 32) {
    constexpr int kWarps = kGroup / 32;
    const int lane = int(threadIdx.x) & 31;
    if (lane == 0) slots[threadIdx.x >> 5] = v;
    __syncthreads();
    v = slots[lane % kWarps];  // every run of kWarps lanes holds all the warps' values
#pragma unroll
    for (int o = kWarps / 2; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  } else {
    (void)slots;
  }
  return v;
}

template <class T>
ST_HD T softmax_shift(T m) {  // as the CPU: all -inf rows keep exp(-inf - 0) = 0 rather than NaN
  return m == T(-INFINITY) ? T(0) : m;
}

// what a row's statistics turn into: the logsumexp result
template <class T>
__device__ __forceinline__ T lse_result(T m, double sum) {
  return finite(m) ? T(m + T(log(sum))) : m;  // +inf, -inf and NaN pass through
}

// A group of kGroup threads per row, each holding kVecs 16-byte vectors of it in registers, so a
// row of up to kGroup * kVecs vectors is read once. kVec: 16-byte loads and stores (rows aligned
// and a whole number of vectors), else single elements; either way a warp touches contiguous
// memory at each step. Slots past the row hold -inf: they never win the max and their terms are
// exactly 0 (st_exp is 0 below -104), so only loads and stores need masks.
template <class T, int kMode, int kGroup, int kBlock, int kVecs, bool kVec>
__global__ void __launch_bounds__(kBlock, 1024 / kBlock)
    softmax_cached(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int n) {
  constexpr int kN = Vec<T>::N, kPer = kVecs * kN, kRows = kBlock / kGroup;
  static_assert(kGroup <= 32 || kGroup == kBlock, "a group is part of a warp or a whole block");
  constexpr int kSlots = kGroup > 32 ? kGroup / 32 : 1;
  using V = typename Vec<T>::Type;
  __shared__ T max_slots[kSlots];
  __shared__ double sum_slots[kSlots];
  const int lane = int(threadIdx.x) % kGroup;
  // every thread runs the same number of iterations, as the shuffles and barriers need; a group
  // past the last row has an empty row
  for (int64_t first = int64_t(blockIdx.x) * kRows; first < outer;
       first += int64_t(gridDim.x) * kRows) {
    const int64_t row = first + int64_t(threadIdx.x) / kGroup;
    const int len = row < outer ? n : 0;
    const int64_t base = (row < outer ? row : 0) * int64_t(n);
    T v[kPer];
    if constexpr (kVec) {
      const V* xv = reinterpret_cast<const V*>(x + base);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        const int q = j * kGroup + lane;
        V w;
        if (q * kN < len) {
          w = xv[q];
        } else {
#pragma unroll
          for (int l = 0; l < kN; ++l) w.v[l] = T(-INFINITY);
        }
#pragma unroll
        for (int l = 0; l < kN; ++l) v[j * kN + l] = w.v[l];
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int k = i * kGroup + lane;
        v[i] = k < len ? x[base + k] : T(-INFINITY);
      }
    }
    T mt = T(-INFINITY);
#pragma unroll
    for (int i = 0; i < kPer; ++i) mt = max_nan(mt, v[i]);
    const T m = group_all<kGroup>(mt, max_slots, MaxNan{});
    // logsumexp returns a non-finite max as it is; its terms are then unused
    const T shift = kMode == kLseMode ? (finite(m) ? m : T(0)) : softmax_shift(m);
    T part = T(0);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const T e = st_exp(T(v[i] - shift));
      if constexpr (kMode == kSoftmaxMode) v[i] = e;
      part += e;
    }
    const double sum = group_all<kGroup>(double(part), sum_slots, Plus{});
    if constexpr (kMode == kLseMode) {
      if (lane == 0 && row < outer) y[row] = lse_result(m, sum);  // n == 0: -inf, as the CPU
    } else {
      if constexpr (kMode == kSoftmaxMode) {
        const T inv = T(1) / T(sum);
#pragma unroll
        for (int i = 0; i < kPer; ++i) v[i] = T(v[i] * inv);
      } else {
        const T lse = T(shift + T(log(sum)));
#pragma unroll
        for (int i = 0; i < kPer; ++i) v[i] = T(v[i] - lse);
      }
      if constexpr (kVec) {
        V* yv = reinterpret_cast<V*>(y + base);
#pragma unroll
        for (int j = 0; j < kVecs; ++j) {
          const int q = j * kGroup + lane;
          if (q * kN < len) {
            V w;
#pragma unroll
            for (int l = 0; l < kN; ++l) w.v[l] = v[j * kN + l];
            yv[q] = w;
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int k = i * kGroup + lane;
          if (k < len) y[base + k] = v[i];
        }
      }
    }
  }
}

// rows too long for registers: a block per row and three passes over it (max, sum, write);
// 1024-thread blocks (one per SM at up to 64 registers) keep the rows in flight few enough for
// the second and third reads to hit L2
constexpr int kLongBlock = 1024;
template <class T, int kMode>
__global__ void __launch_bounds__(kLongBlock)
    softmax_three_pass(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n) {
  __shared__ T max_slots[kLongBlock / 32];
  __shared__ double sum_slots[kLongBlock / 32];
  const int64_t t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const T* p = x + row * n;
    T mt = T(-INFINITY);
    for_row(p, n, t, kLongBlock, [&](T v, int64_t) { mt = max_nan(mt, v); });
    const T m = group_all<kLongBlock>(mt, max_slots, MaxNan{});
    const T shift = kMode == kLseMode ? (finite(m) ? m : T(0)) : softmax_shift(m);
    double part = 0;  // long rows: a thread may hold thousands of terms
    for_row(p, n, t, kLongBlock, [&](T v, int64_t) { part += double(st_exp(T(v - shift))); });
    const double sum = group_all<kLongBlock>(part, sum_slots, Plus{});
    if constexpr (kMode == kLseMode) {
      if (t == 0) y[row] = lse_result(m, sum);
    } else if constexpr (kMode == kSoftmaxMode) {
      const T inv = T(1) / T(sum);
      map_row(p, y + row * n, n, t, kLongBlock,
              [&](T v) { return T(st_exp(T(v - shift)) * inv); });
    } else {
      const T lse = T(shift + T(log(sum)));
      map_row(p, y + row * n, n, t, kLongBlock, [&](T v) { return T(v - lse); });
    }
  }
}

// launches softmax_cached<..., kGroup, kBlock, kVecs> when a row fits it
template <class T, int kMode, int kGroup, int kBlock, int kVecs>
bool launch_cached(const T* x, T* y, int64_t outer, int64_t n, cudaStream_t s) {
  constexpr int kN = Vec<T>::N;
  if (n > int64_t(kGroup) * kVecs * kN) return false;
  const int64_t blocks = std::min(ceil_div(outer, kBlock / kGroup),
                                  int64_t(sm_count()) * (2048 / kBlock));
  // logsumexp writes single elements, so only x's alignment matters
  const bool vec = n % kN == 0 && aligned16(x) && (kMode == kLseMode || aligned16(y));
  if (vec) {
    softmax_cached<T, kMode, kGroup, kBlock, kVecs, true>
        <<<unsigned(blocks), kBlock, 0, s>>>(x, y, outer, int(n));
  } else {
    softmax_cached<T, kMode, kGroup, kBlock, kVecs, false>
        <<<unsigned(blocks), kBlock, 0, s>>>(x, y, outer, int(n));
  }
  st_cuda_check_launch();
  return true;
}

template <class T, int kMode>
using SoftmaxFamilyOp = typename std::conditional<
    kMode == kLseMode, LseOp<T>, SoftmaxOp<T, kMode == kLogSoftmaxMode>>::type;

// softmax (kSoftmaxMode, kLogSoftmaxMode: y shaped as x) or logsumexp (y: one value per line)
// over the middle axis of [outer, n, inner]
template <class T, int kMode>
void softmax_family(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, void* stream) {
  constexpr bool kWrite = kMode != kLseMode;
  using Op = SoftmaxFamilyOp<T, kMode>;
  if (inner != 1) {
    run<Op, kWrite>(Op{}, x, y, outer, n, inner, stream);
    return;
  }
  if (outer <= 0 || (kWrite && n <= 0)) return;
  const cudaStream_t s = as_stream(stream);
  // the smallest group whose registers hold the row: 8 lanes, a warp, then whole blocks, with
  // at most 8 vectors (32 registers) a thread so that 1024 threads fit an SM
  if (launch_cached<T, kMode, 8, 256, 1>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 32, 256, 2>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 32, 256, 8>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 128, 128, 4>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 128, 128, 8>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 256, 256, 8>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 512, 512, 8>(x, y, outer, n, s) ||
      launch_cached<T, kMode, 1024, 1024, 8>(x, y, outer, n, s))
    return;
  // few long rows would leave most SMs idle with a block per row: run() splits each row into
  // pieces instead (the online state, combined across pieces)
  if (outer < int64_t(sm_count()) * 4) {
    run<Op, kWrite>(Op{}, x, y, outer, n, inner, stream);
    return;
  }
  const unsigned blocks = unsigned(std::min(outer, int64_t(sm_count())));
  softmax_three_pass<T, kMode><<<blocks, kLongBlock, 0, s>>>(x, y, outer, n);
  st_cuda_check_launch();
}

// ---- scans ----------------------------------------------------------------------------------------
// Integers scan wrapping (Wrap, dtypes.h), as on the CPU.
template <class A, bool kProd>
__device__ __forceinline__ A scan_op(A a, A b) {
  return kProd ? A(a * b) : A(a + b);
}

// inner == 1: a warp per row, 32 elements per step (a shuffle scan plus the carry)
template <class T, bool kProd>
__global__ void __launch_bounds__(kThreads)
    scan_rows(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n) {
  using A = Wrap<T>;
  const int lane = int(threadIdx.x) & 31;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  for (int64_t row = thread_index() / 32; row < outer; row += warps) {
    const T* p = x + row * n;
    T* q = y + row * n;
    A carry = A(kProd ? 1 : 0);
    for (int64_t b = 0; b < n; b += 32) {
      const int64_t k = b + lane;
      A v = k < n ? A(p[k]) : A(kProd ? 1 : 0);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const A u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v = scan_op<A, kProd>(u, v);
      }
      const A r = scan_op<A, kProd>(carry, v);
      if (k < n) q[k] = T(r);
      carry = __shfl_sync(0xffffffffu, r, 31);
    }
  }
}

// inner > 1: a thread per line, in order; adjacent threads walk adjacent lines (coalesced)
template <class T, bool kProd>
__global__ void __launch_bounds__(kThreads)
    scan_cols(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n, int64_t inner) {
  using A = Wrap<T>;
  const int64_t lines = outer * inner;
  for (int64_t j = thread_index(); j < lines; j += thread_count()) {
    const int64_t off = (j / inner) * n * inner + j % inner;
    A a = A(kProd ? 1 : 0);
    for (int64_t k = 0; k < n; ++k) {
      a = scan_op<A, kProd>(a, A(x[off + k * inner]));
      y[off + k * inner] = T(a);
    }
  }
}

template <class T, bool kProd>
void scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, void* stream) {
  if (outer <= 0 || n <= 0 || inner <= 0) return;
  const cudaStream_t s = as_stream(stream);
  if (inner == 1) {
    scan_rows<T, kProd><<<grid_for(outer, kThreads / 32), kThreads, 0, s>>>(x, y, outer, n);
  } else {
    scan_cols<T, kProd><<<grid_for(outer * inner), kThreads, 0, s>>>(x, y, outer, n, inner);
  }
  st_cuda_check_launch();
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {

#define ST_CU_OP_sum(T) st::cuda::SumOp<T>
#define ST_CU_OP_prod(T) st::cuda::ProdOp<T>
#define ST_CU_OP_max(T) st::cuda::ExtremeOp<T, true>
#define ST_CU_OP_min(T) st::cuda::ExtremeOp<T, false>
#define ST_CU_OP_argmax(T) st::cuda::ArgOp<T, true>
#define ST_CU_OP_argmin(T) st::cuda::ArgOp<T, false>
#define ST_CU_MODE_softmax st::cuda::kSoftmaxMode
#define ST_CU_MODE_log_softmax st::cuda::kLogSoftmaxMode

#define ST_CU_REDUCE(op, sfx, T)                                                                \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,              \
                       void* stream) {                                                         \
    st::cuda::run<ST_CU_OP_##op(T), false>(ST_CU_OP_##op(T){}, x, y, outer, n, inner, stream); \
  }
#define ST_CU_REDUCE_T(sfx, T, _) ST_REDUCE_OPS(ST_CU_REDUCE, sfx, T)
ST_ALL_TYPES(ST_CU_REDUCE_T, _)

#define ST_CU_ARG(op, sfx, T)                                                                   \
  void st_##op##_##sfx(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,        \
                       void* stream) {                                                         \
    st::cuda::run<ST_CU_OP_##op(T), false>(ST_CU_OP_##op(T){}, x, y, outer, n, inner, stream); \
  }
#define ST_CU_ARG_T(sfx, T, _) ST_ARG_REDUCE_OPS(ST_CU_ARG, sfx, T)
ST_ALL_TYPES(ST_CU_ARG_T, _)

#define ST_CU_SOFTMAX(op, sfx, T)                                                              \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,             \
                       void* stream) {                                                        \
    st::cuda::softmax_family<T, ST_CU_MODE_##op>(x, y, outer, n, inner, stream);             \
  }
#define ST_CU_SOFTMAX_T(sfx, T, _) ST_SCAN_FLOAT_OPS(ST_CU_SOFTMAX, sfx, T)
ST_FLOAT_TYPES(ST_CU_SOFTMAX_T, _)

#define ST_CU_PROD_cumsum false
#define ST_CU_PROD_cumprod true
#define ST_CU_SCAN(op, sfx, T)                                                     \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, \
                       void* stream) {                                            \
    st::cuda::scan<T, ST_CU_PROD_##op>(x, y, outer, n, inner, stream);             \
  }
#define ST_CU_SCAN_T(sfx, T, _) ST_SCAN_OPS(ST_CU_SCAN, sfx, T)
ST_NUM_TYPES(ST_CU_SCAN_T, _)

#define ST_CU_FLOAT_REDUCE(sfx, T, _)                                                           \
  void st_logsumexp_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,           \
                          void* stream) {                                                      \
    st::cuda::softmax_family<T, st::cuda::kLseMode>(x, y, outer, n, inner, stream);            \
  }                                                                                            \
  void st_var_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,                 \
                    double correction, void* stream) {                                         \
    st::cuda::run<st::cuda::VarOp<T>, false>(st::cuda::VarOp<T>{n, correction}, x, y, outer,   \
                                             n, inner, stream);                                \
  }
ST_FLOAT_TYPES(ST_CU_FLOAT_REDUCE, _)

}  // extern "C"

// ---- float16 / bfloat16 ---------------------------------------------------------------------------
// Reductions and variance load the 16-bit elements directly (HalfOp); softmax, log_softmax,
// logsumexp and the scans go through float32 scratch (half.cuh).
#include "half.cuh"

extern "C" {

// CALL (a float32 kernel reading xf_.p, writing yf_.p) on a widened copy of x, its ny results
// rounded into y
#define ST_CUDA_HALF_LINES(sfx, ny, CALL)                                                          \
  const int64_t nx_ = outer * n * inner, ny_ = (ny);                                               \
  st::cuda::Widened<ST_TAG_##sfx> xf_(x, nx_, stream);                                             \
  st::cuda::FloatScratch yf_(ny_, stream);                                                         \
  if (!xf_.ok() || !yf_.ok()) return;                                                              \
  CALL;                                                                                            \
  st::cuda::narrow<ST_TAG_##sfx>(yf_.p, y, ny_, stream);

// sums, products, extremes, arg-reductions and variance read the 16-bit elements directly
#define ST_CUDA_HALF_OP(op, sfx) st::cuda::HalfOp<ST_TAG_##sfx, ST_CU_OP_##op(float)>
#define ST_CUDA_DEF_REDUCE_HALF(op, sfx, T)                                                        \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,                  \
                       void* stream) {                                                             \
    st::cuda::run<ST_CUDA_HALF_OP(op, sfx), false>(ST_CUDA_HALF_OP(op, sfx){}, x, y, outer, n,     \
                                                   inner, stream);                                 \
  }
#define ST_CUDA_DEF_REDUCE_HALF_T(sfx, T, _) ST_REDUCE_OPS(ST_CUDA_DEF_REDUCE_HALF, sfx, T)
ST_HALF_TYPES(ST_CUDA_DEF_REDUCE_HALF_T, _)

#define ST_CUDA_DEF_SHAPED_HALF(op, sfx, T)                                                        \
  void st_##op##_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,                  \
                       void* stream) {                                                             \
    ST_CUDA_HALF_LINES(sfx, outer * n * inner,                                                     \
                       st_##op##_f32(xf_.p, yf_.p, outer, n, inner, stream))                       \
  }
#define ST_CUDA_DEF_SCAN_FLOAT_HALF_T(sfx, T, _) \
  ST_SCAN_FLOAT_OPS(ST_CUDA_DEF_SHAPED_HALF, sfx, T)
ST_HALF_TYPES(ST_CUDA_DEF_SCAN_FLOAT_HALF_T, _)
#define ST_CUDA_DEF_SCAN_HALF_T(sfx, T, _) ST_SCAN_OPS(ST_CUDA_DEF_SHAPED_HALF, sfx, T)
ST_HALF_TYPES(ST_CUDA_DEF_SCAN_HALF_T, _)

#define ST_CUDA_DEF_ARG_HALF(op, sfx, T)                                                           \
  void st_##op##_##sfx(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,            \
                       void* stream) {                                                             \
    st::cuda::run<ST_CUDA_HALF_OP(op, sfx), false>(ST_CUDA_HALF_OP(op, sfx){}, x, y, outer, n,     \
                                                   inner, stream);                                 \
  }
#define ST_CUDA_DEF_ARG_HALF_T(sfx, T, _) ST_ARG_REDUCE_OPS(ST_CUDA_DEF_ARG_HALF, sfx, T)
ST_HALF_TYPES(ST_CUDA_DEF_ARG_HALF_T, _)

#define ST_CUDA_DEF_FLOAT_REDUCE_HALF(sfx, T, _)                                                   \
  void st_logsumexp_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,               \
                          void* stream) {                                                          \
    ST_CUDA_HALF_LINES(sfx, outer * inner,                                                         \
                       st_logsumexp_f32(xf_.p, yf_.p, outer, n, inner, stream))                    \
  }                                                                                                \
  void st_var_##sfx(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, double corr,        \
                    void* stream) {                                                                \
    using Op = st::cuda::HalfOp<ST_TAG_##sfx, st::cuda::VarOp<float>>;                             \
    st::cuda::run<Op, false>(Op{st::cuda::VarOp<float>{n, corr}}, x, y, outer, n, inner, stream);  \
  }
ST_HALF_TYPES(ST_CUDA_DEF_FLOAT_REDUCE_HALF, _)

}  // extern "C"
