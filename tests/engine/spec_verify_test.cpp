#include "engine/spec_verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/rng.h"

namespace lift {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(int vocab, uint64_t seed, float scale = 4.0f) {
  std::vector<float> v(static_cast<size_t>(vocab));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((counter_uniform(seed, 991, i) * 2.0 - 1.0) * scale);
  return v;
}

void expect_same_result(const SampleResult& a, const SampleResult& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(std::bit_cast<uint32_t>(a.logprob), std::bit_cast<uint32_t>(b.logprob));
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token, b.top[i].token);
    EXPECT_EQ(std::bit_cast<uint32_t>(a.top[i].logprob), std::bit_cast<uint32_t>(b.top[i].logprob));
  }
}

// Regularized lower incomplete gamma P(a, x) by its power series (fine for the small a and
// x of these tests: the terms fall geometrically once n > x).
double lower_gamma_p(double a, double x) {
  if (x <= 0.0) return 0.0;
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 10000 && term > sum * 1e-17; ++n) {
    term *= x / (a + n);
    sum += term;
  }
  return std::exp(a * std::log(x) - x - std::lgamma(a)) * sum;
}

// The q-quantile of the chi-square distribution with `dof` degrees of freedom, by bisection
// on its CDF P(dof / 2, x / 2).
double chi_square_quantile(int dof, double q) {
  double lo = 0.0, hi = 1000.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (lower_gamma_p(dof / 2.0, mid / 2.0) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

TEST(SpecVerifyChiSquare, QuantileMatchesTables) {
  // Published 0.999 quantiles (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.4).
  EXPECT_NEAR(chi_square_quantile(1, 0.999), 10.828, 1e-3);
  EXPECT_NEAR(chi_square_quantile(7, 0.999), 24.322, 1e-3);
  EXPECT_NEAR(chi_square_quantile(11, 0.999), 31.264, 1e-3);
}

// Pearson's statistic of `counts` against `p` over n draws, and its degrees of freedom (the
// cells with p > 0, minus one). A count in a cell with p == 0 is an outright failure.
struct ChiSquare {
  double stat = 0.0;
  int dof = 0;
  double bound() const { return chi_square_quantile(dof, 0.999); }
};
ChiSquare chi_square(const std::vector<int>& counts, const std::vector<float>& p, int n) {
  ChiSquare r;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0f) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = static_cast<double>(p[i]) * n;
    const double d = counts[i] - e;
    r.stat += d * d / e;
    ++r.dof;
  }
  --r.dof;
  return r;
}

TEST(SpecVerifyHelpers, DrawFromNeverPicksZeroWeight) {
  const std::vector<float> p = {0.0f, 0.25f, 0.0f, 0.75f, 0.0f};
  EXPECT_EQ(draw_from(p, 0.0), 1);
  EXPECT_EQ(draw_from(p, 0.2499), 1);
  EXPECT_EQ(draw_from(p, 0.25), 3);
  EXPECT_EQ(draw_from(p, std::nextafter(1.0, 0.0)), 3);
  EXPECT_EQ(draw_from(p, 1.0), 3);  // beyond the range, rounding's worst case
  // Unnormalized weights draw the same.
  const std::vector<float> w = {0.0f, 1.0f, 0.0f, 3.0f, 0.0f};
  EXPECT_EQ(draw_from(w, 0.2), 1);
  EXPECT_EQ(draw_from(w, 0.3), 3);
  EXPECT_THROW(draw_from(std::vector<float>(4, 0.0f), 0.5), std::invalid_argument);
  EXPECT_THROW(draw_from(std::vector<float>{}, 0.5), std::invalid_argument);
}

TEST(SpecVerifyHelpers, MinTokensMaskBansEosAndStopIdsUntilMinTokens) {
  RequestParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {1, 4};
  std::vector<float> l(6, 0.5f);
  apply_min_tokens_mask(l, p, 3, 1);
  EXPECT_EQ(l, (std::vector<float>{0.5f, -kInf, 0.5f, -kInf, -kInf, 0.5f}));
  l.assign(6, 0.5f);
  apply_min_tokens_mask(l, p, 3, 2);  // min_tokens reached
  EXPECT_EQ(l, std::vector<float>(6, 0.5f));
  p.ignore_eos = true;
  apply_min_tokens_mask(l, p, 3, 0);
  EXPECT_EQ(l, (std::vector<float>{0.5f, -kInf, 0.5f, 0.5f, -kInf, 0.5f}));
  l.assign(6, 0.5f);
  p.ignore_eos = false;
  p.stop_token_ids.clear();
  apply_min_tokens_mask(l, p, -1, 0);  // no EOS in this vocabulary
  EXPECT_EQ(l, std::vector<float>(6, 0.5f));
}

// Greedy rows must be bitwise plain sampling: token, logprobs and the processed logits.
TEST(SpecVerifyGreedy, BitwiseEqualToSampleAndAcceptsIffEqual) {
  constexpr int kVocab = 300;
  Sampler sampler(kVocab);
  Sampler reference(kVocab);
  SpecVerifier verifier(sampler);
  const std::vector<int32_t> prompt = {5, 17, 17, 250};
  const std::vector<int32_t> output = {17, 42, 42};
  for (int variant = 0; variant < 2; ++variant) {
    SamplingParams params;
    params.temperature = variant == 0 ? 0.0f : 0.7f;
    params.top_k = variant == 0 ? 0 : 1;  // top_k 1 is greedy at any temperature
    params.repetition_penalty = 1.3f;
    params.frequency_penalty = 0.5f;
    params.n_logprobs = 5;
    for (uint64_t pos = 0; pos < 20; ++pos) {
      const std::vector<float> logits = random_logits(kVocab, pos);
      std::vector<float> a = logits, b = logits;
      SampleResult expected;
      const int32_t want = reference.sample(a, params, prompt, output, 1, pos, &expected);
      for (int32_t draft : {want, (want + 1) % kVocab, -1}) {
        b = logits;
        SampleResult got;
        bool accepted = true;
        const int32_t t =
            verifier.verify(b, params, prompt, output, 1, pos, draft, {}, &accepted, &got);
        EXPECT_EQ(t, want);
        EXPECT_EQ(accepted, draft == want);
        expect_same_result(got, expected);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
      }
    }
  }
}

// A point-mass draft under sampling is coupled to the plain draw: the verifier's token is
// sample()'s with the same uniform, bit for bit, whatever the draft; the draft stands iff it is
// that token. This is what makes seeded n-gram speculation reproduce plain decoding's text.
TEST(SpecVerifyPointMass, SampledRowIsSampleBitwiseForEveryDraft) {
  constexpr int kVocab = 40;  // few tokens: the likeliest is often the draw
  Sampler sampler(kVocab);
  Sampler reference(kVocab);
  SpecVerifier verifier(sampler);
  const std::vector<int32_t> prompt = {2, 9, 9, 31};
  const std::vector<int32_t> output = {9, 17, 17, 12};
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  params.min_p = 0.01f;
  params.repetition_penalty = 1.2f;
  params.presence_penalty = 0.3f;
  params.n_logprobs = 5;
  int n_accepted = 0;
  for (uint64_t pos = 0; pos < 40; ++pos) {
    params.seed = 900 + pos;
    const std::vector<float> logits = random_logits(kVocab, 500 + pos);
    std::vector<float> a = logits;
    SampleResult expected;
    const int32_t want = reference.sample(a, params, prompt, output, 3, pos, &expected);
    const auto best =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (int32_t draft : {want, best, (want + 7) % kVocab}) {
      std::vector<float> b = logits;
      SampleResult got;
      bool accepted = draft != want;  // the wrong answer, so a missing write shows
      const int32_t t =
          verifier.verify(b, params, prompt, output, 3, pos, draft, {}, &accepted, &got);
      EXPECT_EQ(t, want) << "position " << pos << " draft " << draft;
      EXPECT_EQ(accepted, draft == want);
      n_accepted += accepted && draft == best;
      expect_same_result(got, expected);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    }
  }
  // A draft of the likeliest token is sometimes the draw and sometimes not.
  EXPECT_GT(n_accepted, 0);
  EXPECT_LT(n_accepted, 40);
}

TEST(SpecVerifyBonus, BonusRowIsSampleBitwise) {
  constexpr int kVocab = 500;
  Sampler sampler(kVocab);
  Sampler reference(kVocab);
  SpecVerifier verifier(sampler);
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.9f;
  params.presence_penalty = 0.4f;
  params.seed = 1234;
  params.n_logprobs = 3;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const std::vector<int32_t> output = {7, 7, 9};
  for (uint64_t pos = 0; pos < 50; ++pos) {
    const std::vector<float> logits = random_logits(kVocab, 100 + pos);
    std::vector<float> a = logits, b = logits;
    SampleResult expected, got;
    const int32_t want = reference.sample(a, params, prompt, output, 2, pos, &expected);
    bool accepted = true;
    EXPECT_EQ(verifier.verify(b, params, prompt, output, 2, pos, -1, {}, &accepted, &got), want);
    EXPECT_FALSE(accepted);
    expect_same_result(got, expected);
  }
}

// A small vocabulary with a spread of logits (and one -inf) and a few option sets.
constexpr int kSmallVocab = 12;
const std::vector<float> kTargetLogits = {1.5f, 0.2f,  -0.7f, 2.1f, 0.9f, -kInf,
                                          0.0f, -1.8f, 1.1f,  0.4f, 3.0f, -0.3f};
const std::vector<int32_t> kPrompt = {3, 10, 0};
const std::vector<int32_t> kOutput = {10, 8, 8};

std::vector<SamplingParams> option_sets() {
  std::vector<SamplingParams> sets(4);
  sets[0].temperature = 1.0f;
  sets[1].temperature = 0.6f;
  sets[1].top_k = 6;
  sets[2].temperature = 1.4f;
  sets[2].top_p = 0.8f;
  sets[2].frequency_penalty = 0.7f;
  sets[3].temperature = 0.9f;
  sets[3].repetition_penalty = 1.5f;
  sets[3].min_p = 0.05f;
  sets[3].logit_bias = {{4, 1.0f}};
  for (size_t i = 0; i < sets.size(); ++i) sets[i].seed = 77 + i;
  return sets;
}

std::vector<float> target_distribution(Sampler& sampler, const SamplingParams& params) {
  std::vector<float> logits = kTargetLogits, p(kSmallVocab);
  sampler.distribution(logits, params, kPrompt, kOutput, p);
  return p;
}

struct DraftCase {
  std::string name;
  std::vector<float> q;  // empty: point mass at `point`
  int32_t point = -1;
};

// Draft distributions: near p, far from p (flat, also on tokens p excludes), with zeros
// where p is not zero, and point masses on the likeliest and on an unlikely kept token.
std::vector<DraftCase> draft_cases(const std::vector<float>& p) {
  std::vector<DraftCase> cases;
  std::vector<float> near = p;
  for (size_t i = 0; i < near.size(); ++i) near[i] = 0.8f * near[i] + 0.2f / kSmallVocab;
  cases.push_back({"near", near});
  cases.push_back({"flat", std::vector<float>(kSmallVocab, 1.0f / kSmallVocab)});
  std::vector<float> holes(kSmallVocab, 0.0f);
  holes[0] = 0.5f, holes[6] = 0.3f, holes[7] = 0.2f;  // misses the likeliest tokens
  cases.push_back({"holes", holes});
  const auto best = static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
  cases.push_back({"point-likely", {}, best});
  int32_t unlikely = best;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0.0f && p[i] < p[static_cast<size_t>(unlikely)]) unlikely = static_cast<int32_t>(i);
  }
  cases.push_back({"point-unlikely", {}, unlikely});
  return cases;
}

// One verifier row: the draft drawn from q, then the rule; returns the token that stands.
using Rule = std::function<int32_t(const SamplingParams&, uint64_t stream, int32_t draft,
                                   std::span<const float> q)>;

std::vector<int> frequencies(const SamplingParams& params, const DraftCase& c, int n,
                             const Rule& rule) {
  std::vector<int> counts(kSmallVocab, 0);
  for (int i = 0; i < n; ++i) {
    const auto stream = static_cast<uint64_t>(i);
    const int32_t draft =
        c.q.empty() ? c.point
                    : draw_from(c.q, spec_uniform(params.seed, SpecDraw::draft, stream, 4));
    ++counts[static_cast<size_t>(rule(params, stream, draft, c.q))];
  }
  return counts;
}

constexpr int kTrials = 20000;

// Also the acceptance rate: beta = sum_x min(p(x), q(x)) (p(x) for a point mass at x),
// within the two-sided normal interval that all 20 cases pass together with probability 0.999
// (z^2 is the chi-square quantile for 1 dof at 1 - 0.001 / 20).
TEST(SpecVerifyChiSquare, FirstTokenFollowsTargetForEveryDraft) {
  Sampler sampler(kSmallVocab);
  SpecVerifier verifier(sampler);
  int n_accepted = 0, n_flag_wrong = 0;  // accepted flags that disagree with t == draft
  const Rule rule = [&](const SamplingParams& params, uint64_t stream, int32_t draft,
                        std::span<const float> q) {
    std::vector<float> logits = kTargetLogits;
    bool accepted = false;
    const int32_t t =
        verifier.verify(logits, params, kPrompt, kOutput, stream, 4, draft, q, &accepted);
    n_flag_wrong += accepted != (t == draft);
    n_accepted += accepted;
    return t;
  };
  const double z = std::sqrt(chi_square_quantile(1, 1.0 - 0.001 / 20));
  for (const SamplingParams& params : option_sets()) {
    const std::vector<float> p = target_distribution(sampler, params);
    for (const DraftCase& c : draft_cases(p)) {
      n_accepted = n_flag_wrong = 0;
      const ChiSquare x = chi_square(frequencies(params, c, kTrials, rule), p, kTrials);
      EXPECT_LT(x.stat, x.bound()) << c.name << " T=" << params.temperature << " dof=" << x.dof;

      double beta = 0.0;
      for (size_t i = 0; i < p.size(); ++i)
        beta += c.q.empty() ? (static_cast<int32_t>(i) == c.point ? p[i] : 0.0f)
                            : std::min(p[i], c.q[i]);
      const double sd = std::sqrt(kTrials * beta * (1.0 - beta));
      EXPECT_NEAR(n_accepted, kTrials * beta, z * sd + 1.0) << c.name;
      EXPECT_EQ(n_flag_wrong, 0) << c.name;
    }
  }
}

// The same harness with the rule broken two ways must fail by far, so the test has power.
TEST(SpecVerifyChiSquare, BrokenRulesAreDetected) {
  Sampler sampler(kSmallVocab);
  const SamplingParams params = option_sets()[1];
  const std::vector<float> p = target_distribution(sampler, params);
  std::vector<float> scratch(kSmallVocab);
  auto target = [&](const SamplingParams& sp) {
    std::vector<float> logits = kTargetLogits;
    sampler.distribution(logits, sp, kPrompt, kOutput, scratch);
  };
  // Accepting every draft emits q.
  const Rule accept_always = [](const SamplingParams&, uint64_t, int32_t draft,
                                std::span<const float>) { return draft; };
  // The right accept test, but the rejected draw from p instead of max(0, p - q).
  const Rule residual_is_p = [&](const SamplingParams& sp, uint64_t stream, int32_t draft,
                                 std::span<const float> q) {
    target(sp);
    const auto x = static_cast<size_t>(draft);
    const double qx = q.empty() ? 1.0 : q[x];
    if (spec_uniform(sp.seed, SpecDraw::accept, stream, 4) * qx < scratch[x]) return draft;
    return draw_from(scratch, spec_uniform(sp.seed, SpecDraw::residual, stream, 4));
  };
  for (const DraftCase& c : draft_cases(p)) {
    for (const Rule* rule : {&accept_always, &residual_is_p}) {
      // Near p, rejections are rare and their draw from p is close to the residual's
      // mass anyway: too small an error for 20000 trials to show by a wide margin.
      if (rule == &residual_is_p && c.name == "near") continue;
      std::vector<int> counts = frequencies(params, c, kTrials, *rule);
      // Drafts on tokens p excludes would fail outright; fold them into the stat instead.
      double stat = 0.0;
      int dof = -1;
      for (size_t i = 0; i < p.size(); ++i) {
        const double e = std::max(static_cast<double>(p[i]) * kTrials, 0.5);
        stat += (counts[i] - e) * (counts[i] - e) / e;
        ++dof;
      }
      // Five times the bound: the weakest case (residual from p after a rarely accepted
      // point mass) measures about 190 against a bound of 31.
      EXPECT_GT(stat, 5 * chi_square_quantile(dof, 0.999))
          << c.name << (rule == &accept_always ? " accept-always" : " residual-is-p");
    }
  }
}

// distribution() is what sample() draws: empirically over seeds, and by construction against
// an independent softmax / top-k / top-p computation.
TEST(SpecVerifyDistribution, MatchesSampleAndSumsToOne) {
  Sampler sampler(kSmallVocab);
  for (const SamplingParams& base : option_sets()) {
    const std::vector<float> p = target_distribution(sampler, base);
    double sum = 0.0;
    for (float v : p) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    std::vector<int> counts(kSmallVocab, 0);
    for (int i = 0; i < kTrials; ++i) {
      std::vector<float> logits = kTargetLogits;
      SamplingParams params = base;
      params.seed = static_cast<uint64_t>(i);
      ++counts[static_cast<size_t>(sampler.sample(logits, params, kPrompt, kOutput, 0, 4))];
    }
    const ChiSquare x = chi_square(counts, p, kTrials);
    EXPECT_LT(x.stat, x.bound()) << "T=" << base.temperature;
  }
}

TEST(SpecVerifyDistribution, TopKTopPAndTemperatureByHand) {
  Sampler sampler(kSmallVocab);
  const std::vector<int32_t> none;
  auto dist = [&](const SamplingParams& params) {
    std::vector<float> logits = kTargetLogits, p(kSmallVocab);
    sampler.distribution(logits, params, none, none, p);
    return p;
  };
  auto softmax_over = [&](const std::vector<int32_t>& kept, double t) {
    std::vector<double> r(kSmallVocab, 0.0);
    double sum = 0.0;
    for (int32_t i : kept) sum += std::exp(kTargetLogits[static_cast<size_t>(i)] / t);
    for (int32_t i : kept)
      r[static_cast<size_t>(i)] = std::exp(kTargetLogits[static_cast<size_t>(i)] / t) / sum;
    return r;
  };
  // Tokens by decreasing logit: 10, 3, 0, 8, 4, 9, 1, 6, 11, 2, 7 (5 is -inf).
  SamplingParams k3;
  k3.temperature = 0.5f;
  k3.top_k = 3;
  std::vector<float> p = dist(k3);
  std::vector<double> want = softmax_over({10, 3, 0}, 0.5);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], want[i], 1e-6) << i;
  EXPECT_EQ(p[8], 0.0f);

  // At T = 1 the top-two mass is about 0.65 of the total, the top-three 0.76: top_p 0.7
  // keeps exactly three.
  SamplingParams nucleus;
  nucleus.top_p = 0.7f;
  p = dist(nucleus);
  want = softmax_over({10, 3, 0}, 1.0);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], want[i], 1e-6) << i;

  SamplingParams full;
  full.temperature = 2.0f;
  p = dist(full);
  want = softmax_over({0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11}, 2.0);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], want[i], 1e-6) << i;
  EXPECT_EQ(p[5], 0.0f);

  // Greedy and top_k 1: a point mass at the argmax.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  p = dist(greedy);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], i == 10 ? 1.0f : 0.0f);
}

// With logprobs requested, a sampled row reports for its token what sample() reports when
// sample() picks that token.
TEST(SpecVerifyLogprobs, RejectedAndAcceptedRowsReportAsSample) {
  Sampler sampler(kSmallVocab), reference(kSmallVocab);
  SpecVerifier verifier(sampler);
  SamplingParams params = option_sets()[3];
  params.n_logprobs = 4;
  const std::vector<float> q(kSmallVocab, 1.0f / kSmallVocab);
  int checked_accept = 0, checked_reject = 0;
  for (uint64_t stream = 0; stream < 40; ++stream) {
    const auto draft = static_cast<int32_t>(stream % kSmallVocab);
    std::vector<float> logits = kTargetLogits;
    SampleResult got;
    bool accepted = false;
    const int32_t t =
        verifier.verify(logits, params, kPrompt, kOutput, stream, 4, draft, q, &accepted, &got);
    (accepted ? checked_accept : checked_reject) += 1;
    // Find a seed for which sample() picks t and compare what it reports.
    bool found = false;
    for (uint64_t seed = 0; seed < 2000 && !found; ++seed) {
      SamplingParams sp = params;
      sp.seed = seed;
      std::vector<float> l = kTargetLogits;
      SampleResult expected;
      if (reference.sample(l, sp, kPrompt, kOutput, 0, 0, &expected) != t) continue;
      found = true;
      expect_same_result(got, expected);
    }
    EXPECT_TRUE(found) << "token " << t;
  }
  EXPECT_GT(checked_accept, 0);
  EXPECT_GT(checked_reject, 0);
}

TEST(SpecVerifyErrors, RejectsBadDraftAndSizes) {
  Sampler sampler(kSmallVocab);
  SpecVerifier verifier(sampler);
  const SamplingParams params;
  std::vector<float> logits = kTargetLogits;
  bool accepted = false;
  EXPECT_THROW(verifier.verify(logits, params, kPrompt, kOutput, 0, 0, kSmallVocab, {}, &accepted),
               std::invalid_argument);
  EXPECT_THROW(verifier.verify(logits, params, kPrompt, kOutput, 0, 0, -2, {}, &accepted),
               std::invalid_argument);
  const std::vector<float> short_q(3, 0.1f);
  EXPECT_THROW(verifier.verify(logits, params, kPrompt, kOutput, 0, 0, 1, short_q, &accepted),
               std::invalid_argument);
  std::vector<float> short_logits(5, 0.0f);
  EXPECT_THROW(verifier.verify(short_logits, params, kPrompt, kOutput, 0, 0, 1, {}, &accepted),
               std::invalid_argument);
  std::vector<float> p(3);
  EXPECT_THROW(sampler.distribution(logits, params, kPrompt, kOutput, p), std::invalid_argument);
}

}  // namespace
}  // namespace lift
