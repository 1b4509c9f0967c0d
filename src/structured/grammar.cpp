// GrammarBuilder: expressions are hash-consed nodes; build() turns each rule body into a
// Thompson NFA over bytes and call symbols, determinizes it (subset construction over the
// rule's byte classes), and then prunes every state from which no complete rule can follow,
// so a mask never lets a sequence into a dead end.
#include "structured/grammar.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "structured/grammar_data.h"

namespace lift::structured {
namespace {

enum class Kind : uint8_t { nothing, empty, bytes, seq, alt, repeat, intersect, difference, call };

struct Expr {
  Kind kind = Kind::nothing;
  ByteSet set;
  std::vector<ExprId> kids;
  uint32_t min = 0, max = 0;
  RuleId rule = -1;
};

std::string expr_key(const Expr& e) {
  std::string k;
  k.push_back(static_cast<char>(e.kind));
  auto put = [&](uint64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (e.kind == Kind::bytes)
    for (uint64_t w : e.set.words) put(w);
  for (ExprId id : e.kids) put(static_cast<uint64_t>(id));
  put(e.min);
  put(e.max);
  put(static_cast<uint64_t>(e.rule));
  return k;
}

// An NFA with epsilon, byte-set and call edges; one per rule (or per regular operand).
struct Nfa {
  struct State {
    std::vector<int32_t> eps;
    std::vector<std::pair<int32_t, int32_t>> bytes;  // (set index, target)
    std::vector<std::pair<RuleId, int32_t>> calls;   // (rule, target)
  };
  std::vector<State> states;
  std::vector<ByteSet> sets;
  std::unordered_map<std::string, int32_t> set_index;

  int32_t add() {
    states.emplace_back();
    return static_cast<int32_t>(states.size() - 1);
  }
  int32_t set_id(const ByteSet& s) {
    std::string key(reinterpret_cast<const char*>(s.words.data()), sizeof s.words);
    auto [it, fresh] = set_index.emplace(key, static_cast<int32_t>(sets.size()));
    if (fresh) sets.push_back(s);
    return it->second;
  }
};

// A deterministic automaton over byte classes and call symbols.
struct Dfa {
  std::array<uint8_t, 256> cls{};
  int n_classes = 1;
  std::vector<int32_t> next;  // state * n_classes + class -> state or -1
  std::vector<std::vector<std::pair<RuleId, int32_t>>> calls;
  std::vector<uint8_t> accepting;
  size_t size() const { return accepting.size(); }
  int32_t step(int32_t s, uint8_t b) const {
    return next[static_cast<size_t>(s) * static_cast<size_t>(n_classes) + cls[b]];
  }
};

// Splits 0..255 into classes of bytes no set tells apart.
int byte_classes(const std::vector<ByteSet>& sets, std::array<uint8_t, 256>& cls) {
  std::array<int, 256> c{};
  int n = 1;
  for (const ByteSet& s : sets) {
    std::vector<int> remap(static_cast<size_t>(2 * n), -1);
    int m = 0;
    for (int b = 0; b < 256; ++b) {
      int key = 2 * c[static_cast<size_t>(b)] + (s.test(static_cast<uint8_t>(b)) ? 1 : 0);
      if (remap[static_cast<size_t>(key)] < 0) remap[static_cast<size_t>(key)] = m++;
      c[static_cast<size_t>(b)] = remap[static_cast<size_t>(key)];
    }
    n = m;
    if (n > 255) throw GrammarError("grammar: too many distinct byte classes in one rule");
  }
  for (int b = 0; b < 256; ++b)
    cls[static_cast<size_t>(b)] = static_cast<uint8_t>(c[static_cast<size_t>(b)]);
  return n;
}

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

Dfa determinize(const Nfa& nfa, int32_t start, int32_t accept, size_t max_states,
                const std::string& what) {
  Dfa d;
  d.n_classes = byte_classes(nfa.sets, d.cls);
  const size_t nc = static_cast<size_t>(d.n_classes);
  std::vector<std::vector<int>> set_classes(nfa.sets.size());
  for (size_t i = 0; i < nfa.sets.size(); ++i) {
    std::vector<uint8_t> seen(nc, 0);
    for (int b = 0; b < 256; ++b)
      if (nfa.sets[i].test(static_cast<uint8_t>(b)) && !seen[d.cls[static_cast<size_t>(b)]]) {
        seen[d.cls[static_cast<size_t>(b)]] = 1;
        set_classes[i].push_back(d.cls[static_cast<size_t>(b)]);
      }
  }

  std::vector<uint32_t> mark(nfa.states.size(), 0);
  uint32_t epoch = 0;
  std::vector<int32_t> stack;
  auto closure = [&](std::vector<int32_t> seed) {
    ++epoch;
    std::vector<int32_t> out;
    stack = std::move(seed);
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      if (mark[static_cast<size_t>(s)] == epoch) continue;
      mark[static_cast<size_t>(s)] = epoch;
      const Nfa::State& st = nfa.states[static_cast<size_t>(s)];
      if (!st.bytes.empty() || !st.calls.empty() || s == accept) out.push_back(s);
      for (int32_t t : st.eps) stack.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  };

  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
  std::vector<std::vector<int32_t>> sets_of;
  // NFA states summed over all DFA states: the construction's memory and time.
  constexpr size_t kMaxSubsetWork = 40'000'000;
  size_t work = 0;
  auto intern = [&](std::vector<int32_t> s) -> int32_t {
    if (s.empty()) return -1;
    auto [it, fresh] = ids.emplace(s, static_cast<int32_t>(sets_of.size()));
    if (fresh) {
      if (sets_of.size() >= max_states)
        throw GrammarError("grammar: " + what + " needs more than " + std::to_string(max_states) +
                           " automaton states");
      work += s.size();
      if (work > kMaxSubsetWork)
        throw GrammarError("grammar: " + what +
                           " is too large to determinize (a repetition too large?)");
      sets_of.push_back(std::move(s));
    }
    return it->second;
  };
  // State 0 is the start even when nothing can be matched (an empty closure): callers index
  // it, and liveness then marks it dead.
  if (intern(closure({start})) < 0) sets_of.emplace_back();
  std::vector<std::vector<int32_t>> targets(nc);
  for (size_t i = 0; i < sets_of.size(); ++i) {
    for (auto& t : targets) t.clear();
    std::map<RuleId, std::vector<int32_t>> call_targets;
    bool acc = false;
    for (int32_t s : sets_of[i]) {
      if (s == accept) acc = true;
      const Nfa::State& st = nfa.states[static_cast<size_t>(s)];
      for (auto [set, t] : st.bytes)
        for (int c : set_classes[static_cast<size_t>(set)])
          targets[static_cast<size_t>(c)].push_back(t);
      for (auto [r, t] : st.calls) call_targets[r].push_back(t);
    }
    std::vector<int32_t> row(nc, -1);
    for (size_t c = 0; c < nc; ++c)
      if (!targets[c].empty()) row[c] = intern(closure(targets[c]));
    std::vector<std::pair<RuleId, int32_t>> calls;
    for (auto& [r, ts] : call_targets) calls.emplace_back(r, intern(closure(ts)));
    d.next.insert(d.next.end(), row.begin(), row.end());
    d.calls.push_back(std::move(calls));
    d.accepting.push_back(acc ? 1 : 0);
  }
  return d;
}

// Keeps the states of a call-free DFA from which acceptance is reachable; others become -1.
void prune_regular(Dfa& d) {
  const size_t n = d.size(), nc = static_cast<size_t>(d.n_classes);
  std::vector<std::vector<int32_t>> preds(n);
  for (size_t s = 0; s < n; ++s)
    for (size_t c = 0; c < nc; ++c)
      if (int32_t t = d.next[s * nc + c]; t >= 0)
        preds[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> work;
  for (size_t s = 0; s < n; ++s)
    if (d.accepting[s]) live[s] = 1, work.push_back(static_cast<int32_t>(s));
  while (!work.empty()) {
    int32_t t = work.back();
    work.pop_back();
    for (int32_t p : preds[static_cast<size_t>(t)])
      if (!live[static_cast<size_t>(p)]) live[static_cast<size_t>(p)] = 1, work.push_back(p);
  }
  for (int32_t& t : d.next)
    if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;
}

}  // namespace

struct GrammarBuilder::Impl {
  std::vector<Expr> exprs;
  std::unordered_map<std::string, ExprId> index;
  std::vector<std::string> rule_names;
  std::vector<ExprId> rule_body;  // -1: declared, not defined
  RuleId start = -1;
  std::vector<int8_t> regular;  // memo: -1 unknown

  ExprId add(Expr e) {
    auto [it, fresh] = index.emplace(expr_key(e), static_cast<ExprId>(exprs.size()));
    if (fresh) exprs.push_back(std::move(e));
    return it->second;
  }
  const Expr& at(ExprId id) const {
    if (id < 0 || static_cast<size_t>(id) >= exprs.size())
      throw GrammarError("grammar: expression id out of range");
    return exprs[static_cast<size_t>(id)];
  }
  bool is_regular(ExprId id) {
    if (regular.size() < exprs.size()) regular.resize(exprs.size(), -1);
    int8_t& m = regular[static_cast<size_t>(id)];
    if (m >= 0) return m != 0;
    const Expr e = at(id);
    bool r = e.kind != Kind::call;
    for (ExprId k : e.kids) r = r && is_regular(k);
    regular[static_cast<size_t>(id)] = r ? 1 : 0;
    return r;
  }
};

GrammarBuilder::GrammarBuilder() : impl_(std::make_shared<Impl>()) {}

ExprId GrammarBuilder::nothing() { return impl_->add(Expr{Kind::nothing, {}, {}, 0, 0, -1}); }
ExprId GrammarBuilder::empty() { return impl_->add(Expr{Kind::empty, {}, {}, 0, 0, -1}); }

ExprId GrammarBuilder::byte_set(const ByteSet& s) {
  if (s.empty()) return nothing();
  return impl_->add(Expr{Kind::bytes, s, {}, 0, 0, -1});
}

ExprId GrammarBuilder::byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  if (lo <= hi) s.set_range(lo, hi);
  return byte_set(s);
}

ExprId GrammarBuilder::literal(std::string_view bytes) {
  std::vector<ExprId> parts;
  for (char c : bytes)
    parts.push_back(byte_range(static_cast<uint8_t>(c), static_cast<uint8_t>(c)));
  return seq(parts);
}

ExprId GrammarBuilder::utf8_range(char32_t lo, char32_t hi) {
  if (hi > 0x10FFFF) hi = 0x10FFFF;
  if (lo > hi) return nothing();
  // Leave out the surrogates, then split at the encodings' length boundaries.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    std::vector<ExprId> parts;
    if (lo < 0xD800) parts.push_back(utf8_range(lo, 0xD7FF));
    if (hi > 0xDFFF) parts.push_back(utf8_range(0xE000, hi));
    return alt(parts);
  }
  static constexpr char32_t kEnds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (char32_t end : kEnds)
    if (lo <= end && hi > end) return alt({utf8_range(lo, end), utf8_range(end + 1, hi)});
  auto encode = [](char32_t c, uint8_t* out) {
    if (c < 0x80) return out[0] = static_cast<uint8_t>(c), 1;
    if (c < 0x800) {
      out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return 2;
    }
    if (c < 0x10000) {
      out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return 3;
    }
    out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 4;
  };
  uint8_t a[4] = {}, z[4] = {};
  const int n = encode(lo, a);
  encode(hi, z);
  // Same length: split on the first byte where lo and hi differ, so every piece is a
  // product of byte ranges.
  int i = 0;
  while (i < n && a[i] == z[i]) ++i;
  if (i == n) return literal(std::string(reinterpret_cast<const char*>(a), static_cast<size_t>(n)));
  const int tail_bits = 6 * (n - 1 - i);
  const char32_t low_mask = (char32_t{1} << tail_bits) - 1;
  if (i == n - 1 || ((lo & low_mask) == 0 && (hi & low_mask) == low_mask)) {
    std::vector<ExprId> parts;
    for (int k = 0; k < i; ++k) parts.push_back(byte_range(a[k], a[k]));
    parts.push_back(byte_range(a[i], z[i]));
    for (int k = i + 1; k < n; ++k) parts.push_back(byte_range(0x80, 0xBF));
    return seq(parts);
  }
  // Peel a ragged head and tail off the middle block of full ranges.
  std::vector<ExprId> parts;
  char32_t lo_full = lo, hi_full = hi;
  if ((lo & low_mask) != 0) {
    char32_t head_end = lo | low_mask;
    parts.push_back(utf8_range(lo, head_end));
    lo_full = head_end + 1;
  }
  if ((hi & low_mask) != low_mask) {
    char32_t tail_start = hi & ~low_mask;
    if (tail_start >= lo_full) {
      parts.push_back(utf8_range(tail_start, hi));
      hi_full = tail_start - 1;
    } else {
      hi_full = lo_full - 1;
    }
  }
  if (lo_full <= hi_full) parts.push_back(utf8_range(lo_full, hi_full));
  return alt(parts);
}

ExprId GrammarBuilder::seq(std::span<const ExprId> parts) {
  std::vector<ExprId> kids;
  for (ExprId p : parts) {
    const Expr& e = impl_->at(p);
    if (e.kind == Kind::nothing) return nothing();
    if (e.kind == Kind::empty) continue;
    // Nested sequences stay nested: a sequence is the unit build() may outline (a string
    // literal's quotes and contents), so flattening would hide it.
    kids.push_back(p);
  }
  if (kids.empty()) return empty();
  if (kids.size() == 1) return kids[0];
  return impl_->add(Expr{Kind::seq, {}, std::move(kids), 0, 0, -1});
}

ExprId GrammarBuilder::alt(std::span<const ExprId> options) {
  std::vector<ExprId> kids;
  ByteSet bytes;
  bool has_bytes = false;
  for (ExprId o : options) {
    const Expr& e = impl_->at(o);
    if (e.kind == Kind::nothing) continue;
    if (e.kind == Kind::alt) {
      std::vector<ExprId> inner = e.kids;
      for (ExprId k : inner) {
        const Expr& ke = impl_->at(k);
        if (ke.kind == Kind::bytes) {
          for (int w = 0; w < 4; ++w)
            bytes.words[static_cast<size_t>(w)] |= ke.set.words[static_cast<size_t>(w)];
          has_bytes = true;
        } else {
          kids.push_back(k);
        }
      }
    } else if (e.kind == Kind::bytes) {
      for (int w = 0; w < 4; ++w)
        bytes.words[static_cast<size_t>(w)] |= e.set.words[static_cast<size_t>(w)];
      has_bytes = true;
    } else {
      kids.push_back(o);
    }
  }
  if (has_bytes) kids.push_back(byte_set(bytes));
  std::sort(kids.begin(), kids.end());
  kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
  if (kids.empty()) return nothing();
  if (kids.size() == 1) return kids[0];
  return impl_->add(Expr{Kind::alt, {}, std::move(kids), 0, 0, -1});
}

ExprId GrammarBuilder::repeat(ExprId e, uint32_t min, uint32_t max) {
  if (max < min) return nothing();
  const Expr& x = impl_->at(e);
  if (max == 0 || x.kind == Kind::empty) return empty();
  if (x.kind == Kind::nothing) return min == 0 ? empty() : nothing();
  if (min == 1 && max == 1) return e;
  return impl_->add(Expr{Kind::repeat, {}, {e}, min, max, -1});
}

ExprId GrammarBuilder::intersect(ExprId a, ExprId b) {
  impl_->at(a), impl_->at(b);
  return impl_->add(Expr{Kind::intersect, {}, {a, b}, 0, 0, -1});
}

ExprId GrammarBuilder::difference(ExprId a, ExprId b) {
  impl_->at(a), impl_->at(b);
  return impl_->add(Expr{Kind::difference, {}, {a, b}, 0, 0, -1});
}

ExprId GrammarBuilder::call(RuleId r) {
  if (r < 0 || static_cast<size_t>(r) >= impl_->rule_body.size())
    throw GrammarError("grammar: call of an undeclared rule");
  return impl_->add(Expr{Kind::call, {}, {}, 0, 0, r});
}

RuleId GrammarBuilder::declare(std::string name) {
  impl_->rule_names.push_back(std::move(name));
  impl_->rule_body.push_back(-1);
  return static_cast<RuleId>(impl_->rule_body.size() - 1);
}

void GrammarBuilder::define(RuleId r, ExprId body) {
  if (r < 0 || static_cast<size_t>(r) >= impl_->rule_body.size())
    throw GrammarError("grammar: definition of an undeclared rule");
  impl_->at(body);
  impl_->rule_body[static_cast<size_t>(r)] = body;
}

void GrammarBuilder::set_start(RuleId r) {
  if (r < 0 || static_cast<size_t>(r) >= impl_->rule_body.size())
    throw GrammarError("grammar: start rule not declared");
  impl_->start = r;
}

size_t GrammarBuilder::rule_count() const { return impl_->rule_body.size(); }

bool GrammarBuilder::is_defined(RuleId r) const {
  return r >= 0 && static_cast<size_t>(r) < impl_->rule_body.size() &&
         impl_->rule_body[static_cast<size_t>(r)] >= 0;
}

bool GrammarBuilder::is_regular(ExprId e) const { return impl_->is_regular(e); }

namespace {

// Thompson construction of one rule body (or one regular operand) into `nfa`.
//
// A rule body's large regular parts (a sequence around a repetition of more than single bytes:
// strings; or around an intersection or difference: patterns, keys) become rules of their own,
// one per distinct expression (`outline`), rather than being copied into every rule that uses
// them. The language is the same; what changes is that each such part's states, whose token
// masks are the expensive ones to precompute (nearly every token passes through them), exist
// once however many properties of a schema share the string type.
class NfaBuilder {
 public:
  using Outline = std::function<RuleId(ExprId)>;
  NfaBuilder(GrammarBuilder::Impl& g, Nfa& nfa, const GrammarLimits& limits, Outline outline = {})
      : g_(g), nfa_(nfa), limits_(limits), outline_(std::move(outline)) {}

  std::pair<int32_t, int32_t> build(ExprId id, bool top = true) {
    if (nfa_.states.size() > limits_.max_nfa_states)
      throw GrammarError("grammar: more than " + std::to_string(limits_.max_nfa_states) +
                         " automaton states before determinization (a repetition too large?)");
    const Expr e = g_.at(id);
    int32_t s = nfa_.add(), t = nfa_.add();
    if (!top && outline_ && worth_outlining(e, id)) {
      nfa_.states[static_cast<size_t>(s)].calls.emplace_back(outline_(id), t);
      return {s, t};
    }
    auto eps = [&](int32_t from, int32_t to) {
      nfa_.states[static_cast<size_t>(from)].eps.push_back(to);
    };
    switch (e.kind) {
      case Kind::nothing:
        break;
      case Kind::empty:
        eps(s, t);
        break;
      case Kind::bytes:
        nfa_.states[static_cast<size_t>(s)].bytes.emplace_back(nfa_.set_id(e.set), t);
        break;
      case Kind::call:
        nfa_.states[static_cast<size_t>(s)].calls.emplace_back(e.rule, t);
        break;
      case Kind::seq: {
        int32_t cur = s;
        for (ExprId k : e.kids) {
          auto [ks, kt] = build(k, false);
          eps(cur, ks);
          cur = kt;
        }
        eps(cur, t);
        break;
      }
      case Kind::alt:
        for (ExprId k : e.kids) {
          auto [ks, kt] = build(k, false);
          eps(s, ks);
          eps(kt, t);
        }
        break;
      case Kind::repeat: {
        int32_t cur = s;
        for (uint32_t i = 0; i < e.min; ++i) {
          auto [ks, kt] = build(e.kids[0], false);
          eps(cur, ks);
          cur = kt;
        }
        if (e.max == kUnbounded) {
          int32_t loop = nfa_.add();
          eps(cur, loop);
          auto [ks, kt] = build(e.kids[0], false);
          eps(loop, ks);
          eps(kt, loop);
          eps(loop, t);
        } else {
          for (uint32_t i = e.min; i < e.max; ++i) {
            eps(cur, t);
            auto [ks, kt] = build(e.kids[0], false);
            eps(cur, ks);
            cur = kt;
          }
          eps(cur, t);
        }
        break;
      }
      case Kind::intersect:
      case Kind::difference:
        embed(product(e.kids[0], e.kids[1], e.kind == Kind::difference), s, t);
        break;
    }
    return {s, t};
  }

 private:
  // A regular sequence with a wide part directly inside (`"` contents `"`): outlined whole,
  // so the new rule ends only at its closing delimiter, not after every byte of the contents.
  bool worth_outlining(const Expr& e, ExprId id) const {
    if (e.kind != Kind::seq || !g_.is_regular(id)) return false;
    for (ExprId k : e.kids) {
      const Expr& kid = g_.at(k);
      if (kid.kind == Kind::intersect || kid.kind == Kind::difference) return true;
      if (kid.kind == Kind::repeat && kid.max > 1 && g_.at(kid.kids[0]).kind != Kind::bytes)
        return true;
    }
    return false;
  }

  Dfa regular_dfa(ExprId id) {
    if (!g_.is_regular(id))
      throw GrammarError("grammar: intersect/difference of an expression that calls a rule");
    Nfa sub;
    NfaBuilder nb(g_, sub, limits_);
    auto [s, t] = nb.build(id);
    return determinize(sub, s, t, limits_.max_rule_states, "a regular expression");
  }

  Dfa product(ExprId a, ExprId b, bool difference) {
    Dfa da = regular_dfa(a), db = regular_dfa(b);
    Dfa p;
    std::vector<ByteSet> sets;
    for (int c = 0; c < da.n_classes; ++c) {
      ByteSet s;
      for (int x = 0; x < 256; ++x)
        if (da.cls[static_cast<size_t>(x)] == c) s.set(static_cast<uint8_t>(x));
      sets.push_back(s);
    }
    for (int c = 0; c < db.n_classes; ++c) {
      ByteSet s;
      for (int x = 0; x < 256; ++x)
        if (db.cls[static_cast<size_t>(x)] == c) s.set(static_cast<uint8_t>(x));
      sets.push_back(s);
    }
    p.n_classes = byte_classes(sets, p.cls);
    std::array<uint8_t, 256> rep{};  // a byte of each class
    for (int x = 255; x >= 0; --x) rep[p.cls[static_cast<size_t>(x)]] = static_cast<uint8_t>(x);
    std::map<std::pair<int32_t, int32_t>, int32_t> ids;
    std::vector<std::pair<int32_t, int32_t>> pairs;
    auto intern = [&](int32_t x, int32_t y) -> int32_t {
      if (x < 0 || (!difference && y < 0)) return -1;
      auto [it, fresh] = ids.emplace(std::pair{x, y}, static_cast<int32_t>(pairs.size()));
      if (fresh) {
        if (pairs.size() >= limits_.max_rule_states)
          throw GrammarError("grammar: an intersection needs more than " +
                             std::to_string(limits_.max_rule_states) + " states");
        pairs.emplace_back(x, y);
      }
      return it->second;
    };
    intern(0, 0);
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [x, y] = pairs[i];
      for (int c = 0; c < p.n_classes; ++c) {
        uint8_t byte = rep[static_cast<size_t>(c)];
        int32_t ny = y >= 0 ? db.step(y, byte) : -1;
        p.next.push_back(intern(da.step(x, byte), ny));
      }
      bool acc_b = y >= 0 && db.accepting[static_cast<size_t>(y)];
      bool acc = da.accepting[static_cast<size_t>(x)] && (difference ? !acc_b : acc_b);
      p.accepting.push_back(acc ? 1 : 0);
      p.calls.emplace_back();
    }
    prune_regular(p);
    return p;
  }

  void embed(const Dfa& d, int32_t s, int32_t t) {
    std::vector<int32_t> ids(d.size());
    for (auto& id : ids) id = nfa_.add();
    std::vector<ByteSet> class_sets(static_cast<size_t>(d.n_classes));
    for (int x = 0; x < 256; ++x)
      class_sets[d.cls[static_cast<size_t>(x)]].set(static_cast<uint8_t>(x));
    const size_t nc = static_cast<size_t>(d.n_classes);
    for (size_t i = 0; i < d.size(); ++i) {
      // One edge per target, over the union of the classes leading there.
      std::map<int32_t, ByteSet> by_target;
      for (size_t c = 0; c < nc; ++c)
        if (int32_t tgt = d.next[i * nc + c]; tgt >= 0) {
          ByteSet& bs = by_target[tgt];
          for (int w = 0; w < 4; ++w)
            bs.words[static_cast<size_t>(w)] |= class_sets[c].words[static_cast<size_t>(w)];
        }
      for (auto& [tgt, bs] : by_target)
        nfa_.states[static_cast<size_t>(ids[i])].bytes.emplace_back(nfa_.set_id(bs),
                                                                    ids[static_cast<size_t>(tgt)]);
      if (d.accepting[i]) nfa_.states[static_cast<size_t>(ids[i])].eps.push_back(t);
    }
    if (!d.size()) return;
    nfa_.states[static_cast<size_t>(s)].eps.push_back(ids[0]);
  }

  GrammarBuilder::Impl& g_;
  Nfa& nfa_;
  const GrammarLimits& limits_;
  Outline outline_;
};

}  // namespace

Grammar GrammarBuilder::build(const GrammarLimits& limits) {
  using Data = Grammar::Data;
  Impl& g = *impl_;
  if (g.start < 0) throw GrammarError("grammar: no start rule");
  // Rules reachable from the start, in discovery order.
  std::vector<int32_t> order, index(g.rule_body.size(), -1);
  std::vector<Dfa> dfas;
  auto discover = [&](RuleId r) {
    if (index[static_cast<size_t>(r)] >= 0) return;
    if (g.rule_body[static_cast<size_t>(r)] < 0)
      throw GrammarError("grammar: rule '" + g.rule_names[static_cast<size_t>(r)] +
                         "' is used but never defined");
    index[static_cast<size_t>(r)] = static_cast<int32_t>(order.size());
    order.push_back(r);
  };
  discover(g.start);
  std::unordered_map<ExprId, RuleId> outlined;
  RuleId current = g.start;
  auto outline = [&](ExprId e) {
    auto [it, fresh] = outlined.try_emplace(e, -1);
    if (fresh) {
      it->second = static_cast<RuleId>(g.rule_body.size());
      g.rule_names.push_back("part of " + g.rule_names[static_cast<size_t>(current)]);
      g.rule_body.push_back(e);
      index.push_back(-1);
    }
    return it->second;
  };
  size_t total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Nfa nfa;
    current = order[i];
    NfaBuilder nb(g, nfa, limits, outline);
    auto [s, t] = nb.build(g.rule_body[static_cast<size_t>(order[i])]);
    dfas.push_back(determinize(nfa, s, t, limits.max_rule_states,
                               "rule '" + g.rule_names[static_cast<size_t>(order[i])] + "'"));
    total += dfas.back().size();
    if (total > limits.max_states)
      throw GrammarError("grammar: more than " + std::to_string(limits.max_states) +
                         " automaton states");
    for (const auto& calls : dfas.back().calls)
      for (auto [r, tgt] : calls) discover(r);
  }

  auto d = std::make_shared<Data>();
  const size_t n_rules = order.size();
  d->rules.resize(n_rules);
  int32_t offset = 0;
  for (size_t i = 0; i < n_rules; ++i) {
    d->rules[i] = Data::Rule{g.rule_names[static_cast<size_t>(order[i])], offset, offset,
                             static_cast<int32_t>(dfas[i].size())};
    offset += static_cast<int32_t>(dfas[i].size());
  }
  const size_t n_states = static_cast<size_t>(offset);
  auto global = [&](size_t rule, int32_t local) {
    return local < 0 ? -1 : d->rules[rule].first_state + local;
  };

  // Liveness: a state is live if some complete rule text follows from it; a rule is
  // productive if its start is live. Worklist over reversed edges.
  std::vector<uint8_t> live(n_states, 0), productive(n_rules, 0);
  std::vector<std::vector<int32_t>> byte_preds(n_states);
  struct CallSite {
    int32_t state, ret;
  };
  std::vector<std::vector<CallSite>> sites_of_rule(n_rules);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> sites_by_ret(n_states);  // (state, rule)
  for (size_t i = 0; i < n_rules; ++i) {
    const Dfa& dfa = dfas[i];
    const size_t nc = static_cast<size_t>(dfa.n_classes);
    for (size_t s = 0; s < dfa.size(); ++s) {
      int32_t gs = global(i, static_cast<int32_t>(s));
      for (size_t c = 0; c < nc; ++c)
        if (int32_t t = dfa.next[s * nc + c]; t >= 0)
          byte_preds[static_cast<size_t>(global(i, t))].push_back(gs);
      for (auto [r, t] : dfa.calls[s]) {
        size_t ri = static_cast<size_t>(index[static_cast<size_t>(r)]);
        int32_t gt = global(i, t);
        sites_of_rule[ri].push_back({gs, gt});
        sites_by_ret[static_cast<size_t>(gt)].emplace_back(gs, static_cast<int32_t>(ri));
      }
    }
  }
  std::vector<int32_t> work;
  auto make_live = [&](int32_t s) {
    if (!live[static_cast<size_t>(s)]) live[static_cast<size_t>(s)] = 1, work.push_back(s);
  };
  for (size_t i = 0; i < n_rules; ++i)
    for (size_t s = 0; s < dfas[i].size(); ++s)
      if (dfas[i].accepting[s]) make_live(global(i, static_cast<int32_t>(s)));
  std::vector<int32_t> rule_of(n_states);
  for (size_t i = 0; i < n_rules; ++i)
    for (int32_t s = 0; s < d->rules[i].n_states; ++s)
      rule_of[static_cast<size_t>(d->rules[i].first_state + s)] = static_cast<int32_t>(i);
  while (!work.empty()) {
    int32_t t = work.back();
    work.pop_back();
    for (int32_t p : byte_preds[static_cast<size_t>(t)]) make_live(p);
    // Call sites returning to t: live once their rule is productive.
    for (auto [site, ri] : sites_by_ret[static_cast<size_t>(t)])
      if (productive[static_cast<size_t>(ri)]) make_live(site);
    // t is a rule's start: the rule became productive, so its live-returning sites are live.
    size_t r = static_cast<size_t>(rule_of[static_cast<size_t>(t)]);
    if (t == d->rules[r].start && !productive[r]) {
      productive[r] = 1;
      for (const CallSite& cs : sites_of_rule[r])
        if (live[static_cast<size_t>(cs.ret)]) make_live(cs.state);
    }
  }
  if (!productive[0]) throw GrammarError("grammar: the constraint matches no text at all");

  // Tables, with every edge into a dead state (or a call of an unproductive rule) removed.
  d->states.resize(n_states);
  d->state_rule = rule_of;
  d->class_maps.resize(n_rules * 256);
  for (size_t i = 0; i < n_rules; ++i) {
    const Dfa& dfa = dfas[i];
    std::copy(dfa.cls.begin(), dfa.cls.end(),
              d->class_maps.begin() + static_cast<std::ptrdiff_t>(i * 256));
    const size_t nc = static_cast<size_t>(dfa.n_classes);
    for (size_t s = 0; s < dfa.size(); ++s) {
      int32_t gs = global(i, static_cast<int32_t>(s));
      Data::State& st = d->states[static_cast<size_t>(gs)];
      st.next_begin = static_cast<uint32_t>(d->next.size());
      st.class_map = static_cast<uint32_t>(i * 256);
      st.flags = 0;
      if (!live[static_cast<size_t>(gs)]) {
        d->next.insert(d->next.end(), nc, -1);
        st.call_begin = static_cast<uint32_t>(d->calls.size());
        st.n_calls = 0;
        continue;
      }
      for (size_t c = 0; c < nc; ++c) {
        int32_t t = global(i, dfa.next[s * nc + c]);
        if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;
        if (t >= 0) st.flags |= Data::kHasBytes;
        d->next.push_back(t);
      }
      st.call_begin = static_cast<uint32_t>(d->calls.size());
      for (auto [r, t] : dfa.calls[s]) {
        int32_t ri = index[static_cast<size_t>(r)];
        int32_t gt = global(i, t);
        if (!productive[static_cast<size_t>(ri)] || !live[static_cast<size_t>(gt)]) continue;
        d->calls.push_back({ri, gt});
      }
      size_t n_calls = d->calls.size() - st.call_begin;
      if (n_calls > UINT16_MAX) throw GrammarError("grammar: too many rule calls from one state");
      st.n_calls = static_cast<uint16_t>(n_calls);
      if (n_calls) st.flags |= Data::kHasCalls;
      if (dfa.accepting[s]) st.flags |= Data::kAccepting;
    }
  }
  d->start_rule = 0;

  // Left recursion: a rule that reaches a call of itself without consuming a byte would make
  // the parse stack grow without end. Nullable rules first (a fixpoint), then the graph of
  // calls made before any byte, which must be acyclic.
  std::vector<uint8_t> nullable(n_rules, 0);
  auto eps_region = [&](size_t r, auto&& on_call) {
    std::vector<int32_t> stack{d->rules[r].start};
    std::vector<uint8_t> seen(static_cast<size_t>(d->rules[r].n_states), 0);
    bool reaches_end = false;
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      size_t local = static_cast<size_t>(s - d->rules[r].first_state);
      if (seen[local]) continue;
      seen[local] = 1;
      const Data::State& st = d->states[static_cast<size_t>(s)];
      if (st.flags & Data::kAccepting) reaches_end = true;
      for (uint32_t k = 0; k < st.n_calls; ++k) {
        const Data::Call& c = d->calls[st.call_begin + k];
        on_call(c.rule);
        if (nullable[static_cast<size_t>(c.rule)]) stack.push_back(c.ret);
      }
    }
    return reaches_end;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r)
      if (!nullable[r] && eps_region(r, [](int32_t) {})) nullable[r] = 1, changed = true;
  }
  std::vector<std::vector<int32_t>> left_calls(n_rules);
  for (size_t r = 0; r < n_rules; ++r)
    eps_region(r, [&](int32_t callee) { left_calls[r].push_back(callee); });
  std::vector<uint8_t> color(n_rules, 0);
  std::vector<int32_t> path;
  auto dfs = [&](auto&& self, int32_t r) -> void {
    color[static_cast<size_t>(r)] = 1;
    path.push_back(r);
    for (int32_t c : left_calls[static_cast<size_t>(r)]) {
      if (color[static_cast<size_t>(c)] == 1) {
        std::string cycle;
        auto it = std::find(path.begin(), path.end(), c);
        for (; it != path.end(); ++it) cycle += d->rules[static_cast<size_t>(*it)].name + " -> ";
        throw GrammarError("grammar: left recursion (" + cycle +
                           d->rules[static_cast<size_t>(c)].name +
                           "): rewrite the rule so it consumes text before calling itself");
      }
      if (color[static_cast<size_t>(c)] == 0) self(self, c);
    }
    path.pop_back();
    color[static_cast<size_t>(r)] = 2;
  };
  for (size_t r = 0; r < n_rules; ++r)
    if (color[r] == 0) dfs(dfs, static_cast<int32_t>(r));

  impl_ = std::make_shared<Impl>();
  return Grammar(std::move(d));
}

size_t Grammar::state_count() const { return d_ ? d_->states.size() : 0; }
size_t Grammar::rule_count() const { return d_ ? d_->rules.size() : 0; }
size_t Grammar::bytes() const {
  if (!d_) return 0;
  return d_->rules.size() * sizeof(Data::Rule) + d_->states.size() * sizeof(Data::State) +
         d_->state_rule.size() * sizeof(int32_t) + d_->next.size() * sizeof(int32_t) +
         d_->class_maps.size() + d_->calls.size() * sizeof(Data::Call);
}

}  // namespace lift::structured
