// The float16/bfloat16 forms of the CUDA kernels that are not written for 16-bit loads yet
// (reductions, scans, sorts, pooling indices, cross entropy): the input is widened into
// stream-ordered float32 scratch by st_cast, the float32 kernel runs on it (accumulating in
// float32 or wider), and each result is rounded to the 16-bit format once by st_cast back.
// The results are those of the CPU's half.h chunks; the cost is the scratch's extra traffic.
#ifndef SINGA_TENSOR_CUDA_HALF_CUH_
#define SINGA_TENSOR_CUDA_HALF_CUH_

#include "common.cuh"

namespace st {
namespace cuda {

template <class Tag>
inline void widen(const uint16_t* x, float* y, int64_t n, void* stream) {
  if constexpr (std::is_same<Tag, BF16>::value) st_cast_bf16_f32(x, y, n, stream);
  else st_cast_f16_f32(x, y, n, stream);
}
template <class Tag>
inline void narrow(const float* x, uint16_t* y, int64_t n, void* stream) {
  if constexpr (std::is_same<Tag, BF16>::value) st_cast_f32_bf16(x, y, n, stream);
  else st_cast_f32_f16(x, y, n, stream);
}

// n floats of stream-ordered device scratch, freed in stream order; ok() is false (and the
// error recorded for Python) when the allocation failed
struct FloatScratch {
  float* p = nullptr;
  cudaStream_t s;
  bool good = true;
  FloatScratch(int64_t n, void* stream) : s(as_stream(stream)) {
    if (n > 0)
      good = st_cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&p), size_t(n) * 4, s));
  }
  ~FloatScratch() {
    if (p) st_cuda_check(cudaFreeAsync(p, s));
  }
  FloatScratch(const FloatScratch&) = delete;
  FloatScratch& operator=(const FloatScratch&) = delete;
  bool ok() const { return good; }
};

// a float32 copy of x's n elements (empty when x is null), for inputs such as weights
template <class Tag>
struct Widened : FloatScratch {
  Widened(const uint16_t* x, int64_t n, void* stream) : FloatScratch(x ? n : 0, stream) {
    if (x && ok()) widen<Tag>(x, p, n, stream);
  }
};

}  // namespace cuda
}  // namespace st

#endif  // SINGA_TENSOR_CUDA_HALF_CUH_
