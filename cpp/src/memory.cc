// Caching host allocator behind st_alloc_* / st_free.
//
// Every block carries a 64-byte header holding its size class, so st_free needs no lookup.
// Small blocks are rounded up to a power of two, large ones to 2 MiB; freed blocks wait in a
// per-class list until the cache exceeds its limit. Reuse is what makes repeated large
// temporaries cheap: a fresh 64 MiB buffer costs 16k page faults on first touch.
#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common.h"

namespace st {
namespace {

constexpr size_t kHeader = 64;
constexpr size_t kHuge = size_t(2) << 20;

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  int64_t cached = 0;
  int64_t allocated = 0;
  int64_t limit = int64_t(4) << 30;
  // high-water marks since the last st_reset_peak_bytes: blocks in use, and in use or cached
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: blocks may be freed during interpreter exit
  return *c;
}

size_t size_class(size_t bytes) {
  size_t need = bytes + kHeader;
  if (need <= (size_t(1) << 20)) {
    size_t c = 128;
    while (c < need) c <<= 1;
    return c;
  }
  return (need + kHuge - 1) / kHuge * kHuge;
}

void* fresh(size_t cls) {
  size_t align = cls >= kHuge ? kHuge : 64;
  void* p = std::aligned_alloc(align, cls);
  if (p && cls >= kHuge) madvise(p, cls, MADV_HUGEPAGE);
  return p;
}

void* allocate(size_t bytes) {
  size_t cls = size_class(bytes);
  Cache& c = cache();
  void* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      block = it->second.back();
      it->second.pop_back();
      c.cached -= int64_t(cls);
    }
    c.allocated += int64_t(cls);
    if (c.allocated > c.peak_allocated) c.peak_allocated = c.allocated;
    if (c.allocated + c.cached > c.peak_reserved) c.peak_reserved = c.allocated + c.cached;
  }
  if (!block) {
    block = fresh(cls);
    if (!block) {
      std::lock_guard<std::mutex> lock(c.mu);
      c.allocated -= int64_t(cls);
      return nullptr;  // Python turns this into a MemoryError
    }
  }
  *static_cast<size_t*>(block) = cls;
  return static_cast<char*>(block) + kHeader;
}

void release(void* p) {
  if (!p) return;
  void* block = static_cast<char*>(p) - kHeader;
  size_t cls = *static_cast<size_t*>(block);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.allocated -= int64_t(cls);
    if (c.cached + int64_t(cls) <= c.limit) {
      c.free_blocks[cls].push_back(block);
      c.cached += int64_t(cls);
      return;
    }
  }
  std::free(block);
}

}  // namespace
}  // namespace st

extern "C" {
#define ST_DEF_ALLOC(sfx, T, _) \
  T* st_alloc_##sfx(int64_t n) { return static_cast<T*>(st::allocate(size_t(n) * sizeof(T))); }
ST_CAST_TYPES(ST_DEF_ALLOC, _)

void st_free(void* p) { st::release(p); }

int64_t st_cached_bytes(void) {
  std::lock_guard<std::mutex> lock(st::cache().mu);
  return st::cache().cached;
}

int64_t st_allocated_bytes(void) {
  std::lock_guard<std::mutex> lock(st::cache().mu);
  return st::cache().allocated;
}

int64_t st_peak_allocated_bytes(void) {
  std::lock_guard<std::mutex> lock(st::cache().mu);
  return st::cache().peak_allocated;
}

int64_t st_peak_reserved_bytes(void) {
  std::lock_guard<std::mutex> lock(st::cache().mu);
  return st::cache().peak_reserved;
}

void st_reset_peak_bytes(void) {
  st::Cache& c = st::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.peak_allocated = c.allocated;
  c.peak_reserved = c.allocated + c.cached;
}

void st_empty_cache(void) {
  st::Cache& c = st::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& kv : c.free_blocks)
    for (void* b : kv.second) std::free(b);
  c.free_blocks.clear();
  c.cached = 0;
}

void st_set_cache_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(st::cache().mu);
  st::cache().limit = bytes < 0 ? 0 : bytes;
}
}
