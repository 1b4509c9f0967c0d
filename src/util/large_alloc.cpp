#include "util/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace lift {

void* alloc_streamed(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const bool huge = bytes >= 2 * kHugePage;
  const size_t align = huge ? kHugePage : 64;
  const size_t total = (bytes + align - 1) / align * align;  // aligned_alloc wants a multiple
  void* p = std::aligned_alloc(align, total);
  if (p == nullptr) throw std::bad_alloc();
  // Advice only: where the kernel has no huge pages to give, this fails and nothing changes.
  if (huge) madvise(p, total, MADV_HUGEPAGE);
  return p;
}

}  // namespace lift
