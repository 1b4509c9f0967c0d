// Masks in two parts. At compile time, for every state a head can stand in, one walk over
// the vocabulary trie with that head alone on an empty stack sorts tokens into accepted
// (consumed without leaving the state's rule: true whatever the stack below), rejected, and
// uncertain (the rule ends inside the token, so what follows depends on the stack). At mask
// time a parse's heads OR their accepted sets, and only the uncertain tokens are run against
// the real stack, sharing the work of common prefixes.
#include "structured/matcher.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "structured/grammar_data.h"
#include "structured/parse_stack.h"

namespace lift::structured {

using Data = Grammar::Data;

struct CompiledGrammar::Cache {
  struct Entry {
    uint32_t acc_begin = 0, acc_count = 0;  // acc_tokens, when bitset < 0
    int32_t bitset = -1;                    // index of the state's accepted-token bitset
    uint32_t suf_begin = 0, suf_count = 0;  // the state's suffixes, sorted
  };
  // The bytes an uncertain token still has to consume once the state's rule has ended, and
  // the tokens (trie nodes) that are allowed if they can. Grouping by suffix matters: a
  // thousand tokens like `x",` `y",` share the one check of `,` after the string.
  struct Suffix {
    uint32_t text_begin;
    uint32_t text_len;
    uint32_t nodes_begin;  // nodes[nodes_begin .. next suffix's nodes_begin)
  };
  size_t words = 0;
  std::vector<Entry> entries;  // per grammar state
  std::vector<int32_t> acc_tokens;
  std::vector<uint64_t> bitsets;
  std::vector<Suffix> suffixes;  // plus a sentinel
  std::string suffix_text;
  std::vector<uint32_t> suffix_nodes;

  std::string_view suffix(uint32_t i) const {
    return std::string_view(suffix_text).substr(suffixes[i].text_begin, suffixes[i].text_len);
  }
};

namespace {

void set_bit(uint64_t* m, int32_t t) { m[t >> 6] |= uint64_t{1} << (t & 63); }

void set_node_tokens(uint64_t* m, const TokenVocab::Trie& tr, uint32_t node) {
  for (uint32_t k = tr.token_begin[node]; k < tr.token_begin[node + 1]; ++k)
    set_bit(m, tr.node_tokens[k]);
}

// Walks the whole trie from one head on an empty stack (see the file comment). An uncertain
// token is recorded once per place its rule may end inside it, as (bytes after that place,
// token).
class StateWalker {
 public:
  StateWalker(const Data& g, const TokenVocab& v) : g_(g), v_(v), tr_(v.trie()), closure_(g) {
    size_t max_depth = 0;
    for (uint16_t d : tr_.depth) max_depth = std::max<size_t>(max_depth, d);
    levels_.resize(max_depth + 1);
    ended_.resize(max_depth + 1);
    any_ended_.resize(max_depth + 1);
    single_.resize(max_depth + 1);
    compute_plain_reach();
  }

  // Fills `accepted` (ranges of trie nodes, [first, second)) and `uncertain`; returns parser
  // steps taken.
  size_t walk(int32_t state, std::vector<std::pair<uint32_t, uint32_t>>& accepted,
              std::vector<std::pair<std::string_view, uint32_t>>& uncertain) {
    accepted.clear();
    uncertain.clear();
    arena_.clear();
    accepted_ = &accepted;
    levels_[0].assign(1, Head{state, -1});
    ended_[0] = any_ended_[0] = 0;
    single_[0] = pure(state) ? state : -1;
    size_t steps = 0;
    const uint32_t n = static_cast<uint32_t>(tr_.size());
    for (uint32_t i = 1; i < n;) {
      const size_t d = tr_.depth[i];
      ++steps;
      // Fast path: one head in a state that only consumes bytes (string contents, digits):
      // a table lookup per trie node, no head vectors. Its parent is always the bottom here.
      if (single_[d - 1] >= 0) {
        const int32_t t = g_.step(single_[d - 1], tr_.byte[i]);
        if (t < 0) {
          if (any_ended_[d - 1]) add_subtree(i, tr_.subtree_end[i], d - 1, uncertain);
          i = tr_.subtree_end[i];
          continue;
        }
        if (tr_.subtree_end[i] > i + 1 && tr_.plain_below[i] &&
            plain_reach_[static_cast<size_t>(t)] >= tr_.height[i]) {
          add_accepted(i, tr_.subtree_end[i]);  // every plain string that long fits from t
          i = tr_.subtree_end[i];
          continue;
        }
        add_accepted(i, i + 1);
        if (pure(t)) {
          single_[d] = t;
          ended_[d] = 0;
          any_ended_[d] = any_ended_[d - 1];
          ++i;
          continue;
        }
        raw_.assign(1, Head{t, -1});
      } else {
        const std::vector<Head>& above = levels_[d - 1];
        closure_.step(above, tr_.byte[i], raw_);
        steps += above.size();
        if (raw_.empty()) {
          if (any_ended_[d - 1]) add_subtree(i, tr_.subtree_end[i], d - 1, uncertain);
          i = tr_.subtree_end[i];
          continue;
        }
        add_accepted(i, i + 1);
      }
      if (tr_.subtree_end[i] == i + 1) {  // a leaf: no need for the closure
        ++i;
        continue;
      }
      bool ended = closure_.run(raw_.data(), raw_.size(), levels_[d], arena_, SIZE_MAX);
      ended_[d] = static_cast<uint8_t>(ended ? 1 : 0);
      any_ended_[d] = static_cast<uint8_t>(any_ended_[d - 1] | ended_[d]);
      const std::vector<Head>& here = levels_[d];
      single_[d] =
          here.size() == 1 && here[0].parent < 0 && pure(here[0].state) ? here[0].state : -1;
      if (here.empty()) {
        if (any_ended_[d]) add_subtree(i + 1, tr_.subtree_end[i], d, uncertain);
        i = tr_.subtree_end[i];
        continue;
      }
      ++i;
    }
    return steps;
  }

 private:
  void add_accepted(uint32_t begin, uint32_t end) {
    if (tr_.token_begin[begin] == tr_.token_begin[end]) return;
    if (!accepted_->empty() && accepted_->back().second == begin)
      accepted_->back().second = end;
    else
      accepted_->emplace_back(begin, end);
  }

  // Tokens in [begin, end) whose path is known up to depth `upto`: one entry per depth on
  // the path (1..upto) where the rule ended.
  void add_subtree(uint32_t begin, uint32_t end, size_t upto,
                   std::vector<std::pair<std::string_view, uint32_t>>& out) {
    for (uint32_t j = begin; j < end; ++j) {
      if (tr_.token_begin[j] == tr_.token_begin[j + 1]) continue;
      const std::string& bytes = v_.bytes(tr_.node_tokens[tr_.token_begin[j]]);
      for (size_t k = 1; k <= upto; ++k)
        if (ended_[k]) out.emplace_back(std::string_view(bytes).substr(k), j);
    }
  }

  const Data& g_;
  const TokenVocab& v_;
  const TokenVocab::Trie& tr_;
  Closure closure_;
  NodeArena arena_;
  std::vector<std::vector<Head>> levels_;
  bool pure(int32_t s) const { return g_.flags(s) == Data::kHasBytes; }

  // For each state, how many plain bytes (see Trie::plain_below) in any order are sure to be
  // consumed from it: the distance to the nearest state where some plain byte is refused.
  void compute_plain_reach() {
    const size_t n = g_.states.size();
    std::vector<std::vector<int32_t>> preds(n);
    std::vector<int32_t> work;
    plain_reach_.assign(n, UINT16_MAX);
    for (size_t q = 0; q < n; ++q) {
      bool bad = false;
      for (int b = 0x20; b <= 0x7E; ++b) {
        if (b == '"' || b == '\\') continue;
        int32_t t = g_.step(static_cast<int32_t>(q), static_cast<uint8_t>(b));
        if (t < 0)
          bad = true;
        else if (preds[static_cast<size_t>(t)].empty() ||
                 preds[static_cast<size_t>(t)].back() != static_cast<int32_t>(q))
          preds[static_cast<size_t>(t)].push_back(static_cast<int32_t>(q));
      }
      if (bad) plain_reach_[q] = 0, work.push_back(static_cast<int32_t>(q));
    }
    for (size_t k = 0; k < work.size(); ++k) {  // breadth first from the refusing states
      const int32_t t = work[k];
      for (int32_t p : preds[static_cast<size_t>(t)])
        if (plain_reach_[static_cast<size_t>(p)] == UINT16_MAX) {
          plain_reach_[static_cast<size_t>(p)] = static_cast<uint16_t>(
              std::min<int>(plain_reach_[static_cast<size_t>(t)] + 1, UINT16_MAX - 1));
          work.push_back(p);
        }
    }
  }

  std::vector<uint16_t> plain_reach_;
  std::vector<std::pair<uint32_t, uint32_t>>* accepted_ = nullptr;

  std::vector<uint8_t> ended_;      // ended_[k]: the rule may end after the path's first k bytes
  std::vector<uint8_t> any_ended_;  // ended_ somewhere in 1..k
  std::vector<int32_t> single_;     // >= 0: levels_[k] is this one pure state at the bottom
  std::vector<Head> raw_;
};

}  // namespace

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(
    Grammar g, std::shared_ptr<const TokenVocab> vocab, const CompileLimits& limits) {
  if (!g.valid()) throw GrammarError("constraint: empty grammar");
  auto cg = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  cg->grammar_ = std::move(g);
  cg->vocab_ = std::move(vocab);
  cg->cache_ = std::make_unique<Cache>();
  const Data& d = cg->grammar_.data();
  const TokenVocab& v = *cg->vocab_;
  const TokenVocab::Trie& tr = v.trie();
  Cache& c = *cg->cache_;
  c.words = v.mask_words();
  c.entries.resize(d.states.size());

  // States a head can stand in: reachable from the start, consuming a byte.
  std::vector<uint8_t> reach(d.states.size(), 0);
  std::vector<int32_t> work{d.rules[static_cast<size_t>(d.start_rule)].start};
  while (!work.empty()) {
    int32_t s = work.back();
    work.pop_back();
    if (reach[static_cast<size_t>(s)]) continue;
    reach[static_cast<size_t>(s)] = 1;
    const Data::State& st = d.states[static_cast<size_t>(s)];
    const Data::Rule& r = d.rules[static_cast<size_t>(d.state_rule[static_cast<size_t>(s)])];
    (void)r;
    if (st.flags & Data::kHasBytes)
      for (int b = 0; b < 256; ++b)
        if (int32_t t = d.step(s, static_cast<uint8_t>(b));
            t >= 0 && !reach[static_cast<size_t>(t)])
          work.push_back(t);
    for (uint32_t k = 0; k < st.n_calls; ++k) {
      const Data::Call& call = d.calls[st.call_begin + k];
      work.push_back(d.rules[static_cast<size_t>(call.rule)].start);
      work.push_back(call.ret);
    }
  }

  std::unordered_map<uint64_t, std::vector<int32_t>> bitset_index;            // by XXH3 of the set
  std::unordered_map<uint64_t, std::vector<const Cache::Entry*>> list_index;  // of the list
  StateWalker walker(d, v);
  std::vector<std::pair<uint32_t, uint32_t>> accepted;
  std::vector<std::pair<std::string_view, uint32_t>> uncertain;
  size_t steps = 0;
  for (size_t s = 0; s < d.states.size(); ++s) {
    if (!reach[s] || !(d.states[s].flags & Data::kHasBytes)) continue;
    steps += walker.walk(static_cast<int32_t>(s), accepted, uncertain);
    if (steps > limits.max_steps)
      throw GrammarError("constraint: computing the token masks takes more than its budget of " +
                         std::to_string(limits.max_steps) + " parser steps");
    Cache::Entry& e = c.entries[s];
    size_t n_tokens = 0;
    for (auto [b, end] : accepted) n_tokens += tr.token_begin[end] - tr.token_begin[b];
    if (n_tokens > 2 * c.words) {
      e.bitset = static_cast<int32_t>(c.bitsets.size() / c.words);
      c.bitsets.resize(c.bitsets.size() + c.words, 0);
      uint64_t* m = c.bitsets.data() + static_cast<size_t>(e.bitset) * c.words;
      for (auto [b, end] : accepted)
        for (uint32_t k = tr.token_begin[b]; k < tr.token_begin[end]; ++k)
          set_bit(m, tr.node_tokens[k]);
      // States with the same set share one copy (a 128k vocabulary's set is 16 KB, and the
      // string, number and whitespace states of a large schema repeat the same few sets).
      const size_t set_bytes = c.words * sizeof(uint64_t);
      auto& same = bitset_index[XXH3_64bits(m, set_bytes)];
      const auto copy = std::find_if(same.begin(), same.end(), [&](int32_t other) {
        return std::memcmp(c.bitsets.data() + static_cast<size_t>(other) * c.words, m, set_bytes) ==
               0;
      });
      if (copy != same.end()) {
        c.bitsets.resize(c.bitsets.size() - c.words);
        e.bitset = *copy;
      } else {
        same.push_back(e.bitset);
      }
    } else {
      e.acc_begin = static_cast<uint32_t>(c.acc_tokens.size());
      for (auto [b, end] : accepted)
        for (uint32_t k = tr.token_begin[b]; k < tr.token_begin[end]; ++k)
          c.acc_tokens.push_back(tr.node_tokens[k]);
      e.acc_count = static_cast<uint32_t>(c.acc_tokens.size() - e.acc_begin);
      // Lists are shared the same way (the key states of a large object repeat them).
      if (e.acc_count > 0) {  // an empty list has nothing to share (nor a memcmp of null)
        const int32_t* list = c.acc_tokens.data() + e.acc_begin;
        const size_t list_bytes = e.acc_count * sizeof(int32_t);
        auto& same = list_index[XXH3_64bits(list, list_bytes)];
        const auto copy = std::find_if(same.begin(), same.end(), [&](const Cache::Entry* other) {
          return other->acc_count == e.acc_count &&
                 std::memcmp(c.acc_tokens.data() + other->acc_begin, list, list_bytes) == 0;
        });
        if (copy != same.end()) {
          c.acc_tokens.resize(e.acc_begin);
          e.acc_begin = (*copy)->acc_begin;
        } else {
          same.push_back(&e);
        }
      }
    }
    std::sort(uncertain.begin(), uncertain.end());
    e.suf_begin = static_cast<uint32_t>(c.suffixes.size());
    for (size_t k = 0; k < uncertain.size(); ++k) {
      if (k == 0 || uncertain[k].first != uncertain[k - 1].first) {
        c.suffixes.push_back({static_cast<uint32_t>(c.suffix_text.size()),
                              static_cast<uint32_t>(uncertain[k].first.size()),
                              static_cast<uint32_t>(c.suffix_nodes.size())});
        c.suffix_text.append(uncertain[k].first);
      }
      if (c.suffix_nodes.size() == c.suffixes.back().nodes_begin ||
          c.suffix_nodes.back() != uncertain[k].second)
        c.suffix_nodes.push_back(uncertain[k].second);
    }
    e.suf_count = static_cast<uint32_t>(c.suffixes.size() - e.suf_begin);
    if (cg->cache_bytes() > limits.max_cache_bytes) {
      throw GrammarError("constraint: its token-mask cache needs more than its budget of " +
                         std::to_string(limits.max_cache_bytes >> 20) + " MiB (" +
                         std::to_string(d.states.size()) +
                         " automaton states; a smaller constraint fits)");
    }
  }
  c.suffixes.push_back({static_cast<uint32_t>(c.suffix_text.size()), 0,
                        static_cast<uint32_t>(c.suffix_nodes.size())});
  // Kept for the constraint's life: give back what doubling and the shared sets left over.
  c.acc_tokens.shrink_to_fit();
  c.bitsets.shrink_to_fit();
  c.suffixes.shrink_to_fit();
  c.suffix_text.shrink_to_fit();
  c.suffix_nodes.shrink_to_fit();
  return cg;
}

CompiledGrammar::~CompiledGrammar() = default;

size_t CompiledGrammar::cache_bytes() const {
  const Cache& c = *cache_;
  return c.entries.size() * sizeof(Cache::Entry) + c.acc_tokens.size() * 4 + c.bitsets.size() * 8 +
         c.suffixes.size() * sizeof(Cache::Suffix) + c.suffix_text.size() +
         c.suffix_nodes.size() * 4;
}

struct Matcher::State {
  explicit State(const Data& g) : closure(g) {}
  State(const State& o)
      : heads(o.heads),
        can_end(o.can_end),
        terminated(o.terminated),
        arena(o.arena),
        closure(o.closure) {}

  std::vector<Head> heads;
  bool can_end = false;
  bool terminated = false;
  NodeArena arena;
  // Scratch, not part of the state's value.
  Closure closure;
  std::vector<Head> raw, next;
  std::vector<std::vector<Head>> levels;
};

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g, MatcherLimits limits)
    : g_(std::move(g)), limits_(limits) {
  reset();
}

void Matcher::reset() {
  const Data& d = g_->grammar().data();
  s_ = std::make_shared<State>(d);
  Head start{d.rules[static_cast<size_t>(d.start_rule)].start, -1};
  s_->can_end = s_->closure.run(&start, 1, s_->heads, s_->arena, limits_.max_heads);
}

bool Matcher::can_end() const { return !s_->terminated && s_->can_end; }
bool Matcher::is_done() const { return s_->terminated || (s_->can_end && s_->heads.empty()); }
bool Matcher::is_terminated() const { return s_->terminated; }

bool Matcher::accept_bytes(std::string_view bytes) {
  if (s_->terminated) return false;
  if (bytes.empty()) return true;
  if (s_.use_count() > 1) s_ = std::make_shared<State>(*s_);
  State& st = *s_;
  const size_t mark = st.arena.size();
  st.next = st.heads;
  bool ended = st.can_end;
  for (char ch : bytes) {
    st.closure.step(st.next, static_cast<uint8_t>(ch), st.raw);
    if (st.raw.empty()) {
      st.arena.rollback(mark);
      return false;
    }
    ended = st.closure.run(st.raw.data(), st.raw.size(), st.next, st.arena, limits_.max_heads);
  }
  st.heads.swap(st.next);
  st.can_end = ended;
  return true;
}

bool Matcher::accept(int32_t token) {
  const TokenVocab& v = g_->vocab();
  if (token < 0 || token >= v.size() || s_->terminated) return false;
  if (v.is_end(token)) {
    if (!s_->can_end) return false;
    if (s_.use_count() > 1) s_ = std::make_shared<State>(*s_);
    s_->terminated = true;
    return true;
  }
  const std::string& b = v.bytes(token);
  if (b.empty()) return false;
  return accept_bytes(b);
}

void Matcher::fill_mask(std::span<uint64_t> mask) {
  const CompiledGrammar::Cache& c = g_->cache();
  const TokenVocab& v = g_->vocab();
  const TokenVocab::Trie& tr = v.trie();
  if (mask.size() < c.words) throw GrammarError("constraint: mask buffer too small");
  std::fill(mask.begin(), mask.end(), 0);
  if (s_->terminated) return;
  if (s_.use_count() > 1) s_ = std::make_shared<State>(*s_);
  State& st = *s_;
  uint64_t* m = mask.data();
  size_t steps = 0;
  const size_t mark = st.arena.size();
  for (const Head& h : st.heads) {
    const CompiledGrammar::Cache::Entry& e = c.entries[static_cast<size_t>(h.state)];
    if (e.bitset >= 0) {
      const uint64_t* b = c.bitsets.data() + static_cast<size_t>(e.bitset) * c.words;
      for (size_t w = 0; w < c.words; ++w) m[w] |= b[w];
    } else {
      for (uint32_t k = 0; k < e.acc_count; ++k) set_bit(m, c.acc_tokens[e.acc_begin + k]);
    }
    // At the bottom a rule's end is the text's end: nothing may follow inside the token.
    if (h.parent < 0 || e.suf_count == 0) continue;

    // Where the text goes on once the head's rule ends: the caller's continuation.
    const NodeArena::Node& caller = st.arena[h.parent];
    const Head after{caller.ret, caller.parent};
    if (st.levels.size() < 2) st.levels.resize(2);
    st.closure.run(&after, 1, st.levels[0], st.arena, limits_.max_heads);
    if (st.levels[0].empty()) continue;

    // The suffixes in sorted order: levels[k] holds the heads after the first k bytes of
    // `prefix`; a dead prefix skips, by binary search, every suffix that extends it.
    std::string_view prefix;  // bytes levels[1..valid] were computed for
    size_t valid = 0;
    const uint32_t end = e.suf_begin + e.suf_count;
    for (uint32_t k = e.suf_begin; k < end;) {
      const std::string_view s = c.suffix(k);
      size_t common = 0;
      const size_t lim = std::min(prefix.size(), s.size());
      while (common < lim && prefix[common] == s[common]) ++common;
      valid = std::min(valid, common);
      prefix = s;
      if (st.levels.size() < s.size() + 1) st.levels.resize(s.size() + 1);
      size_t dead = 0;  // > 0: s[0..dead) leads nowhere
      for (size_t i = valid; i < s.size(); ++i) {
        st.closure.step(st.levels[i], static_cast<uint8_t>(s[i]), st.raw);
        steps += st.levels[i].size();
        if (st.raw.empty()) {
          dead = i + 1;
          valid = i;
          break;
        }
        if (i + 1 == s.size()) {  // the last byte: fits; no closure needed
          valid = i;
          break;
        }
        st.closure.run(st.raw.data(), st.raw.size(), st.levels[i + 1], st.arena, limits_.max_heads);
        valid = i + 1;
        if (st.levels[i + 1].empty()) {
          dead = i + 1;
          break;
        }
      }
      if (steps > limits_.max_mask_steps) {
        st.arena.rollback(mark);
        throw GrammarError("constraint: a token mask took more than its budget of " +
                           std::to_string(limits_.max_mask_steps) + " parser steps");
      }
      if (dead == 0) {
        for (uint32_t j = c.suffixes[k].nodes_begin; j < c.suffixes[k + 1].nodes_begin; ++j)
          set_node_tokens(m, tr, c.suffix_nodes[j]);
        ++k;
        continue;
      }
      // Suffixes extending the dead prefix are contiguous from k on.
      const std::string_view dead_prefix = s.substr(0, dead);
      uint32_t lo = k + 1, hi = end;
      while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c.suffix(mid).substr(0, dead) == dead_prefix)
          lo = mid + 1;
        else
          hi = mid;
      }
      k = lo;
    }
  }
  st.arena.rollback(mark);
  if (st.can_end)
    for (int32_t t : v.end_tokens()) set_bit(m, t);
}

bool Grammar::matches(std::string_view text) const {
  if (!d_) return false;
  const Data& d = *d_;
  Closure closure(d);
  NodeArena arena;
  std::vector<Head> heads, raw;
  Head start{d.rules[static_cast<size_t>(d.start_rule)].start, -1};
  const size_t max_heads = MatcherLimits{}.max_heads;
  bool ended = closure.run(&start, 1, heads, arena, max_heads);
  for (char ch : text) {
    closure.step(heads, static_cast<uint8_t>(ch), raw);
    if (raw.empty()) return false;
    ended = closure.run(raw.data(), raw.size(), heads, arena, max_heads);
  }
  return ended;
}

}  // namespace lift::structured
