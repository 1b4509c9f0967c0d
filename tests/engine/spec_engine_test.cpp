// Speculative decoding inside the continuous batch: greedy output and logprobs are bitwise
// those of plain decoding for every proposer and K, alone, batched, under preemption and
// aborts; sampled output keeps the target's distribution; acceptance behaves as the model
// of spec_controller.h says; every KV block comes back.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/ngram_proposer.h"
#include "engine/rng.h"
#include "engine_test_util.h"
#include "spec_test_util.h"
#include "util/error.h"

namespace lift {
namespace {

test::LoadedModel& fx() {
  static test::LoadedModel f("stories260K/stories260K.gguf");
  return f;
}

using test::expect_all_blocks_back;
using test::expect_same;
using test::Job;
using test::Result;

// Prompts that repeat themselves (n-gram lookup finds matches) and ones that do not.
std::vector<Job> jobs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Job> out(n);
  for (size_t i = 0; i < n; ++i) {
    Job& j = out[i];
    j.prompt = {1};
    const int period = std::uniform_int_distribution<int>(2, 9)(rng);
    const int len = std::uniform_int_distribution<int>(4, 70)(rng);
    std::vector<int32_t> motif;
    for (int k = 0; k < period; ++k)
      motif.push_back(std::uniform_int_distribution<int>(3, 511)(rng));
    for (int k = 1; k < len; ++k) {
      j.prompt.push_back(i % 3 == 2 ? std::uniform_int_distribution<int>(3, 511)(rng)
                                    : motif[static_cast<size_t>(k % period)]);
    }
    j.params.max_tokens = std::uniform_int_distribution<int>(1, 70)(rng);
    j.params.ignore_eos = i % 4 != 0;
    j.params.sampling.temperature = 0;
    j.params.logprobs = true;
    j.params.sampling.n_logprobs = 2;
    if (i % 5 == 1) j.params.sampling.repetition_penalty = 1.3f;  // history-dependent rows
    if (i % 7 == 3) j.params.min_tokens = 5;
  }
  return out;
}

EngineConfig config(size_t kv_blocks, SpecMethod method, size_t k, bool adaptive = false) {
  EngineConfig c = test::small_engine_config(kv_blocks, 32);
  c.spec.method = method;
  c.spec.max_tokens = k;
  c.spec.adaptive = adaptive;
  return c;
}

std::vector<Result> run(const EngineConfig& cfg, const std::vector<Job>& js, bool together,
                        EngineMetrics* metrics = nullptr) {
  return test::run(fx(), cfg, js, together, metrics);
}

// Proposes the continuation of a known greedy run, each token right with probability alpha
// (a fixed function of the sequence's prompt length and position), else a wrong one: the
// acceptance of every draft token is then known.
class OracleProposer final : public Proposer {
 public:
  OracleProposer(std::map<size_t, std::vector<int32_t>> runs, double alpha, int vocab)
      : runs_(std::move(runs)), alpha_(alpha), vocab_(vocab) {}
  std::string_view name() const override { return "oracle"; }
  void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override {
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Sequence& s = *reqs[i].seq;
      const std::vector<int32_t>& run = runs_.at(s.n_prompt);
      bool right = true;
      size_t k = 0;
      for (size_t p = s.tokens.size(); k < reqs[i].max_tokens && p < run.size(); ++p, ++k) {
        right = right && counter_uniform(77, s.n_prompt, p) < alpha_;
        drafts[i].tokens.push_back(right ? run[p] : (run[p] + 1) % vocab_);
      }
      ks.push_back(k);
    }
  }
  std::vector<size_t> ks;  // every draft's length

 private:
  std::map<size_t, std::vector<int32_t>> runs_;  // by prompt length: prompt + greedy output
  double alpha_;
  int vocab_;
};

TEST(SpecEngine, NgramLookupFindsTheLatestLongestMatch) {
  std::vector<int32_t> out;
  const std::vector<int32_t> t = {5, 6, 7, 1, 5, 6, 8, 2, 5, 6};
  NgramProposer::lookup(t, 1, 3, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{8, 2, 5}));  // "5 6" last seen before 8 2 5
  out.clear();
  NgramProposer::lookup(std::vector<int32_t>{3, 4, 3, 4}, 1, 4, 5, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 3, 4, 3}));  // the copy runs into itself
  out.clear();
  NgramProposer::lookup(std::vector<int32_t>{1, 2, 3, 4}, 1, 4, 3, out);
  EXPECT_TRUE(out.empty());
}

TEST(SpecEngine, GreedyEqualsPlainForEveryProposerAndK) {
  const auto js = jobs(18, 4);
  const auto plain_alone = run(config(256, SpecMethod::off, 1), js, false);
  const auto plain_batch = run(config(256, SpecMethod::off, 1), js, true);
  for (size_t i = 0; i < js.size(); ++i) expect_same(plain_alone[i], plain_batch[i], "plain");
  for (size_t k : {1, 3, 8}) {
    for (bool together : {false, true}) {
      EngineMetrics m;
      const auto spec = run(config(256, SpecMethod::ngram, k), js, together, &m);
      for (size_t i = 0; i < js.size(); ++i) {
        expect_same(spec[i], plain_alone[i],
                    "ngram K=" + std::to_string(k) + " together=" + std::to_string(together) +
                        " request " + std::to_string(i));
      }
      EXPECT_GT(m.spec.draft_tokens, 0u);
      EXPECT_GT(m.spec.accepted_tokens, 0u) << "K=" << k;
      EXPECT_EQ(m.spec.proposer, "ngram");
    }
  }
}

TEST(SpecEngine, GreedyEqualsPlainUnderPreemptionAndPerRequestK) {
  auto js = jobs(24, 9);
  for (size_t i = 0; i < js.size(); ++i) {
    js[i].params.max_tokens = 60 + static_cast<int>(i % 3) * 20;
    js[i].params.spec_tokens = static_cast<int>(i % 4) * 3 - 1;  // -1 (default), 2, 5, 8
  }
  const auto plain = run(config(256, SpecMethod::off, 1), js, true);
  EngineMetrics m;
  // 30 blocks of 16 tokens hold a few of these at a time: sequences are preempted mid-draft.
  const auto spec = run(config(30, SpecMethod::ngram, 4), js, true, &m);
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_GT(m.spec.accepted_tokens, 0u);
  for (size_t i = 0; i < js.size(); ++i) {
    expect_same(spec[i], plain[i], "preempted request " + std::to_string(i));
  }
}

TEST(SpecEngine, AbortsMidDraftReturnEveryBlock) {
  auto js = jobs(24, 13);
  for (auto& j : js) j.params.max_tokens = 120;
  Engine e(*fx().model, fx().tok, config(200, SpecMethod::ngram, 8));
  e.start();
  std::vector<Submitted> subs;
  for (const Job& j : js) subs.push_back(e.add_request(j.prompt, j.params));
  std::mt19937 rng(3);
  for (size_t i = 0; i < subs.size(); i += 2) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    e.abort(subs[i].id);
  }
  std::vector<Result> got(subs.size(), Result(1));
  for (size_t i = 0; i < subs.size(); ++i) {
    while (!subs[i].stream->done()) {
      if (auto o = subs[i].stream->pop(std::chrono::milliseconds(50))) {
        test::Sample& x = got[i][0];
        x.tokens.insert(x.tokens.end(), o->token_ids.begin(), o->token_ids.end());
        x.text += o->text;
        x.logprobs.insert(x.logprobs.end(), o->logprobs.begin(), o->logprobs.end());
        if (o->finish != FinishReason::none) {
          x.finish = o->finish;
          x.completion_tokens = o->completion_tokens;
        }
      }
    }
  }
  e.stop();
  expect_all_blocks_back(e);
  // The requests not aborted are untouched by the others' aborts.
  std::vector<Job> kept;
  for (size_t i = 1; i < js.size(); i += 2) kept.push_back(js[i]);
  const auto plain = run(config(256, SpecMethod::off, 1), kept, true);
  for (size_t i = 1, k = 0; i < js.size(); i += 2, ++k) {
    expect_same(got[i], plain[k], "kept request " + std::to_string(i));
  }
}

TEST(SpecEngine, MeanAcceptedLengthFollowsTheAcceptanceRate) {
  // Greedy runs to draft from, then an oracle right with probability alpha per token: a draft
  // of k tokens keeps sum_{j=1..k} alpha^j of them on average, (1 - a^(K+1)) / (1 - a) tokens
  // per step with the target's own, for a fixed K.
  std::vector<Job> js(6);
  std::map<size_t, std::vector<int32_t>> runs;
  for (size_t i = 0; i < js.size(); ++i) {
    js[i].prompt = {1};
    for (size_t t = 0; t < 3 + i; ++t) js[i].prompt.push_back(static_cast<int32_t>(40 + 7 * t));
    js[i].params.max_tokens = 200;
    js[i].params.ignore_eos = true;
    js[i].params.sampling.temperature = 0;
  }
  const auto plain = run(config(256, SpecMethod::off, 1), js, true);
  for (size_t i = 0; i < js.size(); ++i) {
    auto r = js[i].prompt;
    r.insert(r.end(), plain[i][0].tokens.begin(), plain[i][0].tokens.end());
    runs[js[i].prompt.size()] = r;
  }
  const size_t K = 4;
  for (double alpha : {0.5, 0.8}) {
    auto oracle = std::make_shared<OracleProposer>(runs, alpha, fx().model->config().n_vocab);
    EngineConfig c = config(256, SpecMethod::custom, K);
    c.spec.proposer = oracle;
    EngineMetrics m;
    const auto spec = run(c, js, true, &m);
    for (size_t i = 0; i < js.size(); ++i) {
      EXPECT_EQ(spec[i][0].tokens, plain[i][0].tokens) << "alpha " << alpha;
    }
    double expect = 0, var = 0;
    size_t full = 0;
    for (size_t k : oracle->ks) {
      // Accepted count: j w.p. a^j (1 - a) for j < k, k w.p. a^k.
      double mean = 0, sq = 0;
      for (size_t j = 0; j <= k; ++j) {
        const double pj = std::pow(alpha, j) * (j < k ? 1 - alpha : 1.0);
        mean += pj * static_cast<double>(j);
        sq += pj * static_cast<double>(j * j);
      }
      expect += mean;
      var += sq - mean * mean;
      full += k == K;
    }
    ASSERT_EQ(m.spec.drafts, oracle->ks.size());
    EXPECT_GT(full, oracle->ks.size() * 8 / 10);  // nearly every draft had K tokens
    EXPECT_NEAR(static_cast<double>(m.spec.accepted_tokens), expect, 4 * std::sqrt(var))
        << "alpha " << alpha;
    const double formula = (1 - std::pow(alpha, K + 1)) / (1 - alpha);
    EXPECT_NEAR(m.spec.mean_accepted_length(), formula, 0.15 * formula) << "alpha " << alpha;
  }
}

TEST(SpecEngine, ControllerTurnsSpeculationDownWhenStepsAreComputeBound) {
  SpecConfig sc;
  sc.method = SpecMethod::ngram;
  sc.max_tokens = 8;
  NgramProposer ngram(1, 4);
  RequestState req;
  req.params.max_tokens = 1000;
  auto make = [&](size_t n) {
    std::vector<std::unique_ptr<Sequence>> seqs;
    for (size_t i = 0; i < n; ++i) {
      auto s = std::make_unique<Sequence>();
      s->req = &req;
      s->status = SeqStatus::running;
      s->tokens = {1, 2, 3, 4};
      s->n_prompt = 2;
      s->n_computed = 3;
      s->spec_accepted = 8;  // a history of good drafts
      s->spec_seen = 10;
      seqs.push_back(std::move(s));
    }
    return seqs;
  };
  auto plan = [&](SpecController& c, size_t n) {
    auto seqs = make(n);
    std::vector<Sequence*> running;
    for (auto& s : seqs) running.push_back(s.get());
    c.plan(running, n, 4096, ngram);
    size_t k = 0;
    for (auto* s : running) k += s->spec_k;
    return k;
  };
  // Memory-bound: a pass costs about the same for 1..64 tokens.
  SpecController flat(sc, 512);
  for (size_t n = 1; n <= 64; ++n) flat.observe_step(n, 0.010 + 0.0001 * static_cast<double>(n));
  EXPECT_GE(plan(flat, 1), 4u);
  // Compute-bound: every token costs its share.
  SpecController linear(sc, 512);
  for (size_t n = 1; n <= 512; ++n) linear.observe_step(n, 0.001 * static_cast<double>(n));
  EXPECT_EQ(plan(linear, 16), 0u);
  // Nothing measured yet: plain decode first.
  SpecController fresh(sc, 512);
  EXPECT_EQ(plan(fresh, 1), 0u);
  // A draft the target keeps turning down is dropped, even where steps are cheap.
  for (int i = 0; i < 50; ++i) {
    Sequence s;
    flat.observe_draft(s, 4, 0, true);
  }
  auto seqs = make(1);
  seqs[0]->spec_accepted = 0;
  seqs[0]->spec_seen = 20;
  std::vector<Sequence*> running{seqs[0].get()};
  flat.plan(running, 1, 4096, ngram);
  EXPECT_LE(running[0]->spec_k, 1u);  // at most a probe
}

// Token 1 comes from the prefill; token 2 is verified against a proposal (K = 1: max_tokens 3
// leaves room for the bonus token). Among the runs whose token 1 is the likeliest one, token
// 2's frequencies must follow p(. | prompt, x1), which the model gives directly.
class NextTokenDistribution : public ::testing::TestWithParam<std::string> {};

TEST_P(NextTokenDistribution, SampledWithSpeculationFollowsTheTarget) {
  const std::vector<int32_t> prompt = fx().tok.encode("Once upon a time, there was a", true, false);
  RequestParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  p.sampling.temperature = 1.0f;
  p.sampling.top_k = 6;
  const size_t n = 2500;
  ThreadPool pool(1);
  auto be = make_cpu_backend(pool);
  std::vector<float> last;
  GenerationRequest g;
  g.prompt = prompt;
  g.max_tokens = 1;
  g.sampling.temperature = 0;
  const int32_t x1 = generate(*fx().model, *be, g).tokens.at(0);
  g.prompt.push_back(x1);
  generate(*fx().model, *be, g, {},
           [&](std::span<const float> l) { last.assign(l.begin(), l.end()); });
  Sampler sampler(fx().model->config().n_vocab);
  std::vector<float> dist(last.size());
  const std::vector<int32_t> out1 = {x1};
  sampler.distribution(last, p.sampling, prompt, out1, dist);
  const auto likeliest =
      static_cast<int32_t>(std::max_element(dist.begin(), dist.end()) - dist.begin());

  class Fixed final : public Proposer {
   public:
    explicit Fixed(int32_t t) : t_(t) {}
    std::string_view name() const override { return "fixed"; }
    void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override {
      for (size_t i = 0; i < reqs.size(); ++i) drafts[i].tokens.push_back(t_);
    }

   private:
    int32_t t_;
  };
  EngineConfig c = config(512, SpecMethod::custom, 1);
  std::unique_ptr<LlamaModel> draft;
  if (GetParam() == "point-mass") {
    c.spec.proposer = std::make_shared<Fixed>(likeliest);
  } else {
    // A real q: the 4-layer cut of stories260K, sampled with the same options.
    draft = LlamaModel::load(test::model_path("stories260K/stories260K-draft-L4.gguf"));
    c.spec.method = SpecMethod::draft;
    c.spec.draft_model = draft.get();
  }
  Engine e(*fx().model, fx().tok, c);
  std::vector<Submitted> subs;
  for (size_t i = 0; i < n; ++i) {
    RequestParams q = p;
    q.sampling.seed = 5000 + i;
    subs.push_back(e.add_request(prompt, q));
  }
  e.run_until_idle();
  std::map<int32_t, double> counts;
  double total = 0;
  for (auto& s : subs) {
    const std::vector<int32_t> r = test::drain(*s.stream, 1)[0].tokens;
    ASSERT_EQ(r.size(), 3u);
    if (r[0] != x1) continue;
    counts[r[1]] += 1;
    total += 1;
  }
  const SpecDecodeMetrics& m = e.metrics().spec;
  EXPECT_GE(m.drafts, n);  // every request verified a draft at token 2
  EXPECT_GT(m.accepted_tokens, 0u);
  EXPECT_LT(m.accepted_tokens, m.draft_tokens);  // and some were rejected
  ASSERT_GT(total, 500);
  double chi2 = 0;
  size_t cells = 0;
  for (size_t t = 0; t < dist.size(); ++t) {
    const auto id = static_cast<int32_t>(t);
    if (dist[t] == 0) {
      EXPECT_EQ(counts.count(id), 0u) << "token " << t << " is outside the top-k";
      continue;
    }
    const double want = dist[t] * total;
    const double got = counts.count(id) ? counts[id] : 0;
    chi2 += (got - want) * (got - want) / want;
    ++cells;
  }
  // 6 cells, 5 degrees of freedom: the 0.999 quantile of chi-square(5) is 20.52.
  ASSERT_EQ(cells, 6u);
  EXPECT_LT(chi2, 20.52) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(SpecEngine, NextTokenDistribution,
                         ::testing::Values("point-mass", "draft-model"));

}  // namespace
}  // namespace lift
