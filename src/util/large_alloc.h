// Memory for large buffers that are streamed end to end (packed weights, the bandwidth
// probe's buffer).
#pragma once

#include <cstddef>

namespace lift {

// At least `bytes` bytes, 64-byte aligned; from 4 MB up, 2 MB aligned and advised onto
// transparent huge pages (a stream over 4 KB pages misses the TLB every 4 KB). Release with
// std::free. Throws std::bad_alloc.
void* alloc_streamed(size_t bytes);

}  // namespace lift
