// Indexing kernels along the middle axis of [outer, n, inner]. Indices arrive validated and
// wrapped to [0, n) by Python.
#include "common.h"

namespace st {
namespace {

// d + s stored back in T; Tag names the format of the 16-bit floats, which add in float and
// round once
template <class Tag, class T>
inline T add_elem(T d, T s) {
  if constexpr (std::is_same<Tag, F16>::value || std::is_same<Tag, BF16>::value)
    return cast_store<Tag>(cast_load<Tag>(d) + cast_load<Tag>(s));
  else
    return T(d + s);
}

template <class T>
void gather(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx, int64_t ni,
            int64_t inner) {
  parallel_for(outer * ni, inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / ni;
      const int64_t* ir = idx + r * inner;
      T* yr = y + r * inner;
      const T* xo = x + o * nx * inner;
      for (int64_t i = 0; i < inner; ++i) yr[i] = xo[ir[i] * inner + i];
    }
  });
}

// scatter writes go to rows chosen by the index, so threads split the inner axis instead,
// which keeps every destination element owned by one thread and the result deterministic
template <class T, bool kAdd, class Tag = T>
void scatter(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, int64_t ni,
             int64_t inner) {
  parallel_for(outer * inner, ni, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t o = c / inner, i = c % inner;
      for (int64_t j = 0; j < ni; ++j) {
        int64_t s = (o * ni + j) * inner + i;
        T& d = y[(o * ny + idx[s]) * inner + i];
        d = kAdd ? add_elem<Tag>(d, src[s]) : src[s];
      }
    }
  });
}

template <class T>
void index_select(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx, int64_t ni,
                  int64_t inner) {
  parallel_for(outer * ni, inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / ni, j = r % ni;
      const T* xr = x + (o * nx + idx[j]) * inner;
      T* yr = y + r * inner;
      for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i];
    }
  });
}

template <class T, class Tag = T>
void index_add(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, int64_t ni,
               int64_t inner) {
  if (outer == 0 || inner == 0) return;  // an empty destination: nothing to add to
  // threads own disjoint outer slices when there are several, else disjoint inner ranges
  if (outer > 1) {
    parallel_for(outer, ni * inner, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (int64_t j = 0; j < ni; ++j) {
          T* yr = y + (o * ny + idx[j]) * inner;
          const T* sr = src + (o * ni + j) * inner;
          for (int64_t i = 0; i < inner; ++i) yr[i] = add_elem<Tag>(yr[i], sr[i]);
        }
    });
    return;
  }
  parallel_for(inner, ni, [&](int64_t b, int64_t e) {
    for (int64_t j = 0; j < ni; ++j) {
      T* yr = y + idx[j] * inner;
      const T* sr = src + j * inner;
      for (int64_t i = b; i < e; ++i) yr[i] = add_elem<Tag>(yr[i], sr[i]);
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {
// the sums add in the element's format (ST_TAG_<suffix>): the 16-bit floats in float, rounded
// once; the copies move bits
#define ST_DEF_INDEX(sfx, T, _)                                                                \
  void st_gather_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,        \
                       int64_t ni, int64_t inner) {                                            \
    st::gather<T>(x, idx, y, outer, nx, ni, inner);                                            \
  }                                                                                            \
  void st_scatter_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,     \
                        int64_t ni, int64_t inner) {                                           \
    st::scatter<T, false, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner);                    \
  }                                                                                            \
  void st_scatter_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny, \
                            int64_t ni, int64_t inner) {                                       \
    st::scatter<T, true, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner);                     \
  }                                                                                            \
  void st_index_select_##sfx(const T* x, const int64_t* idx, T* y, int64_t outer, int64_t nx,  \
                             int64_t ni, int64_t inner) {                                      \
    st::index_select<T>(x, idx, y, outer, nx, ni, inner);                                      \
  }                                                                                            \
  void st_index_add_##sfx(const T* src, const int64_t* idx, T* y, int64_t outer, int64_t ny,   \
                          int64_t ni, int64_t inner) {                                         \
    st::index_add<T, ST_TAG_##sfx>(src, idx, y, outer, ny, ni, inner);                         \
  }
ST_ALL_TYPES(ST_DEF_INDEX, _)
ST_HALF_TYPES(ST_DEF_INDEX, _)

int64_t st_nonzero_u8(const uint8_t* x, int64_t n, int64_t* out, int64_t cap) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i]) {
      if (c < cap) out[c] = i;
      ++c;
    }
  return c < cap ? c : cap;
}
}
