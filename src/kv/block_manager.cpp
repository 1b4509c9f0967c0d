#include "kv/block_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <limits>
#include <string>

#include "util/error.h"

namespace lift {

namespace {

[[noreturn]] void violation(const std::string& what) {
  throw Error("block manager invariant violated: " + what);
}

}  // namespace

uint64_t BlockManager::default_hash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_hash);
}

BlockManager::BlockManager(size_t n_blocks, size_t block_size, bool prefix_caching,
                           BlockHashFn hash)
    : block_size_(block_size), prefix_caching_(prefix_caching), hash_fn_(hash) {
  if (n_blocks == 0 || block_size == 0) {
    throw Error("block manager: need at least one block of at least one slot (got " +
                std::to_string(n_blocks) + " blocks of " + std::to_string(block_size) + ")");
  }
  if (n_blocks > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("block manager: " + std::to_string(n_blocks) + " blocks exceed the int32 range");
  }
  if (hash_fn_ == nullptr) hash_fn_ = &default_hash;
  ref_.assign(n_blocks, 0);
  state_.assign(n_blocks, State::free);
  prev_.assign(n_blocks, -1);
  next_.assign(n_blocks, -1);
  gen_.assign(n_blocks, 0);
  has_entry_.assign(n_blocks, 0);
  if (prefix_caching_) {
    hash_.assign(n_blocks, 0);
    parent_.assign(n_blocks, -1);
    parent_gen_.assign(n_blocks, 0);
    boundary_.assign(n_blocks, -1);
    tokens_.assign(n_blocks * block_size, 0);
    index_.reserve(n_blocks);
  }
  for (size_t b = 0; b < n_blocks; ++b) push_back(free_, static_cast<int32_t>(b));
}

void BlockManager::push_back(List& l, int32_t b) {
  prev_[b] = l.tail;
  next_[b] = -1;
  if (l.tail >= 0) {
    next_[l.tail] = b;
  } else {
    l.head = b;
  }
  l.tail = b;
  ++l.size;
}

void BlockManager::unlink(List& l, int32_t b) {
  const int32_t p = prev_[b], n = next_[b];
  if (p >= 0) {
    next_[p] = n;
  } else {
    l.head = n;
  }
  if (n >= 0) {
    prev_[n] = p;
  } else {
    l.tail = p;
  }
  prev_[b] = next_[b] = -1;
  --l.size;
}

void BlockManager::drop_entry(int32_t b) {
  index_.erase(hash_[b]);
  has_entry_[b] = 0;
}

int32_t BlockManager::take_block(int32_t after) {
  // A table whose blocks follow each other makes each K/V head's reads one ascending stream the
  // hardware prefetchers follow (KvLayerView::head_stride): a growing sequence takes the block
  // after its last one where that is free, e.g. one another request gave back.
  int32_t b = after + 1;
  if (after >= 0 && static_cast<size_t>(b) < state_.size() && state_[b] == State::free) {
    unlink(free_, b);
  } else if (free_.head >= 0) {
    b = free_.head;
    unlink(free_, b);
  } else if (cached_.head >= 0) {
    b = cached_.head;
    unlink(cached_, b);
    drop_entry(b);
    ++stats_.evictions;
  } else {
    throw Error("block manager: no block available (caller skipped the capacity check)");
  }
  state_[b] = State::used;
  ref_[b] = 1;
  ++gen_[b];
  return b;
}

void BlockManager::release(int32_t b) {
  if (ref_[b] <= 0) violation("block " + std::to_string(b) + " released with ref 0");
  if (--ref_[b] > 0) return;
  if (has_entry_[b]) {
    state_[b] = State::cached;
    push_back(cached_, b);  // most recently used at the tail
  } else {
    state_[b] = State::free;
    push_back(free_, b);
  }
}

uint64_t BlockManager::block_key(size_t i, uint64_t parent_hash, std::span<const int32_t> tokens,
                                 size_t n_prompt, int32_t& boundary) const {
  boundary = -1;
  if (kinds_apart_ && n_prompt / block_size_ == i) {
    boundary = static_cast<int32_t>(n_prompt % block_size_);
    parent_hash ^= 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(boundary + 1);
  }
  return hash_fn_(parent_hash, tokens);
}

bool BlockManager::matches(int32_t b, std::span<const int32_t> tokens, int32_t parent,
                           int32_t boundary) const {
  if (parent_[b] != parent || boundary_[b] != boundary) return false;
  if (parent >= 0 && parent_gen_[b] != gen_[parent]) return false;
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * block_size_;
  return std::equal(tokens.begin(), tokens.end(), stored);
}

size_t BlockManager::allocate_prompt(BlockTable& table, std::span<const int32_t> prompt,
                                     size_t n_prompt) {
  if (!table.blocks.empty() || table.n_tokens != 0 || !table.hashes.empty()) {
    throw Error("block manager: allocate_prompt needs an empty block table");
  }
  if (!prefix_caching_ || prompt.empty()) return 0;
  // Only blocks that leave at least one prompt token to compute are looked up: a fully
  // cached prompt gives back its last block, so nobody writes into a shared cached block.
  const size_t n_lookup = (prompt.size() - 1) / block_size_;
  uint64_t parent_hash = kRootHash;
  int32_t parent = -1;
  for (size_t i = 0; i < n_lookup; ++i) {
    const auto toks = prompt.subspan(i * block_size_, block_size_);
    int32_t boundary;
    const uint64_t h = block_key(i, parent_hash, toks, n_prompt, boundary);
    ++stats_.prefix_queries;
    const auto it = index_.find(h);
    if (it == index_.end() || !matches(it->second, toks, parent, boundary)) break;
    const int32_t b = it->second;
    if (ref_[b] == 0) {  // revive a cached block
      unlink(cached_, b);
      state_[b] = State::used;
    }
    ++ref_[b];
    table.blocks.push_back(b);
    table.hashes.push_back(h);
    ++stats_.prefix_hits;
    stats_.prefix_hit_tokens += block_size_;
    parent_hash = h;
    parent = b;
  }
  table.n_tokens = table.blocks.size() * block_size_;
  debug_check_counts();
  return table.n_tokens;
}

size_t BlockManager::blocks_needed(const BlockTable& table, size_t n) const {
  if (n == 0) return 0;
  const size_t have = table.blocks.size();
  size_t need = blocks_for(table.n_tokens + n) - have;
  const bool partial = table.n_tokens % block_size_ != 0;
  if (partial && ref_[table.blocks.back()] > 1) ++need;  // copy on write
  return need;
}

bool BlockManager::can_append(const BlockTable& table, size_t n) const {
  return blocks_needed(table, n) <= n_available();
}

bool BlockManager::append_slots(BlockTable& table, size_t n,
                                std::vector<std::pair<int32_t, int32_t>>* copies) {
  if (n == 0) return true;
  if (table.blocks.size() != blocks_for(table.n_tokens)) {
    throw Error("block manager: append_slots on a malformed block table");
  }
  if (blocks_needed(table, n) > n_available()) return false;
  if (table.n_tokens % block_size_ != 0 && ref_[table.blocks.back()] > 1) {
    if (copies == nullptr) throw Error("block manager: copy-on-write needs a copy list");
    const int32_t src = table.blocks.back();
    const int32_t dst = take_block();
    --ref_[src];  // still >= 1: another table holds it
    table.blocks.back() = dst;
    copies->emplace_back(src, dst);
    ++stats_.cow_copies;
  }
  const size_t target = blocks_for(table.n_tokens + n);
  while (table.blocks.size() < target) {
    table.blocks.push_back(take_block(table.blocks.empty() ? -1 : table.blocks.back()));
  }
  table.n_tokens += n;
  debug_check_counts();
  return true;
}

void BlockManager::commit(BlockTable& table, std::span<const int32_t> all_tokens, size_t n_computed,
                          size_t n_prompt) {
  if (!prefix_caching_) return;
  if (n_computed > table.n_tokens || n_computed > all_tokens.size()) {
    throw Error("block manager: commit of " + std::to_string(n_computed) +
                " tokens, but the table has " + std::to_string(table.n_tokens) + " slots and " +
                std::to_string(all_tokens.size()) + " tokens were given");
  }
  const size_t n_full = n_computed / block_size_;
  for (size_t i = table.hashes.size(); i < n_full; ++i) {
    const uint64_t parent_hash = i == 0 ? kRootHash : table.hashes[i - 1];
    const auto toks = all_tokens.subspan(i * block_size_, block_size_);
    int32_t boundary;
    const uint64_t h = block_key(i, parent_hash, toks, n_prompt, boundary);
    table.hashes.push_back(h);
    const int32_t b = table.blocks[i];
    // A window no wider than a block can release the parent before its child fills: without
    // the parent's identity the entry could not be verified, so the chain is not cached on.
    if (b < 0 || (i > 0 && table.blocks[i - 1] < 0)) continue;
    if (has_entry_[b]) continue;  // registered through a forked sibling
    const int32_t parent = i == 0 ? -1 : table.blocks[i - 1];
    if (const auto it = index_.find(h); it != index_.end()) {
      // Another sequence computed the same block (same tokens after the same parent block)
      // first, e.g. in the same step: take its copy and give ours back, so that the blocks
      // after this one are registered under the parent a lookup walks to. A collision (other
      // tokens or another parent) keeps the entry it found, and ours stays unregistered.
      const int32_t c = it->second;
      if (!matches(c, toks, parent, boundary)) continue;
      if (ref_[c] == 0) {  // revive a cached block
        unlink(cached_, c);
        state_[c] = State::used;
      }
      ++ref_[c];
      table.blocks[i] = c;
      release(b);
      ++stats_.merged;
      continue;
    }
    index_.emplace(h, b);
    has_entry_[b] = 1;
    hash_[b] = h;
    parent_[b] = parent;
    parent_gen_[b] = i == 0 ? 0 : gen_[parent];
    boundary_[b] = boundary;
    std::copy(toks.begin(), toks.end(), tokens_.begin() + static_cast<ptrdiff_t>(b * block_size_));
  }
  debug_check_counts();
}

void BlockManager::fork(const BlockTable& parent, BlockTable& child) {
  if (&parent == &child) throw Error("block manager: a table cannot fork into itself");
  if (!child.blocks.empty() || child.n_tokens != 0 || !child.hashes.empty()) {
    throw Error("block manager: fork needs an empty child table");
  }
  for (int32_t b : parent.blocks) {
    if (b < 0) continue;  // released by the window
    if (ref_[b] <= 0) violation("fork of a table holding unused block " + std::to_string(b));
    ++ref_[b];
  }
  child = parent;
}

size_t BlockManager::release_before(BlockTable& table, size_t first_needed) {
  const size_t end = std::min(first_needed / block_size_, table.blocks.size());
  const size_t before = table.n_released;
  for (; table.n_released < end; ++table.n_released) {
    int32_t& b = table.blocks[table.n_released];
    release(b);
    b = -1;
  }
  debug_check_counts();
  return table.n_released - before;
}

void BlockManager::truncate(BlockTable& table, size_t n_tokens) {
  if (n_tokens > table.n_tokens) throw Error("block manager: truncate past the table's end");
  const size_t keep = blocks_for(n_tokens);
  if (table.hashes.size() > keep || table.n_released > keep) {
    throw Error("block manager: truncate into committed or released blocks");
  }
  while (table.blocks.size() > keep) {
    release(table.blocks.back());
    table.blocks.pop_back();
  }
  table.n_tokens = n_tokens;
  debug_check_counts();
}

void BlockManager::free(BlockTable& table) {
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) {
    if (*it >= 0) release(*it);
  }
  table.blocks.clear();
  table.hashes.clear();
  table.n_tokens = 0;
  table.n_released = 0;
  debug_check_counts();
}

void BlockManager::clear_cached() {
  while (cached_.head >= 0) {
    const int32_t b = cached_.head;
    unlink(cached_, b);
    drop_entry(b);
    state_[b] = State::free;
    push_back(free_, b);
  }
}

void BlockManager::debug_check_counts() const {
#ifndef NDEBUG
  if (free_.size + cached_.size > n_total()) violation("free + cached exceed the total");
  if (index_.size() < cached_.size) violation("fewer cache entries than cached blocks");
#endif
}

void BlockManager::check_invariants(std::span<const BlockTable* const> live_tables) const {
  const size_t n = n_total();
  const auto name = [](int32_t b) { return "block " + std::to_string(b); };
  // Lists: walk both, checking links, membership and per-state properties.
  std::vector<uint8_t> seen(n, 0);
  const auto walk = [&](const List& l, State s, const char* what) {
    size_t count = 0;
    int32_t prev = -1;
    for (int32_t b = l.head; b >= 0; b = next_[b]) {
      if (static_cast<size_t>(b) >= n) violation(std::string(what) + " list holds a bad id");
      if (seen[b]) violation(name(b) + " is linked twice (" + what + " list)");
      seen[b] = 1;
      if (prev_[b] != prev) violation(name(b) + " has a wrong back link in the " + what + " list");
      if (state_[b] != s) violation(name(b) + " is in the " + what + " list but not " + what);
      if (ref_[b] != 0) violation(name(b) + " is " + what + " with ref " + std::to_string(ref_[b]));
      if (s == State::free && has_entry_[b]) violation(name(b) + " is free but has a cache entry");
      if (s == State::cached && !has_entry_[b]) violation(name(b) + " is cached without entry");
      prev = b;
      if (++count > n) violation(std::string(what) + " list has a cycle");
    }
    if (l.tail != prev) violation(std::string(what) + " list tail is wrong");
    if (count != l.size) violation(std::string(what) + " list size is wrong");
  };
  walk(free_, State::free, "free");
  walk(cached_, State::cached, "cached");

  // References from the live tables.
  std::vector<int64_t> refs(n, 0);
  for (const BlockTable* t : live_tables) {
    if (t->blocks.size() != blocks_for(t->n_tokens)) {
      violation("a table holds " + std::to_string(t->blocks.size()) + " blocks for " +
                std::to_string(t->n_tokens) + " tokens");
    }
    if (t->hashes.size() * block_size_ > t->n_tokens) violation("a table hashes unfilled blocks");
    if (!prefix_caching_ && !t->hashes.empty()) violation("a table has hashes without caching");
    if (t->n_released > t->blocks.size()) violation("a table released more blocks than it has");
    for (size_t i = 0; i < t->blocks.size(); ++i) {
      const int32_t b = t->blocks[i];
      if (i < t->n_released) {
        if (b != -1) violation("a table's released entry holds " + name(b));
        continue;
      }
      if (b < 0 || static_cast<size_t>(b) >= n) violation("a table holds bad id " + name(b));
      ++refs[b];
    }
  }
  size_t n_used_seen = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<int32_t>(i);
    if (state_[i] == State::used) {
      ++n_used_seen;
      if (seen[i]) violation(name(b) + " is used but linked in a list");
      if (ref_[i] < 1) violation(name(b) + " is used with ref " + std::to_string(ref_[i]));
    } else if (!seen[i]) {
      violation(name(b) + " is free or cached but in no list");
    }
    if (refs[i] != ref_[i]) {
      violation(name(b) + " has ref " + std::to_string(ref_[i]) + " but " +
                std::to_string(refs[i]) + " table references");
    }
    if (has_entry_[i]) {
      const auto it = index_.find(hash_[i]);
      if (it == index_.end() || it->second != b) violation(name(b) + " entry missing in index");
    }
  }
  if (n_used_seen != n_used()) violation("used count mismatch");
  for (const auto& [h, b] : index_) {
    if (b < 0 || static_cast<size_t>(b) >= n) violation("index holds a bad id");
    if (!has_entry_[b] || hash_[b] != h) violation("index entry for " + name(b) + " is stale");
    if (state_[b] == State::free) violation("index points at free " + name(b));
  }
}

}  // namespace lift
