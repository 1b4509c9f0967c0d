// How the engine speculates (engine/proposer.h): which proposer, how many tokens at most, and
// whether the controller may turn K down (it turns itself off when a step of K + 1 tokens costs
// more than acceptance saves: many sequences, or a poor draft).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace lift {

class LlamaModel;
class Proposer;

enum class SpecMethod { off, ngram, draft, custom };
const char* spec_method_name(SpecMethod m);
SpecMethod parse_spec_method(const std::string& s);  // "off", "ngram" or "draft"

struct SpecConfig {
  SpecMethod method = SpecMethod::off;
  size_t max_tokens = 4;  // --spec-tokens: most draft tokens per sequence and step
  // Off: every speculating sequence gets max_tokens (tests; benchmarks of a fixed K).
  bool adaptive = true;
  // n-gram lookup: the longest suffix of the sequence, ngram_max down to ngram_min tokens, that
  // occurred earlier in its prompt or output proposes what followed it there.
  size_t ngram_min = 1;
  size_t ngram_max = 4;
  LlamaModel* draft_model = nullptr;   // method == draft: same vocabulary as the target
  std::shared_ptr<Proposer> proposer;  // method == custom (tests)
  std::string validate() const;
};

}  // namespace lift
