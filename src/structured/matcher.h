// Token masks for one constraint. CompiledGrammar is the grammar plus, for every DFA state a
// parse can stand in, the tokens it accepts or rejects whatever the rules below it on the
// stack are (computed once, at compile time, by walking the vocabulary trie); Matcher is one
// sequence's position in the grammar. A mask is then the cached sets of the parse's stack
// tops, plus a walk over the few "uncertain" tokens that run past the end of the top rule
// (e.g. `",` closing a string and going on into the object), checked against the real stack.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/token_vocab.h"

namespace lift::structured {

struct MatcherLimits {
  size_t max_heads = 4096;  // live parse stacks at once (ambiguous grammars)
  // Parser steps one fill_mask() may take (a step: one byte on one stack); past it the
  // constraint fails with GrammarError rather than stall the batch.
  size_t max_mask_steps = 50'000'000;
};

// What computing one constraint's mask cache may cost before it is refused (GrammarError, a 400
// from the server): a schema is request input, and its time and memory are the server's.
struct CompileLimits {
  size_t max_steps = 2'000'000'000;            // parser steps over all states' trie walks
  size_t max_cache_bytes = size_t{256} << 20;  // the cache's arrays (cache_bytes())
};

class CompiledGrammar {
 public:
  struct Cache;
  // Walks the vocabulary trie for every state (the time to first mask). Throws GrammarError
  // past `limits`.
  static std::shared_ptr<const CompiledGrammar> compile(Grammar g,
                                                        std::shared_ptr<const TokenVocab> vocab,
                                                        const CompileLimits& limits = {});

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  const Cache& cache() const { return *cache_; }
  size_t cache_bytes() const;
  size_t bytes() const { return grammar_.bytes() + cache_bytes(); }  // what keeping it costs
  ~CompiledGrammar();

 private:
  CompiledGrammar() = default;
  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::unique_ptr<Cache> cache_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> g, MatcherLimits limits = {});

  // Bit t of `mask` (vocab().mask_words() words, bit t % 64 of word t / 64) is set iff token t
  // may come next. End tokens are set iff can_end(). Throws GrammarError past the limits.
  void fill_mask(std::span<uint64_t> mask);
  // Advances by one token; false, and the state unchanged, when the token is not allowed. An
  // end token is allowed iff can_end(), and ends the match (is_terminated()).
  bool accept(int32_t token);
  // Advances by raw bytes (false, unchanged, if they do not fit).
  bool accept_bytes(std::string_view bytes);

  bool can_end() const;        // the text so far is a complete sentence
  bool is_done() const;        // complete, and no byte may follow: only end tokens remain
  bool is_terminated() const;  // an end token was accepted
  void reset();

  const CompiledGrammar& compiled() const { return *g_; }

  struct State;

 private:
  std::shared_ptr<const CompiledGrammar> g_;
  MatcherLimits limits_;
  std::shared_ptr<State> s_;  // copied on write: Matcher copies are cheap and independent
};

}  // namespace lift::structured
