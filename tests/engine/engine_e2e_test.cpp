// The engine end to end on stories260K: batching, preemption, aborts, forks and stop strings
// never change what a request gets, and every KV block comes back.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
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

// Two requests compute the same 2-block prefix in one step; the second goes on to 2 more
// blocks. A third request sharing the second's 4 blocks finds all of them in the cache.
TEST(E2EEngine, PrefixComputedTwiceInOneStepServesALongerPromptLater) {
  Engine e(*fx().model, fx().tok, small_config(64));
  std::vector<int32_t> shared = {1};
  for (int i = 0; i < 31; ++i) shared.push_back(300 + i);  // 2 blocks
  std::vector<int32_t> a = shared, b = shared;
  a.push_back(400);
  for (int i = 0; i < 33; ++i) b.push_back(100 + i);  // 2 more blocks + 1 token
  RequestParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  auto sa = e.add_request(a, p);
  auto sb = e.add_request(b, p);
  ASSERT_TRUE(e.step());  // both prompts in one forward pass (64 + 33 tokens)
  e.run_until_idle();
  const uint64_t hits_before = e.metrics().prefix_hits;
  std::vector<int32_t> c(b.begin(), b.begin() + 64);
  c.push_back(450);
  c.push_back(451);
  auto sc = e.add_request(c, p);
  e.run_until_idle();
  int cached = -1;
  while (auto o = sc.stream->pop(std::chrono::milliseconds(0))) {
    if (o->finish != FinishReason::none) cached = o->cached_tokens;
  }
  EXPECT_EQ(cached, 64);
  EXPECT_EQ(e.metrics().prefix_hits - hits_before, 64u);
  expect_all_blocks_back(e);
}

// The greedy continuation of "Once upon a time" is ", there was a little girl named Lily."
// in the tokens ",", "▁there", "▁was", "▁a", "▁little", "▁g", "ir", "l", ... A stop string
// counts only when it ends in the text of output token min_tokens or later (vLLM).
Collected greedy_with_stop(const std::string& stop, int min_tokens) {
  Engine e(*fx().model, fx().tok, small_config(64));
  RequestParams p;
  p.max_tokens = 30;
  p.min_tokens = min_tokens;
  p.sampling.temperature = 0;
  p.stop = {stop};
  auto s = e.add_request("Once upon a time", p);
  e.run_until_idle();
  expect_all_blocks_back(e);
  return drain(*s.stream);
}

TEST(E2EEngine, MinTokensHoldsBackStopStrings) {
  Collected c = greedy_with_stop("there", 0);
  EXPECT_EQ(c.text.at(0), ", ");
  EXPECT_EQ(c.tokens.at(0).size(), 2u);
  EXPECT_EQ(c.finish.at(0), FinishReason::stop);
  // "there" ends in output token 2: with min_tokens 2 it stops there, with 3 it is text.
  c = greedy_with_stop("there", 2);
  EXPECT_EQ(c.text.at(0), ", ");
  EXPECT_EQ(c.finish.at(0), FinishReason::stop);
  c = greedy_with_stop("there", 3);
  EXPECT_GE(c.tokens.at(0).size(), 3u);
  EXPECT_EQ(c.text.at(0).rfind(", there was a little girl", 0), 0u) << c.text.at(0);
  // "little girl" begins in token 5 and ends in token 8: min_tokens 6 still stops on it,
  // min_tokens 9 does not.
  c = greedy_with_stop("little girl", 6);
  EXPECT_EQ(c.text.at(0), ", there was a ");
  EXPECT_EQ(c.tokens.at(0).size(), 8u);
  EXPECT_EQ(c.finish.at(0), FinishReason::stop);
  c = greedy_with_stop("little girl", 9);
  EXPECT_GE(c.tokens.at(0).size(), 9u);
  EXPECT_EQ(c.text.at(0).rfind(", there was a little girl named", 0), 0u) << c.text.at(0);
}

// Gauges and latencies count requests: n = 4 samples are one running request with one time
// to first token and one end-to-end latency.
TEST(E2EEngine, MetricsCountRequestsNotSamples) {
  Engine e(*fx().model, fx().tok, small_config(128));
  RequestParams p;
  p.n = 4;
  p.max_tokens = 8;
  p.ignore_eos = true;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 5;
  auto s = e.add_request("Once upon a time", p);
  while (e.metrics().generation_tokens < 4) ASSERT_TRUE(e.step());
  EXPECT_EQ(e.metrics().running, 1u);
  EXPECT_EQ(e.metrics().waiting, 0u);
  e.run_until_idle();
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.generation_tokens, 32u);
  EXPECT_EQ(m.ttft.count(), 1u);
  EXPECT_EQ(m.e2e.count(), 1u);
  EXPECT_EQ(m.queue_time.count(), 1u);
  EXPECT_EQ(m.requests_finished, 1u);
  EXPECT_EQ(m.running, 0u);
  EXPECT_EQ(drain(*s.stream).finish.size(), 4u);
}

// Prefix-cache queries count every prompt token looked up, hits the tokens found.
TEST(E2EEngine, PrefixCacheQueriesCountPromptTokens) {
  Engine e(*fx().model, fx().tok, small_config(64));
  std::vector<int32_t> prompt = {1};
  for (int i = 0; i < 39; ++i) prompt.push_back(200 + i);  // 40 tokens: 2 full blocks + 8
  RequestParams p;
  p.max_tokens = 2;
  e.add_request(prompt, p);
  e.run_until_idle();
  EXPECT_EQ(e.metrics().prefix_queries, 40u);
  EXPECT_EQ(e.metrics().prefix_hits, 0u);
  e.add_request(prompt, p);
  e.run_until_idle();
  EXPECT_EQ(e.metrics().prefix_queries, 80u);
  EXPECT_EQ(e.metrics().prefix_hits, 32u);
}

// An aborted request is not a finished one: no success, no end-to-end latency.
TEST(E2EEngine, AbortedRequestsAreNotCountedAsFinished) {
  Engine e(*fx().model, fx().tok, small_config(64));
  RequestParams p;
  p.n = 2;
  p.max_tokens = 40;
  p.ignore_eos = true;
  auto s = e.add_request("Once upon a time", p);
  while (e.metrics().generation_tokens < 4) ASSERT_TRUE(e.step());
  e.abort(s.id);
  e.run_until_idle();
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.requests_finished, 0u);
  EXPECT_EQ(m.e2e.count(), 0u);
  EXPECT_EQ(m.ttft.count(), 1u);
  const Collected c = drain(*s.stream);
  EXPECT_EQ(c.finish.at(0), FinishReason::abort);
  EXPECT_EQ(c.finish.at(1), FinishReason::abort);
  expect_all_blocks_back(e);
}

// Finished requests are counted by their reason; a request of n samples once.
TEST(E2EEngine, FinishedRequestsCountedByReason) {
  Engine e(*fx().model, fx().tok, small_config(64));
  RequestParams p;
  p.max_tokens = 30;
  p.sampling.temperature = 0;
  p.stop = {"girl"};
  e.add_request("Once upon a time", p);  // stops at "girl"
  p.stop.clear();
  p.max_tokens = 3;
  p.n = 3;
  p.sampling.temperature = 1;
  p.ignore_eos = true;
  e.add_request("Once upon a time", p);  // 3 samples, each to max_tokens
  e.run_until_idle();
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.requests_stop, 1u);
  EXPECT_EQ(m.requests_length, 1u);
  EXPECT_EQ(m.requests_finished, 2u);
  EXPECT_EQ(m.requests_aborted, 0u);
  EXPECT_EQ(m.e2e.count(), 2u);
  EXPECT_EQ(m.ttft.count(), 2u);
}

// n samples run as n sequences: more than --max-seqs could never be admitted.
TEST(E2EEngine, MoreSamplesThanMaxSeqsIsRejected) {
  EngineConfig c = small_config(64);
  c.scheduler.max_seqs = 3;
  Engine e(*fx().model, fx().tok, c);
  RequestParams p;
  p.max_tokens = 4;
  p.n = 4;
  EXPECT_THROW(e.add_request("Once upon a time", p), Error);
  p.n = 3;
  auto s = e.add_request("Once upon a time", p);
  e.run_until_idle();
  EXPECT_EQ(drain(*s.stream).finish.size(), 3u);
  EXPECT_FALSE(e.priority_scheduling());
}

// Waits (bounded) until every sample of a stream has finished; the finish reasons seen.
std::vector<FinishReason> wait_closed(OutputStream& s, std::chrono::milliseconds limit) {
  std::vector<FinishReason> finishes;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!s.done() && std::chrono::steady_clock::now() < end) {
    if (auto o = s.pop(std::chrono::milliseconds(20))) {
      if (o->finish != FinishReason::none) finishes.push_back(o->finish);
    }
  }
  return finishes;
}

TEST(E2EEngine, RequestAddedAfterStopGetsAFinalOutput) {
  Engine e(*fx().model, fx().tok, small_config(64));
  e.start();
  e.stop();
  RequestParams p;
  p.n = 2;
  p.max_tokens = 4;
  auto s = e.add_request("Once upon a time", p);
  const auto finishes = wait_closed(*s.stream, std::chrono::milliseconds(2000));
  EXPECT_TRUE(s.stream->done());
  EXPECT_EQ(finishes, (std::vector<FinishReason>{FinishReason::abort, FinishReason::abort}));
  // A restarted engine serves again.
  e.start();
  auto t = e.add_request("Once upon a time", p);
  const auto served = wait_closed(*t.stream, std::chrono::milliseconds(20000));
  EXPECT_EQ(served, (std::vector<FinishReason>{FinishReason::length, FinishReason::length}));
  e.stop();
}

// Threads keep submitting while the engine stops: every stream still closes, each sample
// with a final output (served, or aborted by the stop).
TEST(E2EEngine, RequestsRacingStopAllGetAFinalOutput) {
  for (int round = 0; round < 4; ++round) {
    Engine e(*fx().model, fx().tok, small_config(128));
    e.start();
    std::atomic<bool> go{false};
    std::vector<std::vector<Submitted>> subs(3);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < subs.size(); ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        RequestParams p;
        p.max_tokens = 3;
        p.n = 1 + static_cast<int>(t % 2);
        for (int i = 0; i < 40; ++i) {
          subs[t].push_back(e.add_request(std::vector<int32_t>{1, 300 + i, 301}, p));
          if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
    }
    go.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + round * 2));
    e.stop();
    for (auto& th : threads) th.join();
    for (size_t t = 0; t < subs.size(); ++t) {
      for (size_t i = 0; i < subs[t].size(); ++i) {
        const auto finishes = wait_closed(*subs[t][i].stream, std::chrono::milliseconds(2000));
        ASSERT_TRUE(subs[t][i].stream->done()) << "round " << round << " thread " << t << " #" << i;
        EXPECT_EQ(finishes.size(), 1 + t % 2);
      }
    }
    expect_all_blocks_back(e);
  }
}

}  // namespace
}  // namespace lift
