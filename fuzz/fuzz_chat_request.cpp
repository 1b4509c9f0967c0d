// libFuzzer target for POST /v1/chat/completions bodies, under every chat format and two
// vocabularies (stories260K; Phi-3, whose template markers are special tokens): a request the
// engine accepts or a short, valid-UTF-8 ApiError, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (const size_t vocab : {size_t{2}, size_t{1}}) {
    const Tokenizer& tok = fuzz::tokenizer(vocab);
    for (const ChatFormat f : all_chat_formats()) {
      for (const ApiContext& ctx : fuzz::contexts(tok, f)) {
        try {
          const ApiRequest r = parse_chat_request(body, ctx);
          fuzz::check(r.chat, "a chat request is marked chat");
          fuzz::check_request(r, ctx);
        } catch (const ApiError& e) {
          fuzz::check_api_error(e);
        }
      }
    }
  }
  return 0;
}
