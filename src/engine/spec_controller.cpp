#include "engine/spec_controller.h"

#include <algorithm>
#include <cmath>

#include "engine/draft_proposer.h"
#include "engine/ngram_proposer.h"
#include "engine/request.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace lift {

namespace {

constexpr double kStepDecay = 0.9;  // weight of the old average against a slower step
constexpr double kSeqDecay = 0.8;   // a sequence's acceptance forgets old drafts fast
constexpr double kAllDecay = 0.99;  // the proposer's overall rate, slowly
constexpr double kPriorWeight = 2;  // pseudo-observations behind a prior rate
constexpr double kMinGain = 0.02;   // least relative gain in tokens/s per draft token

// Expected tokens from a step verifying k drafts at per-token acceptance a.
double expected_tokens(double a, size_t k) {
  return a >= 1 ? static_cast<double>(k + 1)
                : (1 - std::pow(a, static_cast<double>(k + 1))) / (1 - a);
}

}  // namespace

std::shared_ptr<Proposer> make_proposer(const SpecConfig& cfg, const LlamaModel& target,
                                        Backend& backend, const KvCache& kv) {
  switch (cfg.method) {
    case SpecMethod::off:
      return nullptr;
    case SpecMethod::ngram:
      return std::make_shared<NgramProposer>(cfg.ngram_min, cfg.ngram_max);
    case SpecMethod::custom:
      return cfg.proposer;
    case SpecMethod::draft:
      return std::make_shared<DraftModelProposer>(*cfg.draft_model, target, backend, kv.n_blocks(),
                                                  kv.block_size(), kv.type());
  }
  throw Error("unknown speculative method");
}

SpecController::SpecController(const SpecConfig& cfg, size_t max_batched_tokens)
    : cfg_(cfg), cost_(max_batched_tokens + 1, 0.0) {}

double SpecController::acceptance() const {
  return (accepted_ + kPriorWeight * kPriorAcceptance) / (seen_ + kPriorWeight);
}

void SpecController::observe_step(size_t n_tokens, double seconds) {
  if (n_tokens == 0 || n_tokens >= cost_.size() || !(seconds > 0)) return;
  // Timing noise only ever adds (another process took the core, a page fault): the average
  // follows a faster step at once and a slower one slowly, never more than twice itself, so
  // one stalled step cannot hold a K at 0 that a quiet machine would take.
  double& c = cost_[n_tokens];
  if (c == 0) {
    c = seconds;
  } else if (seconds < c) {
    c = 0.5 * c + 0.5 * seconds;
  } else {
    c = kStepDecay * c + (1 - kStepDecay) * std::min(seconds, 2 * c);
  }
}

void SpecController::observe_draft(Sequence& seq, size_t proposed, size_t accepted, bool rejected) {
  if (proposed == 0) return;
  const double a = static_cast<double>(accepted);
  const double seen = a + (rejected ? 1.0 : 0.0);
  seq.spec_accepted = kSeqDecay * seq.spec_accepted + a;
  seq.spec_seen = kSeqDecay * seq.spec_seen + seen;
  accepted_ = kAllDecay * accepted_ + a;
  seen_ = kAllDecay * seen_ + seen;
}

double SpecController::step_cost(size_t n) const {
  if (n < cost_.size() && cost_[n] > 0) return cost_[n];
  size_t lo = 0, hi = 0;
  for (size_t m = std::min(n, cost_.size() - 1); m > 0 && lo == 0; --m) {
    if (cost_[m] > 0) lo = m;
  }
  for (size_t m = n + 1; m < cost_.size() && hi == 0; ++m) {
    if (cost_[m] > 0) hi = m;
  }
  if (lo > 0 && hi > 0) {
    const double t = static_cast<double>(n - lo) / static_cast<double>(hi - lo);
    return cost_[lo] + t * (cost_[hi] - cost_[lo]);
  }
  if (hi > 0) return cost_[hi];  // below every measured count: no cheaper than the smallest
  if (lo == 0) return 0;
  // Past every measured count: the slope from lo's nearest measured neighbour below, or the
  // prior; never flatter than the prior's half, since more tokens are never free.
  double slope = kPriorSlope * cost_[lo];
  for (size_t m = lo - 1; m > 0; --m) {
    if (cost_[m] > 0) {
      slope = std::max((cost_[lo] - cost_[m]) / static_cast<double>(lo - m), 0.5 * slope);
      break;
    }
  }
  return cost_[lo] + slope * static_cast<double>(n - lo);
}

size_t SpecController::cap(const Sequence& seq, size_t max_model_len) const {
  if (seq.status != SeqStatus::running || seq.in_prefill()) return 0;
  const RequestParams& p = seq.req->params;
  if (p.n > 1 && !seq.forked) return 0;  // its first token forks the samples
  const size_t want = p.spec_tokens < 0 ? cfg_.max_tokens : static_cast<size_t>(p.spec_tokens);
  const size_t out = seq.n_output();
  const size_t max_out = static_cast<size_t>(p.max_tokens);
  // The step also yields the target's own token after the drafts.
  const size_t by_tokens = max_out > out + 1 ? max_out - out - 1 : 0;
  const size_t by_len = max_model_len > seq.tokens.size() ? max_model_len - seq.tokens.size() : 0;
  return std::min({want, by_tokens, by_len});
}

void SpecController::plan(const std::vector<Sequence*>& running, size_t base_tokens,
                          size_t max_model_len, const Proposer& proposer) {
  ++step_;
  cand_.clear();
  size_t decoding = 0;
  for (Sequence* seq : running) {
    seq->spec_k = 0;
    if (seq->status == SeqStatus::running && !seq->in_prefill()) ++decoding;
    if (cap(*seq, max_model_len) > 0) cand_.push_back(seq);
  }
  if (cand_.empty() || cfg_.method == SpecMethod::off) return;
  if (!cfg_.adaptive) {
    for (Sequence* seq : cand_) seq->spec_k = cap(*seq, max_model_len);
    return;
  }
  const double base_cost = step_cost(base_tokens);
  if (base_cost <= 0) return;  // measure a plain step first
  const double overall = acceptance();
  auto rate = [&](const Sequence* s) {
    return (s->spec_accepted + kPriorWeight * overall) / (s->spec_seen + kPriorWeight);
  };
  double value = static_cast<double>(decoding);  // expected tokens out of the step
  double cost = base_cost;
  // More tokens never cost less: a count measured in a quiet moment must not undercut the plain
  // step measured under load, or a draft the target never accepts looks free.
  double pass = base_cost;
  size_t n = base_tokens, k_max = 0, n_spec = 0;
  for (;;) {
    Sequence* best = nullptr;
    double gain = 0;
    for (Sequence* s : cand_) {
      if (s->spec_k >= cap(*s, max_model_len)) continue;
      const double a = rate(s);
      const double g = expected_tokens(a, s->spec_k + 1) - expected_tokens(a, s->spec_k);
      if (g > gain) {
        gain = g;
        best = s;
      }
    }
    if (best == nullptr) break;
    const size_t k_max2 = std::max(k_max, best->spec_k + 1);
    const size_t n_spec2 = n_spec + (best->spec_k == 0 ? 1 : 0);
    const double pass2 = std::max(step_cost(n + 1), pass);
    const double cost2 = pass2 + proposer.cost_seconds(n_spec2, k_max2);
    // Each draft token must raise tokens per second by kMinGain: what the model leaves out
    // (scheduling, lookup, noise in c) should not turn a break-even guess into a loss.
    if ((value + gain) * cost <= (1 + kMinGain) * value * cost2) break;
    ++best->spec_k;
    value += gain;
    cost = cost2;
    pass = pass2;
    ++n;
    k_max = k_max2;
    n_spec = n_spec2;
  }
  // Keep the estimates alive: now and then one sequence held at 0 drafts one token.
  if (n_spec == 0 && step_ % kProbeInterval == 0) {
    cand_[(step_ / kProbeInterval) % cand_.size()]->spec_k = 1;
  }
}

}  // namespace lift
