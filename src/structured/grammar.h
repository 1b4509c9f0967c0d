// The one representation every constraint source compiles to (JSON Schema, regex, choice,
// GBNF): a context-free grammar whose rule bodies are regular expressions over bytes that
// may call other rules. build() determinizes each rule body into a DFA over bytes and call
// symbols, so the regular parts (string contents, numbers, keywords, whitespace: the lexer's
// job) run as table lookups, and only calls between rules need a stack (the parser's job).
// The matcher (matcher.h) runs that pushdown automaton byte by byte and computes token masks.
//
// Expressions are values in the builder: an ExprId may be used any number of times, in any
// rule; identical expressions are shared (hash-consed), so reuse costs nothing.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace lift::structured {

// A constraint that cannot be compiled (unsupported keyword, malformed pattern, too large):
// the API answers 400 with what() as the message.
class GrammarError : public Error {
 public:
  using Error::Error;
};

using ExprId = int32_t;
using RuleId = int32_t;
inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct ByteSet {
  std::array<uint64_t, 4> words{};
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  ByteSet complement() const {
    ByteSet r;
    for (int i = 0; i < 4; ++i) r.words[i] = ~words[i];
    return r;
  }
  bool operator==(const ByteSet&) const = default;
};

// Sizes past which build() refuses a grammar with GrammarError instead of using unbounded
// memory or time: a pathological schema must not stall the server.
struct GrammarLimits {
  size_t max_states = 1'000'000;      // DFA states over all rules
  size_t max_rule_states = 200'000;   // DFA states of one rule
  size_t max_nfa_states = 1'000'000;  // repeat() expansion before determinization
};

class Grammar;

class GrammarBuilder {
 public:
  GrammarBuilder();

  ExprId nothing();  // matches no string
  ExprId empty();    // matches the empty string
  ExprId byte_set(const ByteSet& s);
  ExprId byte_range(uint8_t lo, uint8_t hi);
  ExprId literal(std::string_view bytes);
  // One code point in [lo, hi] (surrogates U+D800..U+DFFF left out) as its UTF-8 bytes.
  ExprId utf8_range(char32_t lo, char32_t hi);
  ExprId seq(std::span<const ExprId> parts);
  ExprId seq(std::initializer_list<ExprId> parts) {
    return seq(std::span(parts.begin(), parts.size()));
  }
  ExprId alt(std::span<const ExprId> options);
  ExprId alt(std::initializer_list<ExprId> options) {
    return alt(std::span(options.begin(), options.size()));
  }
  // min..max repetitions (max = kUnbounded: no upper bound).
  ExprId repeat(ExprId e, uint32_t min, uint32_t max);
  ExprId opt(ExprId e) { return repeat(e, 0, 1); }
  ExprId star(ExprId e) { return repeat(e, 0, kUnbounded); }
  ExprId plus(ExprId e) { return repeat(e, 1, kUnbounded); }
  // Strings in both / in a but not in b. Both sides must be regular (no call() inside, at any
  // depth); build() throws GrammarError otherwise.
  ExprId intersect(ExprId a, ExprId b);
  ExprId difference(ExprId a, ExprId b);
  // The language of rule r at this point (r may be defined later, or be the rule being
  // defined: recursion). Left recursion (a rule reaching itself without consuming a byte) is
  // refused by build().
  ExprId call(RuleId r);

  RuleId declare(std::string name);  // name: for messages only; need not be unique
  void define(RuleId r, ExprId body);
  RuleId add_rule(std::string name, ExprId body) {
    RuleId r = declare(std::move(name));
    define(r, body);
    return r;
  }
  void set_start(RuleId r);
  size_t rule_count() const;
  bool is_defined(RuleId r) const;
  // Whether e contains no call() (so intersect/difference accept it).
  bool is_regular(ExprId e) const;

  // Determinizes every rule reachable from the start rule. Throws GrammarError for an
  // undefined rule, left recursion, or a size past `limits`. The builder is left empty.
  Grammar build(const GrammarLimits& limits = {});

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The compiled automaton: immutable, shared by every matcher of the constraint.
class Grammar {
 public:
  struct Data;
  Grammar() = default;
  explicit Grammar(std::shared_ptr<const Data> d) : d_(std::move(d)) {}

  // Whether `text` (bytes) is a complete sentence of the grammar: for tests and tools. Throws
  // GrammarError when the parse grows past the matcher's limits.
  bool matches(std::string_view text) const;
  size_t state_count() const;
  size_t rule_count() const;
  size_t bytes() const;  // of its tables
  const Data& data() const { return *d_; }
  bool valid() const { return d_ != nullptr; }

 private:
  std::shared_ptr<const Data> d_;
};

}  // namespace lift::structured
