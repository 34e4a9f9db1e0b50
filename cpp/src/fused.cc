// Fused elementwise programs (graph mode): one pass over the elements runs a short program of
// the unary and binary functors, so the intermediates of a chain never reach memory.
//
// The elements go in blocks of kLanes. A register holds a block and each instruction is one
// loop over the block, the same loop body as the op's own kernel: the result is rounded to
// T in between and the compiler cannot contract across instructions, so a program matches the
// unfused kernels bit for bit.
#include "common.h"
#include "half.h"

namespace st {
namespace {

constexpr int64_t kLanes = 256;

template <class T>
using Block = T[kLanes];

template <class T, class F>
void unary_block(const T* x, T* y, int64_t len, T a, T b) {
  F f;
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = f(x[i], a, b);
}

template <class T, class F>
void binary_block(const T* x, const T* z, T* y, int64_t len) {
  F f;
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = f(x[i], z[i]);
}

template <class T>
void fill_block(T* y, int64_t len, T v) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = v;
}

template <class T>
void copy_block(const T* x, T* y, int64_t len) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i) y[i] = x[i];
}

// elements [s, s + len) of an input read at (i / inner) % period into y, in runs: consecutive
// elements when inner == 1 (`run(src, dst, m)` converts m of them), one repeated value otherwise
// (`one(x)` converts it)
template <class S, class T, class Run, class One>
void load_runs(const S* in, int64_t inner, int64_t period, int64_t s, int64_t len, T* y, Run run,
               One one) {
  if (period == 1) {
    fill_block(y, len, one(in[0]));
  } else if (inner == 1) {
    int64_t pos = s % period;
    for (int64_t i = 0; i < len;) {
      int64_t m = std::min(len - i, period - pos);
      run(in + pos, y + i, m);
      i += m;
      pos = 0;
    }
  } else {
    int64_t r = s % inner;
    int64_t idx = (s / inner) % period;
    for (int64_t i = 0; i < len;) {
      int64_t m = std::min(len - i, inner - r);
      fill_block(y + i, m, one(in[idx]));
      i += m;
      r = 0;
      if (++idx == period) idx = 0;
    }
  }
}

template <class T>
void load_block(const T* in, int64_t inner, int64_t period, int64_t s, int64_t len, T* y) {
  load_runs(in, inner, period, s, len, y, copy_block<T>, [](T x) { return x; });
}

// The arithmetic instructions over one block: a constant (consts[b]), a unary op of register a
// (parameters consts[b], consts[b + 1]) or a binary op of registers a and b; reg(i) is register
// i's lanes.
template <class T, class Reg>
inline void compute_block(int32_t op, int32_t a, int32_t b, const T* consts, Reg reg, T* dst,
                          int64_t len) {
  switch (op) {
    case ST_FUSED_CONST:
      fill_block(dst, len, consts[b]);
      break;
#define ST_FUSED_UNARY_CASE(name, _)                                               \
  case ST_FUSED_U_##name:                                                          \
    unary_block<T, fn::name>(reg(a), dst, len, consts[b], consts[b + 1]);          \
    break;
    ST_UNARY_FLOAT_OPS(ST_FUSED_UNARY_CASE, _)
#undef ST_FUSED_UNARY_CASE
#define ST_FUSED_BINARY_CASE(name, _)                                              \
  case ST_FUSED_B_##name:                                                          \
    binary_block<T, fn::name>(reg(a), reg(b), dst, len);                           \
    break;
    ST_FUSED_BINARY_OPS(ST_FUSED_BINARY_CASE, _)
#undef ST_FUSED_BINARY_CASE
    default:  // Python only emits the opcodes above and the loads
      break;
  }
}

// The register file of one thread. A register's lanes are its own block, or, after a load of
// an input's contiguous run, that input's memory read in place: a full-length input then costs
// no copy, and the first instruction reading it streams it from memory as the unfused kernel
// would.
template <class T>
struct Registers {
  alignas(64) Block<T> own[ST_FUSED_MAX_REGS];
  const T* at[ST_FUSED_MAX_REGS];
};

template <class T>
void run_block(const int32_t* prog, int64_t ninstr, const T* consts,
               const void* const* inputs, const int64_t* in_shape, int64_t s, int64_t len,
               Registers<T>& r) {
  for (int64_t k = 0; k < ninstr; ++k) {
    const int32_t* ins = prog + 4 * k;
    const int32_t d = ins[1], a = ins[2], b = ins[3];
    T* dst = r.own[d];
    switch (ins[0]) {
      case ST_FUSED_LOAD: {
        const T* in = static_cast<const T*>(inputs[a]);
        const int64_t inner = in_shape[2 * a], period = in_shape[2 * a + 1];
        const int64_t pos = inner == 1 ? s % period : 0;
        if (inner == 1 && pos + len <= period) {
          r.at[d] = in + pos;
          continue;
        }
        load_block(in, inner, period, s, len, dst);
        break;
      }
      default:
        compute_block(ins[0], a, b, consts, [&r](int32_t i) { return r.at[i]; }, dst, len);
        break;
    }
    r.at[d] = dst;
  }
}

template <class T>
void fused(const int32_t* prog, int64_t ninstr, const T* consts, const void* const* inputs,
           const int64_t* in_shape, void* const* outputs, const int32_t* out_regs, int64_t nout,
           int64_t n) {
  const int64_t nblocks = (n + kLanes - 1) / kLanes;
  // cost per block: every instruction touches every lane once
  parallel_for(nblocks, kLanes * std::max<int64_t>(ninstr, 1), [&](int64_t b0, int64_t b1) {
    Registers<T> r;
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t s = blk * kLanes;
      const int64_t len = std::min(kLanes, n - s);
      run_block(prog, ninstr, consts, inputs, in_shape, s, len, r);
      // an output may overwrite an input that another output's register still reads in
      // place: copy such registers out of the inputs before any output is written
      for (int64_t o = 0; o < nout; ++o) {
        const int32_t k = out_regs[o];
        if (r.at[k] != r.own[k]) {
          copy_block(r.at[k], r.own[k], len);
          r.at[k] = r.own[k];
        }
      }
      for (int64_t o = 0; o < nout; ++o)
        copy_block(r.own[out_regs[o]], static_cast<T*>(outputs[o]) + s, len);
    }
  });
}

// ---- float16 / bfloat16: registers hold float blocks; a load widens the input, every
// instruction rounds its result to the format (so the program matches the unfused low-precision
// kernels bit for bit), and outputs narrow exactly. The unary parameters stay float, as the
// unfused kernels take them.
struct LowRegisters {
  alignas(64) Block<float> own[ST_FUSED_MAX_REGS];
};

// a low-precision input's elements [s, s + len) read at (i / inner) % period, widened
template <class Tag>
void load_block_low(const uint16_t* in, int64_t inner, int64_t period, int64_t s, int64_t len,
                    float* y) {
  load_runs(
      in, inner, period, s, len, y,
      [](const uint16_t* x, float* out, int64_t m) { widen<Tag>(x, 1, out, m); },
      [](uint16_t x) { return cast_load<Tag>(x); });
}

template <class Tag>
void run_block_low(const int32_t* prog, int64_t ninstr, const float* consts,
                   const void* const* inputs, const int64_t* in_shape, int64_t s, int64_t len,
                   LowRegisters& r) {
  for (int64_t k = 0; k < ninstr; ++k) {
    const int32_t* ins = prog + 4 * k;
    const int32_t d = ins[1], a = ins[2], b = ins[3];
    float* dst = r.own[d];
    switch (ins[0]) {
      case ST_FUSED_LOAD:
        load_block_low<Tag>(static_cast<const uint16_t*>(inputs[a]), in_shape[2 * a],
                            in_shape[2 * a + 1], s, len, dst);
        continue;  // already in the format
      default:
        compute_block(ins[0], a, b, consts, [&r](int32_t i) -> const float* { return r.own[i]; },
                      dst, len);
        break;
    }
    round_through<Tag>(dst, len);
  }
}

template <class Tag>
void fused_low(const int32_t* prog, int64_t ninstr, const float* consts,
               const void* const* inputs, const int64_t* in_shape, void* const* outputs,
               const int32_t* out_regs, int64_t nout, int64_t n) {
  const int64_t nblocks = (n + kLanes - 1) / kLanes;
  parallel_for(nblocks, kLanes * std::max<int64_t>(ninstr, 1), [&](int64_t b0, int64_t b1) {
    LowRegisters r;
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t s = blk * kLanes;
      const int64_t len = std::min(kLanes, n - s);
      run_block_low<Tag>(prog, ninstr, consts, inputs, in_shape, s, len, r);
      // registers are never the inputs' memory here, so outputs may be written in any order
      for (int64_t o = 0; o < nout; ++o)
        narrow<Tag>(r.own[out_regs[o]], static_cast<uint16_t*>(outputs[o]) + s, len);
    }
  });
}

}  // namespace
}  // namespace st

extern "C" {

#define ST_DEF_FUSED(sfx, T, _)                                                                \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const T* consts,                    \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,         \
                      void* const* outputs, const int32_t* out_regs, int64_t nout, int64_t n) { \
    st::fused<T>(prog, ninstr, consts, inputs, in_shape, outputs, out_regs, nout, n);          \
  }
ST_FLOAT_TYPES(ST_DEF_FUSED, _)
#define ST_DEF_FUSED_LOW(sfx, T, _)                                                            \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const float* consts,                \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,         \
                      void* const* outputs, const int32_t* out_regs, int64_t nout, int64_t n) { \
    st::fused_low<ST_TAG_##sfx>(prog, ninstr, consts, inputs, in_shape, outputs, out_regs,     \
                                nout, n);                                                      \
  }
ST_HALF_TYPES(ST_DEF_FUSED_LOW, _)

}  // extern "C"
