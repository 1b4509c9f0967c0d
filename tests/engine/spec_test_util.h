// Helpers shared by the speculative-decoding engine tests: every sample's output of a request,
// compared bitwise (tokens, text, finish, usage, logprobs), and jobs run on one engine.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace lift::test {

// One sample's whole output. `full` lists every chosen token, the stop token too (from the
// logprobs, which name it), so a proposer can replay the run.
struct Sample {
  std::vector<int32_t> tokens;
  std::vector<int32_t> full;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::none;
  int completion_tokens = 0;
};
using Result = std::vector<Sample>;  // by sample index

inline Result drain(OutputStream& s, int n) {
  Result r(static_cast<size_t>(n));
  while (auto o = s.pop(std::chrono::milliseconds(0))) {
    Sample& x = r.at(static_cast<size_t>(o->index));
    x.tokens.insert(x.tokens.end(), o->token_ids.begin(), o->token_ids.end());
    x.text += o->text;
    x.logprobs.insert(x.logprobs.end(), o->logprobs.begin(), o->logprobs.end());
    for (const TokenLogprobs& l : o->logprobs) x.full.push_back(l.token);
    if (o->finish != FinishReason::none) {
      x.finish = o->finish;
      x.completion_tokens = o->completion_tokens;
    }
  }
  return r;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

inline void expect_same(const Result& got, const Result& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t s = 0; s < got.size(); ++s) {
    const Sample& a = got[s];
    const Sample& b = want[s];
    const std::string where = what + " sample " + std::to_string(s);
    ASSERT_EQ(a.tokens, b.tokens) << where;
    ASSERT_EQ(a.text, b.text) << where;
    ASSERT_EQ(a.finish, b.finish) << where;
    ASSERT_EQ(a.completion_tokens, b.completion_tokens) << where;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << where;
    for (size_t i = 0; i < a.logprobs.size(); ++i) {
      ASSERT_EQ(a.logprobs[i].token, b.logprobs[i].token) << where << " position " << i;
      ASSERT_TRUE(same_bits(a.logprobs[i].logprob, b.logprobs[i].logprob))
          << where << " position " << i;
      ASSERT_EQ(a.logprobs[i].top.size(), b.logprobs[i].top.size()) << where;
      for (size_t j = 0; j < a.logprobs[i].top.size(); ++j) {
        ASSERT_EQ(a.logprobs[i].top[j].token, b.logprobs[i].top[j].token) << where;
        ASSERT_TRUE(same_bits(a.logprobs[i].top[j].logprob, b.logprobs[i].top[j].logprob))
            << where << " position " << i << " alternative " << j;
      }
    }
  }
}

inline void expect_all_blocks_back(const Engine& e) {
  EXPECT_EQ(e.blocks().n_used(), 0u);
  EXPECT_EQ(e.blocks().n_free() + e.blocks().n_cached(), e.blocks().n_total());
}

struct Job {
  std::vector<int32_t> prompt;
  RequestParams params;
};

// Runs the jobs on one engine, one at a time or all submitted at once.
inline std::vector<Result> run(LoadedModel& m, const EngineConfig& cfg, const std::vector<Job>& js,
                               bool together, EngineMetrics* metrics = nullptr) {
  std::vector<Result> out;
  Engine e(*m.model, m.tok, cfg);
  std::vector<Submitted> subs;
  for (const Job& j : js) {
    subs.push_back(e.add_request(j.prompt, j.params));
    if (!together) e.run_until_idle();
  }
  e.run_until_idle();
  for (size_t i = 0; i < js.size(); ++i) out.push_back(drain(*subs[i].stream, js[i].params.n));
  expect_all_blocks_back(e);
  if (metrics) *metrics = e.metrics();
  return out;
}

inline void expect_all_same(const std::vector<Result>& got, const std::vector<Result>& want,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect_same(got[i], want[i], what + " request " + std::to_string(i));
}

}  // namespace lift::test
