// The one place where a request's masks meet a logits row before sampling: min_tokens, then
// the structured-output constraint (structured/matcher.h). The sampler then sees masked
// logits, so what it draws, and the logprobs it reports, follow the masked distribution
// (vLLM's default): a token the constraint rules out has logprob -inf.
//
// End tokens. A request ends on EOS (unless ignore_eos) or one of its stop_token_ids; under a
// constraint exactly those are the constraint's end tokens, allowed iff the text so far is a
// complete sentence (Matcher::can_end), whatever bytes a stop id may spell, so a sample never
// stops on a stop id in the middle of its JSON. The vocabulary's own end tokens that are not
// the request's are never allowed: they would end the match but not the sample. When the
// matcher is done (no byte may follow) the sample finishes with reason stop at once, without
// an end token (vLLM does the same); min_tokens cannot hold it back, and before min_tokens
// the end tokens stay allowed only where the constraint allows nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"
#include "structured/matcher.h"

namespace lift {

// Before min_tokens outputs, EOS (unless ignore_eos; eos_id < 0: none) and the
// stop_token_ids cannot be chosen: sets their logits to -inf. A no-op from n_output >=
// min_tokens on. The engine applies it (through LogitsProcessor) to the target's logits, a
// draft model to its own.
void apply_min_tokens_mask(std::span<float> logits, const RequestParams& p, int32_t eos_id,
                           size_t n_output);

// Whether `token` ends a sample of `p`: EOS (unless ignore_eos) or a stop id.
bool is_end_token(const RequestParams& p, int32_t eos_id, int32_t token);

// Owns one mask buffer sized to the vocabulary, so apply() does not allocate. One per engine
// thread (not thread-safe).
class LogitsProcessor {
 public:
  LogitsProcessor(int vocab_size, int32_t eos_id);

  // Masks `logits` (vocab_size entries) for the next output of a sample that has `n_output`
  // tokens: min_tokens, then `matcher`'s constraint when it is non-null. Throws
  // structured::GrammarError when the constraint fails (past its limits, or no token of the
  // vocabulary can continue the text).
  void apply(std::span<float> logits, const RequestParams& p, size_t n_output,
             structured::Matcher* matcher);

  // After sampling `token`: advances `matcher` (null: nothing to do) and returns whether the
  // constraint is complete, so the sample finishes now. An end token is not fed to the
  // matcher (the sample ends on it anyway). Throws structured::GrammarError for a token the
  // constraint does not allow (a logit bias or NaN logits can leave the sampler nothing
  // allowed to choose), so such text is never emitted.
  bool advance(const RequestParams& p, int32_t token, structured::Matcher* matcher) const;

 private:
  bool test(int32_t t) const { return (mask_[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; }
  void set(int32_t t, bool on);

  int vocab_size_;
  int32_t eos_id_;
  std::vector<uint64_t> mask_;
};

}  // namespace lift
