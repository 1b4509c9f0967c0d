// Speculative decoding's verifier: the rejection rule that keeps every emitted token
// distributed exactly as plain decoding would draw it.
//
// The rule (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
// Decoding", arXiv 2211.17192, proof in Appendix A.1; Chen et al. 2023, "Accelerating Large
// Language Model Decoding with Speculative Sampling", arXiv 2302.01318, Theorem 1): a proposer drew
// draft token x from its distribution q; the target's distribution at that position is p
// (Sampler::distribution: every sampling option applied). Accept x with probability min(1, p(x) /
// q(x)); on rejection draw from the residual r = normalize(max(0, p - q)). Then for every token t:
//   P(t) = q(t) min(1, p(t)/q(t)) + (1 - beta) r(t),    beta = sum_x min(p(x), q(x)),
// where beta is the acceptance probability. The first term is min(p(t), q(t)); the residual's
// normalizer is sum max(0, p - q) = 1 - beta, so the second term is max(0, p(t) - q(t)); the sum
// is min + max(0, p - q) = p(t). Hence the token standing at each position is an exact sample
// of p whatever q is; a good q only makes acceptance (and so speed) more likely. A point-mass
// proposal (n-gram lookup) is the case q = delta_x: accept with probability p(x), else draw from p
// with x removed. If p == q the residual is empty, but then rejection has probability 0; rounding
// can still reach it, and drawing from p there is the limit of the rule.
//
// After a rejection the later drafts are discarded; after all K are accepted the row after the
// last draft (the bonus row) draws from p exactly as Sampler::sample does, so a sequence gains
// between 1 and K + 1 tokens per step.
//
// Greedy requests (temperature 0, or top_k == 1) never use the rule: the verifier's token is
// Sampler::sample's argmax with the same logprobs, and the draft is accepted iff it equals it.
// Greedy output with speculation is therefore bitwise the output without it.
//
// Randomness: the accept test and the residual draw use spec_uniform(seed, SpecDraw::accept /
// SpecDraw::residual, sample_index, position), never the plain sampler's uniform, so every draw
// is still a pure function of (seed, sample, position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"

namespace lift {

// Inverse-CDF draw from unnormalized non-negative weights, summed in id order (lowest id
// first) in double: the first id whose running sum exceeds u * total. Never returns a token
// of zero weight, even for u close to 1 where rounding leaves u * total at the very top.
// Throws std::invalid_argument if probs is empty or sums to zero.
int32_t draw_from(std::span<const float> probs, double u);

// Before min_tokens outputs, EOS (unless ignore_eos; eos_id < 0: none) and the
// stop_token_ids cannot be chosen: sets their logits to -inf. A no-op from n_output >=
// min_tokens on. The engine applies it to the target's logits, a draft model to its own.
void apply_min_tokens_mask(std::span<float> logits, const RequestParams& p, int32_t eos_id,
                           size_t n_output);

// Owns scratch sized to the vocabulary (no allocation per call); uses the given Sampler,
// which must outlive it. Not thread-safe, like Sampler.
class SpecVerifier {
 public:
  explicit SpecVerifier(Sampler& sampler);

  // Chooses the token at output index `position` of sample `sample_index` from the target's
  // `logits` (vocab entries, modified in place as Sampler::sample modifies them), given the
  // proposer's `draft` drawn from `q`:
  //   draft == -1: the bonus row; exactly Sampler::sample (same token, bits and logprobs).
  //   greedy params: Sampler::sample's argmax; accepted iff it equals draft.
  //   otherwise: the rule above; q is a vocab-sized distribution or empty (point mass at
  //   draft).
  // *accepted (may be null) says whether the returned token is the draft. `result` (may be
  // null) gets the returned token's raw logprob and the top n_logprobs alternatives exactly
  // as Sampler::sample reports them. `prompt` / `output` are as for Sampler::sample; output
  // includes the drafts before this row. Throws std::invalid_argument for a draft outside the
  // vocabulary or a q of the wrong size.
  int32_t verify(std::span<float> logits, const SamplingParams& params,
                 std::span<const int32_t> prompt, std::span<const int32_t> output,
                 uint64_t sample_index, uint64_t position, int32_t draft, std::span<const float> q,
                 bool* accepted, SampleResult* result = nullptr);

 private:
  Sampler& sampler_;
  std::vector<float> p_;         // target distribution
  std::vector<float> residual_;  // max(0, p - q)
  std::vector<float> raw_;       // the raw logits, kept for logprobs
};

}  // namespace lift
