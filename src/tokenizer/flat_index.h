// Open-addressing hash tables for the tokenizer's load-once, read-many lookups (token text ->
// id, merge pair -> rank): one flat probe array instead of a heap node per entry, which
// std::unordered_map pays for with a cache miss per lookup and an allocation per insert. A
// 150k-token vocabulary with 150k-280k merges is built at every model load and probed for
// every symbol pair while encoding. Linear probing, load factor at most 1/2, never erased.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace lift {

// Text -> id. The texts are viewed, not copied: they must outlive the index and not move.
class TextIndex {
 public:
  void reserve(size_t n) { rehash(capacity_for(n)); }

  // Keeps the first id of a text; returns false when the text was already there.
  bool insert(std::string_view text, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    const uint64_t h = std::hash<std::string_view>{}(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {text, static_cast<uint32_t>(h), id};
        ++size_;
        return true;
      }
      if (s.hash == static_cast<uint32_t>(h) && s.text == text) return false;
    }
  }

  // -1 when absent.
  int32_t find(std::string_view text) const {
    if (size_ == 0) return -1;
    const uint64_t h = std::hash<std::string_view>{}(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == static_cast<uint32_t>(h) && s.text == text) return s.id;
    }
  }

 private:
  struct Slot {
    std::string_view text;
    uint32_t hash = 0;  // low bits of the full hash, checked before the text
    int32_t id = -1;    // -1: empty
  };
  static size_t capacity_for(size_t n) { return std::bit_ceil(std::max<size_t>(16, n * 2)); }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.id >= 0) insert(s.text, s.id);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// 64-bit key -> two int32 values (a merge: left and right token ids -> rank and result id).
class PairIndex {
 public:
  struct Value {
    int32_t rank;
    int32_t id;
  };

  void reserve(size_t n) { rehash(capacity_for(n)); }

  // Keeps the first value of a key; `key` must not be kEmpty.
  bool insert(uint64_t key, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) {
        s = {key, v};
        ++size_;
        return true;
      }
      if (s.key == key) return false;
    }
  }

  // nullptr when absent.
  const Value* find(uint64_t key) const {
    if (size_ == 0) return nullptr;
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  static constexpr uint64_t kEmpty = ~uint64_t{0};

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  // Fibonacci hashing: token ids are small and clustered; the multiply spreads them into the
  // high bits, which index the table.
  size_t mix(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  static size_t capacity_for(size_t n) { return std::bit_ceil(std::max<size_t>(16, n * 2)); }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) insert(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 63;
  size_t size_ = 0;
};

}  // namespace lift
