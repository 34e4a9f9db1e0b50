// The time loop of one recurrent layer and direction, forward and backward, shared by the CPU
// library (cpp/src/rnn.cc) and the CUDA library (cuda/rnn.cu). Each library supplies an Ops
// class with its matrix product and its per-step cell kernels; this file holds the step order,
// the pointer arithmetic and the weight-gradient products, so the two cannot drift apart.
//
// Ops provides, for T float or double (all operands contiguous row-major, n = batch * hidden):
//   gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)          one matrix product
//   lstm(gx, gh, c_prev, h, c, saved, batch, hidden)                     st_lstm_cell, no bias
//   lstm_back(saved, c_prev, c, dh, dc, dgates, dc_prev, batch, hidden)  st_lstm_cell_backward
//   gru(gx, gh, bias_h, h_prev, h, saved, batch, hidden)                 st_gru_cell
//   gru_back(saved, h_prev, dh, dgx, dgh, dh_prev, batch, hidden)        st_gru_cell_backward
//   act(relu, gx, gh, h, n)              h = tanh(gx + gh) or relu(gx + gh)
//   act_back(relu, h, dh, da, n)         da = dh * act'(.), written from h = act(.)
//   add(a, b, y, n)                      y = a + b
//   copy(src, dst, n)
#ifndef SINGA_TENSOR_RNN_SEQ_H_
#define SINGA_TENSOR_RNN_SEQ_H_

#include <cstdint>

namespace st {
namespace rnn_seq {

enum Mode : int32_t { kLSTM = 0, kGRU = 1, kTanh = 2, kRelu = 3 };

inline int64_t gates_of(int32_t mode) { return mode == kLSTM ? 4 : mode == kGRU ? 3 : 1; }

// time index of the t-th step a direction runs
inline int64_t at(int64_t t, int64_t steps, int32_t reverse) {
  return reverse ? steps - 1 - t : t;
}

// See ST_DECL_RNN_SEQ in singa_tensor.h for the operands. work holds batch * 6 * hidden.
template <class T, class Ops>
void forward(Ops& ops, int32_t mode, int32_t reverse, const T* gx, const T* w_hh,
             const T* bias_h, const T* h0, const T* c0, T* out, T* h_n, T* c_n, T* saved,
             T* cells, T* work, int64_t steps, int64_t batch, int64_t hidden) {
  const int64_t g = gates_of(mode) * hidden, bh = batch * hidden;
  T* gh = work;                   // [batch, g]
  T* c_work = work + batch * g;   // two [batch, hidden] cells when `cells` is not kept
  const T* hp = h0;
  const T* cp = c0;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t s = at(t, steps, reverse);
    T* h = out + s * bh;
    ops.gemm(0, 1, batch, g, hidden, T(1), hp, hidden, w_hh, hidden, T(0), gh, g);
    const T* gxs = gx + s * batch * g;
    if (mode == kLSTM) {
      T* c = cells ? cells + s * bh : c_work + (t & 1) * bh;
      ops.lstm(gxs, gh, cp, h, c, saved ? saved + s * 4 * bh : nullptr, batch, hidden);
      cp = c;
    } else if (mode == kGRU) {
      ops.gru(gxs, gh, bias_h, hp, h, saved ? saved + s * 4 * bh : nullptr, batch, hidden);
    } else {
      ops.act(mode == kRelu, gxs, gh, h, bh);
    }
    hp = h;
  }
  ops.copy(hp, h_n, bh);
  if (mode == kLSTM) ops.copy(cp, c_n, bh);
}

// See ST_DECL_RNN_SEQ in singa_tensor.h for the operands. work holds batch * 4 * hidden.
template <class T, class Ops>
void backward(Ops& ops, int32_t mode, int32_t reverse, const T* w_hh, const T* h0, const T* c0,
              const T* out, const T* saved, const T* cells, const T* d_out, const T* d_hn,
              const T* d_cn, T* d_gx, T* d_gh, T* d_w_hh, T* d_h0, T* d_c0, T* work,
              int64_t steps, int64_t batch, int64_t hidden) {
  const int64_t g = gates_of(mode) * hidden, bh = batch * hidden;
  T* dh_total = work;        // the step's h gradient: from the output and from the next step
  T* dh = work + bh;         // carried to the step before
  T* dc[2] = {work + 2 * bh, work + 3 * bh};
  ops.copy(d_hn, dh, bh);
  if (mode == kLSTM) ops.copy(d_cn, dc[0], bh);
  // the hidden-side gate gradients, whose products with h_prev make d_w_hh
  T* dg = mode == kGRU ? d_gh : d_gx;
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t s = at(t, steps, reverse);
    const int64_t sp = t ? at(t - 1, steps, reverse) : -1;  // the step that ran before
    const T* hp = t ? out + sp * bh : h0;
    ops.add(dh, d_out + s * bh, dh_total, bh);
    T* dgx = d_gx + s * batch * g;
    if (mode == kLSTM) {
      const T* cp = t ? cells + sp * bh : c0;
      T* dc_in = dc[(steps - 1 - t) & 1];
      T* dc_out = dc[(steps - t) & 1];
      ops.lstm_back(saved + s * 4 * bh, cp, cells + s * bh, dh_total, dc_in, dgx, dc_out, batch,
                    hidden);
      ops.gemm(0, 0, batch, hidden, g, T(1), dgx, g, w_hh, hidden, T(0), dh, hidden);
    } else if (mode == kGRU) {
      T* dgh = d_gh + s * batch * g;
      ops.gru_back(saved + s * 4 * bh, hp, dh_total, dgx, dgh, dh, batch, hidden);
      ops.gemm(0, 0, batch, hidden, g, T(1), dgh, g, w_hh, hidden, T(1), dh, hidden);
    } else {
      ops.act_back(mode == kRelu, out + s * bh, dh_total, dgx, bh);
      ops.gemm(0, 0, batch, hidden, g, T(1), dgx, g, w_hh, hidden, T(0), dh, hidden);
    }
  }
  ops.copy(dh, d_h0, bh);
  if (mode == kLSTM) ops.copy(dc[steps & 1], d_c0, bh);
  // d_w_hh = sum over steps of dg[s]^T h_prev(s): h_prev is out at the neighbouring time (one
  // product over steps - 1 steps' rows) except at the direction's first step, where it is h0
  const int64_t first = at(0, steps, reverse);
  ops.gemm(1, 0, g, hidden, batch, T(1), dg + first * batch * g, g, h0, hidden, T(0), d_w_hh,
           hidden);
  if (steps > 1) {
    const int64_t rows = (steps - 1) * batch;
    // forward: dg[1:] with out[:-1]; reverse: dg[:-1] with out[1:]
    const T* a = reverse ? dg : dg + batch * g;
    const T* b = reverse ? out + bh : out;
    ops.gemm(1, 0, g, hidden, rows, T(1), a, g, b, hidden, T(1), d_w_hh, hidden);
  }
}

}  // namespace rnn_seq
}  // namespace st

#endif  // SINGA_TENSOR_RNN_SEQ_H_
