// Token sampling: logit bias, repetition / presence / frequency penalties, greedy or
// temperature + top-k + top-p + min-p sampling, and OpenAI-style logprobs.
//
// Order of operations (as in vLLM and llama.cpp):
//   1. NaN logits become -inf, +inf logits become the largest finite float.
//   2. logit_bias is added.
//   3. repetition_penalty over the distinct tokens of prompt + output (HF / llama.cpp:
//      a positive logit is divided by the penalty, a negative one multiplied).
//   4. presence / frequency penalties over the generated tokens (OpenAI:
//      logit -= presence * (count > 0) + frequency * count).
//   5. temperature == 0: argmax, lowest id on ties. Otherwise softmax(logits / T), then
//      top-k, top-p (smallest prefix of the sorted distribution whose mass reaches top_p),
//      min-p (drop tokens below min_p * the largest probability), renormalize, and draw
//      by inverse CDF with one uniform from counter_uniform(seed, sample_index, position).
//
// Randomness depends only on (seed, sample_index, position): no state is carried from
// call to call, so a request gives the same tokens alone, in a batch, after preemption
// and recompute, or when parallel sample #i of n is recomputed on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lift {

inline constexpr int kMaxLogprobs = 20;

struct LogitBias {
  int32_t token;
  float bias;  // added to the logit; -inf bans the token
};

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int top_k = 0;                    // <= 0: off
  float top_p = 1.0f;               // (0, 1]; 1: off
  float min_p = 0.0f;               // [0, 1]; 0: off
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f;    // [-2, 2]; 0: off
  float frequency_penalty = 0.0f;   // [-2, 2]; 0: off
  std::vector<LogitBias> logit_bias;
  uint64_t seed = 0;
  int n_logprobs = 0;  // top alternatives to report, 0..kMaxLogprobs

  // An error message for the first out-of-range value, or empty if the params are valid
  // for a vocabulary of `vocab_size` tokens.
  std::string validate(int vocab_size) const;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  // Log-probability of `token` under the raw softmax (before bias and penalties, at
  // temperature 1), as OpenAI and vLLM report it by default.
  float logprob = 0.0f;
  // The n_logprobs most likely tokens under that same raw softmax, best first (lowest id
  // first among equals). Reuse one SampleResult across calls: after the first call the
  // vector's capacity suffices and filling it does not allocate.
  std::vector<TokenLogprob> top;
};

// Owns scratch buffers sized to the vocabulary, so sample() does not allocate.
// Not thread-safe: use one Sampler per thread.
class Sampler {
 public:
  explicit Sampler(int vocab_size);

  int vocab_size() const { return vocab_size_; }

  // Samples one token. `logits` (vocab_size entries) is modified in place: on return it
  // holds the logits after steps 1-4 above (sanitized, biased and penalized, before
  // temperature). `prompt` and `output` are the token ids so far; ids outside the
  // vocabulary are ignored, as are out-of-range logit_bias tokens. `params` should have
  // passed validate(). `result` may be null. Throws std::invalid_argument if
  // logits.size() != vocab_size.
  int32_t sample(std::span<float> logits, const SamplingParams& params,
                 std::span<const int32_t> prompt, std::span<const int32_t> output,
                 uint64_t sample_index, uint64_t position, SampleResult* result = nullptr);

  // The distribution sample() draws from with these arguments, as vocab_size probabilities
  // in `probs`: steps 1-5 above, renormalized over the kept tokens, 0 for the others (and
  // for a kept token whose probability is below the smallest float, 1.4e-45). When
  // sample() takes the argmax (temperature 0, top_k 1, every logit -inf) it is a point mass
  // there. `logits` is modified exactly as sample() modifies it. Throws
  // std::invalid_argument if logits.size() or probs.size() != vocab_size.
  void distribution(std::span<float> logits, const SamplingParams& params,
                    std::span<const int32_t> prompt, std::span<const int32_t> output,
                    std::span<float> probs);

  // Fills `result` for `token` as sample() would from these raw logits (before bias and
  // penalties): its logprob and the n_logprobs best alternatives. Sanitizes `logits` in
  // place (step 1). For a caller that chose the token by other means (the spec verifier).
  static void raw_logprobs(std::span<float> logits, int n_logprobs, int32_t token,
                           SampleResult* result);

  // True when sample() takes the argmax for these params and draws no random number.
  static bool is_greedy(const SamplingParams& params) {
    return !(params.temperature > 0.0f) || params.top_k == 1;
  }

 private:
  struct Candidate {
    float value;  // logit while selecting top-k, then unnormalized probability
    int32_t id;
  };

  // Steps 1-4 on x (and the raw logprobs into result, when non-null), then the argmax.
  // marks_ stay set for raw_logit() until clear_marks().
  size_t process(float* x, const SamplingParams& params, std::span<const int32_t> prompt,
                 std::span<const int32_t> output, SampleResult* result, double* raw_lse);
  void check_size(const char* what, size_t n) const;
  // Step 5's kept set (top-k, min-p, top-p) in candidates_[0, n), unnormalized; returns n.
  size_t keep_candidates(const float* logits, float max_logit, const SamplingParams& params);
  double kept_mass(size_t n) const;
  void apply_bias_and_penalties(float* logits, const SamplingParams& params,
                                std::span<const int32_t> prompt, std::span<const int32_t> output);
  void save_raw(const float* logits, int32_t token);
  float raw_logit(const float* logits, int32_t token) const;
  void clear_marks(const SamplingParams& params, std::span<const int32_t> prompt,
                   std::span<const int32_t> output);
  int32_t sample_from_distribution(const float* logits, float max_logit,
                                   const SamplingParams& params, double uniform);
  size_t select_top_k(const float* logits, size_t k);
  size_t top_p_cut(size_t n, bool sorted, double target);
  static double raw_logsumexp_and_top(const float* logits, size_t n, float raw_max, int n_top,
                                      SampleResult* result);

  int vocab_size_;
  std::vector<Candidate> candidates_;  // vocab_size
  std::vector<int32_t> counts_;        // vocab_size, all zero between calls
  std::vector<uint8_t> marks_;         // vocab_size, all zero between calls
  std::vector<float> saved_raw_;       // raw logit of each token changed by bias/penalties
  std::vector<double> bucket_mass_;    // probability histogram for top-p
};

}  // namespace lift
