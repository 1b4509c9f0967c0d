#include "engine/spec_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/draft_proposer.h"
#include "engine/ngram_proposer.h"
#include "engine/request.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace lift {

namespace {

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
    : cfg_(cfg), max_batched_tokens_(max_batched_tokens) {}

double SpecController::acceptance() const {
  return (accepted_ + kPriorWeight * kPriorAcceptance) / (seen_ + kPriorWeight);
}

void SpecController::observe_step(size_t n_tokens, double seconds, double positions) {
  if (n_tokens == 0 || n_tokens > max_batched_tokens_) return;
  costs_.observe(static_cast<double>(n_tokens), positions, seconds);
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
  if (n == 0) return 0;
  const double nd = static_cast<double>(n);
  const StepCostModel::Fit f = costs_.fit(nd, nd * costs_.last_positions_per_token());
  return f.known ? f.base : 0;
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

// One depth's plan (spec_k of cand_ set, every K <= depth): drafts are added one token at a
// time, always the one most likely accepted (marginal gain a^(K+1)), while tokens per second
// grow by kMinGain per token, the proposer's `depth` passes (costly) charged from the start.
// Reads cand_rate_ and cand_cap_; gain_ is its scratch.
SpecController::PlanTry SpecController::plan_depth(size_t depth, bool costly, double base_cost,
                                                   double value, const StepCostModel::Fit& fit,
                                                   const Proposer& proposer) {
  const size_t n = cand_.size();
  gain_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    cand_[i]->spec_k = 0;
    gain_[i] = expected_tokens(cand_rate_[i], 1) - expected_tokens(cand_rate_[i], 0);
  }
  PlanTry t{value, base_cost + (costly ? proposer.cost_seconds(1, depth) : 0.0)};
  size_t k_max = 0;
  double added_pos = 0;
  for (;;) {
    size_t best = n;
    double gain = 0;
    for (size_t i = 0; i < n; ++i) {
      if (cand_[i]->spec_k >= std::min(depth, cand_cap_[i])) continue;
      if (gain_[i] > gain) {
        gain = gain_[i];
        best = i;
      }
    }
    if (best == n) break;
    Sequence* s = cand_[best];
    const size_t k_max2 = std::max(k_max, s->spec_k + 1);
    const size_t n_spec2 = t.n_spec + (s->spec_k == 0 ? 1 : 0);
    // The draft row sits after the sequence's decode row and its earlier drafts.
    const double pos2 = added_pos + static_cast<double>(s->tokens.size() + s->spec_k + 1);
    double se = 0;
    const double extra = fit.extra(static_cast<double>(t.added + 1), pos2, &se);
    // More rows never cost less; and a cost the measurements cannot tell from a row's full
    // share must not pass for a small one: the drafts are charged kUncertainty errors more.
    const double cost2 = base_cost + std::max(extra, 0.0) + kUncertainty * se +
                         proposer.cost_seconds(n_spec2, costly ? depth : k_max2);
    // Each draft token must raise tokens per second by kMinGain: what the model leaves out
    // (scheduling, lookup) should not turn a break-even guess into a loss.
    if ((t.value + gain) * t.cost <= (1 + kMinGain) * t.value * cost2) break;
    ++s->spec_k;
    const double a = cand_rate_[best];
    gain_[best] = expected_tokens(a, s->spec_k + 1) - expected_tokens(a, s->spec_k);
    t.value += gain;
    t.cost = cost2;
    ++t.added;
    added_pos = pos2;
    k_max = k_max2;
    t.n_spec = n_spec2;
    t.extra = extra;
    t.extra_se = se;
  }
  // What the plan really costs: as many passes as its deepest draft.
  if (costly && t.added > 0) {
    t.cost += proposer.cost_seconds(t.n_spec, k_max) - proposer.cost_seconds(t.n_spec, depth);
  }
  return t;
}

void SpecController::plan(const std::vector<Sequence*>& running, size_t base_tokens,
                          size_t max_model_len, const Proposer& proposer) {
  ++step_;
  last_ = Plan{};
  last_.base_tokens = last_.n_tokens = base_tokens;
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
  // Where the step's rows attend: a decode row all of its sequence, a prompt chunk (its exact
  // size is the scheduler's) from its sequence's computed tokens on.
  double positions = 0, prefill_at = 0;
  size_t n_prefill = 0;
  for (const Sequence* seq : running) {
    if (seq->status != SeqStatus::running) continue;
    if (seq->in_prefill()) {
      prefill_at += static_cast<double>(seq->n_computed);
      ++n_prefill;
    } else {
      positions += static_cast<double>(seq->tokens.size());
    }
  }
  if (n_prefill > 0 && base_tokens > decoding) {
    const double chunk = static_cast<double>(base_tokens - decoding);
    positions += chunk * (prefill_at / static_cast<double>(n_prefill)) +
                 chunk * (chunk / static_cast<double>(n_prefill) + 1) / 2;
  }
  const double n0 = static_cast<double>(base_tokens);
  if (!fit_.known || n0 != fit_n0_ || step_ - fit_step_ >= kRefitInterval) {
    fit_ = costs_.fit(n0, positions);
    fit_n0_ = n0;
    fit_p0_ = positions;
    fit_step_ = step_;
  }
  const StepCostModel::Fit& fit = fit_;
  if (!fit.known || !(fit.base > 0)) return;  // measure plain steps first
  // The extras below are differences along the line, the same from any point of it.
  const double base_cost = fit.base + fit.extra(0, positions - fit_p0_, nullptr);
  if (!(base_cost > 0)) return;
  last_.base_cost = last_.cost = base_cost;
  // A proposer with a time of its own (a draft model) is paid per pass, and each pass drafts
  // one more token for every drafting sequence: one sequence's K + 1 beyond the others' costs a
  // whole pass, which the other sequences' K + 1 would share. Raised one sequence at a time, K
  // would stop at the first pass no single sequence pays for (at 4 sequences and 95%
  // acceptance: K = 1 each). So the plan is made once per depth L, the passes paid up front,
  // and the depth with the most tokens per second wins. A free proposer has one plan, at the
  // deepest cap.
  const bool costly = proposer.cost_seconds(1, 1) > 0;
  // Each candidate's acceptance and cap, once for all the depths' plans.
  const double overall = acceptance();
  cand_rate_.resize(cand_.size());
  cand_cap_.resize(cand_.size());
  size_t deepest = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    const Sequence* s = cand_[i];
    cand_rate_[i] = (s->spec_accepted + kPriorWeight * overall) / (s->spec_seen + kPriorWeight);
    cand_cap_[i] = cap(*s, max_model_len);
    deepest = std::max(deepest, cand_cap_[i]);
  }
  PlanTry best{static_cast<double>(decoding), base_cost};
  best_k_.assign(cand_.size(), 0);
  for (size_t depth = costly ? 1 : deepest; depth <= deepest; ++depth) {
    const PlanTry t =
        plan_depth(depth, costly, base_cost, static_cast<double>(decoding), fit, proposer);
    if (t.added > 0 && t.value * best.cost > (1 + kMinGain) * best.value * t.cost) {
      best = t;
      for (size_t i = 0; i < cand_.size(); ++i) best_k_[i] = cand_[i]->spec_k;
    }
  }
  for (size_t i = 0; i < cand_.size(); ++i) cand_[i]->spec_k = best_k_[i];
  const size_t added = best.added, n_spec = best.n_spec;
  const double cost = best.cost;
  last_.extra = best.extra;
  last_.extra_se = best.extra_se;
  last_.n_tokens = base_tokens + added;
  last_.n_spec = n_spec;
  last_.cost = cost;
  // Keep the estimates alive: now and then one sequence held at 0 drafts one token.
  if (n_spec > 0) {
    probe_interval_ = kProbeInterval;
    return;
  }
  // A free proposer's probes rotate over the sequences every kProbeInterval steps; a costly
  // one's come ever rarer and go where it has the least to catch up on (ties rotate).
  if (costly ? step_ - last_probe_ < probe_interval_ : step_ % kProbeInterval != 0) return;
  const size_t from = (step_ / kProbeInterval) % cand_.size();
  Sequence* probe = cand_[from];
  size_t least_lag = SIZE_MAX;
  for (size_t i = 0; costly && i < cand_.size(); ++i) {
    Sequence* s = cand_[(from + i) % cand_.size()];
    const size_t lag = s->tokens.size() - std::min(s->tokens.size(), s->proposer_computed);
    if (lag < least_lag) {
      least_lag = lag;
      probe = s;
    }
  }
  probe->spec_k = 1;
  last_.probe = true;
  ++last_.n_tokens;
  last_probe_ = step_;
  if (costly) probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  last_.probe_interval = probe_interval_;
}

}  // namespace lift
