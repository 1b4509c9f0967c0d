// Parsing and validation of OpenAI completion and chat-completion requests into engine
// requests, and of the /tokenize and /detokenize bodies. Every problem becomes an ApiError
// that names the field and says what to fix.
//
// Bodies come from untrusted clients, so parsing never crashes and never does work that grows
// faster than the body:
//  * JSON nesting is limited while parsing (kMaxJsonDepth): a deeper body is refused before a
//    value that deep exists, so no recursive operation on a JSON value (dump, ==, copy) can
//    exhaust the stack;
//  * error messages never echo a client's value unbounded: they show its JSON type, a number,
//    or a short excerpt of a string (valid UTF-8, see excerpt() in api_error.h).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/constraint_request.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace lift {

struct ApiRequest {
  bool chat = false;
  std::vector<int32_t> prompt;
  RequestParams params;  // logprobs: params.logprobs and params.sampling.n_logprobs
  bool stream = false;
  bool include_usage = false;
  // The structured output asked for (response_format, guided_*, ...), compiled into
  // params.constraint at the end of parsing. Whoever parses another source of constraints
  // (tool_choice) may set it before that; a body that also names one is then a 400.
  std::optional<ConstraintRequest> constraint;
  // What the reply is parsed for: the model's tool calls (server/tool_request.h).
  ToolCallSetup tool_calls{};
};

struct ApiContext {
  const Tokenizer& tok;
  ChatTemplate chat;
  int context_length;  // the engine's max-model-len: prompt + max_tokens must fit in it
  int vocab_size;
  // The names the "model" field may take. Empty: any name is accepted (lift serves its one
  // model whatever the request names). Otherwise a request naming another model gets 404
  // model_not_found, as vLLM answers.
  std::vector<std::string> served_model_names{};
  // False when the scheduler ignores priorities (anything but --scheduling-policy priority):
  // a request with a non-zero "priority" then gets 400 instead of being silently reordered
  // or not.
  bool allow_priority = true;
  // Compiles output constraints against the model's vocabulary (null: a request that asks
  // for one gets 400).
  structured::ConstraintCompiler* constraints = nullptr;
  // The model's tool-call syntax (--tool-call-parser); unset: from the chat template.
  std::optional<ToolCallFormat> tool_format{};
};

// Deepest nesting of arrays and objects a request body may have; the body object itself is
// level 1. OpenAI requests need 4 ({"messages": [{"content": [{...}]}]}).
inline constexpr int kMaxJsonDepth = 64;

// body: the raw request body. Throw ApiError (and nothing else).
ApiRequest parse_completion_request(const std::string& body, const ApiContext& ctx);
ApiRequest parse_chat_request(const std::string& body, const ApiContext& ctx);

// The conversation fields a chat template renders, as /v1/chat/completions,
// /apply-template and /tokenize take them: "messages" (required; roles are the template's
// business, content a string, null or an array of text parts; an assistant's
// tool_calls[].function.arguments given as a JSON string are parsed into an object, as vLLM
// does), "tools", "add_generation_prompt" (default true) and "chat_template_kwargs".
ChatInput parse_chat_input(std::string_view body);

// Renders in with the template and tokenizes it. Throws ApiError 400 (param "messages") when
// the template refuses the conversation (its raise_exception message) or fails on it.
ChatPrompt render_chat_request(const ApiContext& ctx, const ChatInput& in);
// The rendered text only (POST /apply-template); the same errors.
std::string render_chat_text(const ApiContext& ctx, const ChatInput& in);

// POST /tokenize: {"prompt": "..."} (or "content"), or a conversation ("messages", "tools",
// "add_generation_prompt", "chat_template_kwargs", as vLLM's /tokenize takes), and
// "add_special_tokens" (or "add_special"; when both are given "add_special" wins): whether BOS
// is added and special-token text parsed; default true for a prompt, false for messages
// (whose template writes its own special tokens).
struct TokenizeRequest {
  std::string text;
  bool add_special = true;
  std::optional<ChatInput> chat;
};
TokenizeRequest parse_tokenize_request(const std::string& body);
// The ids /tokenize answers with for a prompt: with add_special, BOS (when the model adds one)
// and special tokens written in the text ("<s>") as their ids; without, plain text only.
std::vector<int32_t> tokenize(const Tokenizer& tok, const TokenizeRequest& req);
// For either kind: a conversation is rendered with ctx.chat first; its special tokens are
// always parsed, and add_special only decides BOS.
std::vector<int32_t> tokenize(const ApiContext& ctx, const TokenizeRequest& req);

// POST /detokenize: {"tokens": [ids]}, every id in [0, vocab_size). The text to answer with
// is tok.decode(tokens) (in both "prompt" and "content").
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};
DetokenizeRequest parse_detokenize_request(const std::string& body, int vocab_size);

// Parses a JSON object body with the nesting limit above: 400 ApiError for malformed JSON
// (naming the byte offset), nesting deeper than kMaxJsonDepth, or a value that is not an
// object.
nlohmann::json parse_json_object(std::string_view body);

// A client's JSON value for an error message, bounded in size whatever the value: numbers,
// booleans and null as JSON, strings as a quoted excerpt, arrays and objects by their type
// ("an array of 3 elements").
std::string describe_json(const nlohmann::json& v);

}  // namespace lift
