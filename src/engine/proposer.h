// Speculative decoding's proposers (Leviathan et al. 2023): something cheap guesses a sequence's
// next tokens, the target model scores them all in one forward pass of the continuous batch, and
// the verifier (engine/spec_verify.h) keeps the longest prefix the target agrees with, so the
// output distribution stays the target's. A proposer is one class; adding one touches nothing
// else but the factory in engine/spec_controller.cpp.
//
// Timeline of one step (engine.cpp): the controller picks each decoding sequence's K from the
// measured acceptance and step costs; the scheduler reserves KV slots up to
// n_computed + 1 + K; propose() fills drafts (at most K tokens, maybe none); the target runs the
// last token plus the drafts; the verifier accepts a prefix; rolled_back() reports what stands.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/sequence.h"

namespace lift {

struct DraftRequest {
  Sequence* seq;
  size_t max_tokens;  // >= 1: propose at most this many
};

// A proposer's guess for one sequence.
struct Draft {
  std::vector<int32_t> tokens;
  // Row i (vocab entries) is the distribution q that tokens[i] was drawn from, after the
  // request's sampling options (Sampler::distribution). Empty when every proposal is a point
  // mass (n-gram lookup; any proposer under greedy requests).
  std::vector<float> probs;
  void clear() {
    tokens.clear();
    probs.clear();
  }
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string_view name() const = 0;

  // Fills drafts[i] for reqs[i] (drafts come cleared). Runs on the engine thread after the
  // scheduler reserved slots up to seq->n_computed + 1 + max_tokens and after the step's
  // copy-on-write copies, before the target's forward pass. seq->tokens ends with the last
  // accepted token, whose target K/V is not computed yet.
  virtual void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) = 0;

  // Copy-on-write: block src's contents were copied to dst in the target's cache; a proposer
  // with its own K/V copies its part too.
  virtual void copy_block(int32_t /*src*/, int32_t /*dst*/) {}

  // Seconds propose() takes for n_seqs sequences of k tokens each, as measured so far; the
  // controller weighs it against what acceptance saves. Free proposers say 0.
  virtual double cost_seconds(size_t /*n_seqs*/, size_t /*k*/) const { return 0; }
};

}  // namespace lift
