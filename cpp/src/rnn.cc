// Fused LSTM and GRU cells: after a step's two matrix products, everything else a cell does
// (bias, activations, state update, and what the backward needs) is one pass over the rows, so
// a step costs two kernel calls instead of a dozen elementwise ones.
#include <algorithm>
#include <type_traits>

#include "blas.h"
#include "common.h"
#include "small_gemm.h"
#include "singa_tensor/rnn_seq.h"

namespace st {
namespace {

// a[k] = x[k] + y[k] (+ bias[k]) over one row of gate pre-activations
template <class T>
inline void gate_sum(const T* x, const T* y, const T* bias, T* a, int64_t n) {
  if (bias) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) a[k] = x[k] + y[k] + bias[k];
  } else {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) a[k] = x[k] + y[k];
  }
}

template <class T>
inline void sigmoid_inplace(T* a, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) a[k] = sigmoid(a[k]);
}

// A step's rows are few (the batch), so the cells split each row's units into chunks too and
// spread the (row, chunk) pairs over the threads. A chunk runs as a few flat loops (sum,
// activations, state update) rather than one loop that does everything per unit: flat loops
// vectorise, the fused one did not and ran 15x slower.
constexpr int64_t kUnitChunk = 64;

// body(row, first unit, end unit) over every row and chunk of units; `cost` per unit, in the
// elementwise units of kGrain (an exponential or tanh counts as about ten)
template <class F>
void over_units(int64_t batch, int64_t hidden, int64_t cost, F&& body) {
  const int64_t chunks = (hidden + kUnitChunk - 1) / kUnitChunk;
  parallel_for(batch * chunks, std::min(hidden, kUnitChunk) * cost, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t j0 = (q % chunks) * kUnitChunk;
      body(q / chunks, j0, std::min(hidden, j0 + kUnitChunk));
    }
  });
}

template <class T>
void lstm_cell(const T* gx, const T* gh, const T* bias, const T* cp, T* h, T* c, T* saved,
               int64_t batch, int64_t hidden) {
  const int64_t g4 = 4 * hidden;
  over_units(batch, hidden, 64, [&](int64_t r, int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    T scratch[4 * kUnitChunk];
    T* seg[4];  // the chunk's i, f, g, o: in the saved row, or in scratch when nothing is kept
    for (int q = 0; q < 4; ++q)
      seg[q] = saved ? saved + r * g4 + q * hidden + j0 : scratch + q * kUnitChunk;
    for (int q = 0; q < 4; ++q) {
      const int64_t off = r * g4 + q * hidden + j0;
      gate_sum(gx + off, gh + off, bias ? bias + q * hidden + j0 : nullptr, seg[q], w);
    }
    sigmoid_inplace(seg[0], w);
    sigmoid_inplace(seg[1], w);
    T* g = seg[2];
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) g[j] = tanh_(g[j]);
    sigmoid_inplace(seg[3], w);
    const T* i = seg[0];
    const T* f = seg[1];
    const T* o = seg[3];
    const T* cr = cp + r * hidden + j0;
    T* hr = h + r * hidden + j0;
    T* ccr = c + r * hidden + j0;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const T cn = f[j] * cr[j] + i[j] * g[j];
      ccr[j] = cn;
      hr[j] = o[j] * tanh_(cn);
    }
  });
}

template <class T>
void lstm_cell_backward(const T* saved, const T* cp, const T* c, const T* dh, const T* dc,
                        T* dgates, T* dcp, int64_t batch, int64_t hidden) {
  const int64_t g4 = 4 * hidden;
  over_units(batch, hidden, 32, [&](int64_t r, int64_t j0, int64_t j1) {
    const T* s = saved + r * g4;
    const T* cr = cp + r * hidden;
    const T* cn = c + r * hidden;
    const T* dhr = dh + r * hidden;
    const T* dcr = dc + r * hidden;
    T* d = dgates + r * g4;
    T* dcpr = dcp + r * hidden;
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j)
      dcpr[j] = lstm_backward_element(s + j, cr[j], cn[j], dhr[j], dcr[j], d + j, hidden);
  });
}

template <class T>
void gru_cell(const T* gx, const T* gh, const T* bias, const T* hp, T* h, T* saved, int64_t batch,
              int64_t hidden) {
  const int64_t g3 = 3 * hidden, g4 = 4 * hidden;
  over_units(batch, hidden, 48, [&](int64_t r, int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    const T* x = gx + r * g3;
    const T* y = gh + r * g3;
    // saved row: r, z, n, hn; r and z first hold their pre-activation sums
    T scratch[4 * kUnitChunk];
    T* seg[4];
    for (int q = 0; q < 4; ++q)
      seg[q] = saved ? saved + r * g4 + q * hidden + j0 : scratch + q * kUnitChunk;
    for (int q = 0; q < 2; ++q) {
      gate_sum(x + q * hidden + j0, y + q * hidden + j0, bias ? bias + q * hidden + j0 : nullptr,
               seg[q], w);
      sigmoid_inplace(seg[q], w);
    }
    T* hn = seg[3];
    const T* yn = y + 2 * hidden + j0;
    if (bias) {
      const T* bn = bias + 2 * hidden + j0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) hn[j] = yn[j] + bn[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) hn[j] = yn[j];
    }
    const T* rg = seg[0];
    const T* z = seg[1];
    T* n = seg[2];
    const T* xn = x + 2 * hidden + j0;
    const T* hpr = hp + r * hidden + j0;
    T* hr = h + r * hidden + j0;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const T nv = tanh_(xn[j] + rg[j] * hn[j]);
      n[j] = nv;
      hr[j] = (T(1) - z[j]) * nv + z[j] * hpr[j];
    }
  });
}

template <class T>
void gru_cell_backward(const T* saved, const T* hp, const T* dh, T* dgx, T* dgh, T* dhp,
                       int64_t batch, int64_t hidden) {
  const int64_t g3 = 3 * hidden, g4 = 4 * hidden;
  over_units(batch, hidden, 24, [&](int64_t r, int64_t j0, int64_t j1) {
    const T* s = saved + r * g4;
    const T* hpr = hp + r * hidden;
    const T* dhr = dh + r * hidden;
    T* dx = dgx + r * g3;
    T* dy = dgh + r * g3;
    T* dhpr = dhp + r * hidden;
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j)
      dhpr[j] = gru_backward_element(s + j, hpr[j], dhr[j], dx + j, dy + j, hidden);
  });
}

// Below this many steps the per-step products read the recurrent weight where it lies; from it
// on they pack it once per loop (small_gemm::Packed), which costs two to four steps' products.
constexpr int64_t kPackSteps = 4;

// The per-step kernels of a whole layer's loop (singa_tensor/rnn_seq.h): the cells above and
// one product per step; OpenMP threads both. One object serves one loop, forward or backward,
// in which the recurrent weight does not change.
template <class T>
struct CpuSeqOps {
  explicit CpuSeqOps(int64_t steps) : pack(steps >= kPackSteps) {}

  void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
            int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    if constexpr (std::is_same_v<T, float>) {
      // the per-step products (m = batch rows) take the few-row kernels
      if (small_gemm::suits(ta, m, n, k, alpha, beta)) {
        if (pack) {
          if (!packed.holds(tb, n, k, b)) packed.pack(tb, n, k, b, ldb);
          packed.multiply(m, a, lda, c, ldc, beta == T(1));
        } else if (tb) {
          small_gemm::nt(m, n, k, a, lda, b, ldb, c, ldc, beta == T(1));
        } else {
          small_gemm::nn(m, n, k, a, lda, b, ldb, c, ldc, beta == T(1));
        }
        return;
      }
    }
    blas::gemm_mt(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void lstm(const T* gx, const T* gh, const T* cp, T* h, T* c, T* saved, int64_t batch,
            int64_t hidden) {
    lstm_cell<T>(gx, gh, nullptr, cp, h, c, saved, batch, hidden);
  }
  void lstm_back(const T* saved, const T* cp, const T* c, const T* dh, const T* dc, T* dgates,
                 T* dcp, int64_t batch, int64_t hidden) {
    lstm_cell_backward<T>(saved, cp, c, dh, dc, dgates, dcp, batch, hidden);
  }
  void gru(const T* gx, const T* gh, const T* bias, const T* hp, T* h, T* saved, int64_t batch,
           int64_t hidden) {
    gru_cell<T>(gx, gh, bias, hp, h, saved, batch, hidden);
  }
  void gru_back(const T* saved, const T* hp, const T* dh, T* dgx, T* dgh, T* dhp, int64_t batch,
                int64_t hidden) {
    gru_cell_backward<T>(saved, hp, dh, dgx, dgh, dhp, batch, hidden);
  }
  void act(bool relu, const T* gx, const T* gh, T* h, int64_t n) {
    parallel_for(n, 8, [&](int64_t b, int64_t e) {
      if (relu) {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) h[k] = std::max(gx[k] + gh[k], T(0));
      } else {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) h[k] = tanh_(gx[k] + gh[k]);
      }
    });
  }
  void act_back(bool relu, const T* h, const T* dh, T* da, int64_t n) {
    parallel_for(n, 2, [&](int64_t b, int64_t e) {
      if (relu) {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) da[k] = h[k] > T(0) ? dh[k] : T(0);
      } else {
#pragma omp simd
        for (int64_t k = b; k < e; ++k) da[k] = dh[k] * (T(1) - h[k] * h[k]);
      }
    });
  }
  void add(const T* a, const T* b, T* y, int64_t n) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) y[k] = a[k] + b[k];
  }
  void copy(const T* src, T* dst, int64_t n) { std::copy(src, src + n, dst); }

  const bool pack;
  small_gemm::Packed packed;  // the recurrent weight, once the loop has packed it
};

}  // namespace
}  // namespace st

#define ST_DEF_RNN(sfx, T, _)                                                                  \
  void st_lstm_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias, const T* c_prev,  \
                          T* h, T* c, T* saved, int64_t batch, int64_t hidden) {               \
    st::lstm_cell(gates_x, gates_h, bias, c_prev, h, c, saved, batch, hidden);                 \
  }                                                                                            \
  void st_lstm_cell_backward_##sfx(const T* saved, const T* c_prev, const T* c, const T* dh,   \
                                   const T* dc, T* dgates, T* dc_prev, int64_t batch,          \
                                   int64_t hidden) {                                           \
    st::lstm_cell_backward(saved, c_prev, c, dh, dc, dgates, dc_prev, batch, hidden);          \
  }                                                                                            \
  void st_gru_cell_##sfx(const T* gates_x, const T* gates_h, const T* bias_h, const T* h_prev, \
                         T* h, T* saved, int64_t batch, int64_t hidden) {                      \
    st::gru_cell(gates_x, gates_h, bias_h, h_prev, h, saved, batch, hidden);                   \
  }                                                                                            \
  void st_gru_cell_backward_##sfx(const T* saved, const T* h_prev, const T* dh, T* dgates_x,   \
                                  T* dgates_h, T* dh_prev, int64_t batch, int64_t hidden) {    \
    st::gru_cell_backward(saved, h_prev, dh, dgates_x, dgates_h, dh_prev, batch, hidden);      \
  }
ST_FLOAT_TYPES(ST_DEF_RNN, _)

#define ST_DEF_RNN_SEQ(sfx, T, _)                                                              \
  void st_rnn_seq_forward_##sfx(int32_t mode, int32_t reverse, const T* gates_x,               \
                                const T* w_hh, const T* bias_h, const T* h0, const T* c0,      \
                                T* out, T* h_n, T* c_n, T* saved, T* cells, T* work,           \
                                int64_t steps, int64_t batch, int64_t hidden) {                \
    st::CpuSeqOps<T> ops(steps);                                                               \
    st::rnn_seq::forward<T>(ops, mode, reverse, gates_x, w_hh, bias_h, h0, c0, out, h_n, c_n,  \
                            saved, cells, work, steps, batch, hidden);                         \
  }                                                                                            \
  void st_rnn_seq_backward_##sfx(int32_t mode, int32_t reverse, const T* w_hh, const T* h0,    \
                                 const T* c0, const T* out, const T* saved, const T* cells,    \
                                 const T* d_out, const T* d_hn, const T* d_cn, T* d_gates_x,   \
                                 T* d_gates_h, T* d_w_hh, T* d_h0, T* d_c0, T* work,           \
                                 int64_t steps, int64_t batch, int64_t hidden) {               \
    st::CpuSeqOps<T> ops(steps);                                                               \
    st::rnn_seq::backward<T>(ops, mode, reverse, w_hh, h0, c0, out, saved, cells, d_out, d_hn, \
                             d_cn, d_gates_x, d_gates_h, d_w_hh, d_h0, d_c0, work, steps,      \
                             batch, hidden);                                                   \
  }
ST_FLOAT_TYPES(ST_DEF_RNN_SEQ, _)
