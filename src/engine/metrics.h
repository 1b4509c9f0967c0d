// Counters and latency histograms the engine keeps for /metrics and benchmarks, with the
// meanings vLLM gives them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lift {

// Cumulative histogram with fixed bucket bounds (Prometheus style).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
  }
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // per bucket, last = +Inf
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

inline std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

inline std::vector<double> count_buckets(size_t max) {
  std::vector<double> b;
  for (size_t i = 0; i <= max; ++i) b.push_back(static_cast<double>(i));
  return b;
}

// Speculative decoding, per proposer (vLLM's spec_decode counters). A draft is one sequence's
// proposals verified in one step.
struct SpecDecodeMetrics {
  std::string proposer;  // empty: speculation off
  uint64_t drafts = 0;
  uint64_t draft_tokens = 0;     // proposed
  uint64_t accepted_tokens = 0;  // of which the target kept
  // [i]: drafts whose i-th token was accepted (size: --spec-tokens).
  std::vector<uint64_t> accepted_per_pos;
  Histogram accepted_length{count_buckets(16)};  // accepted tokens per draft
  double acceptance_rate() const {
    return draft_tokens ? static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens)
                        : 0.0;
  }
  // Tokens a sequence gains per verify step: accepted drafts plus the target's own token.
  double mean_accepted_length() const {
    return drafts ? 1.0 + static_cast<double>(accepted_tokens) / static_cast<double>(drafts) : 0.0;
  }
};

// Counted per request, not per sample, unless said otherwise (vLLM's meanings).
struct EngineMetrics {
  // Gauges.
  size_t running = 0;       // requests with a sample running
  size_t waiting = 0;       // requests waiting, none of their samples running
  size_t running_seqs = 0;  // sequences (samples) running
  size_t waiting_seqs = 0;  // sequences waiting (new, or preempted)
  size_t kv_used_blocks = 0;
  size_t kv_total_blocks = 0;
  double kv_usage = 0;  // used / total (cached blocks are reusable, so not counted)
  // Counters.
  uint64_t prefix_queries = 0;  // tokens looked up in the prefix cache, once per admission
  uint64_t prefix_hits = 0;     // of which found
  uint64_t preemptions = 0;     // sequences
  uint64_t recomputed_tokens = 0;
  uint64_t prompt_tokens = 0;
  uint64_t generation_tokens = 0;  // every sample's
  // Finished requests by reason. A request's reason is its samples' most severe:
  // error > abort > length > stop. Success means stop or length.
  uint64_t requests_finished = 0;  // = requests_stop + requests_length
  uint64_t requests_stop = 0;
  uint64_t requests_length = 0;
  uint64_t requests_aborted = 0;  // abort() and requests refused by a stopping engine
  uint64_t requests_failed = 0;   // FinishReason::error
  uint64_t steps = 0;
  // Seconds.
  Histogram ttft{latency_buckets()};         // arrival to the first token of any sample
  Histogram inter_token{latency_buckets()};  // between two tokens of one sample
  Histogram e2e{latency_buckets()};          // arrival to the last sample's end (success only)
  Histogram queue_time{latency_buckets()};   // arrival to first scheduling
  SpecDecodeMetrics spec;
};

}  // namespace lift
