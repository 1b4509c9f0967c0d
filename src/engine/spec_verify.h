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
// of p whatever q is; a good q only makes acceptance (and so speed) more likely. If p == q the
// residual is empty, but then rejection has probability 0; rounding can still reach it, and
// drawing from p there is the limit of the rule.
//
// A point-mass proposal (q = delta_x: n-gram lookup, and any proposer's greedy drafts) takes a
// coupled form of the same rule: draw t from p exactly as Sampler::sample does (its own uniform,
// counter_uniform(seed, sample_index, position)), accept iff t == x, and emit t. It is the rule
// in distribution: P(accept) = P(t == x) = p(x), and given rejection t ~ p restricted to t != x,
// normalized, which is normalize(max(0, p - delta_x)). And it is plain decoding's draw bit for
// bit, so a seeded sampled request gives the same tokens and logprobs with n-gram speculation as
// without, whatever K the controller picks from its timings. A real q (a draft model sampling at
// temperature > 0) keeps the rule above with its own uniforms: its output follows the same
// distribution as plain decoding, but is not the same text for a given seed, nor the same text
// for two K (a position is a draft row under one K and a bonus row under another).
//
// After a rejection the later drafts are discarded; after all K are accepted the row after the
// last draft (the bonus row) draws from p exactly as Sampler::sample does, so a sequence gains
// between 1 and K + 1 tokens per step.
//
// Greedy requests (temperature 0, or top_k == 1) are the coupled form with no randomness: the
// verifier's token is Sampler::sample's argmax with the same logprobs, and the draft is accepted
// iff it equals it. Greedy output with speculation is therefore bitwise the output without it.
//
// Randomness: with a real q, the accept test and the residual draw use spec_uniform(seed,
// SpecDraw::accept / SpecDraw::residual, sample_index, position): independent of each other and
// of the draft's own draw, and still pure functions of (seed, sample, position).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/logits_processor.h"  // apply_min_tokens_mask, for the draft model
#include "engine/request.h"
#include "engine/sampler.h"

namespace lift {

// Inverse-CDF draw from unnormalized non-negative weights, summed in id order (lowest id
// first) in double: the first id whose running sum exceeds u * total. Never returns a token
// of zero weight, even for u close to 1 where rounding leaves u * total at the very top.
// Throws std::invalid_argument if probs is empty or sums to zero.
int32_t draw_from(std::span<const float> probs, double u);

// Owns scratch sized to the vocabulary (no allocation per call); uses the given Sampler,
// which must outlive it. Not thread-safe, like Sampler.
class SpecVerifier {
 public:
  explicit SpecVerifier(Sampler& sampler);

  // Chooses the token at output index `position` of sample `sample_index` from the target's
  // `logits` (vocab entries, modified in place as Sampler::sample modifies them), given the
  // proposer's `draft` drawn from `q`:
  //   draft == -1: the bonus row; exactly Sampler::sample (same token, bits and logprobs).
  //   greedy params, or q empty (a point mass at draft): exactly Sampler::sample; accepted
  //   iff its token equals draft.
  //   otherwise: the rejection rule above with q, a vocab-sized distribution.
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
