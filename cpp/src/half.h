// The float16/bfloat16 forms of kernels whose lines are independent (reductions, scans, sorts,
// pooling indices, cross entropy rows): a cache-sized chunk of whole lines is loaded into
// float32 (the vectorised st_cast of layout.cc: a shift for bfloat16, F16C for float16), the
// float32 kernel runs on it, accumulating in float32 or wider, and each result is rounded to
// the 16-bit format once when stored. Memory holds only the chunk, never a float32 copy of the
// tensor, unless one outer slice ([n, inner], or a row) is larger than a chunk: such slices are
// copied one at a time (sums, products, max and min of them read their tiles directly instead,
// see reduce.cc).
#ifndef SINGA_TENSOR_CPU_HALF_H_
#define SINGA_TENSOR_CPU_HALF_H_

#include <vector>

#include "common.h"

namespace st {

template <class Tag>
inline void widen(const uint16_t* x, float* y, int64_t n) {
  if constexpr (std::is_same<Tag, BF16>::value) st_cast_bf16_f32(x, y, n);
  else st_cast_f16_f32(x, y, n);
}
template <class Tag>
inline void narrow(const float* x, uint16_t* y, int64_t n) {
  if constexpr (std::is_same<Tag, BF16>::value) st_cast_f32_bf16(x, y, n);
  else st_cast_f32_f16(x, y, n);
}

// elements per chunk: two float32 chunks (input and output) stay in a core's L2
constexpr int64_t kHalfChunk = 1 << 14;

// fn(xf, first, count) for consecutive groups of the `outer` slabs of x (slab elements each),
// xf holding the group in float32; groups run in parallel, or one slab at a time (the kernel
// then parallel inside) when slabs are large.
template <class Tag, class F>
void by_float_slabs(const uint16_t* x, int64_t outer, int64_t slab, F&& fn) {
  if (outer <= 0) return;
  if (slab == 0) {  // empty lines: the kernel only writes its identities
    float none = 0;
    fn(static_cast<const float*>(&none), int64_t(0), outer);
    return;
  }
  if (slab >= kHalfChunk / 2 || outer == 1) {
    std::vector<float> buf(static_cast<size_t>(slab));
    for (int64_t o = 0; o < outer; ++o) {
      widen<Tag>(x + o * slab, buf.data(), slab);
      fn(static_cast<const float*>(buf.data()), o, int64_t(1));
    }
    return;
  }
  const int64_t per = kHalfChunk / slab;
  const int64_t groups = (outer + per - 1) / per;
  parallel_for(groups, per * slab, [&](int64_t gb, int64_t ge) {
    std::vector<float> buf(size_t(per * slab));
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t o0 = g * per, cnt = std::min(per, outer - o0);
      widen<Tag>(x + o0 * slab, buf.data(), cnt * slab);
      fn(static_cast<const float*>(buf.data()), o0, cnt);
    }
  });
}

}  // namespace st

#endif  // SINGA_TENSOR_CPU_HALF_H_
