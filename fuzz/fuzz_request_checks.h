// Checks shared by the completion and chat request fuzzers: what a parsed request promises
// the engine, and the contexts both parse under.
#pragma once

#include <string>
#include <vector>

#include "fuzz_support.h"
#include "server/openai_request.h"

namespace lift::fuzz {

// A request the parser accepted must be one the engine accepts as it is.
inline void check_request(const ApiRequest& r, const ApiContext& ctx) {
  check(!r.prompt.empty(), "the prompt is not empty");
  for (const int32_t t : r.prompt) check(t >= 0 && t < ctx.vocab_size, "prompt ids are in range");
  check(r.prompt.size() < static_cast<size_t>(ctx.context_length), "the prompt fits the context");
  const RequestParams& p = r.params;
  check(p.max_tokens >= 1, "max_tokens >= 1");
  check(r.prompt.size() + static_cast<size_t>(p.max_tokens) <=
            static_cast<size_t>(ctx.context_length),
        "prompt + max_tokens fit the context");
  check(p.n >= 1 && p.n <= 16, "n is in [1, 16]");
  check(p.validate(ctx.vocab_size).empty(), "the engine accepts the parameters",
        p.validate(ctx.vocab_size));
  check(!r.include_usage || r.stream, "include_usage only with stream");
  check(ctx.allow_priority || p.priority == 0, "priority only where allowed");
}

// The contexts every body is parsed under: the defaults (any model name, priorities allowed,
// a long context) and a strict server (one model name, no priorities, a short context, so
// the context-length errors are reachable).
inline std::vector<ApiContext> contexts(const Tokenizer& tok, ChatFormat format) {
  std::vector<ApiContext> v;
  v.push_back(ApiContext{tok, format, 2048, tok.vocab().size()});
  ApiContext strict{tok, format, 64, tok.vocab().size()};
  strict.served_model_names = {"stories260K", "m"};
  strict.allow_priority = false;
  v.push_back(std::move(strict));
  return v;
}

}  // namespace lift::fuzz
