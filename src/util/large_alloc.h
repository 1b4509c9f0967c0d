// Memory for large buffers that are streamed end to end (packed weights, the KV cache, the
// bandwidth probe's buffer).
//
// Every one of them lies on transparent huge pages where the kernel has them: a decode step
// reads each weight once, from DRAM, and a stream over 4 KB pages misses the TLB every 4 KB.
// A matrix of a few megabytes (a 1.1B model's attention projections, 0.3-2.4 MB) on its own
// would need a 2 MB-rounded allocation to get them (up to 2 MB of padding each), so the
// buffers share slabs of whole huge pages instead, carved in order and never reused in place:
// a slab goes back to the kernel when its last buffer is freed, and the huge pages that a freed
// buffer covered whole go back at once.
#pragma once

#include <cstddef>
#include <memory>

namespace lift {

// The x86-64 transparent huge page, the unit of the slabs and of a first write's fault.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// At least `bytes` bytes, 64-byte aligned, zero-filled (fresh pages), on huge pages where
// available. Release with free_streamed. Throws std::bad_alloc.
void* alloc_streamed(size_t bytes);
// Releases what alloc_streamed returned; nullptr is ignored.
void free_streamed(void* p);
// Faults in the pages of [p, p + bytes) as a write would, leaving every byte as it is (so it may
// race writers): the first write to a huge page costs a fault that zeroes 2 MB. False where the
// kernel cannot (MADV_POPULATE_WRITE is Linux 5.14).
bool populate_streamed(void* p, size_t bytes);

struct StreamedFree {
  void operator()(void* p) const { free_streamed(p); }
};
template <class T>
using StreamedPtr = std::unique_ptr<T, StreamedFree>;

// The slabs held now, and their bytes (address space, not all of it touched): for tests.
struct StreamedStats {
  size_t slabs = 0;
  size_t bytes = 0;
};
StreamedStats streamed_stats();

}  // namespace lift
