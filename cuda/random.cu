// Random numbers from the Philox counter, the twins of cpp/src/random.cc: block b of the stream
// is philox(seed, offset + b), one thread per block, so the values do not depend on the launch
// shape and equal the CPU's.
//
// Rounding: the CPU build (GCC, FMA enabled) fuses `low + span * u` and
// `mean + (sd * rad) * cos(..)` into one fused multiply-add each; the kernels spell out the same
// __fma_rn so that nvcc's own contraction choices cannot make them differ. The remaining
// difference is libm: CUDA's double log/sin/cos may differ from glibc's in the last bit, so
// float64 normals agree to about 1e-15 relative, float32 ones (rounded from double) nearly always
// exactly. uniform and randint agree exactly.
#include "common.cuh"

namespace st {
namespace cuda {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// How the float32-stream kernels store a value: as float, or rounded once to a 16-bit format
// (the 16-bit floats take the float32 kernels' values)
struct StoreFloat {
  using type = float;
  __device__ static float put(float v) { return v; }
};
template <class Tag>
struct StoreLow {
  using type = uint16_t;
  __device__ static uint16_t put(float v) { return cast_store<Tag>(v); }
};

template <class Store>
__global__ void uniform_f32_kernel(typename Store::type* y, int64_t n, uint64_t seed,
                                   uint64_t offset, double low, double span) {
  const int64_t nb = (n + 3) / 4;
  for (int64_t b = thread_index(); b < nb; b += thread_count()) {
    Philox4 r = philox(seed, offset + uint64_t(b));
#pragma unroll
    for (int l = 0; l < 4; ++l)
      if (b * 4 + l < n)
        y[b * 4 + l] = Store::put(float(__fma_rn(span, double(u01_f32(r.v[l])), low)));
  }
}

__global__ void uniform_f64_kernel(double* y, int64_t n, uint64_t seed, uint64_t offset,
                                   double low, double span) {
  const int64_t nb = (n + 1) / 2;
  for (int64_t b = thread_index(); b < nb; b += thread_count()) {
    Philox4 r = philox(seed, offset + uint64_t(b));
#pragma unroll
    for (int l = 0; l < 2; ++l)
      if (b * 2 + l < n) y[b * 2 + l] = __fma_rn(span, u01_f64(r.v[2 * l], r.v[2 * l + 1]), low);
  }
}

// Box-Muller on a pair of uniforms; 1 - u keeps the log argument in (0, 1]. (u1, u2 are exact
// multiples of a power of two, so 1 - u1 is exact however it is compiled.)
template <class T>
__device__ __forceinline__ void box_muller(double u1, double u2, double mean, double sd, T* y,
                                           int64_t i, int64_t n) {
  double rad = sqrt(-2.0 * log(u1));
  double angle = __dmul_rn(kTwoPi, u2);
  double scale = __dmul_rn(sd, rad);
  if (i < n) y[i] = T(__fma_rn(scale, cos(angle), mean));
  if (i + 1 < n) y[i + 1] = T(__fma_rn(scale, sin(angle), mean));
}

template <class Store>
__global__ void normal_f32_kernel(typename Store::type* y, int64_t n, uint64_t seed,
                                  uint64_t offset, double mean, double sd) {
  const int64_t nb = (n + 3) / 4;
  for (int64_t b = thread_index(); b < nb; b += thread_count()) {
    Philox4 r = philox(seed, offset + uint64_t(b));
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      double u1 = 1.0 - double(u01_f32(r.v[2 * p])), u2 = double(u01_f32(r.v[2 * p + 1]));
      float v[2];
      box_muller(u1, u2, mean, sd, v, 0, 2);
      const int64_t i = b * 4 + 2 * p;
      if (i < n) y[i] = Store::put(v[0]);
      if (i + 1 < n) y[i + 1] = Store::put(v[1]);
    }
  }
}

__global__ void normal_f64_kernel(double* y, int64_t n, uint64_t seed, uint64_t offset,
                                  double mean, double sd) {
  const int64_t nb = (n + 1) / 2;
  for (int64_t b = thread_index(); b < nb; b += thread_count()) {
    Philox4 r = philox(seed, offset + uint64_t(b));
    double u1 = 1.0 - u01_f64(r.v[0], r.v[1]), u2 = u01_f64(r.v[2], r.v[3]);
    box_muller(u1, u2, mean, sd, y, b * 2, n);
  }
}

// 64 random bits per value, mapped to [low, high) by the high half of a widening multiply
__global__ void randint_kernel(int64_t* y, int64_t n, uint64_t seed, uint64_t offset, int64_t low,
                               uint64_t span) {
  const int64_t nb = (n + 1) / 2;
  for (int64_t b = thread_index(); b < nb; b += thread_count()) {
    Philox4 r = philox(seed, offset + uint64_t(b));
#pragma unroll
    for (int l = 0; l < 2; ++l) {
      uint64_t v = uint64_t(r.v[2 * l + 1]) << 32 | r.v[2 * l];
      if (b * 2 + l < n) y[b * 2 + l] = low + int64_t(__umul64hi(v, span));
    }
  }
}

// Fisher-Yates from the top, as on the CPU. The swaps are sequential, so one thread does them;
// the rest of the block draws the next kChunk swap partners (step i uses block offset + i) into
// shared memory meanwhile, which takes the Philox rounds off the sequential path.
constexpr int kPermThreads = 1024;
constexpr int kChunk = 2048;

__global__ void __launch_bounds__(kPermThreads)
    randperm_kernel(int64_t* y, int64_t n, uint64_t seed, uint64_t offset) {
  __shared__ int64_t partner[kChunk];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = i;
  __syncthreads();
  for (int64_t top = n - 1; top > 0; top -= kChunk) {
    for (int t = threadIdx.x; t < kChunk && top - t > 0; t += blockDim.x) {
      const int64_t i = top - t;
      Philox4 r = philox(seed, offset + uint64_t(i));
      uint64_t v = uint64_t(r.v[1]) << 32 | r.v[0];
      partner[t] = int64_t(__umul64hi(v, uint64_t(i + 1)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int t = 0; t < kChunk && top - t > 0; ++t) {
        const int64_t i = top - t, j = partner[t];
        const int64_t tmp = y[i];
        y[i] = y[j];
        y[j] = tmp;
      }
    }
    __syncthreads();  // partner is refilled next round
  }
}

}  // namespace
}  // namespace cuda
}  // namespace st

extern "C" {

void st_uniform_f32(float* y, int64_t n, uint64_t seed, uint64_t offset, double low, double high,
                    void* stream) {
  st::cuda::launch_1d(st::cuda::uniform_f32_kernel<st::cuda::StoreFloat>, (n + 3) / 4, stream, y,
                      n, seed, offset, low, high - low);
}
void st_uniform_f64(double* y, int64_t n, uint64_t seed, uint64_t offset, double low,
                    double high, void* stream) {
  st::cuda::launch_1d(st::cuda::uniform_f64_kernel, (n + 1) / 2, stream, y, n, seed, offset, low,
                      high - low);
}
void st_normal_f32(float* y, int64_t n, uint64_t seed, uint64_t offset, double mean, double sd,
                   void* stream) {
  st::cuda::launch_1d(st::cuda::normal_f32_kernel<st::cuda::StoreFloat>, (n + 3) / 4, stream, y,
                      n, seed, offset, mean, sd);
}
void st_normal_f64(double* y, int64_t n, uint64_t seed, uint64_t offset, double mean, double sd,
                   void* stream) {
  st::cuda::launch_1d(st::cuda::normal_f64_kernel, (n + 1) / 2, stream, y, n, seed, offset, mean,
                      sd);
}

#define ST_CUDA_DEF_RANDOM_LOW(sfx, T, _)                                                    \
  void st_uniform_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double low,          \
                        double high, void* stream) {                                          \
    st::cuda::launch_1d(st::cuda::uniform_f32_kernel<st::cuda::StoreLow<ST_TAG_##sfx>>,       \
                        (n + 3) / 4, stream, y, n, seed, offset, low, high - low);            \
  }                                                                                           \
  void st_normal_##sfx(T* y, int64_t n, uint64_t seed, uint64_t offset, double mean,          \
                       double sd, void* stream) {                                             \
    st::cuda::launch_1d(st::cuda::normal_f32_kernel<st::cuda::StoreLow<ST_TAG_##sfx>>,        \
                        (n + 3) / 4, stream, y, n, seed, offset, mean, sd);                   \
  }
ST_HALF_TYPES(ST_CUDA_DEF_RANDOM_LOW, _)

void st_randint_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset, int64_t low,
                    int64_t high, void* stream) {
  st::cuda::launch_1d(st::cuda::randint_kernel, (n + 1) / 2, stream, y, n, seed, offset, low,
                      uint64_t(high - low));
}

void st_randperm_i64(int64_t* y, int64_t n, uint64_t seed, uint64_t offset, void* stream) {
  if (n <= 0) return;
  st::cuda::randperm_kernel<<<1, st::cuda::kPermThreads, 0, st::cuda::as_stream(stream)>>>(
      y, n, seed, offset);
  st_cuda_check_launch();
}

}  // extern "C"
