#include "util/large_alloc.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

namespace lift {
namespace {

constexpr size_t kHugePage = kHugePageBytes;
// Each slab wastes at most the unused part of the last huge page it touched, and reserves (but
// does not touch) the rest: few slabs for a large model, little address space for a small one.
constexpr size_t kSlabBytes = size_t{64} << 20;
constexpr size_t kAlign = 64;

constexpr size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Slab {
  uint8_t* base = nullptr;
  size_t size = 0;
  size_t used = 0;  // carved from base on, in order
  size_t live = 0;  // buffers not freed yet
};

class SlabArena {
 public:
  void* alloc(size_t bytes) {
    const size_t need = round_up(std::max<size_t>(bytes, 1), kAlign);
    if (need < bytes) throw std::bad_alloc();  // the rounding overflowed
    std::lock_guard lock(mu_);
    for (auto& [at, s] : slabs_) {  // first fit: the tails of earlier slabs fill up too
      if (s.size - s.used >= need) return carve(s, need);
    }
    if (need > SIZE_MAX - kHugePage * 2) throw std::bad_alloc();
    Slab s = map_slab(std::max(kSlabBytes, round_up(need, kHugePage)));
    return carve(slabs_.emplace(reinterpret_cast<uintptr_t>(s.base), s).first->second, need);
  }

  void free(void* p) {
    if (p == nullptr) return;
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(mu_);
    const auto sz = sizes_.find(at);
    if (sz == sizes_.end()) return;  // not ours: nothing to release
    const size_t bytes = sz->second;
    sizes_.erase(sz);
    auto it = std::prev(slabs_.upper_bound(at));
    Slab& s = it->second;
    if (--s.live == 0) {
      munmap(s.base, s.size);
      slabs_.erase(it);
      return;
    }
    // The huge pages that lie wholly inside the buffer are no one else's, and never carved
    // again: back to the kernel now, not when the slab's last buffer goes.
    const uintptr_t b = round_up(at, kHugePage), e = (at + bytes) / kHugePage * kHugePage;
    if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }

  StreamedStats stats() {
    std::lock_guard lock(mu_);
    StreamedStats st;
    for (const auto& [at, s] : slabs_) {
      ++st.slabs;
      st.bytes += s.size;
    }
    return st;
  }

 private:
  void* carve(Slab& s, size_t need) {
    uint8_t* p = s.base + s.used;
    s.used += need;
    ++s.live;
    sizes_.emplace(reinterpret_cast<uintptr_t>(p), need);
    return p;
  }

  // `size` bytes of fresh (zero) pages at a huge-page boundary: mapped with a huge page to
  // spare, the unaligned ends cut off.
  static Slab map_slab(size_t size) {
    const size_t len = size + kHugePage;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* raw = static_cast<uint8_t*>(m);
    auto* base = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
    if (base > raw) munmap(raw, static_cast<size_t>(base - raw));
    uint8_t* end = base + size;
    if (raw + len > end) munmap(end, static_cast<size_t>(raw + len - end));
    // Advice only: where the kernel has no huge pages to give, this fails and nothing changes.
    madvise(base, size, MADV_HUGEPAGE);
    return {base, size};
  }

  std::mutex mu_;
  std::map<uintptr_t, Slab> slabs_;              // by base address
  std::unordered_map<uintptr_t, size_t> sizes_;  // each live buffer's carved bytes
};

// Never destroyed: buffers held by other static objects may be freed after it would be.
SlabArena& arena() {
  static auto* a = new SlabArena;
  return *a;
}

}  // namespace

void* alloc_streamed(size_t bytes) { return arena().alloc(bytes); }

void free_streamed(void* p) { arena().free(p); }

bool populate_streamed(void* p, size_t bytes) {
  if (bytes == 0) return true;
  // madvise wants a page-aligned start: the page shared with a neighbour is faulted too, which
  // leaves its bytes as they are.
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / kPage * kPage;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
}

StreamedStats streamed_stats() { return arena().stats(); }

}  // namespace lift
