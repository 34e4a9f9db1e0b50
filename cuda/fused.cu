// Fused elementwise programs (graph mode): one pass over the elements runs a short program of
// the unary and binary functors (functors.h, the code the unfused kernels run), so the
// intermediates of a chain never reach memory.
//
// The whole program (instructions, constants, pointer and broadcast tables) travels in one
// by-value kernel parameter: no device allocation and no copy per call. Each thread runs the
// program for its elements out of a local register file; the opcode is dispatched at run time
// and every result is stored to its register, so nothing is contracted across instructions and
// the results are the unfused kernels' own.
#include <algorithm>
#include <cstring>

#include "common.cuh"

namespace st {
namespace cuda {
namespace {

#define ST_FUSED_COUNT(op, _) +1
constexpr int kNumUnary = 0 ST_UNARY_FLOAT_OPS(ST_FUSED_COUNT, _);
#undef ST_FUSED_COUNT
constexpr int kFirstUnary = ST_FUSED_CONST + 1;
constexpr int kMaxConsts = ST_FUSED_MAX_CONSTS + 2;  // Python's two trailing zeros

// T is the type registers compute in; Tag the element format in memory (T itself, or st::F16 /
// st::BF16 with T float: loads widen, every instruction rounds to the format, stores narrow)
template <class T, class Tag = T>
struct FusedProgram {
  using S = typename CastStorage<Tag>::type;
  int32_t prog[4 * ST_FUSED_MAX_INSTR];
  T consts[kMaxConsts];
  const S* inputs[ST_FUSED_MAX_INPUTS];
  int64_t inner[ST_FUSED_MAX_INPUTS];
  int64_t period[ST_FUSED_MAX_INPUTS];
  S* outputs[ST_FUSED_MAX_OUTPUTS];
  int32_t out_regs[ST_FUSED_MAX_OUTPUTS];
  int32_t ninstr;
  int32_t nout;
};
// the classic kernel-parameter limit, which every architecture we build for accepts
static_assert(sizeof(FusedProgram<double>) <= 4096, "fused program parameter over 4 KB");

// I is uint32_t when every element index fits: its divisions are several times cheaper
template <class I, class T, class Tag>
__global__ void fused_kernel(const FusedProgram<T, Tag> p, int64_t n) {
  constexpr bool kLow = !std::is_same<T, Tag>::value;
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    T r[ST_FUSED_MAX_REGS];
    for (int k = 0; k < p.ninstr; ++k) {
      const int32_t d = p.prog[4 * k + 1], a = p.prog[4 * k + 2], b = p.prog[4 * k + 3];
      switch (p.prog[4 * k]) {
        case ST_FUSED_LOAD: {
          // inner and period are clamped to n on the host, so they fit in I
          const I inner = I(p.inner[a]), period = I(p.period[a]);
          const I q = inner == 1 ? I(i) : I(i) / inner;
          r[d] = cast_load<Tag>(p.inputs[a][q < period ? q : q % period]);
          continue;
        }
        case ST_FUSED_CONST:
          r[d] = p.consts[b];
          break;
#define ST_FUSED_UNARY_CASE(op, _)                             \
  case ST_FUSED_U_##op:                                        \
    r[d] = fn::op()(r[a], p.consts[b], p.consts[b + 1]);       \
    break;
          ST_UNARY_FLOAT_OPS(ST_FUSED_UNARY_CASE, _)
#undef ST_FUSED_UNARY_CASE
#define ST_FUSED_BINARY_CASE(op, _) \
  case ST_FUSED_B_##op:             \
    r[d] = fn::op()(r[a], r[b]);    \
    break;
          ST_FUSED_BINARY_OPS(ST_FUSED_BINARY_CASE, _)
#undef ST_FUSED_BINARY_CASE
        default:  // Python only emits the opcodes above
          break;
      }
      if constexpr (kLow) r[d] = cast_load<Tag>(cast_store<Tag>(r[d]));
    }
    for (int o = 0; o < p.nout; ++o) p.outputs[o][i] = cast_store<Tag>(r[p.out_regs[o]]);
  }
}

template <class T, class Tag = T>
void fused(const int32_t* prog, int64_t ninstr, const T* consts, const void* const* inputs,
           const int64_t* in_shape, int64_t nin, void* const* outputs, const int32_t* out_regs,
           int64_t nout, int64_t n, void* stream) {
  if (n <= 0) return;
  // Python validates all of this; a host-side overflow of the parameter block must still be
  // impossible, so a bad call is reported (as a RuntimeError) instead of launched
  bool ok = ninstr >= 0 && ninstr <= ST_FUSED_MAX_INSTR && nin >= 0 &&
            nin <= ST_FUSED_MAX_INPUTS && nout >= 0 && nout <= ST_FUSED_MAX_OUTPUTS;
  int64_t nconst = 0;  // the constants the program reads: only those travel
  for (int64_t k = 0; ok && k < ninstr; ++k) {
    const int32_t op = prog[4 * k], b = prog[4 * k + 3];
    if (op == ST_FUSED_CONST) nconst = std::max<int64_t>(nconst, int64_t(b) + 1);
    if (op >= kFirstUnary && op < kFirstUnary + kNumUnary)
      nconst = std::max<int64_t>(nconst, int64_t(b) + 2);
  }
  if (!ok || nconst > kMaxConsts) {
    st_cuda_check(cudaErrorInvalidValue);
    return;
  }
  using S = typename CastStorage<Tag>::type;
  FusedProgram<T, Tag> p;
  std::memset(&p, 0, sizeof(p));
  std::memcpy(p.prog, prog, size_t(4 * ninstr) * sizeof(int32_t));
  if (nconst > 0) std::memcpy(p.consts, consts, size_t(nconst) * sizeof(T));
  for (int64_t j = 0; j < nin; ++j) {
    p.inputs[j] = static_cast<const S*>(inputs[j]);
    // an inner or period of n or more acts as n: positions are below n
    p.inner[j] = std::min(in_shape[2 * j], n);
    p.period[j] = std::min(in_shape[2 * j + 1], n);
  }
  for (int64_t o = 0; o < nout; ++o) {
    p.outputs[o] = static_cast<S*>(outputs[o]);
    p.out_regs[o] = out_regs[o];
  }
  p.ninstr = int32_t(ninstr);
  p.nout = int32_t(nout);
  if (n <= int64_t(UINT32_MAX)) {
    launch_1d(fused_kernel<uint32_t, T, Tag>, n, stream, p, n);
  } else {
    launch_1d(fused_kernel<int64_t, T, Tag>, n, stream, p, n);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {

#define ST_DEF_FUSED(sfx, T, _)                                                                \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const T* consts,                    \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,         \
                      void* const* outputs, const int32_t* out_regs, int64_t nout, int64_t n,  \
                      void* stream) {                                                          \
    st::cuda::fused<T>(prog, ninstr, consts, inputs, in_shape, nin, outputs, out_regs, nout,   \
                       n, stream);                                                             \
  }
ST_FLOAT_TYPES(ST_DEF_FUSED, _)
#define ST_DEF_FUSED_LOW(sfx, T, _)                                                            \
  void st_fused_##sfx(const int32_t* prog, int64_t ninstr, const float* consts,                \
                      const void* const* inputs, const int64_t* in_shape, int64_t nin,         \
                      void* const* outputs, const int32_t* out_regs, int64_t nout, int64_t n,  \
                      void* stream) {                                                          \
    st::cuda::fused<float, ST_TAG_##sfx>(prog, ninstr, consts, inputs, in_shape, nin, outputs, \
                                         out_regs, nout, n, stream);                           \
  }
ST_HALF_TYPES(ST_DEF_FUSED_LOW, _)

}  // extern "C"
