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
  std::string model;
  std::vector<int32_t> prompt;
  RequestParams params;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;  // report logprobs at all
  int top_logprobs = 0;
};

struct ApiContext {
  const Tokenizer& tok;
  ChatFormat chat_format;
  int context_length;
  int vocab_size;
};

// A conversation rendered with a chat template and tokenized, with the template's
// end-of-turn markers as stop tokens (or stop strings where the vocabulary lacks them).
struct ChatPrompt {
  std::vector<int32_t> tokens;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
};
// Throws lift::Error for conversations the template rejects.
ChatPrompt build_chat_prompt(const Tokenizer& tok, ChatFormat format,
                             const std::vector<ChatMessage>& messages);

// body: the raw request body. Throws ApiError.
ApiRequest parse_completion_request(const std::string& body, const ApiContext& ctx);
ApiRequest parse_chat_request(const std::string& body, const ApiContext& ctx);

// Parses a JSON object body, with a 400 ApiError for malformed JSON or a non-object.
nlohmann::json parse_json_object(const std::string& body);

}  // namespace lift
