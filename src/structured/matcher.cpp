// Masks in two parts. At compile time, for every state a head can stand in, one walk over
// the vocabulary trie with that head alone on an empty stack sorts tokens into accepted
// (consumed without leaving the state's rule: true whatever the stack below), rejected, and
// uncertain (the rule ends inside the token, so what follows depends on the stack). At mask
// time a parse's heads OR their accepted sets, and only the uncertain tokens are run against
// the real stack, sharing the work of common prefixes.
#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

#include "structured/grammar_data.h"
#include "structured/parse_stack.h"

namespace lift::structured {

using Data = Grammar::Data;

struct CompiledGrammar::Cache {
  struct Entry {
    uint32_t acc_begin = 0, acc_count = 0;  // acc_tokens, when bitset < 0
    int32_t bitset = -1;                    // index of the state's accepted-token bitset
    uint32_t unc_begin = 0, unc_count = 0;  // uncertain trie nodes, depth-first order
  };
  size_t words = 0;
  std::vector<Entry> entries;  // per grammar state
  std::vector<int32_t> acc_tokens;
  std::vector<uint64_t> bitsets;
  std::vector<uint32_t> unc_nodes;
};

namespace {

void set_bit(uint64_t* m, int32_t t) { m[t >> 6] |= uint64_t{1} << (t & 63); }

void set_node_tokens(uint64_t* m, const TokenVocab::Trie& tr, uint32_t node) {
  for (uint32_t k = tr.token_begin[node]; k < tr.token_begin[node + 1]; ++k)
    set_bit(m, tr.node_tokens[k]);
}

// Walks the whole trie from one head on an empty stack (see the file comment).
class StateWalker {
 public:
  StateWalker(const Data& g, const TokenVocab& v) : g_(g), tr_(v.trie()), closure_(g) {
    size_t max_depth = 0;
    for (uint16_t d : tr_.depth) max_depth = std::max<size_t>(max_depth, d);
    levels_.resize(max_depth + 1);
    popped_.resize(max_depth + 1);
  }

  // Fills `accepted` (trie nodes) and `uncertain` (trie nodes); returns parser steps taken.
  size_t walk(int32_t state, std::vector<uint32_t>& accepted, std::vector<uint32_t>& uncertain) {
    accepted.clear();
    uncertain.clear();
    arena_.clear();
    levels_[0].assign(1, Head{state, -1});
    popped_[0] = false;
    size_t steps = 0;
    const uint32_t n = static_cast<uint32_t>(tr_.size());
    for (uint32_t i = 1; i < n;) {
      const size_t d = tr_.depth[i];
      const std::vector<Head>& above = levels_[d - 1];
      const bool popped_above = popped_[d - 1];
      closure_.step(above, tr_.byte[i], raw_);
      steps += above.size();
      if (raw_.empty()) {
        if (popped_above) add_subtree(i, uncertain);
        i = tr_.subtree_end[i];
        continue;
      }
      if (tr_.token_begin[i] != tr_.token_begin[i + 1]) accepted.push_back(i);
      if (tr_.subtree_end[i] == i + 1) {  // a leaf: no need for the closure
        ++i;
        continue;
      }
      bool ended = closure_.run(raw_.data(), raw_.size(), levels_[d], arena_, SIZE_MAX);
      popped_[d] = popped_above || ended;
      if (levels_[d].empty()) {
        if (popped_[d]) add_subtree(i + 1, tr_.subtree_end[i], uncertain);
        i = tr_.subtree_end[i];
        continue;
      }
      ++i;
    }
    return steps;
  }

 private:
  void add_subtree(uint32_t i, std::vector<uint32_t>& out) {
    add_subtree(i, tr_.subtree_end[i], out);
  }
  void add_subtree(uint32_t begin, uint32_t end, std::vector<uint32_t>& out) {
    for (uint32_t j = begin; j < end; ++j)
      if (tr_.token_begin[j] != tr_.token_begin[j + 1]) out.push_back(j);
  }

  const Data& g_;
  const TokenVocab::Trie& tr_;
  Closure closure_;
  NodeArena arena_;
  std::vector<std::vector<Head>> levels_;
  std::vector<uint8_t> popped_;
  std::vector<Head> raw_;
};

}  // namespace

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(
    Grammar g, std::shared_ptr<const TokenVocab> vocab, size_t max_compile_steps) {
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

  StateWalker walker(d, v);
  std::vector<uint32_t> accepted, uncertain;
  size_t steps = 0;
  for (size_t s = 0; s < d.states.size(); ++s) {
    if (!reach[s] || !(d.states[s].flags & Data::kHasBytes)) continue;
    steps += walker.walk(static_cast<int32_t>(s), accepted, uncertain);
    if (steps > max_compile_steps)
      throw GrammarError("constraint: computing the token masks takes more than its budget of " +
                         std::to_string(max_compile_steps) + " parser steps");
    Cache::Entry& e = c.entries[s];
    size_t n_tokens = 0;
    for (uint32_t node : accepted) n_tokens += tr.token_begin[node + 1] - tr.token_begin[node];
    if (n_tokens > 2 * c.words) {
      e.bitset = static_cast<int32_t>(c.bitsets.size() / c.words);
      c.bitsets.resize(c.bitsets.size() + c.words, 0);
      uint64_t* m = c.bitsets.data() + static_cast<size_t>(e.bitset) * c.words;
      for (uint32_t node : accepted) set_node_tokens(m, tr, node);
    } else {
      e.acc_begin = static_cast<uint32_t>(c.acc_tokens.size());
      for (uint32_t node : accepted)
        for (uint32_t k = tr.token_begin[node]; k < tr.token_begin[node + 1]; ++k)
          c.acc_tokens.push_back(tr.node_tokens[k]);
      e.acc_count = static_cast<uint32_t>(c.acc_tokens.size() - e.acc_begin);
    }
    e.unc_begin = static_cast<uint32_t>(c.unc_nodes.size());
    c.unc_nodes.insert(c.unc_nodes.end(), uncertain.begin(), uncertain.end());
    e.unc_count = static_cast<uint32_t>(uncertain.size());
  }
  return cg;
}

CompiledGrammar::~CompiledGrammar() = default;

size_t CompiledGrammar::cache_bytes() const {
  const Cache& c = *cache_;
  return c.entries.size() * sizeof(Cache::Entry) + c.acc_tokens.size() * 4 + c.bitsets.size() * 8 +
         c.unc_nodes.size() * 4;
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
    if (h.parent < 0 || e.unc_count == 0) continue;

    // Uncertain tokens in trie order against the real stack: levels[k] holds the heads after
    // the first k bytes of `prefix`; a dead prefix rules out every token that extends it.
    if (st.levels.size() < 2) st.levels.resize(2);
    st.levels[0].assign(1, h);
    std::string_view prefix;  // bytes levels[1..valid] were computed for
    size_t valid = 0;
    size_t dead = 0;  // > 0: prefix[0..dead) leads nowhere
    for (uint32_t k = 0; k < e.unc_count; ++k) {
      const uint32_t node = c.unc_nodes[e.unc_begin + k];
      const std::string& s = v.bytes(tr.node_tokens[tr.token_begin[node]]);
      size_t common = 0;
      const size_t lim = std::min(prefix.size(), s.size());
      while (common < lim && prefix[common] == s[common]) ++common;
      if (dead > 0 && common >= dead) continue;
      dead = 0;
      valid = std::min(valid, common);
      prefix = s;
      if (st.levels.size() < s.size() + 1) st.levels.resize(s.size() + 1);
      bool ok = true;
      for (size_t i = valid; i < s.size(); ++i) {
        st.closure.step(st.levels[i], static_cast<uint8_t>(s[i]), st.raw);
        steps += st.levels[i].size();
        if (st.raw.empty()) {
          dead = i + 1;
          valid = i;
          ok = false;
          break;
        }
        if (i + 1 == s.size()) {
          // The last byte: the token fits; the closure is only needed for longer tokens.
          valid = i;
          break;
        }
        st.closure.run(st.raw.data(), st.raw.size(), st.levels[i + 1], st.arena, limits_.max_heads);
        valid = i + 1;
        if (st.levels[i + 1].empty()) {
          dead = i + 1;
          ok = false;
          break;
        }
      }
      if (ok) set_node_tokens(m, tr, node);
      if (steps > limits_.max_mask_steps) {
        st.arena.rollback(mark);
        throw GrammarError("constraint: a token mask took more than its budget of " +
                           std::to_string(limits_.max_mask_steps) + " parser steps");
      }
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
