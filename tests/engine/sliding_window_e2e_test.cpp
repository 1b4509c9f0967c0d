// The engine on a model whose every layer slides (archs-phi3: window 20): a long generation
// holds O(window) KV blocks, gives the same tokens as generate() (which never releases a block),
// and every block comes back, with prefix caching, forks and preemption in play.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/generate.h"
#include "engine_test_util.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

test::LoadedModel& fx() {
  static test::LoadedModel f("archs/archs-phi3.gguf");
  return f;
}

std::vector<int32_t> prompt(size_t n, int32_t salt) {
  std::vector<int32_t> p{1};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(100 + (i * 37 + salt) % 3000));
  return p;
}

RequestParams greedy(int max_tokens) {
  RequestParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.sampling.temperature = 0;
  return p;
}

std::vector<int32_t> alone(const std::vector<int32_t>& toks, int max_tokens) {
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool, BackendOptions{});
  GenerationRequest req;
  req.prompt = toks;
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  req.sampling.temperature = 0;
  return generate(*fx().model, *be, req).tokens;
}

std::vector<int32_t> tokens_of(OutputStream& s) {
  std::vector<int32_t> t;
  while (auto o = s.pop(std::chrono::milliseconds(0))) {
    t.insert(t.end(), o->token_ids.begin(), o->token_ids.end());
  }
  return t;
}

TEST(E2ESlidingWindow, LongGenerationHoldsWindowBlocksAndMatchesGenerate) {
  ASSERT_EQ(fx().model->config().kv_window(), 20);
  EngineConfig c = test::small_engine_config(64, 16);
  Engine e(*fx().model, fx().tok, c);
  // A chunk of 16 from position a reads back to a - 19: 35 positions, at most 4 blocks.
  EXPECT_EQ(e.plan().seq_blocks, 4u);
  EXPECT_EQ(e.max_model_len(), 4096u);  // 64 blocks hold a sequence of the whole context
  const auto p = prompt(40, 1);
  auto s = e.add_request(p, greedy(300));
  size_t most = 0;
  while (e.step()) most = std::max(most, e.blocks().n_used());
  EXPECT_LE(most, 4u);
  EXPECT_EQ(tokens_of(*s.stream), alone(p, 300));
  EXPECT_EQ(e.blocks().n_used(), 0u);
  EXPECT_EQ(e.blocks().n_available(), e.blocks().n_total());
}

TEST(E2ESlidingWindow, ManySequencesInAFewWindowsOfBlocks) {
  // 12 blocks: three sequences' windows; seven requests (two with n = 2) of 30..90-token
  // prompts sharing a 32-token prefix, generating 60 each.
  Engine e(*fx().model, fx().tok, test::small_engine_config(12, 16));
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Submitted> subs;
  const auto shared = prompt(32, 5);
  for (int i = 0; i < 7; ++i) {
    auto p = shared;
    const auto tail = prompt(static_cast<size_t>(10 * i), 50 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    RequestParams params = greedy(60);
    if (i % 3 == 1) params.n = 2;
    prompts.push_back(p);
    subs.push_back(e.add_request(p, params));
  }
  e.run_until_idle();
  EXPECT_GT(e.metrics().preemptions, 0u);
  EXPECT_GT(e.metrics().prefix_hits, 0u);
  for (size_t i = 0; i < subs.size(); ++i) {
    const auto want = alone(prompts[i], 60);
    std::vector<std::vector<int32_t>> got(2);
    while (auto o = subs[i].stream->pop(std::chrono::milliseconds(0))) {
      auto& g = got.at(static_cast<size_t>(o->index));
      g.insert(g.end(), o->token_ids.begin(), o->token_ids.end());
    }
    EXPECT_EQ(got[0], want) << "request " << i;
    if (i % 3 == 1) {
      EXPECT_EQ(got[1], want) << "request " << i << " sample 1";
    }
  }
  EXPECT_EQ(e.blocks().n_used(), 0u);
  EXPECT_EQ(e.blocks().n_available(), e.blocks().n_total());
}

}  // namespace
}  // namespace lift
