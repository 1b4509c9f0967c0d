// Building OpenAI-shaped responses and stream chunks from engine outputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace lift {

// Everything one sample accumulated, for the non-streamed response.
struct SampleAccum {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::none;
  int completion_tokens = 0;
};

class ResponseBuilder {
 public:
  ResponseBuilder(const ApiRequest& req, const Tokenizer& tok, std::string id, std::string model);

  // One streamed chunk for this output (text delta, logprobs, finish reason). With tools,
  // the text goes through the sample's tool-call parser: content and tool_calls deltas,
  // finish reason "tool_calls" when the reply called one; null when the parser holds back
  // all of the text and there is nothing else to say.
  nlohmann::json chunk(const RequestOutput& out);
  // Chat streams open with a chunk carrying the role.
  nlohmann::json role_chunk(int index) const;
  nlohmann::json usage_chunk(int prompt_tokens, int completion_tokens) const;
  nlohmann::json full(const std::vector<SampleAccum>& samples, int prompt_tokens) const;

 private:
  // `text_offset`: where the first token starts in the sample's text, in characters (code
  // points, as OpenAI's and vLLM's string indices); advanced past the tokens.
  nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lp, size_t& text_offset) const;
  nlohmann::json stream_logprobs(const RequestOutput& out);
  nlohmann::json base(const char* object) const;
  // The chat message of one finished sample: content and the tool calls parsed from it.
  nlohmann::json message(const SampleAccum& s, const char*& finish) const;

  const ApiRequest& req_;
  const Tokenizer& tok_;
  std::string id_, model_;
  int64_t created_;
  std::vector<ToolCallParser> parsers_;  // per sample, when the reply is parsed for tool calls
  std::vector<size_t> stream_offsets_;   // per sample: characters streamed with logprobs so far
};

const char* openai_finish_reason(FinishReason r);
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& param, const std::string& code);
// JSON text that is always valid UTF-8 (invalid bytes become U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace lift
