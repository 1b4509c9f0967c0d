// The paged KV cache's block manager (PagedAttention, Kwon et al. 2023): which sequence holds
// which KV block, with reference-counted sharing (fork, copy-on-write) and automatic prefix
// caching. It knows nothing about the model: only block ids and token ids.
//
// Every block is in exactly one state:
//   free    ref 0, no prefix-cache entry;
//   cached  ref 0, holds a prefix-cache entry: evictable, counts as available, and revived
//           (becomes used again) when a new prompt starts with the same tokens;
//   used    ref >= 1, referenced by that many block tables.
// A block is taken from the free list first, else the least recently used cached block is
// evicted (its cache entry dropped). Every per-block operation is O(1): the free and cached
// sets are intrusive doubly linked lists over block ids, the cache index is a hash map.
//
// Prefix caching identifies a full block by a hash chained over its parent block's hash and
// its own token ids. A hash hit is trusted only after checking the stored token ids and the
// identity of the parent block (block id and allocation generation), so a 64-bit collision
// can never hand out K/V computed for other tokens or after another prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lift {

// One sequence's view of the cache; owned by the sequence, changed only by the BlockManager.
// Slot of position p: blocks[p / block_size] * block_size + p % block_size. Under sliding-window
// attention the first n_released entries are -1: those positions are out of every layer's
// window and their blocks went back to the pool (release_before).
struct BlockTable {
  std::vector<int32_t> blocks;
  size_t n_tokens = 0;    // positions [0, n_tokens) have a slot (or had, before release)
  size_t n_released = 0;  // blocks[0, n_released) are -1
  // Chained hash of each full block committed so far (hashes[i] belongs to blocks[i]);
  // empty when prefix caching is off.
  std::vector<uint64_t> hashes;

  bool empty() const { return blocks.empty(); }
};

struct BlockManagerStats {
  uint64_t prefix_queries = 0;     // full prompt blocks looked up in the prefix cache
  uint64_t prefix_hits = 0;        // of which reused
  uint64_t prefix_hit_tokens = 0;  // prompt tokens whose K/V was reused
  uint64_t evictions = 0;          // cached blocks evicted to serve an allocation
  uint64_t cow_copies = 0;         // shared partial blocks copied on write
  uint64_t merged = 0;             // computed blocks given back for an equal block already cached
};

// Hash of one full block given its parent's hash (kRootHash for the first block).
using BlockHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens);

class BlockManager {
 public:
  static constexpr uint64_t kRootHash = 0x6c69667420726f6fULL;
  // XXH3-64 of the token ids, seeded with the parent hash.
  static uint64_t default_hash(uint64_t parent_hash, std::span<const int32_t> tokens);

  // hash: the block hash function; tests inject a colliding one. Throws lift::Error for
  // n_blocks == 0, block_size == 0 or n_blocks beyond int32 range.
  BlockManager(size_t n_blocks, size_t block_size, bool prefix_caching = true,
               BlockHashFn hash = &default_hash);

  size_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  size_t n_total() const { return ref_.size(); }
  size_t n_free() const { return free_.size; }
  size_t n_cached() const { return cached_.size; }
  size_t n_used() const { return n_total() - n_free() - n_cached(); }
  size_t n_available() const { return n_free() + n_cached(); }
  // Fraction of blocks in use (cached blocks are reclaimable and do not count).
  double usage() const { return static_cast<double>(n_used()) / static_cast<double>(n_total()); }
  int32_t ref_count(int32_t block) const { return ref_.at(static_cast<size_t>(block)); }
  const BlockManagerStats& stats() const { return stats_; }
  // Blocks needed to hold n tokens.
  size_t blocks_for(size_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

  // Starts an empty table on a prompt: reuses the longest run of cached full blocks at the
  // prompt's start and returns how many prompt tokens already have their K/V (a multiple of
  // block_size, always < prompt.size() so the last prompt token is computed and gives logits).
  // Takes no blocks for the remaining tokens: call append_slots for them.
  // Throws lift::Error if the table is not empty.
  // Tokens from n_prompt on are generated ones (see keep_kinds_apart).
  size_t allocate_prompt(BlockTable& table, std::span<const int32_t> prompt,
                         size_t n_prompt = SIZE_MAX);

  // Whether append_slots(table, n) would succeed.
  bool can_append(const BlockTable& table, size_t n) const;
  // Gives positions [n_tokens, n_tokens + n) slots. A new block is taken only when the last
  // one is full; a shared (ref > 1) partial last block is first replaced by a fresh copy and
  // (src, dst) is appended to *copies: the caller must copy the K/V (KvCache::copy_block)
  // before writing. All or nothing: returns false and changes nothing if the pool cannot
  // provide the blocks. Throws lift::Error if a copy is needed and copies is null.
  bool append_slots(BlockTable& table, size_t n, std::vector<std::pair<int32_t, int32_t>>* copies);

  // After a forward pass wrote K/V for positions [0, n_computed): registers every newly full
  // block in the prefix cache (no-op without prefix caching). A block another block already
  // holds the entry for (same tokens after the same parent block: two sequences computed the
  // same prefix at once) is not registered twice: the table takes the registered block
  // instead (ref++) and gives its own copy back (its K/V is the same by the exactness
  // contract), so the table's later blocks chain under the block a lookup finds. all_tokens
  // holds at least n_computed tokens of the sequence. Throws lift::Error if n_computed
  // exceeds the table's slots.
  void commit(BlockTable& table, std::span<const int32_t> all_tokens, size_t n_computed,
              size_t n_prompt = SIZE_MAX);

  // For a backend whose products differ for prompt and generated tokens (kernels::RowKind):
  // the block holding a sequence's first generated token is then keyed by where that token
  // sits in it (and the blocks after it through the hash chain), so K/V computed with the
  // generated tokens' kernels never serve a prompt that would compute them otherwise. Call
  // before the first commit.
  void keep_kinds_apart(bool on) { kinds_apart_ = on; }

  // Sliding-window attention: drops the table's references to the blocks that lie wholly
  // before position first_needed (no layer reads them again) and sets their entries to -1; the
  // table keeps its length. A block another table shares, or that the prefix cache holds, stays
  // theirs: release is the same ref-- as free. Blocks are released in position order, so the
  // prefix cache evicts a sequence's head before its tail. Returns how many were released.
  size_t release_before(BlockTable& table, size_t first_needed);

  // Speculative decoding's rollback: the table keeps slots for positions [0, n_tokens) only;
  // blocks wholly past them go back to the pool (last first). Slots of rejected draft tokens
  // were appended after the last committed block, so no shared or prefix-cached block is
  // touched. Throws lift::Error if n_tokens exceeds the table or cuts into committed blocks.
  void truncate(BlockTable& table, size_t n_tokens);

  // child shares all of parent's blocks (ref++). Throws lift::Error if child is not empty.
  void fork(const BlockTable& parent, BlockTable& child);

  // Drops the table's references (last block first, so a sequence's tail is evicted before
  // its head) and clears the table; freeing an empty table does nothing.
  void free(BlockTable& table);

  // Evicts every cached block (prefix cache reset); used blocks keep their entries.
  void clear_cached();

  // Self-check: each block in exactly one state, lists and hash index consistent, every used
  // block's ref count equal to the number of references from live_tables, tables well formed.
  // Throws lift::Error describing the first violation.
  void check_invariants(std::span<const BlockTable* const> live_tables) const;

 private:
  enum class State : uint8_t { free, cached, used };
  struct List {
    int32_t head = -1, tail = -1;
    size_t size = 0;
  };

  void push_back(List& l, int32_t b);
  void unlink(List& l, int32_t b);
  // The block after `after` if it is free, else the free list's first, else the LRU cached one
  // (evicted); returns it with ref 1, used.
  int32_t take_block(int32_t after = -1);
  void release(int32_t b);     // ref--, to cached/free at 0
  void drop_entry(int32_t b);  // removes b's prefix-cache entry
  bool matches(int32_t b, std::span<const int32_t> tokens, int32_t parent, int32_t boundary) const;
  // Block i's hash, and where in it the first generated token sits (-1: none, or kinds not kept
  // apart).
  uint64_t block_key(size_t i, uint64_t parent_hash, std::span<const int32_t> tokens,
                     size_t n_prompt, int32_t& boundary) const;
  size_t blocks_needed(const BlockTable& table, size_t n) const;
  void debug_check_counts() const;

  size_t block_size_;
  bool prefix_caching_;
  BlockHashFn hash_fn_;
  bool kinds_apart_ = false;

  // Per block.
  std::vector<int32_t> ref_;
  std::vector<State> state_;
  std::vector<int32_t> prev_, next_;  // links within the free or cached list
  std::vector<uint64_t> gen_;         // bumped on every allocation (new contents)
  std::vector<uint8_t> has_entry_;    // registered in index_
  std::vector<uint64_t> hash_;
  std::vector<int32_t> parent_;       // parent block at registration (-1 for the first)
  std::vector<uint64_t> parent_gen_;  // its generation then
  std::vector<int32_t> boundary_;     // block_key's boundary when registered
  std::vector<int32_t> tokens_;       // block_size token ids per registered block

  List free_, cached_;  // cached_: head = least recently used
  std::unordered_map<uint64_t, int32_t> index_;
  BlockManagerStats stats_;
};

}  // namespace lift
