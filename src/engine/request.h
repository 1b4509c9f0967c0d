// What a client asks of the engine and what comes back, one delta per step.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace lift::structured {
class CompiledGrammar;
}

namespace lift {

inline constexpr int kMaxSpecTokens = 16;

struct RequestParams {
  int max_tokens = 16;  // generated tokens per sample, at most
  int min_tokens = 0;   // EOS and stop ids are masked, stop strings not matched, before this many
  int n = 1;            // parallel samples forked from one prefill
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings, matched across token boundaries, not returned
  std::vector<int32_t> stop_token_ids;
  SamplingParams sampling;  // seed, temperature, ..., n_logprobs
  bool logprobs = false;    // report the chosen token's logprob (+ sampling.n_logprobs top)
  int priority =
      0;  // --scheduling-policy priority: lower runs first, ties by arrival; fcfs: ignored
  // Most draft tokens speculative decoding may verify per step for this request: -1 the
  // engine's --spec-tokens, 0 no speculation. It never changes greedy output.
  int spec_tokens = -1;
  // Structured output: every sample's text is a sentence of this grammar (or a prefix of one,
  // if max_tokens or a stop string ends it first); engine/logits_processor.h says how it
  // meets EOS, stop ids and min_tokens. Compiled by whoever builds the request (the HTTP
  // threads, through structured::ConstraintCompiler), never on the engine thread. A
  // constrained request runs without speculative decoding.
  std::shared_ptr<const structured::CompiledGrammar> constraint;

  // Empty when valid for this vocabulary; otherwise what to fix.
  std::string validate(int vocab_size) const;
};

enum class FinishReason { none, stop, length, abort, error };
const char* finish_reason_name(FinishReason r);

struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

// One step's news for one sample of a request.
struct RequestOutput {
  uint64_t request_id = 0;
  int index = 0;                   // which of the n samples
  std::vector<int32_t> token_ids;  // tokens generated this step
  std::string text;                // text that became final this step (valid UTF-8)
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::none;
  std::string error;  // with FinishReason::error
  // Usage, filled on the sample's last output.
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache
};

}  // namespace lift
