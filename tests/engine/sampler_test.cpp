#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/rng.h"

namespace lift {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Deterministic pseudo-random logits in [-scale, scale).
std::vector<float> random_logits(int vocab, uint64_t seed, float scale = 4.0f) {
  std::vector<float> v(static_cast<size_t>(vocab));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((counter_uniform(seed, 777, i) * 2.0 - 1.0) * scale);
  return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : logits) {
    EXPECT_FALSE(std::isnan(v));  // std::max would drop it
    mx = std::max(mx, static_cast<double>(v));
  }
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    p[i] = std::exp((static_cast<double>(logits[i]) - mx) / temperature);
    sum += p[i];
  }
  for (double& q : p) q /= sum;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// Draws `n` tokens at positions 0..n-1 and returns how often each token came up.
std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, const SamplingParams& p,
                           int n, uint64_t sample_index = 0) {
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> work;
  for (int i = 0; i < n; ++i) {
    work = logits;
    const int32_t t = s.sample(work, p, {}, {}, sample_index, static_cast<uint64_t>(i), nullptr);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, static_cast<int32_t>(logits.size()));
    ++counts[static_cast<size_t>(t)];
  }
  return counts;
}

double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * n;
    if (expected == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has zero probability";
      continue;
    }
    const double d = counts[i] - expected;
    chi2 += d * d / expected;
  }
  return chi2;
}

TEST(SamplerRng, CounterBasedUniformIsPureAndInRange) {
  EXPECT_EQ(counter_hash(1, 2, 3), counter_hash(1, 2, 3));
  EXPECT_NE(counter_hash(1, 2, 3), counter_hash(2, 2, 3));
  EXPECT_NE(counter_hash(1, 2, 3), counter_hash(1, 3, 3));
  EXPECT_NE(counter_hash(1, 2, 3), counter_hash(1, 2, 4));
  // Swapping stream and counter must not give the same draw.
  EXPECT_NE(counter_hash(0, 1, 2), counter_hash(0, 2, 1));
  double sum = 0.0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = counter_uniform(42, 0, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of 1e5 uniforms: standard deviation ~0.0009.
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
}

TEST(SamplerGreedy, PicksArgmaxWithLowestIdOnTies) {
  Sampler s(6);
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(logits, greedy(), {}, {}, 0, 0), 1);

  std::vector<float> all_equal(6, 0.25f);
  EXPECT_EQ(s.sample(all_equal, greedy(), {}, {}, 0, 0), 0);

  std::vector<float> with_nan = {kNaN, 0.5f, kNaN, -kInf, 0.75f, kNaN};
  EXPECT_EQ(s.sample(with_nan, greedy(), {}, {}, 0, 0), 4);
  EXPECT_EQ(with_nan[0], -kInf) << "NaN logits are treated as -inf";

  Sampler big(1000);
  auto r = random_logits(1000, 5);
  const auto expected = std::max_element(r.begin(), r.end()) - r.begin();
  EXPECT_EQ(big.sample(r, greedy(), {}, {}, 0, 0), expected);
}

TEST(SamplerSeed, SameInputsGiveSameTokensAndInputsMatter) {
  constexpr int kVocab = 64;
  const auto logits = random_logits(kVocab, 1, 1.0f);  // fairly flat: draws vary a lot
  SamplingParams p;
  p.seed = 1234;
  Sampler a(kVocab);
  Sampler b(kVocab);
  std::vector<int32_t> seq_a;
  std::vector<int32_t> other_seed;
  std::vector<int32_t> other_index;
  for (uint64_t pos = 0; pos < 200; ++pos) {
    auto w = logits;
    seq_a.push_back(a.sample(w, p, {}, {}, 0, pos));
    // The same draw from another Sampler, after unrelated work on it.
    auto noise = random_logits(kVocab, 99 + pos);
    SamplingParams q;
    q.seed = pos;
    q.top_k = 5;
    b.sample(noise, q, {}, {}, 3, pos);
    w = logits;
    EXPECT_EQ(b.sample(w, p, {}, {}, 0, pos), seq_a.back()) << "position " << pos;

    SamplingParams p2 = p;
    p2.seed = 1235;
    w = logits;
    other_seed.push_back(a.sample(w, p2, {}, {}, 0, pos));
    w = logits;
    other_index.push_back(a.sample(w, p, {}, {}, 1, pos));
  }
  auto differing = [&](const std::vector<int32_t>& v) {
    int d = 0;
    for (size_t i = 0; i < v.size(); ++i) d += v[i] != seq_a[i];
    return d;
  };
  // With ~64 roughly equiprobable tokens, two independent streams agree ~2-5% of the time.
  EXPECT_GT(differing(other_seed), 150);
  EXPECT_GT(differing(other_index), 150);
  const std::set<int32_t> distinct(seq_a.begin(), seq_a.end());
  EXPECT_GT(distinct.size(), 30u) << "draws must vary with position";
}

TEST(SamplerDistribution, MatchesSoftmaxAtTemperatureOne) {
  const std::vector<float> logits = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -3.0f, 1.5f, 0.0f};
  Sampler s(8);
  SamplingParams p;
  p.seed = 7;
  constexpr int kN = 100000;
  const auto counts = histogram(s, logits, p, kN);
  // 7 degrees of freedom: P(chi2 > 35) is about 1e-5.
  EXPECT_LT(chi_square(counts, softmax(logits), kN), 35.0);
}

TEST(SamplerDistribution, TemperatureScalesLogits) {
  const std::vector<float> logits = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -3.0f, 1.5f, 0.0f};
  Sampler s(8);
  constexpr int kN = 60000;
  for (float t : {0.5f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 11;
    const auto counts = histogram(s, logits, p, kN);
    EXPECT_LT(chi_square(counts, softmax(logits, t), kN), 35.0) << "T=" << t;
    // And clearly not the temperature-1 distribution.
    EXPECT_GT(chi_square(counts, softmax(logits, 1.0), kN), 500.0) << "T=" << t;
  }
  // Colder concentrates on the argmax (token 3), hotter spreads out.
  SamplingParams cold;
  cold.temperature = 0.25f;
  SamplingParams hot;
  hot.temperature = 4.0f;
  const auto c = histogram(s, logits, cold, 10000);
  const auto h = histogram(s, logits, hot, 10000);
  EXPECT_GT(c[3], h[3]);
  EXPECT_LT(c[5], h[5]);
}

TEST(SamplerTopK, TopKOneEqualsGreedy) {
  Sampler s(1000);
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 1.5f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto logits = random_logits(1000, seed);
    logits[17] = 10.0f;
    logits[400] = 10.0f;  // tie: lowest id wins, as in greedy
    auto g = logits;
    const int32_t expected = s.sample(g, greedy(), {}, {}, 0, 0);
    EXPECT_EQ(expected, 17);
    p.seed = seed;
    EXPECT_EQ(s.sample(logits, p, {}, {}, 0, seed), expected);
  }
}

TEST(SamplerTopK, NeverEmitsTokensOutsideTopK) {
  for (int vocab : {128000, 1000}) {
    // 128000 with k=40 takes the bounded-heap path, 1000 with k=600 the nth_element path.
    const int k = vocab == 1000 ? 600 : 40;
    const auto logits = random_logits(vocab, 3, 2.0f);
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    const std::set<int32_t> allowed(order.begin(), order.begin() + k);
    Sampler s(vocab);
    SamplingParams p;
    p.top_k = k;
    p.temperature = 50.0f;  // nearly flat, so excluded tokens would show up if allowed
    std::set<int32_t> seen;
    for (uint64_t pos = 0; pos < 3000; ++pos) {
      auto w = logits;
      const int32_t t = s.sample(w, p, {}, {}, 0, pos);
      ASSERT_TRUE(allowed.count(t)) << "token " << t << " is outside the top " << k;
      seen.insert(t);
    }
    EXPECT_GT(seen.size(), static_cast<size_t>(k) / 2);
  }
}

TEST(SamplerTopP, KeepsSmallestNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at shuffled ids.
  std::vector<double> probs = {0.15, 0.5, 0.05, 0.3};
  const auto logits = log_probs(probs);
  Sampler s(4);
  SamplingParams p;
  p.seed = 3;
  constexpr int kN = 20000;

  p.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  auto counts = histogram(s, logits, p, kN);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[1] / double(kN), 0.5 / 0.8, 0.02);
  EXPECT_NEAR(counts[3] / double(kN), 0.3 / 0.8, 0.02);

  p.top_p = 0.85f;  // needs 0.15 too
  counts = histogram(s, logits, p, kN);
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[0], 0);
  EXPECT_NEAR(counts[0] / double(kN), 0.15 / 0.95, 0.02);

  p.top_p = 1e-6f;  // only the most likely token
  counts = histogram(s, logits, p, 500);
  EXPECT_EQ(counts[1], 500);
}

TEST(SamplerTopP, LargeNucleusOverPermutedVocab) {
  // A geometric-ish distribution over a permuted 32000-token vocabulary, whose nucleus
  // needs well over the first 256-candidate chunk.
  constexpr int kVocab = 32000;
  std::vector<int32_t> perm(kVocab);
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size() - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(counter_hash(5, 5, i) % (i + 1));
    std::swap(perm[i], perm[j]);
  }
  std::vector<float> logits(kVocab);
  for (size_t r = 0; r < perm.size(); ++r)
    logits[static_cast<size_t>(perm[r])] = -static_cast<float>(r) * 1e-3f;  // rank r
  // Expected nucleus size for top_p = 0.5, from the same float probabilities.
  double total = 0.0;
  std::vector<double> p_rank(kVocab);
  for (size_t r = 0; r < p_rank.size(); ++r) {
    p_rank[r] = static_cast<double>(std::exp(logits[static_cast<size_t>(perm[r])]));
    total += p_rank[r];
  }
  size_t nucleus = 0;
  for (double cum = 0.0; cum < 0.5 * total; ++nucleus) cum += p_rank[nucleus];
  ASSERT_GT(nucleus, 500u);

  std::vector<size_t> rank_of(kVocab);
  for (size_t r = 0; r < perm.size(); ++r) rank_of[static_cast<size_t>(perm[r])] = r;
  Sampler s(kVocab);
  SamplingParams p;
  p.top_p = 0.5f;
  size_t max_rank = 0;
  for (uint64_t pos = 0; pos < 4000; ++pos) {
    auto w = logits;
    const int32_t t = s.sample(w, p, {}, {}, 0, pos);
    max_rank = std::max(max_rank, rank_of[static_cast<size_t>(t)]);
  }
  EXPECT_LT(max_rank, nucleus + 1);       // never past the nucleus (one token of float slack)
  EXPECT_GT(max_rank, nucleus * 9 / 10);  // and the tail of the nucleus does get drawn
}

TEST(SamplerTopP, TiesAtTheCutGoToLowerIds) {
  // 5000 equally likely tokens: the nucleus for 0.5 is exactly ids 0..2499.
  const std::vector<float> logits(5000, 1.5f);
  Sampler s(5000);
  SamplingParams p;
  p.top_p = 0.5f;
  int32_t max_seen = 0;
  for (uint64_t pos = 0; pos < 3000; ++pos) {
    auto w = logits;
    max_seen = std::max(max_seen, s.sample(w, p, {}, {}, 0, pos));
  }
  EXPECT_LT(max_seen, 2500);
  EXPECT_GT(max_seen, 2400);
}

TEST(SamplerMinP, DropsTokensBelowFractionOfMax) {
  std::vector<double> probs = {0.15, 0.5, 0.05, 0.3};
  const auto logits = log_probs(probs);
  Sampler s(4);
  SamplingParams p;
  constexpr int kN = 20000;

  p.min_p = 0.25f;  // threshold 0.125: drops only 0.05
  auto counts = histogram(s, logits, p, kN);
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / double(kN), 0.15 / 0.95, 0.02);

  p.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
  counts = histogram(s, logits, p, kN);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[3] / double(kN), 0.3 / 0.8, 0.02);

  p.min_p = 1.0f;
  counts = histogram(s, logits, p, 500);
  EXPECT_EQ(counts[1], 500);

  // Combined with top-k and top-p: the intersection of what each keeps.
  p.min_p = 0.25f;
  p.top_k = 3;
  p.top_p = 0.75f;
  counts = histogram(s, logits, p, kN);
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
}

TEST(SamplerPenalties, RepetitionPresenceFrequencyExactValues) {
  std::vector<float> logits = {1.0f, 2.0f, -1.0f, -2.0f, 4.0f, 0.5f, 3.0f, 0.0f};
  const std::vector<int32_t> prompt = {1, 2, 1};
  const std::vector<int32_t> output = {2, 4, 4, 5};
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(8);
  const int32_t t = s.sample(logits, p, prompt, output, 0, 0);
  const std::vector<float> expected = {
      1.0f,                         // untouched
      1.0f,                         // prompt only: 2 / 2 (once, although it occurs twice)
      -1.0f * 2 - 0.5f - 0.25f,     // prompt and output once: -1 * 2, then -(0.5 + 0.25 * 1)
      -2.0f,                        // untouched
      4.0f / 2 - 0.5f - 0.25f * 2,  // output twice
      0.5f / 2 - 0.5f - 0.25f,      // output once
      3.0f,                         // untouched
      0.0f,
  };
  EXPECT_EQ(logits, expected);
  EXPECT_EQ(t, 6);

  // Presence / frequency look only at the generated tokens, not the prompt.
  std::vector<float> l2 = {1.0f, 1.0f, 1.0f};
  SamplingParams q = greedy();
  q.presence_penalty = 1.0f;
  q.frequency_penalty = -0.5f;  // negative encourages repeats
  Sampler s3(3);
  s3.sample(l2, q, std::vector<int32_t>{0}, std::vector<int32_t>{1, 1, 1}, 0, 0);
  EXPECT_EQ(l2, (std::vector<float>{1.0f, 1.0f - 1.0f + 1.5f, 1.0f}));

  // Scratch state is cleared between calls: no penalties now, nothing changes.
  std::vector<float> l3 = {1.0f, 2.0f, -1.0f, -2.0f, 4.0f, 0.5f, 3.0f, 0.0f};
  const auto before = l3;
  s.sample(l3, greedy(), prompt, output, 0, 0);
  EXPECT_EQ(l3, before);
  // And the same penalized call again gives the same values.
  l3 = before;
  s.sample(l3, p, prompt, output, 0, 0);
  EXPECT_EQ(l3, expected);
}

TEST(SamplerPenalties, RepetitionPenaltyChangesGreedyChoice) {
  std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  SamplingParams p = greedy();
  p.repetition_penalty = 1.5f;  // 2 / 1.5 < 1.5
  Sampler s(3);
  EXPECT_EQ(s.sample(logits, p, std::vector<int32_t>{0}, {}, 0, 0), 1);
}

TEST(SamplerLogitBias, BiasAddsAndNegInfBans) {
  Sampler s(5);
  std::vector<float> logits = {0.0f, 5.0f, 1.0f, 0.5f, -1.0f};
  SamplingParams p = greedy();
  p.logit_bias = {{1, -kInf}, {4, 2.5f}};
  EXPECT_EQ(s.sample(logits, p, {}, {}, 0, 0), 4);
  EXPECT_EQ(logits[1], -kInf);
  EXPECT_EQ(logits[4], 1.5f);

  // Sampling never draws a banned token even when it dominates.
  SamplingParams q;
  q.logit_bias = {{1, -kInf}};
  const std::vector<float> base = {0.0f, 50.0f, 0.0f, 0.0f, 0.0f};
  const auto counts = histogram(s, base, q, 2000);
  EXPECT_EQ(counts[1], 0);
  EXPECT_GT(counts[0], 300);
}

TEST(SamplerEdgeCases, NaNAndInfLogits) {
  Sampler s(6);
  SamplingParams p;
  const std::vector<float> logits = {kNaN, 0.0f, -kInf, 0.0f, kNaN, -kInf};
  const auto counts = histogram(s, logits, p, 4000);
  EXPECT_EQ(counts[0] + counts[2] + counts[4] + counts[5], 0);
  EXPECT_NEAR(counts[1] / 4000.0, 0.5, 0.05);

  // A single finite token is always drawn, whatever the filters.
  p.top_p = 0.3f;
  p.min_p = 0.9f;
  const std::vector<float> one = {-kInf, kNaN, -kInf, 2.0f, -kInf, -kInf};
  EXPECT_EQ(histogram(s, one, p, 200)[3], 200);

  // +inf dominates: sampled always, logprob 0.
  SamplingParams r;
  SampleResult res;
  std::vector<float> inf = {1.0f, kInf, 3.0f, kNaN, 0.0f, 0.0f};
  EXPECT_EQ(s.sample(inf, r, {}, {}, 0, 0, &res), 1);
  EXPECT_EQ(res.logprob, 0.0f);
  std::vector<float> two_inf = {kInf, 1.0f, kInf, 0.0f, 0.0f, 0.0f};
  const auto c2 = histogram(s, two_inf, r, 2000);
  EXPECT_EQ(c2[0] + c2[2], 2000);
  EXPECT_GT(c2[0], 800);
  EXPECT_GT(c2[2], 800);

  // Nothing samplable: deterministic token 0, at any temperature.
  std::vector<float> none(6, -kInf);
  EXPECT_EQ(s.sample(none, r, {}, {}, 0, 0, &res), 0);
  EXPECT_EQ(res.logprob, -kInf);

  // Extremely small temperature behaves like greedy.
  SamplingParams cold;
  cold.temperature = 1e-6f;
  const std::vector<float> close = {1.0f, 1.0001f, 0.9f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(histogram(s, close, cold, 200)[1], 200);
}

TEST(SamplerLogprobs, RawLogSoftmaxOfChosenAndTopAlternatives) {
  constexpr int kVocab = 300;
  auto raw = random_logits(kVocab, 21);
  raw[10] = raw[20] = 9.0f;  // tie at the top: id 10 is listed first
  const auto expected_lp = softmax(raw);
  Sampler s(kVocab);
  SamplingParams p;
  p.n_logprobs = 5;
  p.temperature = 0.8f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.7f;
  p.logit_bias = {{10, -3.0f}, {42, 20.0f}};
  const std::vector<int32_t> output = {10, 20, 42, 7, 7};
  SampleResult res;
  std::set<int32_t> chosen;
  for (uint64_t pos = 0; pos < 200; ++pos) {
    auto w = raw;
    const int32_t t = s.sample(w, p, {}, output, 0, pos, &res);
    EXPECT_EQ(res.token, t);
    EXPECT_NEAR(res.logprob, std::log(expected_lp[static_cast<size_t>(t)]), 1e-5);
    chosen.insert(t);
  }
  EXPECT_TRUE(chosen.count(42)) << "a biased / penalized token is reported by raw logprob";

  std::vector<int32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return raw[static_cast<size_t>(a)] > raw[static_cast<size_t>(b)];
  });
  ASSERT_EQ(res.top.size(), 5u);
  EXPECT_EQ(res.top[0].token, 10);
  EXPECT_EQ(res.top[1].token, 20);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(res.top[i].token, order[i]);
    EXPECT_NEAR(res.top[i].logprob, std::log(expected_lp[static_cast<size_t>(order[i])]), 1e-5);
  }

  // n_logprobs = 0 reports none; a tiny vocabulary reports at most its size.
  p.n_logprobs = 0;
  auto w = raw;
  s.sample(w, p, {}, {}, 0, 0, &res);
  EXPECT_TRUE(res.top.empty());
  Sampler small(3);
  std::vector<float> l3 = {0.0f, -kInf, 1.0f};
  SamplingParams g = greedy();
  g.n_logprobs = 20;
  EXPECT_EQ(small.sample(l3, g, {}, {}, 0, 0, &res), 2);
  ASSERT_EQ(res.top.size(), 3u);
  EXPECT_EQ(res.top[0].token, 2);
  EXPECT_EQ(res.top[1].token, 0);
  EXPECT_EQ(res.top[2].token, 1);
  EXPECT_EQ(res.top[2].logprob, -kInf);
  EXPECT_NEAR(res.logprob, -std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(SamplerDeterminism, SameTokensAloneInBatchAndAfterRecompute) {
  constexpr int kVocab = 500;
  constexpr int kSteps = 60;
  // A toy "model": logits depend on the last token and position.
  auto model = [&](const std::vector<int32_t>& out, uint64_t pos) {
    return random_logits(kVocab, (out.empty() ? 0 : static_cast<uint64_t>(out.back())) * 1000 + pos,
                         3.0f);
  };
  SamplingParams p;
  p.seed = 77;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.frequency_penalty = 0.3f;
  p.repetition_penalty = 1.1f;
  const std::vector<int32_t> prompt = {1, 2, 3};

  auto run = [&](Sampler& s, std::vector<int32_t>& out, uint64_t index) {
    auto logits = model(out, out.size());
    out.push_back(s.sample(logits, p, prompt, out, index, out.size()));
  };

  // Alone.
  Sampler alone(kVocab);
  std::vector<int32_t> ref;
  for (int i = 0; i < kSteps; ++i) run(alone, ref, 0);

  // Interleaved in a batch with sample #1 of the same request and an unrelated request.
  Sampler batch(kVocab);
  std::vector<int32_t> a;
  std::vector<int32_t> b;
  std::vector<int32_t> other;
  for (int i = 0; i < kSteps; ++i) {
    run(batch, b, 1);
    run(batch, a, 0);
    auto l = model(other, other.size());
    SamplingParams q;
    q.seed = 5;
    other.push_back(batch.sample(l, q, {}, other, 0, other.size()));
  }
  EXPECT_EQ(a, ref);
  EXPECT_NE(b, ref);

  // Sample #1 recomputed on its own matches its batched run.
  Sampler solo(kVocab);
  std::vector<int32_t> b2;
  for (int i = 0; i < kSteps; ++i) run(solo, b2, 1);
  EXPECT_EQ(b2, b);

  // Preempted at step 25 and resumed from the recorded prefix on a fresh Sampler.
  Sampler resumed(kVocab);
  std::vector<int32_t> c(ref.begin(), ref.begin() + 25);
  while (c.size() < ref.size()) run(resumed, c, 0);
  EXPECT_EQ(c, ref);
}

TEST(SamplerParams, ValidateAcceptsGoodAndRejectsBad) {
  constexpr int kVocab = 100;
  EXPECT_EQ(SamplingParams{}.validate(kVocab), "");
  SamplingParams edge;
  edge.temperature = 0.0f;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.top_k = -1;
  edge.repetition_penalty = 0.5f;
  edge.presence_penalty = -2.0f;
  edge.frequency_penalty = 2.0f;
  edge.n_logprobs = kMaxLogprobs;
  edge.logit_bias = {{0, -kInf}, {99, 100.0f}};
  EXPECT_EQ(edge.validate(kVocab), "");

  auto rejects = [&](auto mutate) {
    SamplingParams p;
    mutate(p);
    return !p.validate(kVocab).empty();
  };
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.temperature = -0.1f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.temperature = kNaN; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.temperature = kInf; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.top_p = 0.0f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.top_p = 1.01f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.top_p = kNaN; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.min_p = -0.01f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.min_p = 1.5f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.repetition_penalty = 0.0f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.repetition_penalty = kInf; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.presence_penalty = 2.5f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.frequency_penalty = -2.5f; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.frequency_penalty = kNaN; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.n_logprobs = -1; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.n_logprobs = kMaxLogprobs + 1; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.logit_bias = {{100, 1.0f}}; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.logit_bias = {{3, kNaN}}; }));
  EXPECT_TRUE(rejects([](SamplingParams& p) { p.logit_bias = {{3, kInf}}; }));
  EXPECT_FALSE(SamplingParams{}.validate(0).empty());

  SamplingParams bad;
  bad.top_p = 2.0f;
  EXPECT_NE(bad.validate(kVocab).find("top_p"), std::string::npos) << bad.validate(kVocab);
}

TEST(SamplerParams, RejectsWrongLogitsSize) {
  Sampler s(10);
  std::vector<float> logits(9, 0.0f);
  EXPECT_THROW(s.sample(logits, SamplingParams{}, {}, {}, 0, 0), std::invalid_argument);
  EXPECT_THROW(Sampler(0), std::invalid_argument);
}

}  // namespace
}  // namespace lift
