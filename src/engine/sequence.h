// One sample of one request as the engine tracks it: its tokens, its KV blocks, how far the
// model has computed, and the state of its text output. Plain state, no behaviour: the
// scheduler, the model runner and the output processor each change their own part.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/output_stream.h"
#include "engine/request.h"
#include "kv/block_manager.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace lift {

using Clock = std::chrono::steady_clock;

// Shared by the n samples of a request.
struct RequestState {
  uint64_t id = 0;
  RequestParams params;
  std::shared_ptr<OutputStream> stream;
  uint64_t arrival = 0;  // submission order
  Clock::time_point arrival_time;
  int n_prompt = 0;
  int cached_tokens = 0;
  int open_samples = 0;
  bool aborted = false;
  bool first_token = false;                  // a sample has produced its first token
  FinishReason finish = FinishReason::none;  // of the request so far (finish_rank)
  uint64_t gauge_mark = 0;                   // Engine::refresh_gauges's request count
};

enum class SeqStatus { waiting, running, finished };

struct Sequence {
  uint64_t id = 0;
  RequestState* req = nullptr;
  int index = 0;                // sample index within the request (randomness depends on it)
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  size_t n_prompt = 0;
  size_t n_computed = 0;  // tokens whose K/V is in the cache
  BlockTable table;
  SeqStatus status = SeqStatus::waiting;
  uint64_t admitted = 0;  // admission order, for choosing whom to preempt
  bool forked = false;    // n > 1: the other samples were forked from this one
  bool scheduled_once = false;
  size_t recompute_from = 0;  // after preemption: tokens that were computed before

  // Speculative decoding (engine/proposer.h).
  size_t spec_k = 0;             // draft tokens the controller allows this step
  size_t n_draft = 0;            // of tokens' last entries, how many are this step's drafts
  size_t proposer_computed = 0;  // positions whose K/V the proposer's own model holds
  double spec_accepted = 0;      // decayed counts of this sequence's accepted draft tokens
  double spec_seen = 0;          // and of those the target judged

  // Structured output (RequestParams::constraint): where this sample's text stands in the
  // grammar. Advanced once per token appended after sampling, never by recompute after
  // preemption (which only rebuilds K/V); forked samples start from a copy.
  std::optional<structured::Matcher> matcher;

  // Output side.
  std::unique_ptr<StreamDecoder> decoder;
  std::string pending;  // decoded text held back while it could begin a stop string
  Clock::time_point first_token_time{};
  Clock::time_point last_token_time{};

  size_t n_output() const { return tokens.size() - n_prompt; }
  size_t remaining() const { return tokens.size() - n_computed; }
  bool in_prefill() const { return remaining() > 1; }
};

}  // namespace lift
