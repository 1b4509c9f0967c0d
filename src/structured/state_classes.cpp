// Moore-style partition refinement, stopped after `depth` rounds: round k separates states
// that some string of k bytes tells apart. It stops early at a fixpoint (a round that splits
// nothing), where the classes are the full equivalence of the rule's states.
#include "structured/state_classes.h"

#include <algorithm>
#include <span>
#include <unordered_map>

namespace lift::structured {

namespace {

using Data = Grammar::Data;

uint64_t hash_key(std::span<const int32_t> key) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  for (int32_t v : key) {
    h ^= static_cast<uint32_t>(v);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h;
}

// Gives equal keys one id, new keys the next one. Keys are compared by content; a hash
// collision between different keys probes on.
class KeyIds {
 public:
  int32_t id(std::span<const int32_t> key) {
    uint64_t h = hash_key(key);
    for (;; ++h) {
      auto [it, fresh] = by_hash_.try_emplace(h, static_cast<int32_t>(offsets_.size()));
      if (fresh) {
        offsets_.push_back(static_cast<uint32_t>(keys_.size()));
        sizes_.push_back(static_cast<uint32_t>(key.size()));
        keys_.insert(keys_.end(), key.begin(), key.end());
        return it->second;
      }
      const size_t k = static_cast<size_t>(it->second);
      std::span<const int32_t> old(keys_.data() + offsets_[k], sizes_[k]);
      if (std::equal(old.begin(), old.end(), key.begin(), key.end())) return it->second;
    }
  }
  size_t size() const { return offsets_.size(); }

 private:
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<int32_t> keys_;
  std::vector<uint32_t> offsets_, sizes_;
};

}  // namespace

std::vector<int32_t> depth_bounded_classes(const Data& d, const std::vector<uint8_t>& reach,
                                           size_t depth) {
  const size_t n = d.states.size();
  std::vector<size_t> n_classes(d.rules.size(), 0);
  for (size_t r = 0; r < d.rules.size(); ++r) {
    if (d.rules[r].n_states == 0) continue;
    const uint32_t map = d.states[static_cast<size_t>(d.rules[r].first_state)].class_map;
    n_classes[r] =
        1u + *std::max_element(d.class_maps.begin() + map, d.class_maps.begin() + map + 256);
  }

  // Round 0: what a state does without consuming a byte itself.
  std::vector<int32_t> cls(n, -1);
  std::vector<int32_t> key;
  std::vector<std::pair<int32_t, int32_t>> calls;
  size_t count = 0;
  {
    KeyIds ids;
    for (size_t s = 0; s < n; ++s) {
      if (!reach[s]) continue;
      const Data::State& st = d.states[s];
      calls.clear();
      for (uint32_t k = 0; k < st.n_calls; ++k)
        calls.emplace_back(d.calls[st.call_begin + k].rule, d.calls[st.call_begin + k].ret);
      std::sort(calls.begin(), calls.end());
      key.assign({d.state_rule[s], st.flags & Data::kAccepting});
      for (auto [rule, ret] : calls) key.insert(key.end(), {rule, ret});
      cls[s] = ids.id(key);
    }
    count = ids.size();
  }

  std::vector<int32_t> next(n, -1);
  for (size_t round = 0; round < depth; ++round) {
    KeyIds ids;
    for (size_t s = 0; s < n; ++s) {
      if (!reach[s]) continue;
      const Data::State& st = d.states[s];
      const size_t nc = n_classes[static_cast<size_t>(d.state_rule[s])];
      key.assign(1, cls[s]);
      for (size_t c = 0; c < nc; ++c) {
        const int32_t t = d.next[st.next_begin + c];
        key.push_back(t < 0 ? -1 : cls[static_cast<size_t>(t)]);
      }
      next[s] = ids.id(key);
    }
    cls.swap(next);
    if (ids.size() == count) break;  // nothing split: no longer string splits anything either
    count = ids.size();
  }
  return cls;
}

}  // namespace lift::structured
