// Softmax cross entropy with class-index targets, fused; the CUDA twin of cpp/src/loss.cc. Each
// row belongs to one warp (short rows) or one block (long rows): a reduction finds the row
// maximum, one sums the exponentials, and the loss needs only the target's logit and (with
// label smoothing) the weighted sum of the logits, so log-probabilities are never stored.
#include <cmath>

#include "common.cuh"

namespace st {
namespace {

// The CPU's running maximum: NaN wins, whichever order the values arrive in.
struct MaxNan {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return (b > a || is_nan(b)) ? b : a;
  }
};

// The threads that share one row: a warp (kWarp) or the whole block. Reductions hand every
// thread the same bits (the butterfly adds the same pairs on every lane), so branches on their
// results stay uniform across the group.
template <bool kWarp>
struct RowGroup {
  static constexpr int kRowsPerBlock = kWarp ? cuda::kThreads / 32 : 1;

  __device__ int64_t lane() const { return kWarp ? threadIdx.x & 31 : threadIdx.x; }
  __device__ int64_t size() const { return kWarp ? 32 : blockDim.x; }
  __device__ int64_t first_row() const {
    return int64_t(blockIdx.x) * kRowsPerBlock + (kWarp ? threadIdx.x >> 5 : 0);
  }
  __device__ int64_t row_stride() const { return int64_t(gridDim.x) * kRowsPerBlock; }

  template <class T, class Op>
  __device__ T reduce(T v, Op op, T identity) const {
    if constexpr (kWarp)
      return cuda::warp_reduce(v, op);
    else
      return cuda::block_reduce(v, op, identity);
  }
};

// rows up to this long go to one warp each
constexpr int64_t kWarpRowMax = 1024;

template <class T, bool kWarp>
__global__ void xent_kernel(const T* __restrict__ x, const int64_t* __restrict__ target,
                            const T* __restrict__ w, T* __restrict__ loss, T* __restrict__ lse,
                            int64_t rows, int64_t c, int64_t ignore, T keep, T per, bool smooth) {
  const RowGroup<kWarp> grp;
  const T inf = T(INFINITY);
  for (int64_t r = grp.first_row(); r < rows; r += grp.row_stride()) {
    const T* xr = x + r * c;
    T mx = -inf;
    for (int64_t j = grp.lane(); j < c; j += grp.size()) mx = MaxNan{}(mx, xr[j]);
    mx = grp.reduce(mx, MaxNan{}, -inf);
    T l = mx == inf ? mx - mx : mx;  // a +inf logit: NaN, as in PyTorch's log_softmax
    if (!is_nan(mx) && mx != inf) {
      const T shift = mx == -inf ? T(0) : mx;  // all -inf: the sum is 0 and lse -inf, not NaN
      T s = T(0);
      for (int64_t j = grp.lane(); j < c; j += grp.size()) s += st_exp(xr[j] - shift);
      l = shift + st_log(grp.reduce(s, fn::add{}, T(0)));
    }
    const int64_t t = target[r];
    const bool lead = grp.lane() == 0;
    if (lead) lse[r] = l;
    if (t == ignore) {
      if (lead) loss[r] = T(0);
      continue;
    }
    const T wt = w ? w[t] : T(1);
    T out = keep * wt * (l - xr[t]);
    if (smooth) {
      T wx = T(0), ws = T(0);  // sum_j w_j x_j and sum_j w_j
      for (int64_t j = grp.lane(); j < c; j += grp.size()) {
        const T wj = w ? w[j] : T(1);
        wx += wj * xr[j];
        ws += wj;
      }
      wx = grp.reduce(wx, fn::add{}, T(0));
      const T wsum = w ? grp.reduce(ws, fn::add{}, T(0)) : T(c);
      out += per * (wsum * l - wx);
    }
    if (lead) loss[r] = out;
  }
}

template <class T, bool kWarp>
__global__ void xent_backward_kernel(const T* __restrict__ x, const int64_t* __restrict__ target,
                                     const T* __restrict__ w, const T* __restrict__ lse,
                                     const T* __restrict__ dloss, T* __restrict__ dx, int64_t rows,
                                     int64_t c, int64_t ignore, T keep, T per) {
  const RowGroup<kWarp> grp;
  for (int64_t r = grp.first_row(); r < rows; r += grp.row_stride()) {
    const T* xr = x + r * c;
    T* o = dx + r * c;
    const int64_t t = target[r];
    if (t == ignore) {
      for (int64_t j = grp.lane(); j < c; j += grp.size()) o[j] = T(0);
      continue;
    }
    const T d = dloss[r], l = lse[r];
    const T wt = w ? w[t] : T(1);
    // the class-weight total only matters with smoothing; without, per * wsum is 0 either way
    T wsum = w ? T(0) : T(c);
    if (w && per != T(0)) {
      T ws = T(0);
      for (int64_t j = grp.lane(); j < c; j += grp.size()) ws += w[j];
      wsum = grp.reduce(ws, fn::add{}, T(0));
    }
    const T a = d * (keep * wt + per * wsum), b = d * per, dt = d * keep * wt;
    for (int64_t j = grp.lane(); j < c; j += grp.size()) {
      T v = a * st_exp(xr[j] - l) - (w ? b * w[j] : b);
      if (j == t) v -= dt;
      o[j] = v;
    }
  }
}

template <bool kWarp>
unsigned row_blocks(int64_t rows) {
  return cuda::grid_for(rows, RowGroup<kWarp>::kRowsPerBlock);
}

template <class T>
void xent(const T* x, const int64_t* target, const T* w, T* loss, T* lse, int64_t rows, int64_t c,
          int64_t ignore, double smoothing, void* stream) {
  if (rows <= 0 || c <= 0) return;
  const T keep = T(1 - smoothing), per = T(smoothing / double(c));
  const bool smooth = T(smoothing) != T(0);
  cudaStream_t s = cuda::as_stream(stream);
  if (c <= kWarpRowMax)
    xent_kernel<T, true><<<row_blocks<true>(rows), cuda::kThreads, 0, s>>>(
        x, target, w, loss, lse, rows, c, ignore, keep, per, smooth);
  else
    xent_kernel<T, false><<<row_blocks<false>(rows), cuda::kThreads, 0, s>>>(
        x, target, w, loss, lse, rows, c, ignore, keep, per, smooth);
  st_cuda_check_launch();
}

template <class T>
void xent_backward(const T* x, const int64_t* target, const T* w, const T* lse, const T* dloss,
                   T* dx, int64_t rows, int64_t c, int64_t ignore, double smoothing,
                   void* stream) {
  if (rows <= 0 || c <= 0) return;
  const T keep = T(1 - smoothing), per = T(smoothing / double(c));
  cudaStream_t s = cuda::as_stream(stream);
  if (c <= kWarpRowMax)
    xent_backward_kernel<T, true><<<row_blocks<true>(rows), cuda::kThreads, 0, s>>>(
        x, target, w, lse, dloss, dx, rows, c, ignore, keep, per);
  else
    xent_backward_kernel<T, false><<<row_blocks<false>(rows), cuda::kThreads, 0, s>>>(
        x, target, w, lse, dloss, dx, rows, c, ignore, keep, per);
  st_cuda_check_launch();
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_XENT(sfx, T, _)                                                            \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, T* loss,      \
                             T* lse, int64_t rows, int64_t c, int64_t ignore_index,            \
                             double smoothing, void* stream) {                                 \
    st::xent(x, target, weight, loss, lse, rows, c, ignore_index, smoothing, stream);          \
  }                                                                                            \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const T* lse, const T* dloss, T* dx, int64_t rows,       \
                                      int64_t c, int64_t ignore_index, double smoothing,       \
                                      void* stream) {                                          \
    st::xent_backward(x, target, weight, lse, dloss, dx, rows, c, ignore_index, smoothing,     \
                      stream);                                                                 \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_XENT, _)
}

// float16 / bfloat16 logits through float32 scratch (half.cuh); loss, lse and dloss are
// float32 as on the CPU, dx is rounded once
#include "half.cuh"

extern "C" {
#define ST_CUDA_DEF_XENT_HALF(sfx, T, _)                                                       \
  void st_softmax_xent_##sfx(const T* x, const int64_t* target, const T* weight, float* loss,  \
                             float* lse, int64_t rows, int64_t c, int64_t ignore_index,        \
                             double smoothing, void* stream) {                                 \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, rows * c, stream), wf(weight, c, stream);            \
    if (!xf.ok() || !wf.ok()) return;                                                          \
    st::xent<float>(xf.p, target, wf.p, loss, lse, rows, c, ignore_index, smoothing, stream);  \
  }                                                                                            \
  void st_softmax_xent_backward_##sfx(const T* x, const int64_t* target, const T* weight,      \
                                      const float* lse, const float* dloss, T* dx,             \
                                      int64_t rows, int64_t c, int64_t ignore_index,           \
                                      double smoothing, void* stream) {                        \
    st::cuda::Widened<ST_TAG_##sfx> xf(x, rows * c, stream), wf(weight, c, stream);            \
    st::cuda::FloatScratch df(rows * c, stream);                                               \
    if (!xf.ok() || !wf.ok() || !df.ok()) return;                                              \
    st::xent_backward<float>(xf.p, target, wf.p, lse, dloss, df.p, rows, c, ignore_index,      \
                             smoothing, stream);                                               \
    st::cuda::narrow<ST_TAG_##sfx>(df.p, dx, rows * c, stream);                                \
  }
ST_HALF_TYPES(ST_CUDA_DEF_XENT_HALF, _)
}
