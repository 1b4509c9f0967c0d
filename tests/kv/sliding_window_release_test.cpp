// BlockManager::release_before (sliding-window attention): released entries become -1, shared
// and prefix-cached blocks stay for their other holders, and every block comes back.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/block_manager.h"
#include "util/error.h"

namespace lift {
namespace {

using Copies = std::vector<std::pair<int32_t, int32_t>>;

std::vector<int32_t> tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

void check(const BlockManager& bm, std::vector<const BlockTable*> tables) {
  ASSERT_NO_THROW(bm.check_invariants(tables));
}

// A sequence of n tokens, computed and committed.
BlockTable computed(BlockManager& bm, const std::vector<int32_t>& toks) {
  BlockTable t;
  const size_t reused = bm.allocate_prompt(t, toks);
  Copies copies;
  EXPECT_TRUE(bm.append_slots(t, toks.size() - reused, &copies));
  bm.commit(t, toks, toks.size());
  return t;
}

TEST(SlidingWindowRelease, BlocksWhollyBeforeThePositionGoBack) {
  BlockManager bm(16, 4, /*prefix_caching=*/false);
  BlockTable t = computed(bm, tokens(18, 100));  // 5 blocks: [0,4) ... [16,18)
  EXPECT_EQ(bm.n_used(), 5u);
  EXPECT_EQ(bm.release_before(t, 7), 1u);  // block [4,8) still holds position 7
  EXPECT_EQ(t.blocks[0], -1);
  EXPECT_GE(t.blocks[1], 0);
  EXPECT_EQ(bm.release_before(t, 12), 2u);
  EXPECT_EQ(bm.release_before(t, 12), 0u);  // idempotent
  EXPECT_EQ(t.n_released, 3u);
  EXPECT_EQ(t.n_tokens, 18u);  // positions keep their numbers
  EXPECT_EQ(bm.n_used(), 2u);
  check(bm, {&t});
  // The table goes on growing at its end.
  Copies copies;
  ASSERT_TRUE(bm.append_slots(t, 6, &copies));
  EXPECT_EQ(t.blocks.size(), 6u);
  check(bm, {&t});
  bm.free(t);
  EXPECT_EQ(bm.n_free(), bm.n_total());
  EXPECT_EQ(t.n_released, 0u);
}

TEST(SlidingWindowRelease, ASharedBlockStaysWithItsOtherHolder) {
  BlockManager bm(16, 4, /*prefix_caching=*/false);
  BlockTable parent = computed(bm, tokens(10, 1));
  BlockTable child;
  bm.fork(parent, child);
  const int32_t b0 = parent.blocks[0];
  bm.release_before(parent, 8);
  EXPECT_EQ(bm.ref_count(b0), 1);  // the child still reads it
  EXPECT_EQ(child.blocks[0], b0);
  check(bm, {&parent, &child});
  // A fork of a table with released entries shares only what is left.
  BlockTable grandchild;
  bm.fork(parent, grandchild);
  EXPECT_EQ(grandchild.blocks[0], -1);
  EXPECT_EQ(bm.ref_count(parent.blocks[2]), 3);
  check(bm, {&parent, &child, &grandchild});
  bm.free(child);
  EXPECT_EQ(bm.ref_count(b0), 0);
  bm.free(parent);
  bm.free(grandchild);
  EXPECT_EQ(bm.n_free(), bm.n_total());
}

TEST(SlidingWindowRelease, ReleasedBlocksStayInThePrefixCacheForTheNextPrompt) {
  BlockManager bm(16, 4);
  const auto prompt = tokens(13, 50);
  BlockTable a = computed(bm, prompt);
  bm.release_before(a, 12);  // blocks [0,4), [4,8), [8,12): released but cached
  EXPECT_EQ(bm.n_cached(), 3u);
  EXPECT_EQ(bm.n_used(), 1u);
  check(bm, {&a});
  BlockTable b;
  EXPECT_EQ(bm.allocate_prompt(b, prompt), 12u);  // all three come back to life
  EXPECT_EQ(bm.n_cached(), 0u);
  check(bm, {&a, &b});
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.n_used(), 0u);
  EXPECT_EQ(bm.n_available(), bm.n_total());
}

TEST(SlidingWindowRelease, AWindowNarrowerThanABlockStopsCachingTheChain) {
  // Window 2 with blocks of 4: block 0 goes before block 1 fills, so block 1 has no parent to
  // be verified against and is not cached (a lookup could not reach it anyway).
  BlockManager bm(16, 4);
  const auto toks = tokens(12, 7);
  BlockTable t;
  bm.allocate_prompt(t, toks);
  Copies copies;
  for (size_t n = 1; n <= toks.size(); ++n) {
    ASSERT_TRUE(bm.append_slots(t, 1, &copies));
    bm.commit(t, toks, n);
    if (n + 1 > 2) bm.release_before(t, n + 1 - 2);
    check(bm, {&t});
  }
  EXPECT_LE(bm.n_used(), 2u);
  EXPECT_EQ(bm.n_cached(), 1u);  // block 0 only
  bm.free(t);
  EXPECT_EQ(bm.n_available(), bm.n_total());
}

TEST(SlidingWindowRelease, InvariantCheckCatchesAReleasedEntryThatIsNotMinusOne) {
  BlockManager bm(8, 4, /*prefix_caching=*/false);
  BlockTable t = computed(bm, tokens(9, 1));
  bm.release_before(t, 4);
  BlockTable bad = t;
  bad.blocks[0] = 5;
  EXPECT_THROW(bm.check_invariants(std::vector<const BlockTable*>{&bad}), Error);
  bm.free(t);
}

}  // namespace
}  // namespace lift
