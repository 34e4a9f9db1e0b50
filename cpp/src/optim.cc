// Fused optimizer updates: one pass over each parameter reads the gradient and the state once
// and writes the parameter and the state once, instead of a chain of elementwise ops with a
// temporary each. The per-element rules (PyTorch's) live in functors.h, shared with CUDA.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "common.h"

namespace st {
namespace {

// One SGD rule over elements [s, e) of one tensor
template <class T>
struct SgdRule {
  T a, b, c, d;
  bool nesterov, maximize, first;
  SgdRule(double lr, double mom, double damp, double wd, bool nest, bool maxi, bool fst)
      : a(T(lr)), b(T(mom)), c(T(1 - damp)), d(T(wd)), nesterov(nest), maximize(maxi),
        first(fst) {}
  void operator()(T* p, const T* g, T* buf, int64_t s, int64_t e) const {
    if (buf == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        sgd_element(p[i], g[i], static_cast<T*>(nullptr), a, b, c, d, nesterov, maximize, first);
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        sgd_element(p[i], g[i], buf + i, a, b, c, d, nesterov, maximize, first);
    }
  }
};

template <class T>
void sgd(T* p, const T* g, T* buf, int64_t n, double lr, double mom, double damp, double wd,
         bool nesterov, bool maximize, bool first) {
  const SgdRule<T> rule(lr, mom, damp, wd, nesterov, maximize, first);
  parallel_for(n, 1, [&](int64_t s, int64_t e) { rule(p, g, buf, s, e); });
}

// span(i, s, e) over elements [s, e) of tensor i, for `count` tensors of n[i] elements taken
// as one range split over the threads: one fork for a whole parameter list, and each thread
// an equal share whatever the tensors' sizes
template <class F>
void over_tensors(const int64_t* n, int64_t count, int64_t cost, F&& span) {
  std::vector<int64_t> start(size_t(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i) start[i + 1] = start[i] + n[i];
  parallel_for(start[count], cost, [&](int64_t s, int64_t e) {
    int64_t i = std::upper_bound(start.begin(), start.end(), s) - start.begin() - 1;
    for (; i < count && start[i] < e; ++i) {
      const int64_t b = std::max(s, start[i]) - start[i], en = std::min(e, start[i + 1]) - start[i];
      if (b < en) span(i, b, en);
    }
  });
}

template <class T>
void sgd_multi(T* const* p, const T* const* g, T* const* buf, const int64_t* n, int64_t count,
               double lr, double mom, double damp, double wd, bool nesterov, bool maximize,
               bool first) {
  const SgdRule<T> rule(lr, mom, damp, wd, nesterov, maximize, first);
  over_tensors(n, count, 1, [&](int64_t i, int64_t s, int64_t e) {
    rule(p[i], g[i], buf ? buf[i] : nullptr, s, e);
  });
}

// One Adam rule over elements [s, e) of one tensor
template <class T>
struct AdamRule {
  T tb1, tb2, c1, c2, te, l2, shrink, step, sqrt_bias2;
  bool maximize;
  AdamRule(double lr, double b1, double b2, double eps, double wd, bool decoupled, bool maxi,
           double bias1, double bias2)
      // 1 - beta in double, as PyTorch passes it: 1 - 0.999f in float32 is off by 1e-5 relative
      : tb1(T(b1)), tb2(T(b2)), c1(T(1 - b1)), c2(T(1 - b2)), te(T(eps)),
        l2(decoupled ? T(0) : T(wd)), shrink(decoupled ? T(1 - lr * wd) : T(1)),
        step(T(lr / bias1)), sqrt_bias2(T(std::sqrt(bias2))), maximize(maxi) {}
  void operator()(T* p, const T* g, T* m, T* v, T* vmax, int64_t s, int64_t e) const {
    // the rule's values as locals: read through `this`, every store to p, m or v might
    // change them (same type), and the loop would not vectorise
    const T b1 = tb1, b2 = tb2, k1 = c1, k2 = c2, ep = te, wd = l2, sh = shrink, st = step,
            sb = sqrt_bias2;
    const bool maxi = maximize;
    if (vmax == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        adam_element(p[i], g[i], m[i], v[i], static_cast<T*>(nullptr), b1, b2, k1, k2, ep, wd,
                     sh, st, sb, maxi);
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        adam_element(p[i], g[i], m[i], v[i], vmax + i, b1, b2, k1, k2, ep, wd, sh, st, sb, maxi);
    }
  }
};

template <class T>
void adam(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr, double b1, double b2,
          double eps, double wd, bool decoupled, bool maximize, double bias1, double bias2) {
  const AdamRule<T> rule(lr, b1, b2, eps, wd, decoupled, maximize, bias1, bias2);
  parallel_for(n, 4, [&](int64_t s, int64_t e) { rule(p, g, m, v, vmax, s, e); });
}

template <class T>
void adam_multi(T* const* p, const T* const* g, T* const* m, T* const* v, T* const* vmax,
                const int64_t* n, int64_t count, double lr, double b1, double b2, double eps,
                double wd, bool decoupled, bool maximize, double bias1, double bias2) {
  const AdamRule<T> rule(lr, b1, b2, eps, wd, decoupled, maximize, bias1, bias2);
  over_tensors(n, count, 4, [&](int64_t i, int64_t s, int64_t e) {
    rule(p[i], g[i], m[i], v[i], vmax ? vmax[i] : nullptr, s, e);
  });
}

template <class T>
void rmsprop(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr, double alpha,
             double eps, double wd, double mom, bool maximize) {
  const T a0 = T(lr), al0 = T(alpha), c0 = T(1 - alpha), te0 = T(eps), d0 = T(wd), mo0 = T(mom);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    // locals, not the captured references (which stores to p might change), and one loop
    // per optional buffer, so that each loop vectorises
    const T a = a0, al = al0, c = c0, te = te0, d = d0, mo = mo0;
    const bool maxi = maximize;
    if (buf == nullptr && gavg == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        rmsprop_element(p[i], g[i], sq[i], static_cast<T*>(nullptr), static_cast<T*>(nullptr),
                        a, al, c, te, d, mo, maxi);
    } else if (gavg == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        rmsprop_element(p[i], g[i], sq[i], buf + i, static_cast<T*>(nullptr), a, al, c, te, d,
                        mo, maxi);
    } else if (buf == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        rmsprop_element(p[i], g[i], sq[i], static_cast<T*>(nullptr), gavg + i, a, al, c, te, d,
                        mo, maxi);
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i)
        rmsprop_element(p[i], g[i], sq[i], buf + i, gavg + i, a, al, c, te, d, mo, maxi);
    }
  });
}

template <class T>
void adagrad(T* p, const T* g, T* sum, int64_t n, double clr, double eps, double wd,
             bool maximize) {
  const T a = T(clr), te = T(eps), d = T(wd);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) adagrad_element(p[i], g[i], sum[i], a, te, d, maximize);
  });
}

// float16 / bfloat16 parameters, gradients and state: each element loaded into float32, the
// float32 rule above applied, and every stored value rounded once
template <class Tag>
void sgd_half(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, double lr, double mom,
              double damp, double wd, bool nesterov, bool maximize, bool first) {
  const float a = float(lr), b = float(mom), c = float(1 - damp), d = float(wd);
  // one loop per case, without branches on the data, so that the loops vectorise
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    if (buf == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        float pi = cast_load<Tag>(p[i]);
        sgd_element(pi, cast_load<Tag>(g[i]), static_cast<float*>(nullptr), a, b, c, d,
                    nesterov, maximize, first);
        p[i] = cast_store<Tag>(pi);
      }
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        float pi = cast_load<Tag>(p[i]);
        float bi = first ? 0.0f : cast_load<Tag>(buf[i]);
        sgd_element(pi, cast_load<Tag>(g[i]), &bi, a, b, c, d, nesterov, maximize, first);
        buf[i] = cast_store<Tag>(bi);
        p[i] = cast_store<Tag>(pi);
      }
    }
  });
}

template <class Tag>
void adam_half(uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v, uint16_t* vmax,
               int64_t n, double lr, double b1, double b2, double eps, double wd, bool decoupled,
               bool maximize, double bias1, double bias2) {
  const float tb10 = float(b1), tb20 = float(b2), c10 = float(1 - b1), c20 = float(1 - b2);
  const float te0 = float(eps), l20 = decoupled ? 0.0f : float(wd);
  const float shrink0 = decoupled ? float(1 - lr * wd) : 1.0f;
  const float step0 = float(lr / bias1), sqrt_bias20 = float(std::sqrt(bias2));
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    // locals, not the captured references, so that the loops vectorise
    const float tb1 = tb10, tb2 = tb20, c1 = c10, c2 = c20, te = te0, l2 = l20;
    const float shrink = shrink0, step = step0, sqrt_bias2 = sqrt_bias20;
    const bool maxi = maximize;
    if (vmax == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        float pi = cast_load<Tag>(p[i]), mi = cast_load<Tag>(m[i]), vi = cast_load<Tag>(v[i]);
        adam_element(pi, cast_load<Tag>(g[i]), mi, vi, static_cast<float*>(nullptr), tb1, tb2,
                     c1, c2, te, l2, shrink, step, sqrt_bias2, maxi);
        p[i] = cast_store<Tag>(pi);
        m[i] = cast_store<Tag>(mi);
        v[i] = cast_store<Tag>(vi);
      }
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        float pi = cast_load<Tag>(p[i]), mi = cast_load<Tag>(m[i]), vi = cast_load<Tag>(v[i]);
        float xi = cast_load<Tag>(vmax[i]);
        adam_element(pi, cast_load<Tag>(g[i]), mi, vi, &xi, tb1, tb2, c1, c2, te, l2, shrink,
                     step, sqrt_bias2, maxi);
        p[i] = cast_store<Tag>(pi);
        m[i] = cast_store<Tag>(mi);
        v[i] = cast_store<Tag>(vi);
        vmax[i] = cast_store<Tag>(xi);
      }
    }
  });
}

template <class Tag>
void rmsprop_half(uint16_t* p, const uint16_t* g, uint16_t* sq, uint16_t* buf, uint16_t* gavg,
                  int64_t n, double lr, double alpha, double eps, double wd, double mom,
                  bool maximize) {
  const float a0 = float(lr), al0 = float(alpha), c0 = float(1 - alpha), te0 = float(eps);
  const float d0 = float(wd), mo0 = float(mom);
  // one loop per optional buffer (kBuf, kAvg), with locals for the constants, so that it
  // vectorises
  auto run = [&](auto has_buf, auto has_avg, int64_t s, int64_t e) {
    constexpr bool kBuf = decltype(has_buf)::value, kAvg = decltype(has_avg)::value;
    const float a = a0, al = al0, c = c0, te = te0, d = d0, mo = mo0;
    const bool maxi = maximize;
#pragma omp simd
    for (int64_t i = s; i < e; ++i) {
      float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sq[i]);
      float bi = kBuf ? cast_load<Tag>(buf[i]) : 0.0f, ai = kAvg ? cast_load<Tag>(gavg[i]) : 0.0f;
      rmsprop_element(pi, cast_load<Tag>(g[i]), si, kBuf ? &bi : nullptr, kAvg ? &ai : nullptr,
                      a, al, c, te, d, mo, maxi);
      p[i] = cast_store<Tag>(pi);
      sq[i] = cast_store<Tag>(si);
      if (kBuf) buf[i] = cast_store<Tag>(bi);
      if (kAvg) gavg[i] = cast_store<Tag>(ai);
    }
  };
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    using Y = std::true_type;
    using N = std::false_type;
    if (buf == nullptr && gavg == nullptr) run(N{}, N{}, s, e);
    else if (gavg == nullptr) run(Y{}, N{}, s, e);
    else if (buf == nullptr) run(N{}, Y{}, s, e);
    else run(Y{}, Y{}, s, e);
  });
}

template <class Tag>
void adagrad_half(uint16_t* p, const uint16_t* g, uint16_t* sum, int64_t n, double clr,
                  double eps, double wd, bool maximize) {
  const float a0 = float(clr), te0 = float(eps), d0 = float(wd);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    const float a = a0, te = te0, d = d0;  // locals, so that the loop vectorises
    const bool maxi = maximize;
#pragma omp simd
    for (int64_t i = s; i < e; ++i) {
      float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sum[i]);
      adagrad_element(pi, cast_load<Tag>(g[i]), si, a, te, d, maxi);
      p[i] = cast_store<Tag>(pi);
      sum[i] = cast_store<Tag>(si);
    }
  });
}

}  // namespace
}  // namespace st

#define ST_DEF_OPTIM(sfx, T, _)                                                                \
  void st_sgd_step_##sfx(T* p, const T* g, T* buf, int64_t n, double lr, double momentum,      \
                         double dampening, double weight_decay, int32_t nesterov,             \
                         int32_t maximize, int32_t first) {                                   \
    st::sgd(p, g, buf, n, lr, momentum, dampening, weight_decay, nesterov, maximize, first);   \
  }                                                                                            \
  void st_adam_step_##sfx(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr,         \
                          double beta1, double beta2, double eps, double weight_decay,         \
                          int32_t decoupled, int32_t maximize, double bias1, double bias2) {   \
    st::adam(p, g, m, v, vmax, n, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,    \
             bias1, bias2);                                                                    \
  }                                                                                            \
  void st_rmsprop_step_##sfx(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr,   \
                             double alpha, double eps, double weight_decay, double momentum,   \
                             int32_t maximize) {                                               \
    st::rmsprop(p, g, sq, buf, gavg, n, lr, alpha, eps, weight_decay, momentum, maximize);     \
  }                                                                                            \
  void st_adagrad_step_##sfx(T* p, const T* g, T* sum, int64_t n, double clr, double eps,      \
                             double weight_decay, int32_t maximize) {                          \
    st::adagrad(p, g, sum, n, clr, eps, weight_decay, maximize);                               \
  }
ST_FLOAT_TYPES(ST_DEF_OPTIM, _)

#define ST_DEF_OPTIM_MULTI(sfx, T, _)                                                          \
  void st_sgd_step_multi_##sfx(T* const* p, const T* const* g, T* const* buf, const int64_t* n, \
                               int64_t count, double lr, double momentum, double dampening,    \
                               double weight_decay, int32_t nesterov, int32_t maximize,        \
                               int32_t first) {                                                \
    st::sgd_multi(p, g, buf, n, count, lr, momentum, dampening, weight_decay, nesterov,        \
                  maximize, first);                                                            \
  }                                                                                            \
  void st_adam_step_multi_##sfx(T* const* p, const T* const* g, T* const* m, T* const* v,      \
                                T* const* vmax, const int64_t* n, int64_t count, double lr,    \
                                double beta1, double beta2, double eps, double weight_decay,   \
                                int32_t decoupled, int32_t maximize, double bias1,             \
                                double bias2) {                                                \
    st::adam_multi(p, g, m, v, vmax, n, count, lr, beta1, beta2, eps, weight_decay, decoupled, \
                   maximize, bias1, bias2);                                                    \
  }
ST_FLOAT_TYPES(ST_DEF_OPTIM_MULTI, _)

#define ST_DEF_OPTIM_HALF(sfx, T, _)                                                           \
  void st_sgd_step_##sfx(T* p, const T* g, T* buf, int64_t n, double lr, double momentum,      \
                         double dampening, double weight_decay, int32_t nesterov,             \
                         int32_t maximize, int32_t first) {                                   \
    st::sgd_half<ST_TAG_##sfx>(p, g, buf, n, lr, momentum, dampening, weight_decay, nesterov,  \
                               maximize, first);                                               \
  }                                                                                            \
  void st_adam_step_##sfx(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr,         \
                          double beta1, double beta2, double eps, double weight_decay,         \
                          int32_t decoupled, int32_t maximize, double bias1, double bias2) {   \
    st::adam_half<ST_TAG_##sfx>(p, g, m, v, vmax, n, lr, beta1, beta2, eps, weight_decay,      \
                                decoupled, maximize, bias1, bias2);                            \
  }                                                                                            \
  void st_rmsprop_step_##sfx(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr,   \
                             double alpha, double eps, double weight_decay, double momentum,   \
                             int32_t maximize) {                                               \
    st::rmsprop_half<ST_TAG_##sfx>(p, g, sq, buf, gavg, n, lr, alpha, eps, weight_decay,       \
                                   momentum, maximize);                                        \
  }                                                                                            \
  void st_adagrad_step_##sfx(T* p, const T* g, T* sum, int64_t n, double clr, double eps,      \
                             double weight_decay, int32_t maximize) {                          \
    st::adagrad_half<ST_TAG_##sfx>(p, g, sum, n, clr, eps, weight_decay, maximize);            \
  }
ST_HALF_TYPES(ST_DEF_OPTIM_HALF, _)
