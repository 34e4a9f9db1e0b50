// Shapes and strides as the host code of both backends handles them: the CPU kernels walk a
// merged layout themselves, the CUDA launchers hand it to their kernels by value. Compiled by
// g++ for cpp/ and by nvcc for cuda/; nothing here runs on the device.
#ifndef SINGA_TENSOR_SHAPES_H_
#define SINGA_TENSOR_SHAPES_H_

#include <cstdint>

namespace st {

constexpr int kMaxDims = 32;  // MAX_DIMS in tensor.py

// Row-major (contiguous) strides of a shape, for the output operand of a broadcast.
inline void contiguous_strides(int ndim, const int64_t* shape, int64_t* out) {
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    out[d] = acc;
    acc *= shape[d];
  }
}

// A strided layout over K operands broadcast to one shape, with adjacent dims merged where
// every operand allows, so that most broadcasts and views walk one or two dims. A scalar (or a
// shape of size-1 dims only) becomes one dim of size 1 with zero strides.
template <int K>
struct MergedStrides {
  int nd = 0;
  int64_t numel = 1;
  int64_t shape[kMaxDims];
  int64_t stride[K][kMaxDims];

  MergedStrides(int ndim, const int64_t* shp, const int64_t* const* strides) {
    for (int d = 0; d < ndim; ++d) {
      numel *= shp[d];
      if (shp[d] == 1) continue;  // size-1 dims carry no information
      bool merge = nd > 0;
      for (int k = 0; k < K && merge; ++k) merge = stride[k][nd - 1] == strides[k][d] * shp[d];
      if (merge) {
        shape[nd - 1] *= shp[d];
        for (int k = 0; k < K; ++k) stride[k][nd - 1] = strides[k][d];
      } else {
        shape[nd] = shp[d];
        for (int k = 0; k < K; ++k) stride[k][nd] = strides[k][d];
        ++nd;
      }
    }
    if (nd == 0) {
      nd = 1;
      shape[0] = 1;
      for (int k = 0; k < K; ++k) stride[k][0] = 0;
    }
  }
};

// A 2-D convolution or pooling window over images of c channels of h x w: kernel kh x kw,
// strides sh sw, top and left padding pt pl, dilations dh dw, output oh x ow.
struct Geometry {
  int64_t c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
};

// One scaled dot-product attention call: batch of L queries against S keys, E features per
// query and key, Ev per value; causal lets query i see keys j <= i only.
struct AttentionDims {
  int64_t batch, l, s, e, ev;
  bool causal;
};

}  // namespace st

#endif  // SINGA_TENSOR_SHAPES_H_
