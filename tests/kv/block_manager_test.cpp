// BlockManager: block accounting, all-or-nothing exhaustion, fork and copy-on-write, prefix
// caching (chains, partial blocks, full-prompt back-off, collisions, LRU eviction, revival),
// and a random-operation property test against a shadow model of the K/V contents.
#include "kv/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>

#include "util/error.h"

namespace lift {
namespace {

using Copies = std::vector<std::pair<int32_t, int32_t>>;

std::vector<int32_t> iota_tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

void check(const BlockManager& bm, std::initializer_list<const BlockTable*> tables) {
  const std::vector<const BlockTable*> v(tables);
  ASSERT_NO_THROW(bm.check_invariants(v));
}

void expect_all_released(const BlockManager& bm) {
  EXPECT_EQ(bm.n_used(), 0u);
  EXPECT_EQ(bm.n_free() + bm.n_cached(), bm.n_total());
  EXPECT_EQ(bm.n_available(), bm.n_total());
}

// Starts a sequence on a prompt: reuse, slots for the rest, "compute", commit.
size_t start(BlockManager& bm, BlockTable& t, const std::vector<int32_t>& prompt) {
  const size_t reused = bm.allocate_prompt(t, prompt);
  Copies copies;
  EXPECT_TRUE(bm.append_slots(t, prompt.size() - reused, &copies));
  EXPECT_TRUE(copies.empty());
  bm.commit(t, prompt, prompt.size());
  return reused;
}

TEST(BlockManager, RejectsBadGeometry) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
}

TEST(BlockManager, AllocateAppendFreeAccounting) {
  BlockManager bm(8, 4);
  EXPECT_EQ(bm.n_total(), 8u);
  EXPECT_EQ(bm.n_free(), 8u);
  BlockTable a, b;
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, 1, &copies));  // first slot takes a block
  EXPECT_EQ(a.blocks.size(), 1u);
  ASSERT_TRUE(bm.append_slots(a, 3, &copies));  // fills it, no new block
  EXPECT_EQ(a.blocks.size(), 1u);
  ASSERT_TRUE(bm.append_slots(a, 1, &copies));  // next block only when the last is full
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_EQ(a.n_tokens, 5u);
  ASSERT_TRUE(bm.append_slots(b, 9, &copies));
  EXPECT_EQ(b.blocks.size(), 3u);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.n_used(), 5u);
  EXPECT_EQ(bm.n_free(), 3u);
  EXPECT_DOUBLE_EQ(bm.usage(), 5.0 / 8.0);
  check(bm, {&a, &b});
  for (int32_t blk : a.blocks) EXPECT_EQ(bm.ref_count(blk), 1);

  bm.free(a);
  EXPECT_TRUE(a.blocks.empty());
  EXPECT_EQ(a.n_tokens, 0u);
  check(bm, {&b});
  bm.free(a);  // a second free of the same table is harmless
  check(bm, {&b});
  bm.free(b);
  check(bm, {});
  expect_all_released(bm);
  EXPECT_EQ(bm.n_cached(), 0u);  // nothing was committed
}

// A growing table takes the block after its last one where that is free (so a K/V head's blocks
// lie in one ascending stream), else the free list's first.
TEST(BlockManager, GrowingTableTakesTheBlockAfterItsLast) {
  BlockManager bm(8, 4, /*prefix_caching=*/false);
  BlockTable a, b, c;
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, 8, &copies));  // blocks 0, 1
  ASSERT_TRUE(bm.append_slots(b, 8, &copies));  // 2, 3
  ASSERT_TRUE(bm.append_slots(c, 4, &copies));  // 4
  EXPECT_EQ(a.blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.blocks, (std::vector<int32_t>{2, 3}));
  bm.free(b);                                   // 2 and 3 go to the free list's end
  ASSERT_TRUE(bm.append_slots(a, 8, &copies));  // free 2, 3 follow a's 1 (the list starts at 5)
  EXPECT_EQ(a.blocks, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_TRUE(bm.append_slots(a, 1, &copies));  // 4 is c's: the list's first, 5
  EXPECT_EQ(a.blocks.back(), 5);
  ASSERT_TRUE(bm.append_slots(c, 1, &copies));  // 5 is taken: 6
  EXPECT_EQ(c.blocks, (std::vector<int32_t>{4, 6}));
  check(bm, {&a, &c});
  bm.free(a);
  bm.free(c);
  expect_all_released(bm);
}

TEST(BlockManager, ExhaustionReturnsFalseAndChangesNothing) {
  BlockManager bm(4, 4);
  BlockTable a, b;
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, 10, &copies));  // 3 blocks
  EXPECT_FALSE(bm.can_append(b, 8));
  const BlockTable b_before = b;
  EXPECT_FALSE(bm.append_slots(b, 8, &copies));  // needs 2, 1 left
  EXPECT_EQ(b.blocks, b_before.blocks);
  EXPECT_EQ(b.n_tokens, 0u);
  EXPECT_EQ(bm.n_free(), 1u);
  check(bm, {&a, &b});

  EXPECT_TRUE(bm.can_append(a, 2));
  ASSERT_TRUE(bm.append_slots(a, 2, &copies));  // fits in the partial block
  EXPECT_EQ(bm.n_free(), 1u);
  ASSERT_TRUE(bm.append_slots(a, 4, &copies));  // takes the last block
  EXPECT_EQ(bm.n_free(), 0u);
  const BlockTable a_before = a;
  EXPECT_FALSE(bm.can_append(a, 1));
  EXPECT_FALSE(bm.append_slots(a, 1, &copies));
  EXPECT_EQ(a.blocks, a_before.blocks);
  EXPECT_EQ(a.n_tokens, 16u);
  EXPECT_TRUE(bm.can_append(a, 0));
  EXPECT_TRUE(bm.append_slots(a, 0, &copies));
  EXPECT_TRUE(copies.empty());
  check(bm, {&a, &b});

  // Copy-on-write that cannot get its block fails cleanly too.
  bm.free(a);
  ASSERT_TRUE(bm.append_slots(a, 6, &copies));  // 2 blocks, last partial
  BlockTable c;
  bm.fork(a, c);
  ASSERT_TRUE(bm.append_slots(b, 8, &copies));  // pool now full
  EXPECT_EQ(bm.n_available(), 0u);
  EXPECT_FALSE(bm.append_slots(c, 1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(c.blocks, a.blocks);
  check(bm, {&a, &b, &c});
  for (BlockTable* t : {&a, &b, &c}) bm.free(*t);
  expect_all_released(bm);
}

TEST(BlockManager, ForkAndCopyOnWrite) {
  BlockManager bm(16, 4);
  BlockTable a;
  const auto prompt = iota_tokens(6, 100);
  start(bm, a, prompt);  // blocks [x, y], y holds 2 of 4
  ASSERT_EQ(a.blocks.size(), 2u);
  const int32_t x = a.blocks[0], y = a.blocks[1];
  BlockTable b;
  bm.fork(a, b);
  EXPECT_EQ(b.blocks, a.blocks);
  EXPECT_EQ(b.n_tokens, 6u);
  EXPECT_EQ(bm.ref_count(x), 2);
  EXPECT_EQ(bm.ref_count(y), 2);
  check(bm, {&a, &b});
  EXPECT_THROW(bm.fork(a, b), Error);  // child must be empty

  // a diverges first: its shared partial block is copied.
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, 1, &copies));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].first, y);
  const int32_t y2 = copies[0].second;
  EXPECT_NE(y2, y);
  EXPECT_EQ(a.blocks, (std::vector<int32_t>{x, y2}));
  EXPECT_EQ(bm.ref_count(x), 2);
  EXPECT_EQ(bm.ref_count(y), 1);
  EXPECT_EQ(bm.ref_count(y2), 1);
  EXPECT_EQ(bm.stats().cow_copies, 1u);
  // b is now the only holder of y: it writes in place.
  copies.clear();
  ASSERT_TRUE(bm.append_slots(b, 1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(b.blocks, (std::vector<int32_t>{x, y}));
  // Filling and growing past the block boundary never copies the shared full block x.
  ASSERT_TRUE(bm.append_slots(a, 3, &copies));
  ASSERT_TRUE(bm.append_slots(b, 3, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_EQ(b.blocks.size(), 3u);
  EXPECT_EQ(a.blocks[0], x);
  EXPECT_EQ(b.blocks[0], x);
  EXPECT_NE(a.blocks[2], b.blocks[2]);
  check(bm, {&a, &b});

  // A fork at a block boundary shares only full blocks: no copy, a fresh block each.
  BlockTable c, d;
  ASSERT_TRUE(bm.append_slots(c, 8, &copies));
  bm.fork(c, d);
  ASSERT_TRUE(bm.append_slots(c, 1, &copies));
  ASSERT_TRUE(bm.append_slots(d, 1, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_NE(c.blocks[2], d.blocks[2]);
  check(bm, {&a, &b, &c, &d});

  // A copy list is required when a copy is needed.
  BlockTable e, f;
  ASSERT_TRUE(bm.append_slots(e, 2, &copies));
  bm.fork(e, f);
  EXPECT_THROW(bm.append_slots(f, 1, nullptr), Error);
  check(bm, {&a, &b, &c, &d, &e, &f});

  for (BlockTable* t : {&a, &b, &c, &d, &e, &f}) bm.free(*t);
  check(bm, {});
  expect_all_released(bm);
}

TEST(BlockManager, PrefixChainOfThreeBlocksReused) {
  BlockManager bm(32, 4);
  BlockTable a, b;
  auto pa = iota_tokens(14, 1);  // 3 full blocks + 2 tokens
  EXPECT_EQ(start(bm, a, pa), 0u);
  EXPECT_EQ(a.hashes.size(), 3u);
  EXPECT_EQ(bm.stats().prefix_queries, 1u);  // the first lookup missed: the chain stops
  EXPECT_EQ(bm.stats().prefix_hits, 0u);

  auto pb = iota_tokens(12, 1);
  for (int32_t t : {70, 71, 72}) pb.push_back(t);
  const size_t reused = bm.allocate_prompt(b, pb);
  EXPECT_EQ(reused, 12u);
  EXPECT_EQ(b.n_tokens, 12u);
  EXPECT_EQ(b.blocks, std::vector<int32_t>(a.blocks.begin(), a.blocks.begin() + 3));
  EXPECT_EQ(b.hashes, a.hashes);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(bm.ref_count(a.blocks[i]), 2);
  EXPECT_EQ(bm.stats().prefix_queries, 4u);
  EXPECT_EQ(bm.stats().prefix_hits, 3u);
  EXPECT_EQ(bm.stats().prefix_hit_tokens, 12u);
  check(bm, {&a, &b});
  Copies copies;
  ASSERT_TRUE(bm.append_slots(b, 3, &copies));
  EXPECT_TRUE(copies.empty());  // a full shared block is never written
  EXPECT_EQ(b.blocks.size(), 4u);
  EXPECT_NE(b.blocks[3], a.blocks[3]);
  bm.commit(b, pb, pb.size());
  check(bm, {&a, &b});

  // A prompt that diverges inside the second block reuses only the first.
  BlockTable c;
  auto pc = iota_tokens(10, 1);
  pc[6] = 999;
  EXPECT_EQ(bm.allocate_prompt(c, pc), 4u);
  check(bm, {&a, &b, &c});
  for (BlockTable* t : {&a, &b, &c}) bm.free(*t);
  expect_all_released(bm);
  EXPECT_EQ(bm.n_cached(), 3u);  // the three full blocks keep their entries
}

// Two sequences compute the same two-block prefix in one step (neither found it cached: both
// were admitted together), and the second goes on past it. A third prompt sharing the second's
// longer prefix must find all of it: the second's later blocks chain under the blocks a lookup
// reaches, and its duplicates of the shared blocks come back to the pool.
TEST(BlockManager, SamePrefixComputedTwiceInOneStepStaysReachable) {
  BlockManager bm(16, 4);
  const auto pa = iota_tokens(9, 1);  // 2 full blocks + 1
  auto pb = iota_tokens(8, 1);        // the same 2 blocks, then 1 more full block + 1
  for (int32_t t : {70, 71, 72, 73, 74}) pb.push_back(t);
  BlockTable a, b;
  EXPECT_EQ(bm.allocate_prompt(a, pa), 0u);
  EXPECT_EQ(bm.allocate_prompt(b, pb), 0u);
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, pa.size(), &copies));
  ASSERT_TRUE(bm.append_slots(b, pb.size(), &copies));
  EXPECT_EQ(bm.n_used(), 3u + 4u);
  // One forward pass computed both; the engine commits them in batch order.
  bm.commit(a, pa, pa.size());
  bm.commit(b, pb, pb.size());
  check(bm, {&a, &b});
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  EXPECT_EQ(bm.ref_count(a.blocks[0]), 2);
  EXPECT_EQ(bm.ref_count(a.blocks[1]), 2);
  EXPECT_EQ(bm.stats().merged, 2u);
  EXPECT_EQ(bm.n_used(), 3u + 2u);  // b's copies of the shared blocks are free again

  auto pc = iota_tokens(8, 1);
  for (int32_t t : {70, 71, 72, 73, 99, 98}) pc.push_back(t);
  BlockTable c;
  EXPECT_EQ(bm.allocate_prompt(c, pc), 12u);
  EXPECT_EQ(c.blocks, std::vector<int32_t>(b.blocks.begin(), b.blocks.begin() + 3));
  check(bm, {&a, &b, &c});
  for (BlockTable* t : {&a, &b, &c}) bm.free(*t);
  expect_all_released(bm);
  // The chain outlives its sequences.
  BlockTable d;
  EXPECT_EQ(bm.allocate_prompt(d, pc), 12u);
  check(bm, {&d});
  bm.free(d);
}

TEST(BlockManager, PartialBlockPrompts) {
  BlockManager bm(16, 4);
  BlockTable a;
  start(bm, a, iota_tokens(11, 1));  // 2 full blocks registered, 3 tokens in a partial one
  EXPECT_EQ(a.hashes.size(), 2u);
  BlockTable b;
  EXPECT_EQ(bm.allocate_prompt(b, iota_tokens(3, 1)), 0u);  // shorter than a block
  EXPECT_EQ(bm.stats().prefix_queries, 1u);                 // b looked nothing up
  EXPECT_TRUE(b.blocks.empty());
  BlockTable c;
  EXPECT_EQ(bm.allocate_prompt(c, iota_tokens(7, 1)), 4u);  // 1.75 blocks: one reused
  // The partial third block of a is never registered, even when a later prompt matches it.
  BlockTable d;
  EXPECT_EQ(bm.allocate_prompt(d, iota_tokens(12, 1)), 8u);
  check(bm, {&a, &b, &c, &d});
  // Committing part of a block registers nothing new; the full block registers on commit.
  Copies copies;
  auto toks = iota_tokens(11, 1);
  toks.push_back(12);
  ASSERT_TRUE(bm.append_slots(a, 1, &copies));
  bm.commit(a, toks, 11);
  EXPECT_EQ(a.hashes.size(), 2u);
  bm.commit(a, toks, 12);
  EXPECT_EQ(a.hashes.size(), 3u);
  BlockTable e;
  auto pe = iota_tokens(13, 1);
  EXPECT_EQ(bm.allocate_prompt(e, pe), 12u);
  EXPECT_THROW(bm.commit(a, toks, 13), Error);  // beyond the table's slots
  check(bm, {&a, &b, &c, &d, &e});
  for (BlockTable* t : {&a, &b, &c, &d, &e}) bm.free(*t);
  expect_all_released(bm);
}

TEST(BlockManager, FullPromptHitBacksOffOneBlock) {
  BlockManager bm(16, 4);
  BlockTable a;
  const auto p = iota_tokens(8, 1);
  start(bm, a, p);
  const auto a_blocks = a.blocks;
  bm.free(a);
  EXPECT_EQ(bm.n_cached(), 2u);

  BlockTable b;
  EXPECT_EQ(bm.allocate_prompt(b, p), 4u);  // the last token must be computed
  EXPECT_EQ(b.blocks, std::vector<int32_t>{a_blocks[0]});
  EXPECT_EQ(b.hashes.size(), 1u);
  EXPECT_EQ(bm.stats().prefix_hits, 1u);
  EXPECT_EQ(bm.n_cached(), 1u);  // the second block stays cached, untouched
  Copies copies;
  ASSERT_TRUE(bm.append_slots(b, 4, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_NE(b.blocks[1], a_blocks[1]);  // never written into the shared cached block
  bm.commit(b, p, 8);                   // same contents: not registered twice
  check(bm, {&b});
  bm.free(b);
  expect_all_released(bm);
  EXPECT_EQ(bm.n_cached(), 2u);
  // A one-token prompt computes its token.
  BlockTable c;
  EXPECT_EQ(bm.allocate_prompt(c, iota_tokens(1, 1)), 0u);
  check(bm, {&c});
}

// Every block hashes alike: hits must be confirmed by the stored tokens.
uint64_t constant_hash(uint64_t, std::span<const int32_t>) { return 42; }
// Ignores the parent: equal blocks after different prefixes collide.
uint64_t tokens_only_hash(uint64_t, std::span<const int32_t> t) {
  return BlockManager::default_hash(7, t);
}

TEST(BlockManager, HashCollisionIsNeverReused) {
  BlockManager bm(16, 4, true, &constant_hash);
  BlockTable a, b;
  start(bm, a, {1, 2, 3, 4, 5});
  EXPECT_EQ(bm.allocate_prompt(b, std::vector<int32_t>{7, 8, 9, 10, 11}),
            0u);  // same hash, other tokens
  EXPECT_EQ(bm.stats().prefix_queries, 2u);
  EXPECT_EQ(bm.stats().prefix_hits, 0u);
  BlockTable c;
  EXPECT_EQ(bm.allocate_prompt(c, std::vector<int32_t>{1, 2, 3, 4, 6}),
            4u);  // a true hit still works
  check(bm, {&a, &b, &c});
  for (BlockTable* t : {&a, &b, &c}) bm.free(*t);
  expect_all_released(bm);
}

TEST(BlockManager, CollisionWithEqualTokensAfterAnotherPrefixIsNeverReused) {
  BlockManager bm(16, 4, true, &tokens_only_hash);
  BlockTable x, w, y;
  start(bm, x, {1, 2, 3, 4, 5, 6, 7, 8, 0});  // [1..4] then [5..8] after it
  start(bm, w, {9, 9, 9, 9, 0});              // [9,9,9,9] registered by another block
  // [9,9,9,9] hits; [5..8] hashes like x's second block and holds the same tokens, but
  // that block's K/V was computed after [1..4]: it must not be reused.
  EXPECT_EQ(bm.allocate_prompt(y, std::vector<int32_t>{9, 9, 9, 9, 5, 6, 7, 8, 0}), 4u);
  EXPECT_EQ(y.blocks, std::vector<int32_t>{w.blocks[0]});
  check(bm, {&x, &w, &y});
  for (BlockTable* t : {&x, &w, &y}) bm.free(*t);
  expect_all_released(bm);
}

TEST(BlockManager, LruEvictionOrderAndRevival) {
  BlockManager bm(4, 2);
  BlockTable p, q;
  start(bm, p, {1, 2, 0});  // registers [1,2]
  start(bm, q, {3, 4, 0});  // registers [3,4]
  const int32_t bp = p.blocks[0], bq = q.blocks[0];
  bm.free(p);  // [1,2] released first: least recently used
  bm.free(q);
  EXPECT_EQ(bm.n_cached(), 2u);
  EXPECT_EQ(bm.n_free(), 2u);

  // A hit revives [1,2] (cached -> used) and, once released, makes it the most recent.
  BlockTable r;
  EXPECT_EQ(bm.allocate_prompt(r, std::vector<int32_t>{1, 2, 9}), 2u);
  EXPECT_EQ(r.blocks, std::vector<int32_t>{bp});
  EXPECT_EQ(bm.ref_count(bp), 1);
  EXPECT_EQ(bm.n_cached(), 1u);
  EXPECT_EQ(bm.n_used(), 1u);
  check(bm, {&r});
  bm.free(r);
  EXPECT_EQ(bm.n_cached(), 2u);

  // Free blocks go first; then the least recently used cached block, [3,4], is evicted.
  BlockTable s;
  Copies copies;
  ASSERT_TRUE(bm.append_slots(s, 6, &copies));
  EXPECT_EQ(bm.stats().evictions, 1u);
  EXPECT_EQ(bm.n_cached(), 1u);
  EXPECT_EQ(bm.n_free(), 0u);
  EXPECT_NE(std::find(s.blocks.begin(), s.blocks.end(), bq), s.blocks.end());
  check(bm, {&s});
  bm.free(s);
  BlockTable t, u;
  EXPECT_EQ(bm.allocate_prompt(t, std::vector<int32_t>{3, 4, 0}), 0u);  // evicted
  EXPECT_EQ(bm.allocate_prompt(u, std::vector<int32_t>{1, 2, 0}), 2u);  // still cached
  check(bm, {&t, &u});
  bm.free(t);
  bm.free(u);
  expect_all_released(bm);

  bm.clear_cached();
  EXPECT_EQ(bm.n_cached(), 0u);
  EXPECT_EQ(bm.n_free(), 4u);
  BlockTable v;
  EXPECT_EQ(bm.allocate_prompt(v, std::vector<int32_t>{1, 2, 0}), 0u);
  check(bm, {&v});
}

TEST(BlockManager, CachedBlocksCountAsAvailable) {
  BlockManager bm(3, 2);
  BlockTable a;
  start(bm, a, {1, 2, 3, 4, 5});  // 3 blocks, 2 registered
  bm.free(a);
  EXPECT_EQ(bm.n_cached(), 2u);
  EXPECT_EQ(bm.n_available(), 3u);
  EXPECT_DOUBLE_EQ(bm.usage(), 0.0);
  BlockTable b;
  Copies copies;
  EXPECT_TRUE(bm.can_append(b, 6));
  ASSERT_TRUE(bm.append_slots(b, 6, &copies));  // evicts both
  EXPECT_EQ(bm.stats().evictions, 2u);
  EXPECT_EQ(bm.n_cached(), 0u);
  check(bm, {&b});
}

TEST(BlockManager, WithoutPrefixCaching) {
  BlockManager bm(8, 4, false);
  BlockTable a, b;
  const auto p = iota_tokens(10, 1);
  EXPECT_EQ(start(bm, a, p), 0u);
  EXPECT_TRUE(a.hashes.empty());
  EXPECT_EQ(start(bm, b, p), 0u);
  EXPECT_EQ(bm.stats().prefix_queries, 0u);
  check(bm, {&a, &b});
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.n_cached(), 0u);
  EXPECT_EQ(bm.n_free(), 8u);
}

TEST(BlockManager, CheckInvariantsReportsViolations) {
  BlockManager bm(8, 4);
  BlockTable a;
  Copies copies;
  ASSERT_TRUE(bm.append_slots(a, 5, &copies));
  EXPECT_THROW(bm.check_invariants({}), Error);  // a's references unaccounted for
  BlockTable dup = a;
  const std::vector<const BlockTable*> twice{&a, &dup};
  EXPECT_THROW(bm.check_invariants(twice), Error);  // counted twice, ref is 1
  BlockTable bad = a;
  bad.n_tokens = 9;  // 3 blocks' worth of tokens in 2 blocks
  const std::vector<const BlockTable*> malformed{&bad};
  EXPECT_THROW(bm.check_invariants(malformed), Error);
  check(bm, {&a});
  EXPECT_THROW(bm.allocate_prompt(a, iota_tokens(4, 1)), Error);  // not empty
}

// ---- random operations against a shadow K/V ---------------------------------------------

// The shadow cache stores, per slot, a hash of the whole token prefix whose K/V a real cache
// would hold there; every live sequence must read its own prefix at each computed position.
struct Shadow {
  std::vector<uint64_t> slot;
  size_t bs;
  void copy_block(int32_t src, int32_t dst) {
    std::copy_n(slot.begin() + static_cast<ptrdiff_t>(src * bs), bs,
                slot.begin() + static_cast<ptrdiff_t>(dst * bs));
  }
};

struct Seq {
  BlockTable t;
  std::vector<int32_t> toks;
  std::vector<uint64_t> prefix;  // prefix[p]: hash of toks[0..p]
  size_t computed = 0, committed = 0;
};

uint64_t extend(uint64_t h, int32_t tok) {
  return (h ^ static_cast<uint64_t>(tok + 1)) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
}

void random_ops(BlockHashFn hash, uint32_t seed, size_t n_ops) {
  const size_t bs = 4, n_blocks = 48;
  BlockManager bm(n_blocks, bs, true, hash);
  Shadow shadow{std::vector<uint64_t>(n_blocks * bs, 0), bs};
  std::mt19937 rng(seed);
  const auto uni = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  // A few base prompts over a tiny alphabet, so prefixes are shared and blocks repeat.
  std::vector<std::vector<int32_t>> bases(4);
  for (auto& b : bases) {
    for (size_t i = 0; i < 40; ++i) b.push_back(static_cast<int32_t>(uni(0, 2)));
  }
  std::vector<std::unique_ptr<Seq>> seqs;
  size_t n_hits = 0, n_cow = 0, n_full = 0;

  const auto slot_of = [&](const BlockTable& t, size_t p) {
    return static_cast<size_t>(t.blocks[p / bs]) * bs + p % bs;
  };
  // Writes K/V for [computed, n_tokens) and maybe commits.
  const auto compute = [&](Seq& s) {
    for (size_t p = s.computed; p < s.t.n_tokens; ++p) shadow.slot[slot_of(s.t, p)] = s.prefix[p];
    s.computed = s.t.n_tokens;
    if (uni(0, 3) != 0) {
      bm.commit(s.t, s.toks, s.computed);
      s.committed = s.computed;
    }
  };
  const auto push_token = [&](Seq& s, int32_t tok) {
    s.prefix.push_back(extend(s.prefix.empty() ? 0 : s.prefix.back(), tok));
    s.toks.push_back(tok);
  };
  const auto verify = [&]() {
    std::vector<const BlockTable*> live;
    for (const auto& s : seqs) live.push_back(&s->t);
    bm.check_invariants(live);
    for (const auto& s : seqs) {
      for (size_t p = 0; p < s->computed; ++p) {
        ASSERT_EQ(shadow.slot[slot_of(s->t, p)], s->prefix[p]) << "position " << p;
      }
    }
  };

  for (size_t op = 0; op < n_ops; ++op) {
    const size_t kind = seqs.empty() ? 0 : uni(0, 9);
    Copies copies;
    if (kind <= 1 && seqs.size() < 10) {  // new request
      auto s = std::make_unique<Seq>();
      const auto& base = bases[uni(0, bases.size() - 1)];
      const size_t n_base = uni(1, base.size()), n_extra = uni(0, 6);
      for (size_t i = 0; i < n_base; ++i) push_token(*s, base[i]);
      for (size_t i = 0; i < n_extra; ++i) push_token(*s, static_cast<int32_t>(uni(0, 2)));
      const size_t reused = bm.allocate_prompt(s->t, s->toks);
      ASSERT_LT(reused, s->toks.size());
      ASSERT_EQ(reused % bs, 0u);
      n_hits += reused / bs;
      s->computed = s->committed = reused;
      if (!bm.append_slots(s->t, s->toks.size() - reused, &copies)) {
        ++n_full;
        bm.free(s->t);  // no room: the request waits (here: dropped)
        continue;
      }
      ASSERT_TRUE(copies.empty());
      compute(*s);
      seqs.push_back(std::move(s));
    } else if (kind <= 5) {  // decode or chunk: append tokens, copy, compute
      Seq& s = *seqs[uni(0, seqs.size() - 1)];
      const size_t n = uni(0, 2) == 0 ? uni(1, 9) : 1;
      const bool could = bm.can_append(s.t, n);
      const BlockTable before = s.t;
      const bool ok = bm.append_slots(s.t, n, &copies);
      ASSERT_EQ(ok, could);
      if (!ok) {
        ++n_full;
        ASSERT_EQ(s.t.blocks, before.blocks);
        ASSERT_EQ(s.t.n_tokens, before.n_tokens);
        ASSERT_TRUE(copies.empty());
      } else {
        ASSERT_LE(copies.size(), 1u);
        for (auto [src, dst] : copies) {
          ASSERT_GE(bm.ref_count(src), 1);
          ASSERT_EQ(bm.ref_count(dst), 1);
          shadow.copy_block(src, dst);
          ++n_cow;
        }
        for (size_t i = 0; i < n; ++i) push_token(s, static_cast<int32_t>(uni(0, 2)));
        compute(s);
      }
    } else if (kind == 6) {  // late commit
      Seq& s = *seqs[uni(0, seqs.size() - 1)];
      bm.commit(s.t, s.toks, s.computed);
      s.committed = s.computed;
    } else if (kind <= 8 && seqs.size() < 10) {  // fork
      const Seq& parent = *seqs[uni(0, seqs.size() - 1)];
      auto child = std::make_unique<Seq>();
      bm.fork(parent.t, child->t);
      child->toks = parent.toks;
      child->prefix = parent.prefix;
      child->computed = parent.computed;
      child->committed = parent.committed;
      seqs.push_back(std::move(child));
    } else {  // finish
      const size_t i = uni(0, seqs.size() - 1);
      bm.free(seqs[i]->t);
      seqs.erase(seqs.begin() + static_cast<ptrdiff_t>(i));
    }
    verify();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(n_hits, 0u);
  EXPECT_GT(n_cow, 0u);
  EXPECT_GT(n_full, 0u);
  EXPECT_GT(bm.stats().evictions, 0u);
  for (auto& s : seqs) bm.free(s->t);
  seqs.clear();
  verify();
  expect_all_released(bm);
}

TEST(BlockManager, RandomOperationsKeepInvariantsAndContents) {
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(seed);
    random_ops(&BlockManager::default_hash, seed, 10000);
    if (HasFatalFailure()) return;
  }
}

// A 2-bit hash: nearly every lookup collides; the contents must still be right.
uint64_t tiny_hash(uint64_t parent, std::span<const int32_t> t) {
  return (parent * 31 + static_cast<uint64_t>(t[0] + 2 * t[1])) % 4;
}

TEST(BlockManager, RandomOperationsWithCollidingHash) {
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(seed);
    random_ops(&tiny_hash, seed, 10000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace lift

namespace lift {
namespace {

// A sequence with an 8-token prompt generates 4 tokens (block size 4), then frees its blocks
// into the cache. A new prompt repeating all 12 tokens reuses the generated block only when the
// two kinds of token are computed alike; the sequence itself, resumed, always gets it back.
size_t reuse_after_generation(bool kinds_apart, size_t resumed_prompt_len) {
  BlockManager bm(8, 4);
  bm.keep_kinds_apart(kinds_apart);
  const auto toks = iota_tokens(13, 100);
  BlockTable a;
  Copies copies;
  EXPECT_EQ(bm.allocate_prompt(a, std::span(toks).first(8), 8), 0u);
  EXPECT_TRUE(bm.append_slots(a, 12, &copies));
  bm.commit(a, toks, 12, 8);
  bm.free(a);
  BlockTable b;
  const size_t reused = bm.allocate_prompt(b, toks, resumed_prompt_len);
  bm.free(b);
  return reused;
}

TEST(BlockManager, GeneratedBlocksServeOnlyTheirKindWhenKindsAreApart) {
  EXPECT_EQ(reuse_after_generation(false, 13), 12u);
  EXPECT_EQ(reuse_after_generation(true, 13), 8u);  // a new prompt: all 13 are prompt tokens
  EXPECT_EQ(reuse_after_generation(true, 8), 12u);  // the same sequence resumed
  EXPECT_EQ(reuse_after_generation(true, 9), 8u);   // another split inside the third block
}

}  // namespace
}  // namespace lift
