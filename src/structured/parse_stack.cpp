#include "structured/parse_stack.h"

#include <algorithm>

namespace lift::structured {

bool Closure::insert_seen(uint64_t key) {
  // Head sets are mostly a handful: a linear scan beats hashing until they are not.
  if (seen_.size() < 32) {
    if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) return false;
    seen_.push_back(key);
    if (seen_.size() == 32) seen_big_.insert(seen_.begin(), seen_.end());
    return true;
  }
  return seen_big_.insert(key).second;
}

bool Closure::run(const Head* raw, size_t n, std::vector<Head>& out, NodeArena& arena,
                  size_t max_heads) {
  out.clear();
  using Data = Grammar::Data;
  // The common case, one head inside a token-level DFA: nothing to expand.
  if (n == 1 && g_.flags(raw[0].state) == Data::kHasBytes) {
    out.push_back(raw[0]);
    return false;
  }
  seen_.clear();
  seen_big_.clear();
  work_.assign(raw, raw + n);
  bool bottom_end = false;
  while (!work_.empty()) {
    Head h = work_.back();
    work_.pop_back();
    if (!insert_seen(pack(h.state, h.parent))) continue;
    const Data::State& st = g_.states[static_cast<size_t>(h.state)];
    if (st.flags & Data::kHasBytes) {
      out.push_back(h);
      if (out.size() > max_heads)
        throw GrammarError("constraint: the parse is too ambiguous (more than " +
                           std::to_string(max_heads) + " live parse stacks)");
    }
    for (uint32_t k = 0; k < st.n_calls; ++k) {
      const Data::Call& c = g_.calls[st.call_begin + k];
      work_.push_back({g_.rules[static_cast<size_t>(c.rule)].start, arena.intern(c.ret, h.parent)});
    }
    if (st.flags & Data::kAccepting) {
      if (h.parent < 0) {
        bottom_end = true;
      } else {
        const NodeArena::Node& node = arena[h.parent];
        work_.push_back({node.ret, node.parent});
      }
    }
  }
  return bottom_end;
}

}  // namespace lift::structured
