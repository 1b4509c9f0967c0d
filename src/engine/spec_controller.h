// Chooses, every step, how many draft tokens each decoding sequence may have verified (its K,
// 0 = plain decode), so that speculation never costs more than it saves.
//
// Model. A sequence whose drafts the target accepts at rate a (per token, estimated from its
// own drafts, starting from the proposer's overall rate) gains E(K) = (1 - a^(K+1)) / (1 - a)
// tokens from a step that verifies K drafts (Leviathan et al. 2023), and the step costs
// c + D + d: c the plain step's estimated time, D what the extra draft rows add to it, d the
// proposer's own time. The controller raises one sequence's K at a time, always the one whose
// next draft token is most likely accepted (marginal gain a^(K+1)), while the batch's tokens per
// second (sum of E over decoding sequences) / (c + D + d) still grows by at least 2% per token.
// Where steps are memory-bound (few sequences) D stays small and K climbs; where they are
// compute-bound (many sequences) every row costs its share and K stays 0; a poor draft's a
// drives K to 0 too.
//
// Step cost (spec_cost_model.h): a weighted least-squares line through the recent steps' times
// against their token count and attended positions, local to the planned step, with outliers
// (stalls on a shared machine) down-weighted. D is the line's prediction for the extra rows plus
// kUncertainty of its standard error, so a cost the measurements cannot yet tell apart from a
// full share per row does not pass as free. While no sequence drafts, one is probed with K = 1
// every kProbeInterval steps, so the fit keeps seeing what a draft row costs. For a proposer
// that costs time of its own (a draft model) the interval doubles after each probe, up to
// kMaxProbeInterval, until a plan drafts again: such a probe is dear, since the draft first
// runs every token of the sequence it has not seen (a 2-layer draft of a 1.1B target catching
// up 8 tokens costs about half a target step), so probing a draft that never pays every 8
// steps cost 3-20% of throughput. The probe goes to the sequence the proposer lags least.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/proposer.h"
#include "engine/spec_config.h"
#include "engine/spec_cost_model.h"

namespace lift {

class Backend;
class KvCache;
class LlamaModel;

// The proposer cfg asks for (null for SpecMethod::off), its K/V beside the target's in `kv`'s
// block ids. Throws lift::Error when the proposer cannot serve this target.
std::shared_ptr<Proposer> make_proposer(const SpecConfig& cfg, const LlamaModel& target,
                                        Backend& backend, const KvCache& kv);

class SpecController {
 public:
  static constexpr double kPriorAcceptance = 0.5;
  static constexpr uint64_t kProbeInterval = 8;
  static constexpr uint64_t kMaxProbeInterval = 1024;
  static constexpr double kUncertainty = 2;  // standard errors added to a draft's cost
  // A fit costs tens of microseconds, a fair share of a small model's step: one is reused for
  // up to kRefitInterval steps of the same token count, moved along its line to the step's
  // attended positions (the line changes little from one step to the next).
  static constexpr uint64_t kRefitInterval = 8;

  // What the last plan() assumed, for tracing (LIFT_SPEC_TRACE) and tests.
  struct Plan {
    size_t base_tokens = 0, n_tokens = 0;  // without and with the drafts
    size_t n_spec = 0;                     // sequences given K > 0
    bool probe = false;                    // K = 1 for one sequence, to keep measuring
    uint64_t probe_interval = 0;           // steps from this probe to the next
    double base_cost = 0;                  // predicted seconds of the plain step
    double cost = 0;                       // and of the planned one (with the margin)
    double extra = 0, extra_se = 0;        // the drafts' predicted seconds and its error
  };

  SpecController(const SpecConfig& cfg, size_t max_batched_tokens);

  // Sets spec_k on every running sequence: 0 while in prefill, for requests that turned it off
  // and where it does not pay; otherwise at most the request's (or --spec-tokens) cap, and
  // never past max_tokens or max_model_len. `base_tokens`: the tokens the step carries besides
  // drafts (decode tokens and prompt chunks).
  void plan(const std::vector<Sequence*>& running, size_t base_tokens, size_t max_model_len,
            const Proposer& proposer);
  // A step over n tokens took `seconds` from forward pass to emitted tokens. `positions`: the
  // sum over its rows of the positions each row attends to (0: not reported; then the cost
  // model uses the token count alone).
  void observe_step(size_t n_tokens, double seconds, double positions = 0);
  // A sequence's draft of `proposed` tokens had `accepted` accepted; `rejected`: the target
  // turned down the next one (false when all passed or the sequence finished first).
  void observe_draft(Sequence& seq, size_t proposed, size_t accepted, bool rejected);

  // Estimated seconds of a step over n decode tokens at the last observed step's context per
  // token (0 before any step was measured).
  double step_cost(size_t n) const;
  double acceptance() const;  // the proposer's overall estimate
  const Plan& last_plan() const { return last_; }

 private:
  size_t cap(const Sequence& seq, size_t max_model_len) const;
  // A plan's expected tokens, predicted seconds, drafts and drafting sequences.
  struct PlanTry {
    double value = 0, cost = 0;
    size_t added = 0, n_spec = 0;
    double extra = 0, extra_se = 0;
  };
  PlanTry plan_depth(size_t depth, bool costly, double base_cost, double value,
                     const StepCostModel::Fit& fit, const Proposer& proposer);

  SpecConfig cfg_;
  size_t max_batched_tokens_;
  StepCostModel costs_;
  double accepted_ = 0, seen_ = 0;  // decayed counts over all sequences
  uint64_t step_ = 0;
  uint64_t probe_interval_ = kProbeInterval, last_probe_ = 0;
  Plan last_;
  std::vector<Sequence*> cand_;           // scratch
  std::vector<size_t> best_k_;            // scratch: the best plan's K per candidate
  std::vector<double> cand_rate_, gain_;  // scratch: per candidate acceptance, next gain
  std::vector<size_t> cand_cap_;          // scratch: per candidate most drafts
  StepCostModel::Fit fit_;  // the reused fit, made at (fit_n0_, fit_p0_) in step fit_step_
  double fit_n0_ = 0, fit_p0_ = 0;
  uint64_t fit_step_ = 0;
};

}  // namespace lift
