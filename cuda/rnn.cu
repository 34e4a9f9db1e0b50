// Fused LSTM and GRU cells; the CUDA twin of cpp/src/rnn.cc. One thread per (row, unit): each
// reads its gate pre-activations, writes the new state and what the backward needs, with the
// same sigmoid/tanh as the CPU (functors.h).
#include "common.cuh"

namespace st {
namespace {

template <class T>
__global__ void lstm_cell_kernel(const T* __restrict__ gx, const T* __restrict__ gh,
                                 const T* __restrict__ bias, const T* __restrict__ cp,
                                 T* __restrict__ h, T* __restrict__ c, T* __restrict__ saved,
                                 int64_t n, int64_t hidden) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    const int64_t r = k / hidden, j = k - r * hidden;
    const int64_t base = r * 4 * hidden + j;
    T ai = gx[base] + gh[base], af = gx[base + hidden] + gh[base + hidden];
    T ag = gx[base + 2 * hidden] + gh[base + 2 * hidden];
    T ao = gx[base + 3 * hidden] + gh[base + 3 * hidden];
    if (bias) {
      ai += bias[j];
      af += bias[hidden + j];
      ag += bias[2 * hidden + j];
      ao += bias[3 * hidden + j];
    }
    const T i = sigmoid(ai), f = sigmoid(af), g = tanh_(ag), o = sigmoid(ao);
    const T cn = f * cp[k] + i * g;
    c[k] = cn;
    h[k] = o * tanh_(cn);
    if (saved) {
      saved[base] = i;
      saved[base + hidden] = f;
      saved[base + 2 * hidden] = g;
      saved[base + 3 * hidden] = o;
    }
  }
}

template <class T>
__global__ void lstm_cell_backward_kernel(const T* __restrict__ saved, const T* __restrict__ cp,
                                          const T* __restrict__ c, const T* __restrict__ dh,
                                          const T* __restrict__ dc, T* __restrict__ dgates,
                                          T* __restrict__ dcp, int64_t n, int64_t hidden) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    const int64_t r = k / hidden, j = k - r * hidden;
    const int64_t base = r * 4 * hidden + j;
    dcp[k] = lstm_backward_element(saved + base, cp[k], c[k], dh[k], dc[k], dgates + base, hidden);
  }
}

template <class T>
__global__ void gru_cell_kernel(const T* __restrict__ gx, const T* __restrict__ gh,
                                const T* __restrict__ bias, const T* __restrict__ hp,
                                T* __restrict__ h, T* __restrict__ saved, int64_t n,
                                int64_t hidden) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    const int64_t r = k / hidden, j = k - r * hidden;
    const int64_t base = r * 3 * hidden + j;
    T ar = gx[base] + gh[base], az = gx[base + hidden] + gh[base + hidden];
    T hn = gh[base + 2 * hidden];
    if (bias) {
      ar += bias[j];
      az += bias[hidden + j];
      hn += bias[2 * hidden + j];
    }
    const T rg = sigmoid(ar), z = sigmoid(az), nn = tanh_(gx[base + 2 * hidden] + rg * hn);
    h[k] = (T(1) - z) * nn + z * hp[k];
    if (saved) {
      const int64_t sb = r * 4 * hidden + j;
      saved[sb] = rg;
      saved[sb + hidden] = z;
      saved[sb + 2 * hidden] = nn;
      saved[sb + 3 * hidden] = hn;
    }
  }
}

template <class T>
__global__ void gru_cell_backward_kernel(const T* __restrict__ saved, const T* __restrict__ hp,
                                         const T* __restrict__ dh, T* __restrict__ dgx,
                                         T* __restrict__ dgh, T* __restrict__ dhp, int64_t n,
                                         int64_t hidden) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    const int64_t r = k / hidden, j = k - r * hidden;
    const int64_t sb = r * 4 * hidden + j, base = r * 3 * hidden + j;
    dhp[k] = gru_backward_element(saved + sb, hp[k], dh[k], dgx + base, dgh + base, hidden);
  }
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_CUDA_DEF_RNN(sfx, T, _)                                                             \
  void st_lstm_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias, const T* c_prev,  \
                          T* h, T* c, T* saved, int64_t batch, int64_t hidden, void* stream) { \
    st::cuda::launch_1d(st::lstm_cell_kernel<T>, batch * hidden, stream, gates_x, gates_h,     \
                        bias, c_prev, h, c, saved, batch * hidden, hidden);                    \
  }                                                                                            \
  void st_lstm_cell_backward_##sfx(const T* saved, const T* c_prev, const T* c, const T* dh,   \
                                   const T* dc, T* dgates, T* dc_prev, int64_t batch,          \
                                   int64_t hidden, void* stream) {                             \
    st::cuda::launch_1d(st::lstm_cell_backward_kernel<T>, batch * hidden, stream, saved,       \
                        c_prev, c, dh, dc, dgates, dc_prev, batch * hidden, hidden);           \
  }                                                                                            \
  void st_gru_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias_h, const T* h_prev, \
                         T* h, T* saved, int64_t batch, int64_t hidden, void* stream) {        \
    st::cuda::launch_1d(st::gru_cell_kernel<T>, batch * hidden, stream, gates_x, gates_h,      \
                        bias_h, h_prev, h, saved, batch * hidden, hidden);                     \
  }                                                                                            \
  void st_gru_cell_backward_##sfx(const T* saved, const T* h_prev, const T* dh, T* dgates_x,   \
                                  T* dgates_h, T* dh_prev, int64_t batch, int64_t hidden,      \
                                  void* stream) {                                              \
    st::cuda::launch_1d(st::gru_cell_backward_kernel<T>, batch * hidden, stream, saved,        \
                        h_prev, dh, dgates_x, dgates_h, dh_prev, batch * hidden, hidden);      \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_RNN, _)
}
