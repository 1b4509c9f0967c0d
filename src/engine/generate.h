// Single-sequence generation: one batched prefill of the whole prompt, then one token per
// decode step reading earlier K/V from the cache. The serving engine batches many sequences;
// this is the plain path the CLI's `generate` uses and tests compare against.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "kernels/backend.h"
#include "model/llama_model.h"

namespace lift {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted
  int max_tokens = 16;
  // Prompt + generated tokens stop here (0: the model's context); more than the context is
  // refused.
  size_t max_model_len = 0;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;
  int32_t eos_id = -1;
  bool ignore_eos = false;
  // Off: recompute the whole sequence at every step (the naive way), to show what the
  // KV cache saves.
  bool use_kv_cache = true;
};

struct GenerationResult {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::length;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double ttft_seconds = 0;  // prompt in to first token out
  // Token positions run through the model, and what the same run costs without a cache.
  uint64_t positions_processed = 0;
  uint64_t positions_without_cache = 0;
};

// on_token is called after each generated token; returning false stops generation.
// Logits of every step can be observed through on_logits (teacher forcing, tests).
GenerationResult generate(LlamaModel& model, Backend& backend, const GenerationRequest& req,
                          const std::function<bool(int32_t)>& on_token = {},
                          const std::function<void(std::span<const float>)>& on_logits = {});

}  // namespace lift
