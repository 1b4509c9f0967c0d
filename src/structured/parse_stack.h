// The pushdown part of the matcher: a parse is a set of heads, each a DFA state plus the
// stack of states to return to (interned, so equal stacks are one id and heads compare by
// value). closure() expands heads through rule calls (push) and rule ends (pop) until every
// head stands where a byte is consumed, as an Earley-style prediction/completion step would.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "structured/grammar_data.h"

namespace lift::structured {

struct Head {
  int32_t state;
  int32_t parent;  // stack node id; -1: the bottom (nothing to return to)
  bool operator==(const Head&) const = default;
};

inline uint64_t pack(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class NodeArena {
 public:
  struct Node {
    int32_t ret;
    int32_t parent;
  };
  int32_t intern(int32_t ret, int32_t parent) {
    auto [it, fresh] = ids_.try_emplace(pack(ret, parent), static_cast<int32_t>(nodes_.size()));
    if (fresh) nodes_.push_back({ret, parent});
    return it->second;
  }
  const Node& operator[](int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  // Drops every node made since size() was `mark` (a mask's trial parses leave none behind).
  void rollback(size_t mark) {
    while (nodes_.size() > mark) {
      ids_.erase(pack(nodes_.back().ret, nodes_.back().parent));
      nodes_.pop_back();
    }
  }
  void clear() {
    nodes_.clear();
    ids_.clear();
  }

 private:
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> ids_;
};

class Closure {
 public:
  explicit Closure(const Grammar::Data& g) : g_(g) {}

  // Expands `raw` into `out` (replaced): the heads that consume a byte next. Returns whether
  // some head ends the bottom rule (parent -1 in an accepting state). Throws GrammarError
  // past `max_heads`.
  bool run(const Head* raw, size_t n, std::vector<Head>& out, NodeArena& arena, size_t max_heads);

  // Heads after one byte, before closure (appended to `out`, which is cleared first).
  void step(const std::vector<Head>& heads, uint8_t byte, std::vector<Head>& out) const {
    out.clear();
    for (const Head& h : heads)
      if (int32_t t = g_.step(h.state, byte); t >= 0) out.push_back({t, h.parent});
  }

 private:
  bool insert_seen(uint64_t key);

  const Grammar::Data& g_;
  std::vector<Head> work_;
  std::vector<uint64_t> seen_;
  std::unordered_set<uint64_t> seen_big_;
};

}  // namespace lift::structured
