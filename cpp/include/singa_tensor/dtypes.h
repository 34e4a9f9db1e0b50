// What the kernels of both backends know about element types besides their per-element math:
// the C++ type behind each dtype suffix of the ABI, the type integers accumulate in, and the
// starting values of max and min. Compiled by g++ for cpp/ and by nvcc for cuda/, so that the
// two backends cannot drift apart on any of them.
#ifndef SINGA_TENSOR_DTYPES_H_
#define SINGA_TENSOR_DTYPES_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#include "singa_tensor/functors.h"

// The element type behind each dtype suffix (a tag for the 16-bit floats, whose storage is
// uint16_t), for kernels defined per pair of suffixes such as st_cast_<from>_<to>.
#define ST_TAG_f32 float
#define ST_TAG_f64 double
#define ST_TAG_f16 st::F16
#define ST_TAG_bf16 st::BF16
#define ST_TAG_i32 int32_t
#define ST_TAG_i64 int64_t
#define ST_TAG_u8 uint8_t

namespace st {

// Integer sums and products accumulate in the unsigned type of their width: overflow then
// wraps modulo 2^bits, the same bits on both backends, without signed-overflow UB. Other
// types accumulate in themselves.
template <class T>
struct WrapOf {
  using type = T;
};
template <>
struct WrapOf<int32_t> {
  using type = uint32_t;
};
template <>
struct WrapOf<int64_t> {
  using type = uint64_t;
};
template <class T>
using Wrap = typename WrapOf<T>::type;

// Starting values of max and min: infinities for floats (not lowest()/max()), so that a line
// of infinities reduces to itself; the type's limits for integers.
template <class T>
ST_HD T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <class T>
ST_HD T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

}  // namespace st

#endif  // SINGA_TENSOR_DTYPES_H_
