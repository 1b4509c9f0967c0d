// Parsing and validation of OpenAI completion and chat-completion requests into engine
// requests. Every problem becomes an ApiError that names the field and says what to fix.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lift {

struct ApiRequest {
  bool chat = false;
  std::vector<int32_t> prompt;
  RequestParams params;  // logprobs: params.logprobs and params.sampling.n_logprobs
  bool stream = false;
  bool include_usage = false;
};

struct ApiContext {
  const Tokenizer& tok;
  ChatFormat chat_format;
  int context_length;
  int vocab_size;
};

// body: the raw request body. Throws ApiError.
ApiRequest parse_completion_request(const std::string& body, const ApiContext& ctx);
ApiRequest parse_chat_request(const std::string& body, const ApiContext& ctx);

// Parses a JSON object body, with a 400 ApiError for malformed JSON or a non-object.
nlohmann::json parse_json_object(const std::string& body);

}  // namespace lift
