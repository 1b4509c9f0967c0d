// The engine on F16 weights, where machines with AMX compute prompt and generated tokens with
// different kernels (kernels::RowKind): batching, preemption with recomputation and prefix
// caching still give every request bitwise the logprobs it gets alone.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "test_compare.h"

namespace lift {
namespace {

test::LoadedModel& fx() {
  static test::LoadedModel f("quantized/stories260K-ffn192-F16.gguf");
  return f;
}

EngineConfig config(size_t kv_blocks) { return test::small_engine_config(kv_blocks, 48); }

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  // Bitwise, and never on nothing or on NaN (memcmp would accept both).
  bool operator==(const Result& o) const {
    return !tokens.empty() && tokens == o.tokens && test::same_bits(logprobs, o.logprobs);
  }
};

Result collect(OutputStream& s) {
  Result r;
  while (auto o = s.pop(std::chrono::milliseconds(0))) {
    r.tokens.insert(r.tokens.end(), o->token_ids.begin(), o->token_ids.end());
    for (const auto& lp : o->logprobs) r.logprobs.push_back(lp.logprob);
  }
  return r;
}

RequestParams params(int max_tokens, uint64_t seed) {
  RequestParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.logprobs = true;
  p.sampling.temperature = 0.9f;
  p.sampling.seed = seed;
  return p;
}

Result run_alone(const std::vector<int32_t>& prompt, const RequestParams& p) {
  Engine e(*fx().model, fx().tok, config(64));
  auto s = e.add_request(prompt, p);
  e.run_until_idle();
  return collect(*s.stream);
}

TEST(E2EEngineKinds, PreemptionAndBatchingKeepLogprobsBitwise) {
  std::mt19937 rng(21);
  std::vector<std::vector<int32_t>> prompts(16);
  std::vector<RequestParams> ps;
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i] = {1};
    const int len = std::uniform_int_distribution<int>(5, 70)(rng);
    for (int k = 1; k < len; ++k)
      prompts[i].push_back(std::uniform_int_distribution<int>(3, 511)(rng));
    ps.push_back(params(std::uniform_int_distribution<int>(10, 50)(rng), 500 + i));
  }
  Engine e(*fx().model, fx().tok, config(24));  // too few blocks: preemption
  std::vector<Submitted> subs;
  for (size_t i = 0; i < prompts.size(); ++i) subs.push_back(e.add_request(prompts[i], ps[i]));
  e.run_until_idle();
  EXPECT_GT(e.metrics().preemptions, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(collect(*subs[i].stream) == run_alone(prompts[i], ps[i])) << "request " << i;
  }
}

// A follow-up whose prompt repeats an earlier answer (a chat's next turn) computes the answer's
// tokens as prompt tokens; the cached K/V of the same tokens as generated ones must not be used.
TEST(E2EEngineKinds, FollowUpPromptMatchesAFreshEngine) {
  std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51};
  Engine e(*fx().model, fx().tok, config(64));
  auto first = e.add_request(prompt, params(40, 7));
  e.run_until_idle();
  const Result answer = collect(*first.stream);
  std::vector<int32_t> follow = prompt;
  follow.insert(follow.end(), answer.tokens.begin(), answer.tokens.end());
  follow.push_back(60);
  auto second = e.add_request(follow, params(20, 8));
  e.run_until_idle();
  EXPECT_TRUE(collect(*second.stream) == run_alone(follow, params(20, 8)));
}

}  // namespace
}  // namespace lift
