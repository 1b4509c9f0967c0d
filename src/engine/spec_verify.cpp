#include "engine/spec_verify.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/rng.h"

namespace lift {

int32_t draw_from(std::span<const float> probs, double u) {
  double total = 0.0;
  for (float p : probs) {
    if (p > 0.0f) total += static_cast<double>(p);
  }
  if (!(total > 0.0))
    throw std::invalid_argument("draw_from: the " + std::to_string(probs.size()) +
                                " probabilities sum to zero");
  const double target = u * total;
  double cum = 0.0;
  size_t last = 0;  // last token with weight: where a target rounded to the top lands
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0.0f)) continue;
    cum += static_cast<double>(probs[i]);
    last = i;
    if (target < cum) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

SpecVerifier::SpecVerifier(Sampler& sampler) : sampler_(sampler) {
  const auto n = static_cast<size_t>(sampler.vocab_size());
  p_.resize(n);
  residual_.resize(n);
  raw_.resize(n);
}

int32_t SpecVerifier::verify(std::span<float> logits, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             uint64_t sample_index, uint64_t position, int32_t draft,
                             std::span<const float> q, bool* accepted, SampleResult* result) {
  const size_t vocab = p_.size();
  if (logits.size() != vocab)
    throw std::invalid_argument("SpecVerifier: logits size " + std::to_string(logits.size()) +
                                " != vocab size " + std::to_string(vocab));
  if (draft < -1 || draft >= static_cast<int32_t>(vocab))
    throw std::invalid_argument("SpecVerifier: draft token " + std::to_string(draft) +
                                " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  if (!q.empty() && q.size() != vocab)
    throw std::invalid_argument("SpecVerifier: draft distribution has " + std::to_string(q.size()) +
                                " entries, vocab size is " + std::to_string(vocab));

  // The bonus row, greedy rows and point masses are plain sampling: same uniform, same bits.
  if (draft < 0 || q.empty() || Sampler::is_greedy(params)) {
    const int32_t t =
        sampler_.sample(logits, params, prompt, output, sample_index, position, result);
    if (accepted != nullptr) *accepted = draft >= 0 && t == draft;
    return t;
  }

  if (result != nullptr) std::copy(logits.begin(), logits.end(), raw_.begin());
  sampler_.distribution(logits, params, prompt, output, p_);

  const auto x = static_cast<size_t>(draft);
  const double px = static_cast<double>(p_[x]);
  const double qx = static_cast<double>(q[x]);
  // u < p/q, written without the division: q(x) == 0 (a draft its own q rules out) then
  // accepts whenever p(x) > 0, the limit of min(1, p/q).
  const double u_accept = spec_uniform(params.seed, SpecDraw::accept, sample_index, position);
  const bool ok = u_accept * qx < px;

  int32_t token = draft;
  if (!ok) {
    for (size_t i = 0; i < vocab; ++i) residual_[i] = std::max(0.0f, p_[i] - q[i]);
    const bool empty =
        std::none_of(residual_.begin(), residual_.end(), [](float v) { return v > 0.0f; });
    const double u = spec_uniform(params.seed, SpecDraw::residual, sample_index, position);
    token = draw_from(empty ? std::span<const float>(p_) : std::span<const float>(residual_), u);
  }
  if (accepted != nullptr) *accepted = ok;
  if (result != nullptr) Sampler::raw_logprobs(raw_, params.n_logprobs, token, result);
  return token;
}

}  // namespace lift
