// Random numbers from the Philox counter: block b of the stream is philox(seed, offset + b),
// so results do not depend on the thread count and the CUDA backend reproduces them.
#include "common.h"

namespace st {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

template <class F>
void blocks(int64_t n, int per_block, uint64_t seed, uint64_t offset, F&& emit) {
  int64_t nb = (n + per_block - 1) / per_block;
  parallel_for(nb, per_block * 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) emit(i, philox(seed, offset + uint64_t(i)));
  });
}

template <class T>
void uniform(T* y, int64_t n, uint64_t seed, uint64_t offset, double low, double high) {
  const double span = high - low;
  if constexpr (std::is_same<T, float>::value) {
    blocks(n, 4, seed, offset, [&](int64_t b, Philox4 r) {
      for (int l = 0; l < 4 && b * 4 + l < n; ++l)
        y[b * 4 + l] = float(low + span * double(u01_f32(r.v[l])));
    });
  } else {
    blocks(n, 2, seed, offset, [&](int64_t b, Philox4 r) {
      for (int l = 0; l < 2 && b * 2 + l < n; ++l)
        y[b * 2 + l] = low + span * u01_f64(r.v[2 * l], r.v[2 * l + 1]);
    });
  }
}

template <class T>
void normal(T* y, int64_t n, uint64_t seed, uint64_t offset, double mean, double sd) {
  // Box-Muller on pairs of uniforms; 1 - u keeps the log argument in (0, 1]
  if constexpr (std::is_same<T, float>::value) {
    blocks(n, 4, seed, offset, [&](int64_t b, Philox4 r) {
      for (int p = 0; p < 2; ++p) {
        double u1 = 1.0 - double(u01_f32(r.v[2 * p])), u2 = double(u01_f32(r.v[2 * p + 1]));
        double rad = std::sqrt(-2.0 * std::log(u1));
        int64_t i = b * 4 + 2 * p;
        if (i < n) y[i] = float(mean + sd * rad * std::cos(kTwoPi * u2));
        if (i + 1 < n) y[i + 1] = float(mean + sd * rad * std::sin(kTwoPi * u2));
      }
    });
  } else {
    blocks(n, 2, seed, offset, [&](int64_t b, Philox4 r) {
      double u1 = 1.0 - u01_f64(r.v[0], r.v[1]), u2 = u01_f64(r.v[2], r.v[3]);
      double rad = std::sqrt(-2.0 * std::log(u1));
      int64_t i = b * 2;
      if (i < n) y[i] = mean + sd * rad * std::cos(kTwoPi * u2);
      if (i + 1 < n) y[i + 1] = mean + sd * rad * std::sin(kTwoPi * u2);
    });
  }
}

// the 16-bit floats: the float32 stream's values, each rounded once, so a low-precision fill
// is the float32 fill of the same seed rounded (both backends)
template <class Tag>
void uniform_low(uint16_t* y, int64_t n, uint64_t seed, uint64_t offset, double low,
                 double high) {
  const double span = high - low;
  blocks(n, 4, seed, offset, [&](int64_t b, Philox4 r) {
    for (int l = 0; l < 4 && b * 4 + l < n; ++l)
      y[b * 4 + l] = cast_store<Tag>(float(low + span * double(u01_f32(r.v[l]))));
  });
}

template <class Tag>
void normal_low(uint16_t* y, int64_t n, uint64_t seed, uint64_t offset, double mean, double sd) {
  blocks(n, 4, seed, offset, [&](int64_t b, Philox4 r) {
    for (int p = 0; p < 2; ++p) {
      double u1 = 1.0 - double(u01_f32(r.v[2 * p])), u2 = double(u01_f32(r.v[2 * p + 1]));
      double rad = std::sqrt(-2.0 * std::log(u1));
      int64_t i = b * 4 + 2 * p;
      if (i < n) y[i] = cast_store<Tag>(float(mean + sd * rad * std::cos(kTwoPi * u2)));
      if (i + 1 < n) y[i + 1] = cast_store<Tag>(float(mean + sd * rad * std::sin(kTwoPi * u2)));
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_DEF_RANDOM(sfx, T, _)                                                            \
  void st_uniform_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double low,        \
                        double high) {                                                      \
    st::uniform<T>(y, n, seed, offset, low, high);                                          \
  }                                                                                         \
  void st_normal_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double mean,        \
                       double sd) {                                                         \
    st::normal<T>(y, n, seed, offset, mean, sd);                                            \
  }
ST_FLOAT_TYPES(ST_DEF_RANDOM, _)
#define ST_DEF_RANDOM_LOW(sfx, T, _)                                                        \
  void st_uniform_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double low,        \
                        double high) {                                                      \
    st::uniform_low<ST_TAG_##sfx>(y, n, seed, offset, low, high);                           \
  }                                                                                         \
  void st_normal_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double mean,        \
                       double sd) {                                                         \
    st::normal_low<ST_TAG_##sfx>(y, n, seed, offset, mean, sd);                             \
  }
ST_HALF_TYPES(ST_DEF_RANDOM_LOW, _)

void st_randint_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset, int64_t low,
                    int64_t high) {
  // 64 random bits per value, mapped to the range by a widening multiply (bias below 2^-40)
  const unsigned __int128 span = (unsigned __int128)(uint64_t(high - low));
  st::blocks(n, 2, seed, offset, [&](int64_t b, st::Philox4 r) {
    for (int l = 0; l < 2 && b * 2 + l < n; ++l) {
      uint64_t v = uint64_t(r.v[2 * l + 1]) << 32 | r.v[2 * l];
      y[b * 2 + l] = low + int64_t((v * span) >> 64);
    }
  });
}

void st_randperm_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset) {
  for (int64_t i = 0; i < n; ++i) y[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    st::Philox4 r = st::philox(seed, offset + uint64_t(i));
    uint64_t v = uint64_t(r.v[1]) << 32 | r.v[0];
    int64_t j = int64_t((uint64_t)(((unsigned __int128)v * uint64_t(i + 1)) >> 64));
    int64_t t = y[i];
    y[i] = y[j];
    y[j] = t;
  }
}
}
