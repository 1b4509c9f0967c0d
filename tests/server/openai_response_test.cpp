// The response side of completions: logprobs' text_offset counts characters (code points, as
// OpenAI's and vLLM's string indices) and runs on across streamed chunks.
#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/openai_request.h"
#include "test_paths.h"

namespace lift {
namespace {

using nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST(CompletionLogprobs, TextOffsetsCountCharactersAndRunOnAcrossChunks) {
  const Tokenizer tok = Tokenizer::load(test::model_path("vocab/ggml-vocab-qwen2.gguf"));
  const std::vector<int32_t> ids = tok.encode("naïve café, 日本語 ok", false, false);
  ApiRequest req;
  req.params.n = 1;
  req.params.logprobs = true;
  SampleAccum whole;
  for (int32_t t : ids) whole.logprobs.push_back({t, -1.0f, {}});
  whole.completion_tokens = static_cast<int>(ids.size());
  whole.finish = FinishReason::length;
  ResponseBuilder rb(req, tok, "id", "m");
  const json lp = rb.full({whole}, 1)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["text_offset"].size(), ids.size());
  size_t at = 0;
  bool wide = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], at) << i;
    const std::string piece = lp["tokens"][i];
    wide = wide || piece.size() != code_points(piece);
    at += code_points(piece);
  }
  EXPECT_TRUE(wide) << "no token with a multi-byte character: the test checks nothing";

  // Streamed one token a chunk: the same offsets.
  ResponseBuilder stream(req, tok, "id", "m");
  json offsets = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    RequestOutput o;
    o.logprobs = {whole.logprobs[i]};
    o.text = lp["tokens"][i];
    if (i + 1 == ids.size()) o.finish = FinishReason::length;
    const json chunk = stream.chunk(o);
    for (const json& x : chunk["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(x);
  }
  EXPECT_EQ(offsets, lp["text_offset"]);
}

}  // namespace
}  // namespace lift
