// The engine end to end on stories260K: batching, preemption, aborts, forks and stop strings
// never change what a request gets, and every KV block comes back.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "engine/generate.h"
#include "engine_test_util.h"
#include "test_paths.h"
#include "util/error.h"

namespace lift {
namespace {

test::LoadedModel& fx() {
  static test::LoadedModel f("stories260K/stories260K.gguf");
  return f;
}

EngineConfig small_config(size_t kv_blocks) { return test::small_engine_config(kv_blocks); }

struct Collected {
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, std::string> text;
  std::map<int, FinishReason> finish;
};

Collected drain(OutputStream& s) {
  Collected c;
  while (auto o = s.pop(std::chrono::milliseconds(0))) {
    auto& t = c.tokens[o->index];
    t.insert(t.end(), o->token_ids.begin(), o->token_ids.end());
    c.text[o->index] += o->text;
    if (o->finish != FinishReason::none) c.finish[o->index] = o->finish;
  }
  return c;
}

struct Job {
  std::vector<int32_t> prompt;
  RequestParams params;
};

std::vector<Job> random_jobs(size_t n, uint32_t seed, bool sampled) {
  std::mt19937 rng(seed);
  std::vector<Job> jobs(n);
  for (size_t i = 0; i < n; ++i) {
    const int len = std::uniform_int_distribution<int>(1, 90)(rng);
    jobs[i].prompt = {1};
    for (int k = 1; k < len; ++k)
      jobs[i].prompt.push_back(std::uniform_int_distribution<int>(3, 511)(rng));
    jobs[i].params.max_tokens = std::uniform_int_distribution<int>(1, 60)(rng);
    jobs[i].params.ignore_eos = true;
    jobs[i].params.sampling.temperature = sampled ? 0.9f : 0.0f;
    jobs[i].params.sampling.seed = 1000 + i;
  }
  return jobs;
}

std::vector<int32_t> run_alone(const Job& j) {
  Engine e(*fx().model, fx().tok, small_config(64));
  auto s = e.add_request(j.prompt, j.params);
  e.run_until_idle();
  return drain(*s.stream).tokens[0];
}

void expect_all_blocks_back(const Engine& e) {
  EXPECT_EQ(e.blocks().n_used(), 0u);
  EXPECT_EQ(e.blocks().n_free() + e.blocks().n_cached(), e.blocks().n_total());
}

TEST(E2EEngine, ConcurrentRequestsMatchAloneGreedyAndSeeded) {
  for (bool sampled : {false, true}) {
    const auto jobs = random_jobs(64, sampled ? 7 : 3, sampled);
    Engine e(*fx().model, fx().tok, small_config(512));
    std::vector<Submitted> subs;
    for (const Job& j : jobs) subs.push_back(e.add_request(j.prompt, j.params));
    e.run_until_idle();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Collected c = drain(*subs[i].stream);
      EXPECT_EQ(c.tokens.at(0), run_alone(jobs[i])) << "request " << i << " sampled " << sampled;
      EXPECT_EQ(c.finish.at(0), FinishReason::length);
    }
    expect_all_blocks_back(e);
  }
}

TEST(E2EEngine, PreemptionKeepsOutputsIdentical) {
  const auto jobs = random_jobs(24, 11, true);
  // 40 blocks of 16 tokens: far too few for 24 requests of up to 150 tokens at once.
  Engine e(*fx().model, fx().tok, small_config(40));
  std::vector<Submitted> subs;
  for (const Job& j : jobs) subs.push_back(e.add_request(j.prompt, j.params));
  e.run_until_idle();
  EXPECT_GT(e.metrics().preemptions, 0u);
  EXPECT_GT(e.metrics().recomputed_tokens, 0u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(drain(*subs[i].stream).tokens.at(0), run_alone(jobs[i])) << "request " << i;
  }
  expect_all_blocks_back(e);
}

TEST(E2EEngine, RequestThatCanNeverFitIsRejected) {
  Engine e(*fx().model, fx().tok, small_config(4));
  RequestParams p;
  p.max_tokens = 200;
  EXPECT_THROW(e.add_request(std::vector<int32_t>{1, 400}, p), Error);
  EXPECT_THROW(e.add_request(std::vector<int32_t>{}, p), Error);
  EXPECT_THROW(e.add_request(std::vector<int32_t>(2048, 300), p), Error);
  EXPECT_THROW(e.add_request(std::vector<int32_t>{1, 9999}, p), Error);
}

TEST(E2EEngine, AbortsAtRandomPointsReturnEveryBlock) {
  const auto jobs = random_jobs(32, 5, true);
  Engine e(*fx().model, fx().tok, small_config(120));
  e.start();
  std::vector<Submitted> subs;
  for (const Job& j : jobs) subs.push_back(e.add_request(j.prompt, j.params));
  std::mt19937 rng(9);
  for (size_t i = 0; i < subs.size(); i += 2) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    e.abort(subs[i].id);
  }
  for (auto& s : subs) {
    while (!s.stream->done()) s.stream->pop(std::chrono::milliseconds(50));
  }
  e.stop();
  expect_all_blocks_back(e);
}

TEST(E2EEngine, ParallelSamplesShareThePromptAndDiffer) {
  Engine e(*fx().model, fx().tok, small_config(256));
  RequestParams p;
  p.n = 4;
  p.max_tokens = 24;
  p.ignore_eos = true;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 42;
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 63; ++i) prompt.push_back(300 + i);  // 4 full blocks
  auto s = e.add_request(prompt, p);
  // Run until the prompt is prefilled and the samples forked, then look at the blocks.
  while (e.metrics().generation_tokens < 4) e.step();
  // 4 samples of 64 prompt tokens + 1: unshared they would need 4 * 5 blocks.
  EXPECT_LE(e.blocks().n_used(), 4u + 4u);
  e.run_until_idle();
  const Collected c = drain(*s.stream);
  ASSERT_EQ(c.tokens.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& [i, t] : c.tokens) {
    EXPECT_EQ(t.size(), 24u);
    distinct.insert(t);
  }
  EXPECT_EQ(distinct.size(), 4u);
  expect_all_blocks_back(e);
}

TEST(E2EEngine, StopStringsSplitAcrossTokens) {
  // Greedy from "Once upon a time" gives ", there was a little girl named Lily. She loved..."
  Engine e(*fx().model, fx().tok, small_config(64));
  RequestParams p;
  p.max_tokens = 40;
  p.sampling.temperature = 0;
  p.stop = {"ittle gi"};  // starts inside the token "▁little" and ends inside "▁girl"
  auto s = e.add_request("Once upon a time", p);
  e.run_until_idle();
  const Collected c = drain(*s.stream);
  EXPECT_EQ(c.text.at(0), ", there was a l");
  EXPECT_EQ(c.finish.at(0), FinishReason::stop);
  expect_all_blocks_back(e);
}

TEST(E2EEngine, StreamedTextEqualsDecodedTokens) {
  Engine e(*fx().model, fx().tok, small_config(64));
  RequestParams p;
  p.max_tokens = 50;
  p.sampling.temperature = 0;
  auto s = e.add_request("Once upon a time", p);
  e.run_until_idle();
  const Collected c = drain(*s.stream);
  StreamDecoder d(fx().tok, false);
  std::string want;
  for (int32_t t : c.tokens.at(0)) want += d.push(t);
  want += d.flush();
  EXPECT_EQ(c.text.at(0), want);
  EXPECT_EQ(c.text.at(0).rfind(", there was a little girl named Lily.", 0), 0u);
}

}  // namespace
}  // namespace lift
