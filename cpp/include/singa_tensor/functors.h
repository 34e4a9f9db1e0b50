// Per-element math shared by the C++ CPU kernels and the CUDA kernels: each functor is the
// single definition of an op's forward value, compiled by g++ for cpp/ and by nvcc for cuda/.
#ifndef SINGA_TENSOR_FUNCTORS_H_
#define SINGA_TENSOR_FUNCTORS_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define ST_HD __host__ __device__ __forceinline__
#else
#define ST_HD inline
#endif

namespace st {

template <class T>
ST_HD bool is_nan(T x) {
  return x != x;  // false for integers, true only for NaN
}

ST_HD float f32_from_bits(int32_t i) {
  float x;
  std::memcpy(&x, &i, sizeof(x));
  return x;
}

// Cody-Waite reduction shared by exp and expm1: x = n ln2 + r with |r| <= ln2/2; ln2 is split
// in two so that n * ln2_hi is exact. Returns n, writes r.
ST_HD float exp_reduce(float x, float* r) {
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  *r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  return n;
}

// v * 2^n for n in [-150, 128], as two factors that are each a normal float, so results in the
// denormal range and at the top of the range need no branch
ST_HD float scale_pow2(float v, int32_t n) {
  int32_t n1 = n >> 1, n2 = n - n1;
  return v * f32_from_bits((n1 + 127) << 23) * f32_from_bits((n2 + 127) << 23);
}

// exp for float32 that vectorises: Cody-Waite range reduction to [-ln2/2, ln2/2], a degree-6
// polynomial (relative error below 2 ulp), and 2^n built from exponent bits in two halves, so
// that results in the denormal range come out right without a branch. The libm call cannot be
// vectorised without -ffast-math, and exp dominates softmax, sigmoid, silu and elu.
ST_HD float fast_expf(float x) {
  float xc = x > 88.7228394f ? 88.7228394f : (x < -104.0f ? -104.0f : x);
  float r;
  float n = exp_reduce(xc, &r);
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float y = scale_pow2(p, static_cast<int32_t>(n));
  y = x > 88.7228394f ? INFINITY : y;
  y = x < -103.972076f ? 0.0f : y;
  return x != x ? x : y;
}

ST_HD float st_exp(float x) { return fast_expf(x); }
ST_HD double st_exp(double x) { return std::exp(x); }

template <class T>
ST_HD T sigmoid(T x) {
  // written so that neither branch overflows
  T z = st_exp(-std::fabs(x));
  T s = T(1) / (T(1) + z);
  return x >= T(0) ? s : z * s;
}

// tanh for float32 without a libm call, so that its loops vectorise: the odd Taylor series
// near zero (where 1 - e^{-2|x|} would cancel), the exp form elsewhere; both are evaluated and
// one selected, which keeps the loop branch-free. float64 keeps the libm call.
ST_HD float tanh_(float x) {
  float ax = std::fabs(x);
  float x2 = x * x;
  float p = 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  p = x + x * x2 * p;
  float e = fast_expf(-2.0f * ax);
  float t = (1.0f - e) / (1.0f + e);
  t = x < 0.0f ? -t : t;
  return ax < 0.3f ? p : t;
}
ST_HD double tanh_(double x) { return std::tanh(x); }

// Bit casts for the float32 kernels below: memcpy is the portable way and compiles to a move.
ST_HD int32_t f32_bits(float x) {
  int32_t i;
  std::memcpy(&i, &x, sizeof(i));
  return i;
}

// log(u) + c for finite u > 0 (denormals included) and a small correction c that log1p needs.
// u = m 2^k with m in [sqrt(1/2), sqrt(2)), found from the exponent bits, so f = m - 1 is exact and
// log(m) = f - f^2/2 + f^3 P(f), P fitted (weighted minimax, relative error 6e-9) on that range.
// Keeping f apart from the small terms until the end gives full relative accuracy near u = 1.
ST_HD float log_core_(float u, float c) {
  bool tiny = u < 1.17549435e-38f;  // denormal: scale into the normal range first
  float us = tiny ? u * 8388608.0f : u;
  // unsigned so that NaN and negative inputs (selected away by the callers) cannot overflow
  uint32_t ix = static_cast<uint32_t>(f32_bits(us)) + (0x3f800000u - 0x3f3504f3u);
  int32_t k = static_cast<int32_t>(ix >> 23) - 127 - (tiny ? 23 : 0);
  float f = f32_from_bits(static_cast<int32_t>((ix & 0x007fffffu) + 0x3f3504f3u)) - 1.0f;
  float p = -7.646037638e-02f;
  p = p * f + 1.277908832e-01f;
  p = p * f - 1.316419840e-01f;
  p = p * f + 1.419969946e-01f;
  p = p * f - 1.662276387e-01f;
  p = p * f + 2.000129223e-01f;
  p = p * f - 2.500083745e-01f;
  p = p * f + 3.333333135e-01f;
  float kf = static_cast<float>(k);
  // ln2 split so that k * hi is exact for every k a float can produce
  float lo = f * f * (f * p - 0.5f) + (kf * -2.12194440e-4f + c);
  return kf * 0.693359375f + (f + lo);
}

// The float32 kernels below replace libm calls that cannot vectorise without -ffast-math; each
// evaluates every path and selects, so loops stay branch-free. Maximum error about 1-2 ulp over
// the whole float range (tests/test_unary_accuracy.py); float64 keeps libm.
ST_HD float fast_logf(float x) {
  float r = log_core_(x, 0.0f);
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  r = x < 0.0f ? NAN : r;
  return x != x ? x : r;
}

// log1p(x) = log(u) + log(1 + c/u) with u = 1 + x rounded and c the rounding error of that sum,
// recovered exactly (Sterbenz) by whichever subtraction order avoids cancellation.
ST_HD float fast_log1pf(float x) {
  float u = 1.0f + x;
  float c = x < 1.0f ? x - (u - 1.0f) : 1.0f - (u - x);
  float r = log_core_(u, c / u);
  r = x == INFINITY ? x : r;
  r = x == -1.0f ? -INFINITY : r;
  r = x < -1.0f ? NAN : r;
  r = x == 0.0f ? x : r;  // keeps the sign of -0
  return x != x ? x : r;
}

// expm1(x) = 2^n (expm1(r) + 1 - 2^-n) with the same Cody-Waite reduction as fast_expf;
// expm1(r) = r + r^2/2 + r^3 P(r) (relative error 6e-12). Adding 1 - 2^-n before scaling keeps the
// n = +-1 cases free of cancellation; 2^n is applied in two halves so n = 128 does not overflow.
ST_HD float fast_expm1f(float x) {
  float xc = x > 88.7228394f ? 88.7228394f : (x < -30.0f ? -30.0f : x);
  float r;
  float n = exp_reduce(xc, &r);
  float p = 2.480953117e-05f;
  p = p * r + 1.990530582e-04f;
  p = p * r + 1.388894860e-03f;
  p = p * r + 8.333289064e-03f;
  p = p * r + 4.166666791e-02f;
  p = p * r + 1.666666716e-01f;
  p = r + r * r * (p * r + 0.5f);
  int32_t ni = static_cast<int32_t>(n);
  int32_t nc = ni > 25 ? 25 : ni;
  float c = 1.0f - f32_from_bits((127 - nc) << 23);
  float y = scale_pow2(p + c, ni);
  y = x > 88.7228394f ? INFINITY : y;
  y = x == 0.0f ? x : y;
  return x != x ? x : y;
}

// erf: x P(x^2) for |x| < 1 (relative error 1.2e-9); 1 - Q(|x| - 2.5) on [1, 4] with Q fitted to
// erfc (absolute error 6e-10); beyond 4, erfc < 2^-25 and 1 - Q rounds to exactly 1.
ST_HD float fast_erff(float x) {
  float ax = std::fabs(x);
  float x2 = x * x;
  float s = 7.854025171e-05f;
  s = s * x2 - 8.010247257e-04f;
  s = s * x2 + 5.188334268e-03f;
  s = s * x2 - 2.685381658e-02f;
  s = s * x2 + 1.128358543e-01f;
  s = s * x2 - 3.761262596e-01f;
  s = s * x2 + 1.283791661e-01f;  // the leading 2/sqrt(pi) less one: x is added exactly below
  s = x + x * s;
  float t = (ax < 4.0f ? ax : 4.0f) - 2.5f;
  float q = 3.491683174e-07f;
  q = q * t - 8.877124174e-07f;
  q = q * t - 3.446334404e-06f;
  q = q * t + 1.570132554e-05f;
  q = q * t - 7.805789210e-06f;
  q = q * t - 8.104860171e-05f;
  q = q * t + 2.534989035e-04f;
  q = q * t - 2.588039788e-04f;
  q = q * t - 5.445930874e-04f;
  q = q * t + 2.797608264e-03f;
  q = q * t - 6.116563920e-03f;
  q = q * t + 8.622585796e-03f;
  q = q * t - 8.350215852e-03f;
  q = q * t + 5.445690826e-03f;
  q = q * t - 2.178278286e-03f;
  q = q * t + 4.069523129e-04f;
  q = 1.0f - q;
  q = x < 0.0f ? -q : q;
  float r = ax < 1.0f ? s : q;
  return x != x ? x : r;
}

ST_HD float st_log(float x) { return fast_logf(x); }
ST_HD double st_log(double x) { return std::log(x); }
ST_HD float st_log1p(float x) { return fast_log1pf(x); }
ST_HD double st_log1p(double x) { return std::log1p(x); }
ST_HD float st_expm1(float x) { return fast_expm1f(x); }
ST_HD double st_expm1(double x) { return std::expm1(x); }
ST_HD float st_erf(float x) { return fast_erff(x); }
ST_HD double st_erf(double x) { return std::erf(x); }

// ---- special functions with no libm call on both compilers -----------------------------------

// digamma: the reflection psi(x) = psi(1 - x) - pi / tan(pi x) below zero (tan of the distance
// to the nearest integer, an exact difference, so large arguments keep their accuracy), the
// recurrence psi(x) = psi(x + 1) - 1/x up to 10, then the asymptotic series in 1/x^2.
// Poles: NaN at the negative integers, -inf at +0 and +inf at -0 (PyTorch's values).
template <class T>
ST_HD T digamma_(T x) {
  if (x != x) return x;
  if (x == T(0)) return T(1) / x < T(0) ? T(INFINITY) : T(-INFINITY);
  T r = T(0);
  if (x < T(0)) {
    T q = x - std::nearbyint(x);  // NaN for -inf
    if (q == T(0) || q != q) return T(NAN);
    // in double: float's rounding of pi q would cost accuracy where the cotangent is small
    r = T(-3.14159265358979323846 / std::tan(3.14159265358979323846 * double(q)));
    x = T(1) - x;
  }
  for (int i = 0; i < 10 && x < T(10); ++i) {
    r -= T(1) / x;
    x += T(1);
  }
  if (x == T(INFINITY)) return x;
  T z = T(1) / (x * x);
  T p = T(691.0 / 32760.0) - z * T(1.0 / 12.0);
  p = T(1.0 / 132.0) - z * p;
  p = T(1.0 / 240.0) - z * p;
  p = T(1.0 / 252.0) - z * p;
  p = T(1.0 / 120.0) - z * p;
  p = T(1.0 / 12.0) - z * p;
  return r + std::log(x) - T(0.5) / x - z * p;
}

// Hurwitz zeta(s, x) for x >= 10 + (s - 2) by Euler-Maclaurin: x^(1-s)/(s-1) + x^-s/2 +
// sum_k B2k t_k, t_k = s (s+1) .. (s+2k-2) x^(-s-2k+1) / (2k)!, with B2 .. B16
template <class T>
ST_HD T zeta_tail_(T s, T x) {
  const T b2k[8] = {T(1.0 / 6.0), T(-1.0 / 30.0), T(1.0 / 42.0), T(-1.0 / 30.0),
                    T(5.0 / 66.0), T(-691.0 / 2730.0), T(7.0 / 6.0), T(-3617.0 / 510.0)};
  T xs = std::pow(x, -s);
  T sum = x * xs / (s - T(1)) + T(0.5) * xs;
  T t = s * xs / (x * T(2));
  T inv2 = T(1) / (x * x);
  for (int k = 1; k <= 8; ++k) {
    sum += b2k[k - 1] * t;
    T m = T(2 * k);
    t *= (s + m - T(1)) * (s + m) * inv2 / ((m + T(1)) * (m + T(2)));
  }
  return sum;
}

// polygamma(n, x) for whole n >= 1: (-1)^(n+1) n! zeta(n + 1, x), zeta summed directly until
// x >= 10 + n, then its tail. Below zero, n = 1 uses the reflection psi1(x) = pi^2 / sin^2(pi x)
// - psi1(1 - x); other n sum up from x, refused (NaN) below -1e6. At the poles (the integers
// <= 0): +inf for odd n, NaN for even n, whose sign differs on the two sides; NaN at -inf.
// n = 0 is digamma.
template <class T>
ST_HD T polygamma_(T n, T x) {
  if (n == T(0)) return digamma_(x);
  // Python passes a whole n >= 0; anything else (a fused program's stray constant) is NaN
  // rather than a loop of n steps
  if (!(n > T(0) && n <= T(1000) && n == std::floor(n))) return T(NAN);
  if (x != x || x == T(-INFINITY)) return T(NAN);
  bool odd = std::fmod(n, T(2)) == T(1);
  if (x <= T(0) && x == std::nearbyint(x)) return odd ? T(INFINITY) : T(NAN);
  if (x == T(INFINITY)) return T(0);
  T fact = T(1);
  for (T i = T(2); i <= n; i += T(1)) fact *= i;
  T s = n + T(1);
  T lead = T(0);
  if (x < T(0) && n == T(1)) {
    double sp = std::sin(3.14159265358979323846 * double(x - std::nearbyint(x)));
    lead = T(9.86960440108935861883 / (sp * sp));
    x = T(1) - x;
  } else if (x < T(-1e6)) {
    return T(NAN);
  }
  T z = T(0);
  for (T thr = T(10) + n; x < thr; x += T(1)) {
    z += std::pow(x, -s);
  }
  z += zeta_tail_(s, x);
  return lead != T(0) ? lead - z : (odd ? fact : -fact) * z;
}

// erfinv: Giles' single-precision approximation (w = -log(1 - x^2), two polynomial ranges) as
// the start, then Newton steps in double, which take float64 to full precision.
template <class T>
ST_HD T erfinv_(T x) {
  T ax = x < T(0) ? -x : x;
  if (!(ax < T(1))) return ax == T(1) ? (x < T(0) ? T(-INFINITY) : T(INFINITY)) : T(NAN);
  if (x == T(0)) return x;
  double xd = double(x);  // float64 inputs next to 1 must not round to 1 here
  float w = float(-std::log((1.0 - xd) * (1.0 + xd)));
  float p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  // Newton in double: on erf(y) = x below 0.5; beyond, on log erfc(|y|) = log(1 - |x|) (1 - |x|
  // exact there), whose near-quadratic shape converges from the poorer starts of float64's far
  // tail, where erf's rounding next to 1 would swamp the tiny slope
  double y = double(p) * xd;
  double c = 1.0 - (xd < 0 ? -xd : xd);
  for (int i = 0; i < 4; ++i) {
    double ay = y < 0 ? -y : y;
    double slope = 1.12837916709551257390 * std::exp(-y * y);
    if (c <= 0.5) {
      double e = std::erfc(ay);
      ay += e > 0.0 ? (std::log(e) - std::log(c)) * e / slope : 0.0;
      y = y < 0 ? -ay : ay;
    } else {
      y -= (std::erf(y) - xd) / slope;
    }
  }
  return T(y);
}

// the bodies of the gelu_tanh and silu gradients, which name their intermediate values
template <class T>
ST_HD T gelu_tanh_grad_(T x, T g) {
  const T k = T(0.79788456080286535588);
  const T x2 = x * x;
  const T t = tanh_(k * (x + T(0.044715) * x2 * x));
  return g * (T(0.5) * (T(1) + t) +
              T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x2));
}
template <class T>
ST_HD T silu_grad_(T x, T g) {
  const T s = st::sigmoid(x);
  return g * (s * (T(1) + x * (T(1) - s)));
}

// ---- unary: y = f(x; a, b) -------------------------------------------------------------------
#define ST_UNARY_FUNCTOR(NAME, EXPR)                 \
  struct NAME {                                      \
    template <class T>                               \
    ST_HD T operator()(T x, T a, T b) const {        \
      (void)a;                                       \
      (void)b;                                       \
      return EXPR;                                   \
    }                                                \
  };

namespace fn {
ST_UNARY_FUNCTOR(neg, -x)
ST_UNARY_FUNCTOR(abs, x < T(0) ? T(-x) : x)
ST_UNARY_FUNCTOR(sign, is_nan(x) ? x : T((x > T(0)) - (x < T(0))))
ST_UNARY_FUNCTOR(exp, st_exp(x))
ST_UNARY_FUNCTOR(log, st_log(x))
ST_UNARY_FUNCTOR(log1p, st_log1p(x))
ST_UNARY_FUNCTOR(expm1, st_expm1(x))
ST_UNARY_FUNCTOR(sqrt, std::sqrt(x))
ST_UNARY_FUNCTOR(rsqrt, T(1) / std::sqrt(x))
ST_UNARY_FUNCTOR(sin, std::sin(x))
ST_UNARY_FUNCTOR(cos, std::cos(x))
ST_UNARY_FUNCTOR(tan, std::tan(x))
ST_UNARY_FUNCTOR(tanh, tanh_(x))
ST_UNARY_FUNCTOR(sigmoid, st::sigmoid(x))
ST_UNARY_FUNCTOR(relu, x > T(0) ? x : (is_nan(x) ? x : T(0)))
ST_UNARY_FUNCTOR(leaky_relu, x > T(0) ? x : x * a)
ST_UNARY_FUNCTOR(elu, x > T(0) ? x : a * st_expm1(x))
ST_UNARY_FUNCTOR(gelu, T(0.5) * x * (T(1) + st_erf(x * T(0.70710678118654752440))))
ST_UNARY_FUNCTOR(gelu_tanh,
                 T(0.5) * x *
                     (T(1) + tanh_(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))))
ST_UNARY_FUNCTOR(silu, x * st::sigmoid(x))
// softplus(x; beta, threshold) = log1p(exp(beta x)) / beta, linear above the threshold
ST_UNARY_FUNCTOR(softplus, x * a > b ? x : st_log1p(st_exp(x * a)) / a)
ST_UNARY_FUNCTOR(erf, st_erf(x))
ST_UNARY_FUNCTOR(floor, std::floor(x))
ST_UNARY_FUNCTOR(ceil, std::ceil(x))
ST_UNARY_FUNCTOR(round, std::nearbyint(x))
ST_UNARY_FUNCTOR(clamp, is_nan(x) ? x : (x < a ? a : (x > b ? b : x)))
ST_UNARY_FUNCTOR(reciprocal, T(1) / x)
ST_UNARY_FUNCTOR(square, x * x)
ST_UNARY_FUNCTOR(relu_mask, x > T(0) ? T(1) : T(0))
ST_UNARY_FUNCTOR(pow_scalar, a == T(2) ? x * x : (a == T(1) ? x : std::pow(x, a)))
ST_UNARY_FUNCTOR(affine, a * x + b)
ST_UNARY_FUNCTOR(logical_not, T(x == T(0)))
ST_UNARY_FUNCTOR(asin, std::asin(x))
ST_UNARY_FUNCTOR(acos, std::acos(x))
ST_UNARY_FUNCTOR(atan, std::atan(x))
ST_UNARY_FUNCTOR(asinh, std::asinh(x))
ST_UNARY_FUNCTOR(acosh, std::acosh(x))
ST_UNARY_FUNCTOR(atanh, std::atanh(x))
ST_UNARY_FUNCTOR(sinh, std::sinh(x))
ST_UNARY_FUNCTOR(cosh, std::cosh(x))
ST_UNARY_FUNCTOR(lgamma, std::lgamma(x))
ST_UNARY_FUNCTOR(digamma, digamma_(x))
// polygamma(n, x) with n (a whole number >= 0, checked in Python) as a
ST_UNARY_FUNCTOR(polygamma, polygamma_(a, x))
ST_UNARY_FUNCTOR(erfinv, erfinv_(x))
ST_UNARY_FUNCTOR(erfc, std::erfc(x))
ST_UNARY_FUNCTOR(log2, std::log2(x))
ST_UNARY_FUNCTOR(log10, std::log10(x))
ST_UNARY_FUNCTOR(exp2, std::exp2(x))
ST_UNARY_FUNCTOR(trunc, std::trunc(x))
ST_UNARY_FUNCTOR(frac, x - std::trunc(x))

// ---- unary gradients: dx = g * f'(x; a, b), one kernel for the backward --------------------
#define ST_UNARY_GRAD_FUNCTOR(NAME, EXPR)              \
  struct NAME##_backward {                             \
    template <class T>                                 \
    ST_HD T operator()(T x, T g, T a, T b) const {     \
      (void)a;                                         \
      (void)b;                                         \
      return EXPR;                                     \
    }                                                  \
  };

// Phi(x) + x phi(x)
ST_UNARY_GRAD_FUNCTOR(gelu, g * (T(0.5) * (T(1) + st_erf(x * T(0.70710678118654752440))) +
                                 x * T(0.39894228040143267794) * st_exp(T(-0.5) * x * x)))
// with u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u):
// (1 + t) / 2 + x / 2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
ST_UNARY_GRAD_FUNCTOR(gelu_tanh, gelu_tanh_grad_(x, g))
// s (1 + x (1 - s)), s = sigmoid(x)
ST_UNARY_GRAD_FUNCTOR(silu, silu_grad_(x, g))
// g where x is not <= 0: a NaN input passes g, as PyTorch's threshold backward does
ST_UNARY_GRAD_FUNCTOR(relu, x <= T(0) ? T(0) : g)
// these two read the output y = f(x) in x's place: y (1 - y) and 1 - y^2
ST_UNARY_GRAD_FUNCTOR(sigmoid, g * (x * (T(1) - x)))
ST_UNARY_GRAD_FUNCTOR(tanh, g * (T(1) - x * x))

// ---- binary: out = f(a, b) ---------------------------------------------------------------------
#define ST_BINARY_FUNCTOR(NAME, EXPR)           \
  struct NAME {                                 \
    template <class T>                          \
    ST_HD T operator()(T a, T b) const {        \
      return EXPR;                              \
    }                                           \
  };

template <class T>
ST_HD T floor_div(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) return T(0);            // Python refuses this before the kernel runs
    if (b == T(-1)) return T(T(0) - a);  // avoids the INT_MIN / -1 trap
    T q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? T(q - 1) : q;
  } else {
    if (b == T(0)) return a / b;
    T r = std::fmod(a, b);
    T q = (a - r) / b;
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) q -= T(1);
    return q;
  }
}

template <class T>
ST_HD T py_mod(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0 || b == T(-1)) return T(0);
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
  } else {
    T r = std::fmod(a, b);
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
    return r;
  }
}

template <class T>
ST_HD T power(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b < 0) return T(a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0));
    T r = 1;
    while (b) {
      if (b & 1) r = T(r * a);
      a = T(a * a);
      b >>= 1;
    }
    return r;
  } else {
    return b == T(2) ? a * a : std::pow(a, b);
  }
}

// C's fmod (the result has the sign of the dividend); integers truncate, and a zero divisor
// (refused in Python) gives 0
template <class T>
ST_HD T fmod_(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return (b == 0 || b == T(-1)) ? T(0) : T(a % b);
  } else {
    return std::fmod(a, b);
  }
}

// the float-only binary ops below: their integer instances exist for the ABI's dtype lists,
// but Python promotes integer operands to float first
template <class T>
ST_HD T atan2_(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return T(0);
  } else {
    return std::atan2(a, b);
  }
}
template <class T>
ST_HD T hypot_(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return T(0);
  } else {
    return std::hypot(a, b);
  }
}
template <class T>
ST_HD T copysign_(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return T(0);
  } else {
    return std::copysign(a, b);
  }
}

ST_BINARY_FUNCTOR(add, a + b)
ST_BINARY_FUNCTOR(sub, a - b)
ST_BINARY_FUNCTOR(mul, a * b)
ST_BINARY_FUNCTOR(div, a / b)
ST_BINARY_FUNCTOR(floor_divide, floor_div(a, b))
ST_BINARY_FUNCTOR(remainder, py_mod(a, b))
ST_BINARY_FUNCTOR(pow, power(a, b))
ST_BINARY_FUNCTOR(maximum, is_nan(a) ? a : (is_nan(b) ? b : (a > b ? a : b)))
ST_BINARY_FUNCTOR(minimum, is_nan(a) ? a : (is_nan(b) ? b : (a < b ? a : b)))
ST_BINARY_FUNCTOR(logical_and, T((a != 0) && (b != 0)))
ST_BINARY_FUNCTOR(logical_or, T((a != 0) || (b != 0)))
ST_BINARY_FUNCTOR(logical_xor, T((a != 0) != (b != 0)))
ST_BINARY_FUNCTOR(atan2, atan2_(a, b))
ST_BINARY_FUNCTOR(hypot, hypot_(a, b))
ST_BINARY_FUNCTOR(fmod, fmod_(a, b))
ST_BINARY_FUNCTOR(copysign, copysign_(a, b))
// NaN-ignoring maximum and minimum: NaN only when both are
ST_BINARY_FUNCTOR(fmax, is_nan(a) ? b : (is_nan(b) ? a : (a > b ? a : b)))
ST_BINARY_FUNCTOR(fmin, is_nan(a) ? b : (is_nan(b) ? a : (a < b ? a : b)))

#define ST_COMPARE_FUNCTOR(NAME, OP)                   \
  struct NAME {                                        \
    template <class T>                                 \
    ST_HD uint8_t operator()(T a, T b) const {         \
      return uint8_t(a OP b);                          \
    }                                                  \
  };
ST_COMPARE_FUNCTOR(eq, ==)
ST_COMPARE_FUNCTOR(ne, !=)
ST_COMPARE_FUNCTOR(lt, <)
ST_COMPARE_FUNCTOR(le, <=)
ST_COMPARE_FUNCTOR(gt, >)
ST_COMPARE_FUNCTOR(ge, >=)
}  // namespace fn

// ---- dtype conversion helpers for the 16-bit float storage types --------------------------------
ST_HD float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
ST_HD uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (f != f) return uint16_t((bits >> 16) | 0x40);  // keep NaN a quiet NaN
  bits += 0x7FFF + ((bits >> 16) & 1);                 // round to nearest even
  return uint16_t(bits >> 16);
}
ST_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal half: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | man << 13;
  } else {
    bits = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
ST_HD uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax > 0x7F800000) return uint16_t(sign | 0x7E00);   // NaN
  if (ax >= 0x477FF000) return uint16_t(sign | 0x7C00);  // overflow rounds to inf
  if (ax < 0x38800000) {                                 // subnormal or zero half
    if (ax < 0x33000000) return uint16_t(sign);
    uint32_t e = ax >> 23;
    uint32_t man = (ax & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = ((ax - 0x38000000) >> 13);
  uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(sign | half);
}

// ---- dtype conversion of one element (st_cast on the CPU and on CUDA) -----------------------
// To bool tests for non-zero; float to integer saturates (NaN gives 0) where C++ leaves it
// undefined; the 16-bit float formats pass through float with the conversions above.
template <class D, class S>
ST_HD D convert(S v) {
  if constexpr (std::is_same<D, uint8_t>::value) {
    return uint8_t(v != S(0));
  } else if constexpr (std::is_integral<D>::value && std::is_floating_point<S>::value) {
    if (v != v) return D(0);
    if (v >= S(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    if (v <= S(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    return D(v);
  } else {
    return D(v);
  }
}

// tag types for the two 16-bit float formats, whose storage is uint16_t
struct F16 {};
struct BF16 {};
template <class Tag>
struct CastStorage {
  using type = Tag;
};
template <>
struct CastStorage<F16> {
  using type = uint16_t;
};
template <>
struct CastStorage<BF16> {
  using type = uint16_t;
};

// an element of storage type Tag as a computable value, and back
template <class Tag>
ST_HD auto cast_load(typename CastStorage<Tag>::type v) {
  if constexpr (std::is_same<Tag, F16>::value) return f16_to_f32(v);
  else if constexpr (std::is_same<Tag, BF16>::value) return bf16_to_f32(v);
  else return v;
}
template <class Tag, class V>
ST_HD typename CastStorage<Tag>::type cast_store(V v) {
  if constexpr (std::is_same<Tag, F16>::value) return f32_to_f16(convert<float>(v));
  else if constexpr (std::is_same<Tag, BF16>::value) return f32_to_bf16(convert<float>(v));
  else return convert<Tag>(v);
}

// ---- Philox-4x32-10 counter-based generator -------------------------------------------------------
struct Philox4 {
  uint32_t v[4];
};
ST_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
}
ST_HD Philox4 philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}
// uniform in [0, 1) from 24 or 53 random bits
ST_HD float u01_f32(uint32_t x) { return float(x >> 8) * 5.9604644775390625e-08f; }
ST_HD double u01_f64(uint32_t lo, uint32_t hi) {
  uint64_t v = (uint64_t(hi) << 32 | lo) >> 11;
  return double(v) * 1.1102230246251565e-16;
}

// ---- optimizer updates of one element (cpp/src/optim.cc, cuda/optim.cu) --------------------
// PyTorch's rules; the scalar factors come in already rounded to T by the host code, with
// 1 - beta formed in double first, as PyTorch forms it.

// the gradient as an update sees it: negated when maximizing, plus L2 weight decay
template <class T>
ST_HD T optim_grad(T g, T p, T wd, bool maximize) {
  g = maximize ? -g : g;
  return g + wd * p;
}

// SGD; buf is null without momentum; on the first step the buffer starts as the gradient
template <class T>
ST_HD void sgd_element(T& p, T g, T* buf, T lr, T mom, T keep, T wd, bool nesterov,
                       bool maximize, bool first) {
  const T gi = optim_grad(g, p, wd, maximize);
  if (buf == nullptr) {
    p -= lr * gi;
    return;
  }
  const T b = first ? gi : mom * *buf + keep * gi;
  *buf = b;
  p -= lr * (nesterov ? gi + mom * b : b);
}

// Adam/AdamW: l2 is the coupled decay (0 for AdamW), shrink the decoupled one (1 for Adam);
// vmax (amsgrad) may be null; step = lr / bias1
template <class T>
ST_HD void adam_element(T& p, T g, T& m, T& v, T* vmax, T b1, T b2, T c1, T c2, T eps, T l2,
                        T shrink, T step, T sqrt_bias2, bool maximize) {
  const T p0 = p;
  const T gi = optim_grad(g, p0, l2, maximize);
  const T mi = b1 * m + c1 * gi;
  T vi = b2 * v + c2 * gi * gi;
  m = mi;
  v = vi;
  if (vmax != nullptr) {
    vi = vi > *vmax ? vi : *vmax;
    *vmax = vi;
  }
  p = p0 * shrink - step * (mi / (std::sqrt(vi) / sqrt_bias2 + eps));  // PyTorch's op order
}

// RMSprop: buf (momentum) and gavg (centered) may be null; c = 1 - alpha
template <class T>
ST_HD void rmsprop_element(T& p, T g, T& sq, T* buf, T* gavg, T lr, T alpha, T c, T eps, T wd,
                           T mom, bool maximize) {
  const T gi = optim_grad(g, p, wd, maximize);
  const T si = alpha * sq + c * gi * gi;
  sq = si;
  T var = si;
  if (gavg != nullptr) {
    const T ai = alpha * *gavg + c * gi;
    *gavg = ai;
    var = si - ai * ai;
  }
  const T upd = gi / (std::sqrt(var) + eps);
  if (buf != nullptr) {
    const T b = mom * *buf + upd;
    *buf = b;
    p -= lr * b;
  } else {
    p -= lr * upd;
  }
}

// Adagrad with the decayed learning rate clr
template <class T>
ST_HD void adagrad_element(T& p, T g, T& sum, T clr, T eps, T wd, bool maximize) {
  const T gi = optim_grad(g, p, wd, maximize);
  const T si = sum + gi * gi;
  sum = si;
  p -= clr * gi / (std::sqrt(si) + eps);
}

// ---- batch normalization of one channel (cpp/src/norm.cc, cuda/norm.cu) -----------------------
// The channel's y = x * scale + shift: the inverse deviation formed in double and rounded to T
// once, then the optional affine weight and bias folded in.
template <class T>
ST_HD void bn_scale_shift(T mean, T var, const T* w, const T* b, int64_t ch, double eps,
                          T* scale, T* shift) {
  const T is = T(1 / std::sqrt(double(var) + eps));
  const T sc = (w ? w[ch] : T(1)) * is;
  *scale = sc;
  *shift = (b ? b[ch] : T(0)) - mean * sc;
}

// dx of one element from the channel's k = weight * invstd and its means of dy and dy * xhat
template <class T>
ST_HD T bn_input_grad(T dy, T x, T k, T mean, T invstd, T mean_dy, T mean_dy_xhat) {
  return k * (dy - mean_dy - (x - mean) * invstd * mean_dy_xhat);
}

// ---- LSTM and GRU cell gradients of one unit (cpp/src/rnn.cc, cuda/rnn.cu) ---------------------
// s points at the unit's saved gate values, one `hidden` apart as the forward cells store them
// (i, f, g, o for LSTM; r, z, n and the hidden-side n sum for GRU); the gate gradients go out
// with the same spacing.

// LSTM: the gradients of the four gate pre-activations into d; returns that of c_prev
template <class T>
ST_HD T lstm_backward_element(const T* s, T cp, T c, T dh, T dc, T* d, int64_t hidden) {
  const T i = s[0], f = s[hidden], g = s[2 * hidden], o = s[3 * hidden];
  const T tc = tanh_(c);
  const T dct = dc + dh * o * (T(1) - tc * tc);
  d[0] = dct * g * i * (T(1) - i);
  d[hidden] = dct * cp * f * (T(1) - f);
  d[2 * hidden] = dct * i * (T(1) - g * g);
  d[3 * hidden] = dh * tc * o * (T(1) - o);
  return dct * f;
}

// GRU: the gradients of the input-side and hidden-side gate sums into dx and dy; returns that
// of h_prev
template <class T>
ST_HD T gru_backward_element(const T* s, T hp, T dh, T* dx, T* dy, int64_t hidden) {
  const T rg = s[0], z = s[hidden], n = s[2 * hidden], hn = s[3 * hidden];
  const T dn = dh * (T(1) - z) * (T(1) - n * n);
  const T dr = dn * hn * rg * (T(1) - rg);
  const T dz = dh * (hp - n) * z * (T(1) - z);
  dx[0] = dr;
  dx[hidden] = dz;
  dx[2 * hidden] = dn;
  dy[0] = dr;
  dy[hidden] = dz;
  dy[2 * hidden] = dn * rg;
  return dh * z;
}

}  // namespace st

#endif  // SINGA_TENSOR_FUNCTORS_H_
