// Fused optimizer updates: one pass over each parameter reads the gradient and the state once
// and writes the parameter and the state once, instead of a chain of elementwise ops with a
// temporary each. The rules are PyTorch's (see the header).
#include <cmath>

#include "common.h"

namespace st {
namespace {

// The gradient as the update sees it: negated when maximizing, plus L2 weight decay.
template <class T>
inline T effective_grad(T g, T p, T wd, bool maximize) {
  g = maximize ? -g : g;
  return g + wd * p;
}

template <class T>
void sgd(T* p, const T* g, T* buf, int64_t n, double lr_, double mom_, double damp_, double wd_,
         bool nesterov, bool maximize, bool first) {
  const T lr = T(lr_), mom = T(mom_), keep = T(1 - damp_), wd = T(wd_);
  parallel_for(n, 1, [&](int64_t s, int64_t e) {
    if (buf == nullptr) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) p[i] -= lr * effective_grad(g[i], p[i], wd, maximize);
    } else if (first) {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        const T gi = effective_grad(g[i], p[i], wd, maximize);
        buf[i] = gi;
        p[i] -= lr * (nesterov ? gi + mom * gi : gi);
      }
    } else {
#pragma omp simd
      for (int64_t i = s; i < e; ++i) {
        const T gi = effective_grad(g[i], p[i], wd, maximize);
        const T b = mom * buf[i] + keep * gi;
        buf[i] = b;
        p[i] -= lr * (nesterov ? gi + mom * b : b);
      }
    }
  });
}

template <class T>
void adam(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr, double b1_, double b2_,
          double eps_, double wd_, bool decoupled, bool maximize, double bias1, double bias2) {
  // 1 - beta in double, as PyTorch passes it: 1 - 0.999f in float32 is off by 1e-5 relative
  const T b1 = T(b1_), b2 = T(b2_), c1 = T(1 - b1_), c2 = T(1 - b2_), eps = T(eps_);
  const T l2 = decoupled ? T(0) : T(wd_);
  const T shrink = decoupled ? T(1 - lr * wd_) : T(1);
  const T step = T(lr / bias1), sqrt_bias2 = T(std::sqrt(bias2));  // PyTorch's op order
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) {
      const T pi = p[i] * shrink;
      const T gi = effective_grad(g[i], p[i], l2, maximize);
      const T mi = b1 * m[i] + c1 * gi;
      T vi = b2 * v[i] + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      if (vmax != nullptr) {
        vi = vi > vmax[i] ? vi : vmax[i];
        vmax[i] = vi;
      }
      p[i] = pi - step * (mi / (std::sqrt(vi) / sqrt_bias2 + eps));
    }
  });
}

template <class T>
void rmsprop(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr_, double alpha_,
             double eps_, double wd_, double mom_, bool maximize) {
  const T lr = T(lr_), alpha = T(alpha_), c = T(1 - alpha_), eps = T(eps_), wd = T(wd_);
  const T mom = T(mom_);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) {
      const T gi = effective_grad(g[i], p[i], wd, maximize);
      const T si = alpha * sq[i] + c * gi * gi;
      sq[i] = si;
      T var = si;
      if (gavg != nullptr) {
        const T ai = alpha * gavg[i] + c * gi;
        gavg[i] = ai;
        var = si - ai * ai;
      }
      const T upd = gi / (std::sqrt(var) + eps);
      if (buf != nullptr) {
        const T b = mom * buf[i] + upd;
        buf[i] = b;
        p[i] -= lr * b;
      } else {
        p[i] -= lr * upd;
      }
    }
  });
}

template <class T>
void adagrad(T* p, const T* g, T* sum, int64_t n, double clr_, double eps_, double wd_,
             bool maximize) {
  const T clr = T(clr_), eps = T(eps_), wd = T(wd_);
  parallel_for(n, 4, [&](int64_t s, int64_t e) {
#pragma omp simd
    for (int64_t i = s; i < e; ++i) {
      const T gi = effective_grad(g[i], p[i], wd, maximize);
      const T si = sum[i] + gi * gi;
      sum[i] = si;
      p[i] -= clr * gi / (std::sqrt(si) + eps);
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
