// Fused optimizer updates, the CUDA twin of cpp/src/optim.cc: one thread per element reads the
// gradient and the state once and writes the parameter and the state once. The scalar factors
// are rounded to T on the host exactly as the CPU rounds them.
#include <cmath>

#include "common.cuh"

namespace st {
namespace {

using cuda::thread_count;
using cuda::thread_index;

// kState: 0 without a momentum buffer, 1 on the first step (the buffer starts as the gradient),
// 2 afterwards; the per-element rules live in functors.h, shared with the CPU
template <class T, int kState>
__global__ void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf,
                           int64_t n, T lr, T mom, T keep, T wd, bool nesterov, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    sgd_element(p[i], g[i], kState == 0 ? static_cast<T*>(nullptr) : buf + i, lr, mom, keep, wd,
                nesterov, maximize, kState == 1);
}

template <class T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                            T* __restrict__ v, T* __restrict__ vmax, int64_t n, T b1, T b2, T c1,
                            T c2, T eps, T l2, T shrink, T step, T sqrt_bias2, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    adam_element(p[i], g[i], m[i], v[i], vmax != nullptr ? vmax + i : nullptr, b1, b2, c1, c2,
                 eps, l2, shrink, step, sqrt_bias2, maximize);
}

template <class T>
__global__ void rmsprop_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq,
                               T* __restrict__ buf, T* __restrict__ gavg, int64_t n, T lr,
                               T alpha, T c, T eps, T wd, T mom, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    rmsprop_element(p[i], g[i], sq[i], buf != nullptr ? buf + i : nullptr,
                    gavg != nullptr ? gavg + i : nullptr, lr, alpha, c, eps, wd, mom, maximize);
}

template <class T>
__global__ void adagrad_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum,
                               int64_t n, T clr, T eps, T wd, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    adagrad_element(p[i], g[i], sum[i], clr, eps, wd, maximize);
}

template <class T>
void sgd(T* p, const T* g, T* buf, int64_t n, double lr, double mom, double damp, double wd,
         bool nesterov, bool maximize, bool first, void* stream) {
  const T args[4] = {T(lr), T(mom), T(1 - damp), T(wd)};
  if (buf == nullptr)
    cuda::launch_1d(sgd_kernel<T, 0>, n, stream, p, g, buf, n, args[0], args[1], args[2],
                    args[3], nesterov, maximize);
  else if (first)
    cuda::launch_1d(sgd_kernel<T, 1>, n, stream, p, g, buf, n, args[0], args[1], args[2],
                    args[3], nesterov, maximize);
  else
    cuda::launch_1d(sgd_kernel<T, 2>, n, stream, p, g, buf, n, args[0], args[1], args[2],
                    args[3], nesterov, maximize);
}

template <class T>
void adam(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr, double b1, double b2,
          double eps, double wd, bool decoupled, bool maximize, double bias1, double bias2,
          void* stream) {
  const T l2 = decoupled ? T(0) : T(wd);
  const T shrink = decoupled ? T(1 - lr * wd) : T(1);
  // 1 - beta in double, as PyTorch passes it: 1 - 0.999f in float32 is off by 1e-5 relative
  cuda::launch_1d(adam_kernel<T>, n, stream, p, g, m, v, vmax, n, T(b1), T(b2), T(1 - b1),
                  T(1 - b2), T(eps), l2, shrink, T(lr / bias1), T(std::sqrt(bias2)), maximize);
}

// float16 / bfloat16 parameters, gradients and state: each element loaded into float32, the
// float32 rule applied (scalars rounded to float32 as for float32 parameters), every stored
// value rounded once
template <class Tag>
__global__ void sgd_half_kernel(uint16_t* __restrict__ p, const uint16_t* __restrict__ g,
                                uint16_t* __restrict__ buf, int64_t n, float lr, float mom,
                                float keep, float wd, bool nesterov, bool maximize, bool first) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    float pi = cast_load<Tag>(p[i]);
    if (buf == nullptr) {
      sgd_element(pi, cast_load<Tag>(g[i]), static_cast<float*>(nullptr), lr, mom, keep, wd,
                  nesterov, maximize, first);
    } else {
      float bi = first ? 0.0f : cast_load<Tag>(buf[i]);
      sgd_element(pi, cast_load<Tag>(g[i]), &bi, lr, mom, keep, wd, nesterov, maximize, first);
      buf[i] = cast_store<Tag>(bi);
    }
    p[i] = cast_store<Tag>(pi);
  }
}

template <class Tag>
__global__ void adam_half_kernel(uint16_t* __restrict__ p, const uint16_t* __restrict__ g,
                                 uint16_t* __restrict__ m, uint16_t* __restrict__ v,
                                 uint16_t* __restrict__ vmax, int64_t n, float b1, float b2,
                                 float c1, float c2, float eps, float l2, float shrink,
                                 float step, float sqrt_bias2, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    float pi = cast_load<Tag>(p[i]), mi = cast_load<Tag>(m[i]), vi = cast_load<Tag>(v[i]);
    float xi = vmax != nullptr ? cast_load<Tag>(vmax[i]) : 0.0f;
    adam_element(pi, cast_load<Tag>(g[i]), mi, vi, vmax != nullptr ? &xi : nullptr, b1, b2, c1,
                 c2, eps, l2, shrink, step, sqrt_bias2, maximize);
    p[i] = cast_store<Tag>(pi);
    m[i] = cast_store<Tag>(mi);
    v[i] = cast_store<Tag>(vi);
    if (vmax != nullptr) vmax[i] = cast_store<Tag>(xi);
  }
}

template <class Tag>
__global__ void rmsprop_half_kernel(uint16_t* __restrict__ p, const uint16_t* __restrict__ g,
                                    uint16_t* __restrict__ sq, uint16_t* __restrict__ buf,
                                    uint16_t* __restrict__ gavg, int64_t n, float lr,
                                    float alpha, float c, float eps, float wd, float mom,
                                    bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sq[i]);
    float bi = buf != nullptr ? cast_load<Tag>(buf[i]) : 0.0f;
    float ai = gavg != nullptr ? cast_load<Tag>(gavg[i]) : 0.0f;
    rmsprop_element(pi, cast_load<Tag>(g[i]), si, buf != nullptr ? &bi : nullptr,
                    gavg != nullptr ? &ai : nullptr, lr, alpha, c, eps, wd, mom, maximize);
    p[i] = cast_store<Tag>(pi);
    sq[i] = cast_store<Tag>(si);
    if (buf != nullptr) buf[i] = cast_store<Tag>(bi);
    if (gavg != nullptr) gavg[i] = cast_store<Tag>(ai);
  }
}

template <class Tag>
__global__ void adagrad_half_kernel(uint16_t* __restrict__ p, const uint16_t* __restrict__ g,
                                    uint16_t* __restrict__ sum, int64_t n, float clr, float eps,
                                    float wd, bool maximize) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    float pi = cast_load<Tag>(p[i]), si = cast_load<Tag>(sum[i]);
    adagrad_element(pi, cast_load<Tag>(g[i]), si, clr, eps, wd, maximize);
    p[i] = cast_store<Tag>(pi);
    sum[i] = cast_store<Tag>(si);
  }
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_OPTIM(sfx, T, _)                                                           \
  void st_sgd_step_##sfx(T* p, const T* g, T* buf, int64_t n, double lr, double momentum,      \
                         double dampening, double weight_decay, int32_t nesterov,             \
                         int32_t maximize, int32_t first, void* stream) {                     \
    st::sgd(p, g, buf, n, lr, momentum, dampening, weight_decay, nesterov, maximize, first,    \
            stream);                                                                           \
  }                                                                                            \
  void st_adam_step_##sfx(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr,         \
                          double beta1, double beta2, double eps, double weight_decay,         \
                          int32_t decoupled, int32_t maximize, double bias1, double bias2,     \
                          void* stream) {                                                      \
    st::adam(p, g, m, v, vmax, n, lr, beta1, beta2, eps, weight_decay, decoupled, maximize,    \
             bias1, bias2, stream);                                                            \
  }                                                                                            \
  void st_rmsprop_step_##sfx(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr,   \
                             double alpha, double eps, double weight_decay, double momentum,   \
                             int32_t maximize, void* stream) {                                 \
    st::cuda::launch_1d(st::rmsprop_kernel<T>, n, stream, p, g, sq, buf, gavg, n, T(lr),       \
                        T(alpha), T(1 - alpha), T(eps), T(weight_decay), T(momentum),          \
                        maximize != 0);                                                        \
  }                                                                                            \
  void st_adagrad_step_##sfx(T* p, const T* g, T* sum, int64_t n, double clr, double eps,      \
                             double weight_decay, int32_t maximize, void* stream) {            \
    st::cuda::launch_1d(st::adagrad_kernel<T>, n, stream, p, g, sum, n, T(clr), T(eps),        \
                        T(weight_decay), maximize != 0);                                       \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_OPTIM, _)

#define ST_CUDA_DEF_OPTIM_HALF(sfx, T, _)                                                      \
  void st_sgd_step_##sfx(T* p, const T* g, T* buf, int64_t n, double lr, double momentum,      \
                         double dampening, double weight_decay, int32_t nesterov,             \
                         int32_t maximize, int32_t first, void* stream) {                     \
    st::cuda::launch_1d(st::sgd_half_kernel<ST_TAG_##sfx>, n, stream, p, g, buf, n, float(lr), \
                        float(momentum), float(1 - dampening), float(weight_decay),            \
                        nesterov != 0, maximize != 0, first != 0);                             \
  }                                                                                            \
  void st_adam_step_##sfx(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr,         \
                          double beta1, double beta2, double eps, double weight_decay,         \
                          int32_t decoupled, int32_t maximize, double bias1, double bias2,     \
                          void* stream) {                                                      \
    const float l2 = decoupled ? 0.0f : float(weight_decay);                                   \
    const float shrink = decoupled ? float(1 - lr * weight_decay) : 1.0f;                      \
    st::cuda::launch_1d(st::adam_half_kernel<ST_TAG_##sfx>, n, stream, p, g, m, v, vmax, n,    \
                        float(beta1), float(beta2), float(1 - beta1), float(1 - beta2),        \
                        float(eps), l2, shrink, float(lr / bias1), float(std::sqrt(bias2)),    \
                        maximize != 0);                                                        \
  }                                                                                            \
  void st_rmsprop_step_##sfx(T* p, const T* g, T* sq, T* buf, T* gavg, int64_t n, double lr,   \
                             double alpha, double eps, double weight_decay, double momentum,   \
                             int32_t maximize, void* stream) {                                 \
    st::cuda::launch_1d(st::rmsprop_half_kernel<ST_TAG_##sfx>, n, stream, p, g, sq, buf, gavg, \
                        n, float(lr), float(alpha), float(1 - alpha), float(eps),              \
                        float(weight_decay), float(momentum), maximize != 0);                  \
  }                                                                                            \
  void st_adagrad_step_##sfx(T* p, const T* g, T* sum, int64_t n, double clr, double eps,      \
                             double weight_decay, int32_t maximize, void* stream) {            \
    st::cuda::launch_1d(st::adagrad_half_kernel<ST_TAG_##sfx>, n, stream, p, g, sum, n,        \
                        float(clr), float(eps), float(weight_decay), maximize != 0);           \
  }
ST_HALF_TYPES(ST_CUDA_DEF_OPTIM_HALF, _)
}
