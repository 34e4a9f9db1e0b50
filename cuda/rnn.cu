// Fused LSTM and GRU cells; the CUDA twin of cpp/src/rnn.cc. One thread per (row, unit): each
// reads its gate pre-activations, writes the new state and what the backward needs, with the
// same sigmoid/tanh as the CPU (functors.h).
#include "common.cuh"
#include "singa_tensor/rnn_seq.h"

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

template <class T>
__global__ void rnn_act_kernel(int32_t relu, const T* __restrict__ gx, const T* __restrict__ gh,
                               T* __restrict__ h, int64_t n) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) {
    const T a = gx[k] + gh[k];
    h[k] = relu ? (a > T(0) ? a : T(0)) : tanh_(a);
  }
}

template <class T>
__global__ void rnn_act_backward_kernel(int32_t relu, const T* __restrict__ h,
                                        const T* __restrict__ dh, T* __restrict__ da, int64_t n) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count())
    da[k] = relu ? (h[k] > T(0) ? dh[k] : T(0)) : dh[k] * (T(1) - h[k] * h[k]);
}

template <class T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                           int64_t n) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) y[k] = a[k] + b[k];
}

template <class T>
__global__ void copy_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n) {
  for (int64_t k = cuda::thread_index(); k < n; k += cuda::thread_count()) dst[k] = src[k];
}

template <class T>
void gemm_any(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
              int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc, void* stream);

// The per-step kernels of a whole layer's loop (singa_tensor/rnn_seq.h), all queued on one
// stream: the library's own matrix product and the cell kernels above.
template <class T>
struct CudaSeqOps {
  void* stream;
  void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
            int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    gemm_any<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
  }
  void lstm(const T* gx, const T* gh, const T* cp, T* h, T* c, T* saved, int64_t batch,
            int64_t hidden) {
    cuda::launch_1d(lstm_cell_kernel<T>, batch * hidden, stream, gx, gh,
                    static_cast<const T*>(nullptr), cp, h, c, saved, batch * hidden, hidden);
  }
  void lstm_back(const T* saved, const T* cp, const T* c, const T* dh, const T* dc, T* dgates,
                 T* dcp, int64_t batch, int64_t hidden) {
    cuda::launch_1d(lstm_cell_backward_kernel<T>, batch * hidden, stream, saved, cp, c, dh, dc,
                    dgates, dcp, batch * hidden, hidden);
  }
  void gru(const T* gx, const T* gh, const T* bias, const T* hp, T* h, T* saved, int64_t batch,
           int64_t hidden) {
    cuda::launch_1d(gru_cell_kernel<T>, batch * hidden, stream, gx, gh, bias, hp, h, saved,
                    batch * hidden, hidden);
  }
  void gru_back(const T* saved, const T* hp, const T* dh, T* dgx, T* dgh, T* dhp, int64_t batch,
                int64_t hidden) {
    cuda::launch_1d(gru_cell_backward_kernel<T>, batch * hidden, stream, saved, hp, dh, dgx, dgh,
                    dhp, batch * hidden, hidden);
  }
  void act(bool relu, const T* gx, const T* gh, T* h, int64_t n) {
    cuda::launch_1d(rnn_act_kernel<T>, n, stream, int32_t(relu), gx, gh, h, n);
  }
  void act_back(bool relu, const T* h, const T* dh, T* da, int64_t n) {
    cuda::launch_1d(rnn_act_backward_kernel<T>, n, stream, int32_t(relu), h, dh, da, n);
  }
  void add(const T* a, const T* b, T* y, int64_t n) {
    cuda::launch_1d(add_kernel<T>, n, stream, a, b, y, n);
  }
  void copy(const T* src, T* dst, int64_t n) {
    cuda::launch_1d(copy_kernel<T>, n, stream, src, dst, n);
  }
};

template <>
void gemm_any<float>(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc, void* stream) {
  st_gemm_f32(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1, 0, 0, 0, stream);
}

template <>
void gemm_any<double>(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                      double* c, int64_t ldc, void* stream) {
  st_gemm_f64(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1, 0, 0, 0, stream);
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

#define ST_CUDA_DEF_RNN_SEQ(sfx, T, _)                                                         \
  void st_rnn_seq_forward_##sfx(int32_t mode, int32_t reverse, const T* gates_x,               \
                                const T* w_hh, const T* bias_h, const T* h0, const T* c0,      \
                                T* out, T* h_n, T* c_n, T* saved, T* cells, T* work,           \
                                int64_t steps, int64_t batch, int64_t hidden, void* stream) {  \
    st::CudaSeqOps<T> ops{stream};                                                             \
    st::rnn_seq::forward<T>(ops, mode, reverse, gates_x, w_hh, bias_h, h0, c0, out, h_n, c_n,  \
                            saved, cells, work, steps, batch, hidden);                         \
  }                                                                                            \
  void st_rnn_seq_backward_##sfx(int32_t mode, int32_t reverse, const T* w_hh, const T* h0,    \
                                 const T* c0, const T* out, const T* saved, const T* cells,    \
                                 const T* d_out, const T* d_hn, const T* d_cn, T* d_gates_x,   \
                                 T* d_gates_h, T* d_w_hh, T* d_h0, T* d_c0, T* work,           \
                                 int64_t steps, int64_t batch, int64_t hidden, void* stream) { \
    st::CudaSeqOps<T> ops{stream};                                                             \
    st::rnn_seq::backward<T>(ops, mode, reverse, w_hh, h0, c0, out, saved, cells, d_out, d_hn, \
                             d_cn, d_gates_x, d_gates_h, d_w_hh, d_h0, d_c0, work, steps,      \
                             batch, hidden);                                                   \
  }
ST_FLOAT_TYPES(ST_CUDA_DEF_RNN_SEQ, _)
}
