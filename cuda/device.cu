// Device discovery and the per-thread error channel of the CUDA library.
#include <atomic>
#include <cstdio>

#include "common.cuh"

namespace {

// The first unread error of this thread: later failures are usually consequences of it (a
// sticky fault makes every following call fail), so it is the one worth reporting.
thread_local char g_message[512];
thread_local bool g_pending = false;

void record(cudaError_t e) {
  if (g_pending) return;
  std::snprintf(g_message, sizeof(g_message), "CUDA error %d (%s): %s", int(e),
                cudaGetErrorName(e), cudaGetErrorString(e));
  g_pending = true;
}

constexpr int kMaxDevices = 64;
std::atomic<int> g_sm_count[kMaxDevices];  // 0 until looked up

}  // namespace

void st_cuda_check_launch() {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) record(e);
}

bool st_cuda_check(cudaError_t e) {
  if (e == cudaSuccess) return true;
  record(e);
  cudaGetLastError();  // a non-sticky error must not be reported again by the next launch
  return false;
}

namespace st {
namespace cuda {

int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return 1;
  int n = g_sm_count[dev].load(std::memory_order_relaxed);
  if (n > 0) return n;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
    cudaGetLastError();
    return 1;
  }
  g_sm_count[dev].store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace cuda
}  // namespace st

extern "C" {

int32_t st_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // "no driver" must not surface later as a kernel's error
    return 0;
  }
  return n;
}

const char* st_cuda_last_error(void) {
  if (!g_pending) return nullptr;
  g_pending = false;
  return g_message;
}

void st_cuda_clear_error(void) { g_pending = false; }

}  // extern "C"
