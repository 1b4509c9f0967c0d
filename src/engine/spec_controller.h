// Chooses, every step, how many draft tokens each decoding sequence may have verified (its K,
// 0 = plain decode), so that speculation never costs more than it saves.
//
// Model. A sequence whose drafts the target accepts at rate a (per token, estimated from its
// own drafts, starting from the proposer's overall rate) gains E(K) = (1 - a^(K+1)) / (1 - a)
// tokens from a step that verifies K drafts (Leviathan et al. 2023), and the step costs
// c(n) + d: c the measured time of a target forward pass over n tokens, d the proposer's own
// time. The controller raises one sequence's K at a time, always the one whose next draft
// token is most likely accepted (marginal gain a^(K+1)), while the batch's tokens per second
// (sum of E over decoding sequences) / (c(n) + d) still grows by at least 2% per token. Where steps
// are memory-bound (few sequences) c barely grows with n and K climbs; where they are compute-bound
// (many sequences) c grows in proportion and K stays 0; a poor draft's a drives K to 0 too.
//
// c(n) is an average of measured step times (forward pass to emitted tokens) per token count n,
// quick to follow a faster step and slow to follow a slower one (noise on a shared machine only
// adds); between measured counts it is interpolated, beyond them extrapolated with the measured
// slope (or a prior of kPriorSlope per token until two counts are known). A sequence held at K = 0
// by a low estimate is probed with K = 1 every kProbeInterval steps, so the estimate can recover.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/proposer.h"
#include "engine/spec_config.h"

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
  static constexpr double kPriorSlope = 0.08;  // extra cost per token, as a fraction of c(n)
  static constexpr double kPriorAcceptance = 0.5;
  static constexpr uint64_t kProbeInterval = 8;

  SpecController(const SpecConfig& cfg, size_t max_batched_tokens);

  // Sets spec_k on every running sequence: 0 while in prefill, for requests that turned it off
  // and where it does not pay; otherwise at most the request's (or --spec-tokens) cap, and
  // never past max_tokens or max_model_len. `base_tokens`: the tokens the step carries besides
  // drafts (decode tokens and prompt chunks).
  void plan(const std::vector<Sequence*>& running, size_t base_tokens, size_t max_model_len,
            const Proposer& proposer);
  // A target forward pass over n tokens took `seconds`.
  void observe_step(size_t n_tokens, double seconds);
  // A sequence's draft of `proposed` tokens had `accepted` accepted; `rejected`: the target
  // turned down the next one (false when all passed or the sequence finished first).
  void observe_draft(Sequence& seq, size_t proposed, size_t accepted, bool rejected);

  // c(n): estimated seconds of a forward pass over n tokens (0 before any step was measured).
  double step_cost(size_t n) const;
  double acceptance() const;  // the proposer's overall estimate

 private:
  size_t cap(const Sequence& seq, size_t max_model_len) const;

  SpecConfig cfg_;
  std::vector<double> cost_;        // [n]: average seconds of a pass over n tokens, 0: unmeasured
  double accepted_ = 0, seen_ = 0;  // decayed counts over all sequences
  uint64_t step_ = 0;
  std::vector<Sequence*> cand_;  // scratch
};

}  // namespace lift
