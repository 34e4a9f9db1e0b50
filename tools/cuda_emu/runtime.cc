// The emulated CUDA runtime (see cuda_runtime.h): launches run each block's threads as fibers
// on the calling thread, switching at barriers and warp collectives. On x86-64 a fiber switch
// saves the callee-saved registers and swaps stacks (a few nanoseconds); elsewhere, and in
// sanitizer builds (EMU_UCONTEXT, which AddressSanitizer understands), it is swapcontext, which
// also saves the signal mask with a system call.
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_runtime.h"

namespace emu {

Lane* g_lane = nullptr;
uint3 g_block_idx{0, 0, 0};
dim3 g_block_dim, g_grid_dim;

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kSharedLimit = 48 * 1024;  // without cudaFuncSetAttribute
constexpr int kSmCount = 2;                 // small grids: grid-stride loops go round

enum State { kRunnable, kAtBarrier, kAtWarp, kDone };

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
#endif

struct Fiber {
  Lane lane;
#ifdef EMU_FAST_SWITCH
  void* sp = nullptr;  // the saved stack pointer while switched out
#else
  ucontext_t ctx;
#endif
  char* stack = nullptr;
  State state = kRunnable;
  unsigned linear = 0;      // linear thread index in the block
};

struct Warp {
  unsigned char slots[2][32][8];  // double-buffered: a lane may enter the next collective
  unsigned gen = 0;               // while others still read this one's values
  unsigned exist = 0;             // lanes present in the block
  unsigned waiting = 0;           // lanes waiting in the current collective
  unsigned mask = 0;              // its mask
};

std::mutex g_launch_mutex;  // one launch at a time: the globals above describe it
thread_local cudaError_t g_last_error = cudaSuccess;
thread_local std::string g_fault;  // what the emulator found wrong in the last failed launch

std::vector<Fiber> g_fibers;
std::vector<Warp> g_warps;
#ifdef EMU_FAST_SWITCH
void* g_scheduler = nullptr;
#else
ucontext_t g_scheduler;
#endif
Fiber* g_current = nullptr;
const std::function<void()>* g_body = nullptr;
std::vector<unsigned char> g_dynamic_shared;
std::string g_error;  // the first fault found in the running block
unsigned g_runnable = 0, g_done = 0;  // threads of the running block
uint64_t g_block_serial = 0;  // counts blocks run, to tell a new block's shared memory
std::unordered_map<void*, uint64_t> g_shared_filled;  // static -> block that last filled it

}  // namespace
}  // namespace emu

#ifdef EMU_FAST_SWITCH
// emu_switch(save, load): pushes the callee-saved registers, stores the stack pointer in *save,
// moves to the stack `load`, pops its registers and returns into that fiber.
extern "C" void emu_switch(void** save, void* load);
asm(R"(
  .text
  .globl emu_switch
  .hidden emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");
#endif

namespace emu {
namespace {

[[noreturn]] void fiber_main() {
  (*g_body)();
  g_current->state = kDone;
  --g_runnable;
  ++g_done;
#ifdef EMU_FAST_SWITCH
  emu_switch(&g_current->sp, g_scheduler);
#else
  swapcontext(&g_current->ctx, &g_scheduler);
#endif
  std::abort();  // a finished fiber is never resumed
}

void yield(State s) {
  g_current->state = s;
  --g_runnable;
#ifdef EMU_FAST_SWITCH
  emu_switch(&g_current->sp, g_scheduler);
#else
  swapcontext(&g_current->ctx, &g_scheduler);
#endif
}

// Makes f start at fiber_main when it is next switched to.
void reset(Fiber& f) {
#ifdef EMU_FAST_SWITCH
  // the stack as emu_switch leaves it: six registers, then the return address, then a slot
  // that makes the stack pointer 8 past a 16-byte boundary at entry, as after a call. The tops
  // are staggered: stacks that all start at the same offset in a page would compete for the
  // same few cache sets.
  auto* top = reinterpret_cast<uintptr_t*>(f.stack + kStackBytes - (f.linear % 64) * 80);
  top[-1] = 0;
  top[-2] = reinterpret_cast<uintptr_t>(&fiber_main);
  for (int i = 3; i <= 8; ++i) top[-i] = 0;
  f.sp = top - 8;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, reinterpret_cast<void (*)()>(&fiber_main), 0);
#endif
}

void resume(Fiber& f) {
#ifdef EMU_FAST_SWITCH
  emu_switch(&g_scheduler, f.sp);
#else
  swapcontext(&g_scheduler, &f.ctx);
#endif
}

void fault(const std::string& what) {
  if (g_error.empty()) g_error = what;
}

char* new_stack() {
  void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cuda_emu: mmap of a fiber stack");
    std::abort();
  }
  return static_cast<char*>(p);
}

// Lanes of warp w that exist in a block of n threads.
unsigned existing_lanes(unsigned w, unsigned n) {
  const unsigned first = w * 32;
  const unsigned count = n - first >= 32 ? 32 : n - first;
  return count == 32 ? 0xffffffffu : ((1u << count) - 1u);
}

std::string hex(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

// Threads run in index order, or in reverse with SINGA_TENSOR_EMU_ORDER=descending: a read of
// shared memory that another thread writes without a barrier in between sees the fill pattern
// in one of the two orders whichever thread is the writer.
bool g_descending = [] {
  const char* o = std::getenv("SINGA_TENSOR_EMU_ORDER");
  return o && std::string(o) == "descending";
}();

// Runs one block to completion; returns false (with g_error set) when it cannot finish.
// Threads run in turn until each blocks or ends; a warp collective releases its lanes
// when the last one arrives (warp_exchange), a barrier when nothing else can run.
bool run_block(unsigned n) {
  for (unsigned t = 0; t < n; ++t) {
    Fiber& f = g_fibers[t];
    f.state = kRunnable;
    reset(f);
  }
  const unsigned warps = (n + 31) / 32;
  g_runnable = n;
  g_done = 0;
  for (unsigned w = 0; w < warps; ++w) {
    g_warps[w].waiting = 0;
    g_warps[w].exist = existing_lanes(w, n);
  }
  for (;;) {
    for (unsigned i = 0; i < n && g_runnable; ++i) {
      Fiber& f = g_fibers[g_descending ? n - 1 - i : i];
      if (f.state != kRunnable) continue;
      g_current = &f;
      g_lane = &f.lane;
      resume(f);
    }
    if (!g_error.empty()) return false;
    if (g_runnable) continue;  // lanes released by a collective after their turn
    if (g_done == n) return true;
    for (unsigned w = 0; w < warps; ++w) {
      const Warp& wp = g_warps[w];
      if (!wp.waiting) continue;
      unsigned done = 0;
      for (unsigned l = 0; l < 32; ++l)
        if (((wp.exist >> l) & 1u) && g_fibers[w * 32 + l].state == kDone) done |= 1u << l;
      if (wp.mask & done)
        fault("a warp collective (shuffle, ballot or __syncwarp) with mask " + hex(wp.mask) +
              " waits for lanes that have returned from the kernel");
      else
        fault("deadlock: some threads wait in a warp collective whose other lanes wait at "
              "__syncthreads");
      return false;
    }
    if (g_done) {
      fault("__syncthreads reached by some threads of a block after others returned from the "
            "kernel (undefined behaviour on a GPU)");
      return false;
    }
    for (unsigned t = 0; t < n; ++t)  // everyone is at __syncthreads
      g_fibers[t].state = kRunnable;
    g_runnable = n;
  }
}

}  // namespace

void sync_block() { yield(kAtBarrier); }

unsigned lane_id() { return g_current->linear & 31u; }

void warp_exchange(unsigned mask, const void* value, size_t bytes, unsigned char (*all)[8]) {
  const unsigned lane = lane_id();
  if (!((mask >> lane) & 1u)) fault("a warp collective called by a lane outside its mask");
  Warp& w = g_warps[g_current->linear / 32];
  if (w.waiting && w.mask != mask)
    fault("lanes of a warp meet in a collective with different masks (" + hex(w.mask) + ", " +
          hex(mask) + ")");
  const unsigned gen = w.gen;
  std::memcpy(w.slots[gen & 1][lane], value, bytes);
  w.mask = mask;
  w.waiting |= 1u << lane;
  const unsigned need = mask & w.exist;
  if ((w.waiting & need) == need) {  // the last lane: release the others, go on
    const unsigned base = g_current->linear & ~31u;
    for (unsigned l = 0; l < 32; ++l)
      if (l != lane && ((w.waiting >> l) & 1u)) {
        g_fibers[base + l].state = kRunnable;
        ++g_runnable;
      }
    w.waiting = 0;
    w.gen++;
  } else {
    yield(kAtWarp);
  }
  std::memcpy(all, w.slots[gen & 1], sizeof(w.slots[0]));
}

unsigned char* dynamic_shared() { return g_dynamic_shared.data(); }

void fresh_shared(void* p, size_t bytes) {
  uint64_t& filled = g_shared_filled[p];
  if (filled == g_block_serial) return;
  filled = g_block_serial;
  std::memset(p, 0xAB, bytes);
}

void launch_impl(const char* kernel, const std::function<void()>& body, dim3 grid, dim3 block,
                 size_t shared_bytes) {
  std::lock_guard<std::mutex> hold(g_launch_mutex);
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const bool bad = threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 ||
                   block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
                   grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 ||
                   shared_bytes > kSharedLimit;
  if (bad) {
    char b[256];
    std::snprintf(b, sizeof b, "%s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>: invalid configuration",
                  kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    g_fault = b;
    g_last_error = cudaErrorInvalidConfiguration;
    return;
  }
  const unsigned n = unsigned(threads);
  while (g_fibers.size() < n) {
    g_fibers.emplace_back();
    g_fibers.back().stack = new_stack();
  }
  if (g_warps.size() < (n + 31) / 32) g_warps.resize((n + 31) / 32);
  for (unsigned t = 0; t < n; ++t) {
    Fiber& f = g_fibers[t];
    f.linear = t;
    f.lane.idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  }
  g_dynamic_shared.resize(shared_bytes ? shared_bytes : 1);  // exact: a sanitizer sees overruns
  g_grid_dim = grid;
  g_block_dim = block;
  g_body = &body;
  g_error.clear();
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        g_block_idx = {x, y, z};
        ++g_block_serial;
        std::memset(g_dynamic_shared.data(), 0xAB, g_dynamic_shared.size());
        if (!run_block(n)) {
          char b[128];
          std::snprintf(b, sizeof b, "%s, block (%u,%u,%u): ", kernel, x, y, z);
          g_fault = b + g_error;
          g_last_error = cudaErrorLaunchFailure;
          // the fibers still blocked are abandoned; their stacks are reset by the next launch
          return;
        }
      }
}

}  // namespace emu

// ---- the runtime API --------------------------------------------------------------------------
using emu::g_fault;
using emu::g_last_error;

cudaError_t cudaGetLastError() {
  cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return g_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  if (e == cudaSuccess) return "no error";
  if (e == cudaErrorInvalidConfiguration || e == cudaErrorLaunchFailure) {
    thread_local std::string text;
    text = "emulated launch failed: " + g_fault;
    return text.c_str();
  }
  if (e == cudaErrorMemoryAllocation) return "out of memory";
  return "invalid argument";
}

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* dev) {
  *dev = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev) {
  if (dev != 0) return g_last_error = cudaErrorInvalidValue;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = emu::kSmCount; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
  }
  return g_last_error = cudaErrorInvalidValue;
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return g_last_error = cudaErrorMemoryAllocation;
  std::memset(*p, 0xAB, bytes);  // as the stand-in device's memory: unwritten bytes show
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

// The order threads run in (see run_block): 1 descending, 0 ascending; returns the previous.
extern "C" int emu_set_descending(int descending) {
  std::lock_guard<std::mutex> hold(emu::g_launch_mutex);
  const int was = emu::g_descending;
  emu::g_descending = descending != 0;
  return was;
}
