#include "util/large_alloc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace lift {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool all_bytes(const void* p, size_t n, uint8_t v) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::all_of(b, b + n, [v](uint8_t x) { return x == v; });
}

TEST(LargeAlloc, BuffersAreAlignedZeroAndApart) {
  const StreamedStats before = streamed_stats();
  const std::vector<size_t> sizes = {1,        63,       64, 65, 300 * 1024, 2 * kMiB + 123,
                                     5 * kMiB, 70 * kMiB};
  std::vector<std::pair<uint8_t*, size_t>> bufs;
  for (size_t n : sizes) {
    auto* p = static_cast<uint8_t*>(alloc_streamed(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    EXPECT_TRUE(all_bytes(p, n, 0)) << n;
    bufs.emplace_back(p, n);
  }
  // Each filled with its own byte: an overlap shows as another buffer's byte.
  for (size_t i = 0; i < bufs.size(); ++i) {
    std::memset(bufs[i].first, static_cast<int>(i + 1), bufs[i].second);
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_TRUE(all_bytes(bufs[i].first, bufs[i].second, static_cast<uint8_t>(i + 1))) << i;
  }
  EXPECT_GT(streamed_stats().slabs, before.slabs);
  for (auto& [p, n] : bufs) free_streamed(p);
  // Every slab these opened went back with their last buffer.
  EXPECT_EQ(streamed_stats().slabs, before.slabs);
  EXPECT_EQ(streamed_stats().bytes, before.bytes);
}

TEST(LargeAlloc, SmallBuffersShareSlabs) {
  const StreamedStats before = streamed_stats();
  std::vector<void*> bufs;
  for (int i = 0; i < 20; ++i) bufs.push_back(alloc_streamed(kMiB));
  // 20 MB of 1 MB buffers: one new slab at most, not one (2 MB-rounded) mapping each.
  EXPECT_LE(streamed_stats().slabs, before.slabs + 1);
  for (void* p : bufs) free_streamed(p);
  EXPECT_EQ(streamed_stats().slabs, before.slabs);
}

TEST(LargeAlloc, FreeingOneBufferKeepsItsNeighbours) {
  // The freed middle buffer's whole huge pages go back to the kernel at once; the pages it
  // shares with its neighbours must not.
  uint8_t* a = static_cast<uint8_t*>(alloc_streamed(kMiB + 4096));
  uint8_t* b = static_cast<uint8_t*>(alloc_streamed(5 * kMiB));
  uint8_t* c = static_cast<uint8_t*>(alloc_streamed(kMiB + 4096));
  std::memset(a, 0xA1, kMiB + 4096);
  std::memset(b, 0xB2, 5 * kMiB);
  std::memset(c, 0xC3, kMiB + 4096);
  free_streamed(b);
  EXPECT_TRUE(all_bytes(a, kMiB + 4096, 0xA1));
  EXPECT_TRUE(all_bytes(c, kMiB + 4096, 0xC3));
  free_streamed(a);
  free_streamed(c);
}

TEST(LargeAlloc, PopulatingPagesKeepsTheirBytes) {
  // Written in places first, then every page faulted in: the written bytes stay, the rest zero.
  const size_t n = 5 * kMiB + 333;
  auto* p = static_cast<uint8_t*>(alloc_streamed(n));
  for (size_t i = 0; i < n; i += 4099) p[i] = static_cast<uint8_t>(i % 251 + 1);
  if (!populate_streamed(p + 17, n - 17)) GTEST_SKIP() << "no MADV_POPULATE_WRITE here";
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(p[i], i % 4099 == 0 ? static_cast<uint8_t>(i % 251 + 1) : 0) << i;
  }
  free_streamed(p);
}

TEST(LargeAlloc, NullAndForeignPointersAreIgnored) {
  free_streamed(nullptr);
  int local = 7;
  free_streamed(&local);
  EXPECT_EQ(local, 7);
}

TEST(LargeAlloc, ImpossibleSizesThrow) {
  EXPECT_THROW(alloc_streamed(SIZE_MAX - 10), std::bad_alloc);
}

}  // namespace
}  // namespace lift
