#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/rng.h"

namespace lift {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

constexpr size_t kProbBuckets = 1024;

// marks_ bits.
constexpr uint8_t kSaved = 1;  // saved_raw_ holds the token's raw logit
constexpr uint8_t kSeen = 2;   // repetition penalty already applied this call

// NaN -> -inf and +inf -> largest finite, so that max-subtraction never yields NaN.
inline float sanitize(float v) { return v != v ? kNegInf : (v > kMaxFloat ? kMaxFloat : v); }

inline float max2(float a, float b) { return a < b ? b : a; }

// The vocab-wide passes keep eight independent maxima, so they do not serialize on one
// dependency chain and the compiler can vectorize them.
constexpr size_t kLanes = 8;

// Sanitizes logits in place and returns their maximum.
float sanitize_and_max(float* x, size_t n) {
  std::array<float, kLanes> m;
  m.fill(kNegInf);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = sanitize(x[i + j]);
      x[i + j] = v;
      m[j] = max2(m[j], v);
    }
  }
  float r = kNegInf;
  for (; i < n; ++i) {
    x[i] = sanitize(x[i]);
    r = max2(r, x[i]);
  }
  for (float v : m) r = max2(r, v);
  return r;
}

// Lowest index of the maximum (0 when all are -inf); no NaN may be present.
size_t argmax(const float* x, size_t n) {
  std::array<float, kLanes> m;
  m.fill(kNegInf);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) m[j] = max2(m[j], x[i + j]);
  }
  float r = kNegInf;
  for (; i < n; ++i) r = max2(r, x[i]);
  for (float v : m) r = max2(r, v);
  for (i = 0; i < n; ++i) {
    if (x[i] == r) return i;
  }
  return 0;
}

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = std::to_string(v);
  // Trim trailing zeros of the fixed notation: 0.500000 -> 0.5.
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// Bucket of a probability in (0, 1] by the top 11 bits of its float pattern (exponent and
// 3 mantissa bits): order-preserving, and 1.0f lands in bucket 0x3f8.
inline size_t prob_bucket(float p) {
  return std::min<size_t>(std::bit_cast<uint32_t>(p) >> 20, kProbBuckets - 1);
}

inline bool in_vocab(int32_t t, int vocab) { return t >= 0 && t < vocab; }

// log softmax of a raw logit given the raw log-sum-exp, as float.
inline float token_logprob(float raw, double lse) {
  return raw == kNegInf ? kNegInf : static_cast<float>(static_cast<double>(raw) - lse);
}

}  // namespace

std::string SamplingParams::validate(int vocab_size) const {
  if (vocab_size <= 0) return "vocab_size must be positive, got " + std::to_string(vocab_size);
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return "temperature must be finite and >= 0, got " + fmt(temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return "top_p must be in (0, 1], got " + fmt(top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return "min_p must be in [0, 1], got " + fmt(min_p);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    return "repetition_penalty must be finite and > 0, got " + fmt(repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return "presence_penalty must be in [-2, 2], got " + fmt(presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return "frequency_penalty must be in [-2, 2], got " + fmt(frequency_penalty);
  if (n_logprobs < 0 || n_logprobs > kMaxLogprobs)
    return "n_logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
           std::to_string(n_logprobs);
  for (const LogitBias& b : logit_bias) {
    if (!in_vocab(b.token, vocab_size))
      return "logit_bias token " + std::to_string(b.token) + " is outside the vocabulary [0, " +
             std::to_string(vocab_size) + ")";
    if (std::isnan(b.bias) || b.bias == std::numeric_limits<float>::infinity())
      return "logit_bias for token " + std::to_string(b.token) + " must be finite or -inf, got " +
             fmt(b.bias);
  }
  return {};
}

Sampler::Sampler(int vocab_size) : vocab_size_(vocab_size) {
  if (vocab_size <= 0) throw std::invalid_argument("Sampler: vocab_size must be positive");
  const auto n = static_cast<size_t>(vocab_size);
  candidates_.resize(n);
  counts_.assign(n, 0);
  marks_.assign(n, 0);
  saved_raw_.assign(n, 0.0f);
  bucket_mass_.assign(kProbBuckets, 0.0);
}

void Sampler::save_raw(const float* logits, int32_t token) {
  if (!(marks_[token] & kSaved)) {
    marks_[token] |= kSaved;
    saved_raw_[token] = logits[token];
  }
}

float Sampler::raw_logit(const float* logits, int32_t token) const {
  return (marks_[token] & kSaved) ? saved_raw_[token] : logits[token];
}

void Sampler::apply_bias_and_penalties(float* logits, const SamplingParams& params,
                                       std::span<const int32_t> prompt,
                                       std::span<const int32_t> output) {
  const int vocab = vocab_size_;
  for (const LogitBias& b : params.logit_bias) {
    if (!in_vocab(b.token, vocab)) continue;
    save_raw(logits, b.token);
    logits[b.token] = sanitize(logits[b.token] + b.bias);
  }

  const float rep = params.repetition_penalty;
  if (rep != 1.0f && rep > 0.0f) {
    auto penalize = [&](std::span<const int32_t> tokens) {
      for (int32_t t : tokens) {
        if (!in_vocab(t, vocab) || (marks_[t] & kSeen)) continue;
        marks_[t] |= kSeen;
        save_raw(logits, t);
        const float v = logits[t];
        logits[t] = sanitize(v > 0.0f ? v / rep : v * rep);
      }
    };
    penalize(prompt);
    penalize(output);
  }

  const float presence = params.presence_penalty;
  const float frequency = params.frequency_penalty;
  if (presence != 0.0f || frequency != 0.0f) {
    for (int32_t t : output) {
      if (in_vocab(t, vocab)) ++counts_[t];
    }
    // The second pass applies each distinct token once and returns counts_ to zero.
    for (int32_t t : output) {
      if (!in_vocab(t, vocab) || counts_[t] == 0) continue;
      save_raw(logits, t);
      logits[t] = sanitize(logits[t] - (frequency * static_cast<float>(counts_[t]) + presence));
      counts_[t] = 0;
    }
  }
}

void Sampler::clear_marks(const SamplingParams& params, std::span<const int32_t> prompt,
                          std::span<const int32_t> output) {
  const int vocab = vocab_size_;
  for (const LogitBias& b : params.logit_bias) {
    if (in_vocab(b.token, vocab)) marks_[b.token] = 0;
  }
  for (int32_t t : prompt) {
    if (in_vocab(t, vocab)) marks_[t] = 0;
  }
  for (int32_t t : output) {
    if (in_vocab(t, vocab)) marks_[t] = 0;
  }
}

double Sampler::raw_logsumexp_and_top(const float* logits, size_t n, float raw_max, int n_top,
                                      SampleResult* result) {
  double lse = -std::numeric_limits<double>::infinity();
  if (raw_max > kNegInf) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += static_cast<double>(std::exp(logits[i] - raw_max));
    lse = static_cast<double>(raw_max) + std::log(sum);
  }

  // Best n_top by raw logit, lowest id first among equals: ids arrive in increasing order,
  // so a newcomer only displaces strictly smaller logits.
  std::array<TokenLogprob, kMaxLogprobs> best{};
  const size_t want = std::min(static_cast<size_t>(std::clamp(n_top, 0, kMaxLogprobs)), n);
  size_t have = 0;
  for (size_t i = 0; i < n && want > 0; ++i) {
    const float v = logits[i];
    if (have == want && !(v > best[have - 1].logprob)) continue;
    size_t pos = have < want ? have : want - 1;
    if (have < want) ++have;
    while (pos > 0 && v > best[pos - 1].logprob) {
      best[pos] = best[pos - 1];
      --pos;
    }
    best[pos] = TokenLogprob{static_cast<int32_t>(i), v};
  }

  if (result->top.capacity() < static_cast<size_t>(kMaxLogprobs)) result->top.reserve(kMaxLogprobs);
  result->top.clear();
  for (size_t i = 0; i < have; ++i) {
    const float v = best[i].logprob;
    const float lp = v == kNegInf ? kNegInf : static_cast<float>(static_cast<double>(v) - lse);
    result->top.push_back(TokenLogprob{best[i].token, lp});
  }
  return lse;
}

size_t Sampler::select_top_k(const float* logits, size_t k) {
  Candidate* c = candidates_.data();
  const size_t vocab = static_cast<size_t>(vocab_size_);
  // "a ranks before b": higher logit, then lower id.
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  };
  size_t n = 0;
  if (k <= vocab / 8) {
    // Bounded heap with the worst kept candidate on top; most tokens fail one compare.
    for (size_t i = 0; i < vocab; ++i) {
      const float v = logits[i];
      if (v == kNegInf) continue;
      if (n < k) {
        c[n++] = Candidate{v, static_cast<int32_t>(i)};
        std::push_heap(c, c + n, better);
      } else if (v > c[0].value) {  // a later id never wins a tie
        std::pop_heap(c, c + n, better);
        c[n - 1] = Candidate{v, static_cast<int32_t>(i)};
        std::push_heap(c, c + n, better);
      }
    }
    std::sort_heap(c, c + n, better);  // best first
    return n;
  }
  for (size_t i = 0; i < vocab; ++i) {
    if (logits[i] != kNegInf) c[n++] = Candidate{logits[i], static_cast<int32_t>(i)};
  }
  if (k < n) {
    std::nth_element(c, c + k, c + n, better);
    n = k;
  }
  std::sort(c, c + n, better);
  return n;
}

size_t Sampler::top_p_cut(size_t n, bool sorted, double target) {
  Candidate* c = candidates_.data();
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  };
  // Extends `cum` over the sorted range [from, to); the kept count once it reaches
  // target, 0 if it does not.
  double cum = 0.0;
  auto cut_in = [&](size_t from, size_t to) -> size_t {
    for (size_t i = from; i < to; ++i) {
      cum += static_cast<double>(c[i].value);
      if (cum >= target) return i + 1;
    }
    return 0;
  };
  if (sorted) {
    const size_t k = cut_in(0, n);
    return k != 0 ? k : n;
  }

  // Without sorting the vocabulary: bucket the probabilities by their float bit patterns
  // (monotonic for positive floats, 8 buckets per octave), find the bucket in which the
  // mass counted from the top reaches target, and sort only that bucket. Everything in
  // higher buckets is kept, in partition order (deterministic).
  std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
  for (size_t i = 0; i < n; ++i) bucket_mass_[prob_bucket(c[i].value)] += c[i].value;
  size_t b = kProbBuckets;
  double above = 0.0;
  while (b > 0) {
    --b;
    if (above + bucket_mass_[b] >= target) break;
    above += bucket_mass_[b];
  }
  const size_t hi = static_cast<size_t>(
      std::partition(c, c + n, [&](const Candidate& x) { return prob_bucket(x.value) > b; }) - c);
  const size_t mid = static_cast<size_t>(
      std::partition(c + hi, c + n, [&](const Candidate& x) { return prob_bucket(x.value) == b; }) -
      c);
  for (size_t i = 0; i < hi; ++i) cum += static_cast<double>(c[i].value);
  if (cum >= target) {
    // Only summation-order rounding lands here: the cut is inside the higher buckets.
    std::sort(c, c + hi, better);
    cum = 0.0;
    const size_t k = cut_in(0, hi);
    return k != 0 ? k : hi;
  }
  std::sort(c + hi, c + mid, better);
  if (const size_t k = cut_in(hi, mid); k != 0) return k;
  std::sort(c + mid, c + n, better);  // rounding again: continue into lower buckets
  const size_t k = cut_in(mid, n);
  return k != 0 ? k : n;
}

size_t Sampler::keep_candidates(const float* logits, float max_logit,
                                const SamplingParams& params) {
  Candidate* c = candidates_.data();
  const size_t vocab = static_cast<size_t>(vocab_size_);
  const float inv_t = 1.0f / params.temperature;
  auto prob = [&](float v) { return std::exp((v - max_logit) * inv_t); };

  // Candidates with their unnormalized probabilities exp((logit - max) / T); the max
  // token has exactly 1. `sorted`: in decreasing probability, lowest id first on ties.
  size_t n = 0;
  bool sorted = false;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) {
    n = select_top_k(logits, static_cast<size_t>(params.top_k));
    for (size_t i = 0; i < n; ++i) c[i].value = prob(c[i].value);
    while (n > 1 && c[n - 1].value == 0.0f) --n;
    sorted = true;
  } else {
    for (size_t i = 0; i < vocab; ++i) {
      if (logits[i] == kNegInf) continue;
      const float q = prob(logits[i]);
      if (q > 0.0f) c[n++] = Candidate{q, static_cast<int32_t>(i)};
    }
  }

  // Mass after top-k: top-p measures its nucleus against this.
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += static_cast<double>(c[i].value);

  // min-p keeps p >= min_p * p_max, a ratio unchanged by renormalization, so it can run
  // before top-p (shrinking what top-p must sort) and give the same set as after it.
  if (params.min_p > 0.0f) {
    const float threshold = params.min_p;  // p_max == 1
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (c[i].value >= threshold) c[kept++] = c[i];  // stable: sorted stays sorted
    }
    n = kept;
  }

  if (params.top_p < 1.0f) {
    n = top_p_cut(n, sorted, static_cast<double>(params.top_p) * total);
  }
  return n;
}

double Sampler::kept_mass(size_t n) const {
  double kept_total = 0.0;
  for (size_t i = 0; i < n; ++i) kept_total += static_cast<double>(candidates_[i].value);
  return kept_total;
}

int32_t Sampler::sample_from_distribution(const float* logits, float max_logit,
                                          const SamplingParams& params, double uniform) {
  const size_t n = keep_candidates(logits, max_logit, params);
  const Candidate* c = candidates_.data();
  const double kept_total = kept_mass(n);
  const double target = uniform * kept_total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += static_cast<double>(c[i].value);
    if (target < cum) return c[i].id;
  }
  return c[n - 1].id;  // rounding left target at the very top
}

size_t Sampler::process(float* x, const SamplingParams& params, std::span<const int32_t> prompt,
                        std::span<const int32_t> output, SampleResult* result, double* raw_lse) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  const float raw_max = sanitize_and_max(x, vocab);
  if (result != nullptr)
    *raw_lse = raw_logsumexp_and_top(x, vocab, raw_max, params.n_logprobs, result);
  apply_bias_and_penalties(x, params, prompt, output);
  // Lowest id on ties. If every token is -inf there is nothing to sample and token 0 wins.
  return argmax(x, vocab);
}

int32_t Sampler::sample(std::span<float> logits, const SamplingParams& params,
                        std::span<const int32_t> prompt, std::span<const int32_t> output,
                        uint64_t sample_index, uint64_t position, SampleResult* result) {
  check_size("Sampler::sample: logits", logits.size());
  float* x = logits.data();
  double raw_lse = 0.0;
  const size_t best = process(x, params, prompt, output, result, &raw_lse);
  int32_t token = static_cast<int32_t>(best);
  const float max_logit = x[best];
  if (!is_greedy(params) && max_logit > kNegInf) {
    token = sample_from_distribution(x, max_logit, params,
                                     counter_uniform(params.seed, sample_index, position));
  }

  if (result != nullptr) {
    result->token = token;
    result->logprob = token_logprob(raw_logit(x, token), raw_lse);
  }
  clear_marks(params, prompt, output);
  return token;
}

void Sampler::distribution(std::span<float> logits, const SamplingParams& params,
                           std::span<const int32_t> prompt, std::span<const int32_t> output,
                           std::span<float> probs) {
  check_size("Sampler::distribution: logits", logits.size());
  check_size("Sampler::distribution: probs", probs.size());
  float* x = logits.data();
  const size_t best = process(x, params, prompt, output, nullptr, nullptr);
  std::fill(probs.begin(), probs.end(), 0.0f);
  const float max_logit = x[best];
  if (!is_greedy(params) && max_logit > kNegInf) {
    // The very candidates and mass sample_from_distribution draws from.
    const size_t n = keep_candidates(x, max_logit, params);
    const double total = kept_mass(n);
    for (size_t i = 0; i < n; ++i) {
      const Candidate& c = candidates_[i];
      probs[static_cast<size_t>(c.id)] = static_cast<float>(static_cast<double>(c.value) / total);
    }
  } else {
    probs[best] = 1.0f;
  }
  clear_marks(params, prompt, output);
}

void Sampler::raw_logprobs(std::span<float> logits, int n_logprobs, int32_t token,
                           SampleResult* result) {
  if (!in_vocab(token, static_cast<int>(logits.size())))
    throw std::invalid_argument("Sampler::raw_logprobs: token " + std::to_string(token) +
                                " is outside the vocabulary [0, " + std::to_string(logits.size()) +
                                ")");
  float* x = logits.data();
  const float raw_max = sanitize_and_max(x, logits.size());
  const double lse = raw_logsumexp_and_top(x, logits.size(), raw_max, n_logprobs, result);
  result->token = token;
  result->logprob = token_logprob(x[token], lse);
}

void Sampler::check_size(const char* what, size_t n) const {
  if (n != static_cast<size_t>(vocab_size_))
    throw std::invalid_argument(std::string(what) + " size " + std::to_string(n) +
                                " != vocab size " + std::to_string(vocab_size_));
}

}  // namespace lift
