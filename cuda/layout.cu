// Layout kernels: strided copies, dtype conversion and ranges (the twins of cpp/src/layout.cc).
#include <limits>
#include <type_traits>

#include "common.cuh"

namespace st {
namespace cuda {
namespace {

// ---- copy: y = x, both strided ------------------------------------------------------------------
// one merged dim: a run with a stride per side (a zero source stride is a fill)
template <class T>
__global__ void copy_1d_kernel(const T* x, T* y, int64_t n, int64_t sx, int64_t sy) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) y[i * sy] = x[i * sx];
}

template <class I, class T>
__global__ void copy_strided_kernel(const T* x, T* y, StridedIndexer<2> it) {
  for (int64_t i = thread_index(); i < it.numel; i += thread_count()) {
    int64_t off[2];
    it.offsets<I>(I(i), off);
    y[off[0]] = x[off[1]];
  }
}

template <class T>
void copy(const T* x, T* y, int ndim, const int64_t* shape, const int64_t* sx, const int64_t* sy,
          void* stream) {
  const int64_t* strides[2] = {sy, sx};
  StridedIndexer<2> it(ndim, shape, strides);
  const int64_t n = it.numel;
  if (n <= 0) return;
  if (it.nd == 1 && it.stride[0][0] == 1 && it.stride[1][0] == 1) {
    // the copy engine's memcpy outruns any kernel on dense data
    st_cuda_check(cudaMemcpyAsync(y, x, size_t(n) * sizeof(T), cudaMemcpyDeviceToDevice,
                                  as_stream(stream)));
  } else if (it.nd == 1) {
    launch_1d(copy_1d_kernel<T>, n, stream, x, y, n, it.stride[1][0], it.stride[0][0]);
  } else if (n <= int64_t(UINT32_MAX)) {
    launch_1d(copy_strided_kernel<uint32_t, T>, n, stream, x, y, it);
  } else {
    launch_1d(copy_strided_kernel<int64_t, T>, n, stream, x, y, it);
  }
}

// ---- cast -----------------------------------------------------------------------------------
// The conversion rules (convert, cast_load, cast_store) are functors.h's, shared with the CPU.
template <class SrcTag, class DstTag>
__global__ void cast_kernel(const typename CastStorage<SrcTag>::type* x,
                            typename CastStorage<DstTag>::type* y, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    y[i] = cast_store<DstTag>(cast_load<SrcTag>(x[i]));
}

template <class SrcTag, class DstTag>
void cast(const typename CastStorage<SrcTag>::type* x, typename CastStorage<DstTag>::type* y,
          int64_t n, void* stream) {
  // same-type casts run the kernel too: the CPU normalises bools and NaN payloads on the way
  launch_1d(cast_kernel<SrcTag, DstTag>, n, stream, x, y, n);
}

// ---- arange ---------------------------------------------------------------------------------
// start + i * step as one fused multiply-add: the CPU build contracts it the same way (GCC with
// FMA enabled), so both backends round once and agree bit for bit
template <class T>
__global__ void arange_kernel(T* y, int64_t n, double start, double step) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    y[i] = T(__fma_rn(double(i), step, start));
}

// the 16-bit floats: st_arange_f32's values rounded once
template <class Tag>
__global__ void arange_low_kernel(uint16_t* y, int64_t n, double start, double step) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    y[i] = cast_store<Tag>(float(__fma_rn(double(i), step, start)));
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {

#define ST_DEF_COPY(sfx, T, _)                                                              \
  void st_copy_##sfx(const void* x, void* y, int32_t ndim, const int64_t* shape,              \
                     const int64_t* sx, const int64_t* sy, void* stream) {                   \
    st::cuda::copy<T>(static_cast<const T*>(x), static_cast<T*>(y), ndim, shape, sx, sy,      \
                      stream);                                                               \
  }
ST_WIDTH_TYPES(ST_DEF_COPY, _)

#define ST_DEF_CAST_TO(dsfx, D, ssfx, S)                                         \
  void st_cast_##ssfx##_##dsfx(const S* x, D* y, int64_t n, void* stream) {      \
    st::cuda::cast<ST_TAG_##ssfx, ST_TAG_##dsfx>(x, y, n, stream);               \
  }
#define ST_DEF_CAST_FROM(ssfx, S, _) ST_CAST_TYPES_INNER(ST_DEF_CAST_TO, ssfx, S)
ST_CAST_TYPES(ST_DEF_CAST_FROM, _)

#define ST_DEF_ARANGE(sfx, T, _)                                                  \
  void st_arange_##sfx(T* y, int64_t n, double start, double step, void* stream) { \
    st::cuda::launch_1d(st::cuda::arange_kernel<T>, n, stream, y, n, start, step);  \
  }
ST_NUM_TYPES(ST_DEF_ARANGE, _)
#define ST_DEF_ARANGE_LOW(sfx, T, _)                                                       \
  void st_arange_##sfx(T* y, int64_t n, double start, double step, void* stream) {         \
    st::cuda::launch_1d(st::cuda::arange_low_kernel<ST_TAG_##sfx>, n, stream, y, n, start,  \
                        step);                                                             \
  }
ST_HALF_TYPES(ST_DEF_ARANGE_LOW, _)

}  // extern "C"
