// Sorting along the middle axis of [outer, n, inner]: sort, argsort and topk share one kernel
// that writes the first k entries of each ordered line. Lines run in parallel; within a line, a
// full sort is a stable radix sort and a partial one a selection of the k first entries.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common.h"
#include "half.h"

namespace st {
namespace {

// Keys become unsigned integers whose plain order is the wanted order: NaN (any payload) is
// the largest value and -0.0 equals 0.0, as comparisons see them; descending flips every bit.
// Equal keys stay equal, so sorting (key, index) pairs by key then index is the stable order.
template <class T>
struct Ordered {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  static U key(T v, bool descending) {
    U u;
    if constexpr (std::is_floating_point<T>::value) {
      constexpr U sign = U(1) << (8 * sizeof(T) - 1);
      if (v == T(0)) v = T(0);  // -0.0 -> 0.0
      std::memcpy(&u, &v, sizeof(T));
      u = (u & sign) ? U(~u) : U(u | sign);
      if (is_nan(v)) u = U(~U(0));
    } else if constexpr (std::is_signed<T>::value) {
      u = U(v) ^ (U(1) << (8 * sizeof(T) - 1));
    } else {
      u = U(v);
    }
    return descending ? U(~u) : u;
  }
};

template <class U>
struct Entry {
  U key;
  int64_t index;
  bool operator<(const Entry& o) const { return key < o.key || (key == o.key && index < o.index); }
};

// Stable LSD radix sort by key, one byte per pass; a pass whose byte is the same for every
// entry is skipped. `tmp` is scratch of the same length.
template <class U>
void radix_sort(std::vector<Entry<U>>& a, std::vector<Entry<U>>& tmp) {
  const int64_t n = int64_t(a.size());
  for (int shift = 0; shift < int(8 * sizeof(U)); shift += 8) {
    int64_t count[257] = {0};
    for (int64_t i = 0; i < n; ++i) ++count[((a[i].key >> shift) & 0xff) + 1];
    if (count[((a[0].key >> shift) & 0xff) + 1] == n) continue;
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (int64_t i = 0; i < n; ++i) tmp[count[(a[i].key >> shift) & 0xff]++] = a[i];
    a.swap(tmp);
  }
}

// Below this length a comparison sort beats the radix passes' fixed cost
constexpr int64_t kRadixMin = 64;
// topk keeps a heap of the k best entries seen when k is at most this fraction of the line:
// most entries are then turned away by one comparison with the heap's top
constexpr int64_t kHeapRatio = 8;

// The k first entries of line [0, n) in order, into h[0, k), by a max-heap of the best so far
template <class T, class U>
void heap_select(const T* src, int64_t n, int64_t inner, int64_t k, bool descending,
                 Entry<U>* h) {
  for (int64_t j = 0; j < k; ++j) h[j] = {Ordered<T>::key(src[j * inner], descending), j};
  std::make_heap(h, h + k);
  for (int64_t j = k; j < n; ++j) {
    const Entry<U> e{Ordered<T>::key(src[j * inner], descending), j};
    if (e < h[0]) {  // strictly better: among equal keys the lower index stays
      std::pop_heap(h, h + k);
      h[k - 1] = e;
      std::push_heap(h, h + k);
    }
  }
  std::sort_heap(h, h + k);
}

template <class T>
void sort_lines(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,
                int64_t inner, int64_t k, bool descending) {
  using U = typename Ordered<T>::U;
  const int64_t lines = outer * inner;
  if (lines == 0 || k == 0) return;
  // cost per line ~ n log n; the scratch lines are reused by every line a thread sorts
  int64_t log_n = 1;
  while ((int64_t(1) << log_n) < n) ++log_n;
  const bool by_heap = k < n && k * kHeapRatio <= n;
  parallel_for(lines, n * log_n, [&](int64_t b, int64_t e) {
    std::vector<Entry<U>> line(by_heap ? k : n), tmp(k == n && n >= kRadixMin ? n : 0);
    for (int64_t l = b; l < e; ++l) {
      const int64_t o = l / inner, i = l % inner;
      const T* src = x + o * n * inner + i;
      if (by_heap) {
        heap_select(src, n, inner, k, descending, line.data());
      } else {
        for (int64_t j = 0; j < n; ++j)
          line[j] = {Ordered<T>::key(src[j * inner], descending), j};
        if (k < n) {
          // the k first entries (the index breaks ties, so they are the stable order's),
          // then their order
          std::nth_element(line.begin(), line.begin() + k, line.end());
          std::sort(line.begin(), line.begin() + k);
        } else if (n >= kRadixMin) {
          radix_sort(line, tmp);
        } else {
          std::sort(line.begin(), line.end());
        }
      }
      T* v = values + o * k * inner + i;
      int64_t* ix = indices + o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        v[j * inner] = src[line[j].index * inner];
        ix[j * inner] = line[j].index;
      }
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_DEF_SORT(sfx, T, _)                                                                 \
  void st_sort_##sfx(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,        \
                     int64_t inner, int64_t k, int32_t descending) {                           \
    st::sort_lines<T>(x, values, indices, outer, n, inner, k, descending != 0);                \
  }
ST_ALL_TYPES(ST_DEF_SORT, _)

}  // extern "C"

// float16 / bfloat16: lines sorted as float32 (exact: every 16-bit value widens exactly and
// the order is the same), values narrowed back without rounding

extern "C" {

#define ST_DEF_SORT_HALF(sfx, T, _)                                                            \
  void st_sort_##sfx(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,        \
                     int64_t inner, int64_t k, int32_t descending) {                           \
    st::by_float_slabs<ST_TAG_##sfx>(                                                          \
        x, outer, n * inner, [&](const float* xf, int64_t o0, int64_t cnt) {                   \
          std::vector<float> vf(size_t(cnt * k * inner > 0 ? cnt * k * inner : 1));            \
          st::sort_lines<float>(xf, vf.data(), indices + o0 * k * inner, cnt, n, inner, k,     \
                                descending != 0);                                              \
          st::narrow<ST_TAG_##sfx>(vf.data(), values + o0 * k * inner, cnt * k * inner);       \
        });                                                                                    \
  }
ST_HALF_TYPES(ST_DEF_SORT_HALF, _)

}  // extern "C"
