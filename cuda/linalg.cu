// Matrix products C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], row-major, leading dimensions
// and batch strides in elements: the CUDA twin of cpp/src/linalg.cc. Python sends float
// products to cuBLAS through CuPy; this shared-memory tiled kernel is the ABI twin, correct for
// every numeric type (and the path integer matmul takes); float16/bfloat16 accumulate in float.
#include "common.cuh"

namespace st {
namespace cuda {
namespace {

// a block computes a kBM x kBN tile of C, 16 x 16 threads each owning a 4 x 4 grid of it (rows
// ty + 16 i, columns tx + 16 j, so shared-memory reads of a warp hit distinct banks), stepping
// through k kBK at a time
constexpr int kBM = 64, kBN = 64, kBK = 16, kSub = 4, kSide = 16;
static_assert(kSide * kSide == kThreads, "one thread per 4 x 4 sub-tile");
static_assert(kBM * kBK == 4 * kThreads && kBN * kBK == 4 * kThreads, "4 loads per thread");

// How a storage type is computed in: floats accumulate in their own type (as BLAS does),
// integers wrapping (dtypes.h) as on the CPU, and the 16-bit floats (Tag F16/BF16, stored as
// uint16_t) in float: the tiles hold widened values and C is rounded once on store.
template <class Tag>
struct GemmIO {
  using S = Tag;
  using Tile = Tag;
  using Acc = Wrap<Tag>;
  static __device__ Tile load(S v) { return v; }
  static __device__ S store(Acc v) { return S(v); }
};
template <class Tag>
struct GemmIOHalf {
  using S = uint16_t;
  using Tile = float;
  using Acc = float;
  static __device__ Tile load(S v) { return cast_load<Tag>(v); }
  static __device__ S store(Acc v) { return cast_store<Tag>(v); }
};
template <>
struct GemmIO<F16> : GemmIOHalf<F16> {};
template <>
struct GemmIO<BF16> : GemmIOHalf<BF16> {};

template <class Tag>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k,
                typename GemmIO<Tag>::Tile alpha, const typename GemmIO<Tag>::S* a, int64_t lda,
                const typename GemmIO<Tag>::S* b, int64_t ldb, typename GemmIO<Tag>::Tile beta,
                typename GemmIO<Tag>::S* c, int64_t ldc, int64_t batch, int64_t stride_a,
                int64_t stride_b, int64_t stride_c) {
  using IO = GemmIO<Tag>;
  using T = typename IO::Tile;
  using S = typename IO::S;
  using A = typename IO::Acc;
  __shared__ T as[kBK][kBM + 1];  // op(A) tile, k-major; +1 spreads the transposing stores
  __shared__ T bs[kBK][kBN + 1];
  const int tid = int(threadIdx.x), tx = tid % kSide, ty = tid / kSide;
  const int64_t tiles_m = (m + kBM - 1) / kBM, tiles_n = (n + kBN - 1) / kBN;
  const int64_t tiles = batch * tiles_m * tiles_n;
  // the same tile in every thread of the block, as the barriers need
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t p = t / (tiles_m * tiles_n), rest = t % (tiles_m * tiles_n);
    const int64_t row0 = (rest / tiles_n) * kBM, col0 = (rest % tiles_n) * kBN;
    const S* ap = a + p * stride_a;
    const S* bp = b + p * stride_b;
    A acc[kSub][kSub];
#pragma unroll
    for (int i = 0; i < kSub; ++i)
#pragma unroll
      for (int j = 0; j < kSub; ++j) acc[i][j] = A(0);
    for (int64_t k0 = 0; k0 < k; k0 += kBK) {
      // each thread loads 4 elements of each tile, adjacent threads reading adjacent memory
      // (along k for an untransposed A, along m for a transposed one; likewise for B)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int l = tid + e * kThreads;
        const int ar = ta ? l % kBM : l / kBK, aq = ta ? l / kBM : l % kBK;
        const int64_t gi = row0 + ar, gq = k0 + aq;
        as[aq][ar] =
            (gi < m && gq < k) ? IO::load(ta ? ap[gq * lda + gi] : ap[gi * lda + gq]) : T(0);
        const int bc = tb ? l / kBK : l % kBN, bq = tb ? l % kBK : l / kBN;
        const int64_t gj = col0 + bc, gr = k0 + bq;
        bs[bq][bc] =
            (gj < n && gr < k) ? IO::load(tb ? bp[gj * ldb + gr] : bp[gr * ldb + gj]) : T(0);
      }
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kBK; ++q) {
        A av[kSub], bv[kSub];
#pragma unroll
        for (int i = 0; i < kSub; ++i) av[i] = A(as[q][ty + kSide * i]);
#pragma unroll
        for (int j = 0; j < kSub; ++j) bv[j] = A(bs[q][tx + kSide * j]);
#pragma unroll
        for (int i = 0; i < kSub; ++i)
#pragma unroll
          for (int j = 0; j < kSub; ++j) acc[i][j] = A(acc[i][j] + av[i] * bv[j]);
      }
      __syncthreads();  // the tiles are overwritten by the next step
    }
    S* cp = c + p * stride_c;
#pragma unroll
    for (int i = 0; i < kSub; ++i) {
      const int64_t gi = row0 + ty + kSide * i;
      if (gi >= m) continue;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const int64_t gj = col0 + tx + kSide * j;
        if (gj >= n) continue;
        S& out = cp[gi * ldc + gj];
        // beta == 0 never reads C (it may hold NaN), and alpha == 0 or k == 0 leaves the
        // product out, as BLAS and the CPU do
        const A scaled = beta == T(0) ? A(0) : A(A(beta) * A(IO::load(out)));
        const A prod = (alpha == T(0) || k == 0) ? A(0) : A(A(alpha) * acc[i][j]);
        out = IO::store(A(scaled + prod));
      }
    }
  }
}

template <class Tag>
void gemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,
          const typename GemmIO<Tag>::S* a, int64_t lda, const typename GemmIO<Tag>::S* b,
          int64_t ldb, double beta, typename GemmIO<Tag>::S* c, int64_t ldc, int64_t batch,
          int64_t sa, int64_t sb, int64_t sc, void* stream) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  using T = typename GemmIO<Tag>::Tile;
  const int64_t tiles = batch * ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
  // alpha and beta in the compute type, as the CPU passes them to BLAS (floats, float for the
  // 16-bit ones) or its loop (integers)
  gemm_kernel<Tag><<<grid_for(tiles, 1), kThreads, 0, as_stream(stream)>>>(
      ta, tb, m, n, k, T(alpha), a, lda, b, ldb, T(beta), c, ldc, batch, sa, sb, sc);
  st_cuda_check_launch();
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {
#define ST_CU_GEMM(sfx, T, _)                                                                   \
  void st_gemm_##sfx(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, double alpha,     \
                     const T* a, int64_t lda, const T* b, int64_t ldb, double beta, T* c,       \
                     int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc,            \
                     void* stream) {                                                           \
    st::cuda::gemm<ST_TAG_##sfx>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, batch,  \
                                 sa, sb, sc, stream);                                          \
  }
ST_NUM_TYPES(ST_CU_GEMM, _)
ST_HALF_TYPES(ST_CU_GEMM, _)
}
