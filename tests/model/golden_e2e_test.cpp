// Golden runs on the real stories260K weights: the token ids recorded from llama2.c's run.c
// (see ../shared/models/README.md) must come out exactly, with and without the KV cache.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

struct Record {
  std::vector<int32_t> prompt_ids, generated_ids;
};

Record load_record(const std::string& name) {
  const auto& r = test::stories260k_run(name);
  return {r["prompt_ids"].get<std::vector<int32_t>>(),
          r["generated_ids"].get<std::vector<int32_t>>()};
}

std::vector<int32_t> greedy(LlamaModel& m, Backend& be, std::vector<int32_t> prompt, size_t n,
                            bool use_cache) {
  GenerationRequest req;
  req.prompt = std::move(prompt);
  req.max_tokens = static_cast<int>(n);
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  req.use_kv_cache = use_cache;
  return generate(m, be, req).tokens;
}

TEST(E2EGolden, PromptedGreedyMatchesRecord) {
  auto model = LlamaModel::load(test::model_path("stories260K/stories260K.gguf"));
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  const Record rec = load_record("prompt_once_upon_a_time_greedy_60");
  const auto prompt = tok.encode("Once upon a time", true, false);
  ASSERT_EQ(prompt, rec.prompt_ids);
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  const size_t n = 56;
  const std::vector<int32_t> want(rec.generated_ids.begin(), rec.generated_ids.begin() + n);
  EXPECT_EQ(greedy(*model, *be, prompt, n, true), want);
  EXPECT_EQ(greedy(*model, *be, prompt, n, false), want);
}

TEST(E2EGolden, NoPromptGreedy256MatchesRecord) {
  auto model = LlamaModel::load(test::model_path("stories260K/stories260K.gguf"));
  const Record rec = load_record("doc_greedy_no_prompt");
  ASSERT_EQ(rec.generated_ids.size(), 256u);
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  EXPECT_EQ(greedy(*model, *be, {1}, 256, true), rec.generated_ids);
  EXPECT_EQ(greedy(*model, *be, {1}, 256, false), rec.generated_ids);
  auto ref = make_reference_backend();
  EXPECT_EQ(greedy(*model, *ref, {1}, 256, true), rec.generated_ids);
}

TEST(E2EGolden, SeededSamplingRepeatsExactly) {
  auto model = LlamaModel::load(test::model_path("stories260K/stories260K.gguf"));
  ThreadPool pool1(1), pool2(2);
  auto be1 = make_cpu_backend(pool1);
  auto be2 = make_cpu_backend(pool2);
  GenerationRequest req;
  req.prompt = {1, 403, 407, 261, 378};
  req.max_tokens = 64;
  req.ignore_eos = true;
  req.sampling.temperature = 1.0f;
  req.sampling.top_p = 0.9f;
  req.sampling.seed = 1234;
  const auto a = generate(*model, *be1, req).tokens;
  const auto b = generate(*model, *be2, req).tokens;
  EXPECT_EQ(a, b);
  req.sampling.seed = 1235;
  EXPECT_NE(generate(*model, *be2, req).tokens, a);
}

}  // namespace
}  // namespace lift

namespace lift {
namespace {

// Random weights over the real 32000-token Llama 2 vocabulary at a high temperature produce
// plenty of byte tokens that do not form valid UTF-8: the streamed text must still be valid.
TEST(E2EGolden, HighTemperatureRandomModelStreamsValidUtf8) {
  auto model = LlamaModel::load(test::model_path("llama-2-tiny-random/llama-2-tiny-random.gguf"));
  const Tokenizer tok = Tokenizer::from_gguf(model->file());
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  GenerationRequest req;
  req.prompt = tok.encode("Hello", true, false);
  req.max_tokens = 500;
  req.ignore_eos = true;
  req.sampling.temperature = 1.5f;
  req.sampling.seed = 7;
  StreamDecoder dec(tok, false);
  std::string text;
  size_t byte_tokens = 0;
  const auto res = generate(*model, *be, req, [&](int32_t t) {
    const std::string piece = dec.push(t);
    EXPECT_TRUE(is_valid_utf8(piece));
    EXPECT_LE(dec.pending_bytes(), 3u);
    text += piece;
    byte_tokens += tok.vocab().is_byte(t) ? 1 : 0;
    return true;
  });
  text += dec.flush();
  EXPECT_EQ(res.tokens.size(), 500u);
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_GT(byte_tokens, 0u) << "the test should exercise byte tokens";
}

}  // namespace
}  // namespace lift
