// Fused optimizer updates: one pass over each parameter reads the gradient and the state once
// and writes the parameter and the state once, instead of a chain of elementwise ops with a
// temporary each. The per-element rules (PyTorch's) live in functors.h, shared with CUDA.
#include <algorithm>
#include <cmath>
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
#pragma omp simd
    for (int64_t i = s; i < e; ++i)
      adam_element(p[i], g[i], m[i], v[i], vmax ? vmax + i : nullptr, tb1, tb2, c1, c2, te, l2,
                   shrink, step, sqrt_bias2, maximize);
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
  const T a = T(lr), al = T(alpha), c = T(1 - alpha), te = T(eps), d = T(wd), mo = T(mom);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i)
      rmsprop_element(p[i], g[i], sq[i], buf ? buf + i : nullptr, gavg ? gavg + i : nullptr, a,
                      al, c, te, d, mo, maximize);
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
  const float tb1 = float(b1), tb2 = float(b2), c1 = float(1 - b1), c2 = float(1 - b2);
  const float te = float(eps), l2 = decoupled ? 0.0f : float(wd);
  const float shrink = decoupled ? float(1 - lr * wd) : 1.0f;
  const float step = float(lr / bias1), sqrt_bias2 = float(std::sqrt(bias2));
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    if (vmax == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        float pi = cast_load<Tag>(p[i]), mi = cast_load<Tag>(m[i]), vi = cast_load<Tag>(v[i]);
        adam_element(pi, cast_load<Tag>(g[i]), mi, vi, static_cast<float*>(nullptr), tb1, tb2,
                     c1, c2, te, l2, shrink, step, sqrt_bias2, maximize);
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
                     step, sqrt_bias2, maximize);
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
  const float a = float(lr), al = float(alpha), c = float(1 - alpha), te = float(eps);
  const float d = float(wd), mo = float(mom);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sq[i]);
      float bi = buf ? cast_load<Tag>(buf[i]) : 0.0f, ai = gavg ? cast_load<Tag>(gavg[i]) : 0.0f;
      rmsprop_element(pi, cast_load<Tag>(g[i]), si, buf ? &bi : nullptr, gavg ? &ai : nullptr, a,
                      al, c, te, d, mo, maximize);
      p[i] = cast_store<Tag>(pi);
      sq[i] = cast_store<Tag>(si);
      if (buf) buf[i] = cast_store<Tag>(bi);
      if (gavg) gavg[i] = cast_store<Tag>(ai);
    }
  });
}

template <class Tag>
void adagrad_half(uint16_t* p, const uint16_t* g, uint16_t* sum, int64_t n, double clr,
                  double eps, double wd, bool maximize) {
  const float a = float(clr), te = float(eps), d = float(wd);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sum[i]);
      adagrad_element(pi, cast_load<Tag>(g[i]), si, a, te, d, maximize);
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
