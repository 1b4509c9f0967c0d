// libFuzzer target for POST /v1/completions bodies: any byte string must parse into a request
// the engine accepts, or be refused with a short, valid-UTF-8 ApiError. Anything else (another
// exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_request_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (const ApiContext& ctx : fuzz::contexts(fuzz::tokenizer(2), ChatFormat::chatml)) {
    try {
      const ApiRequest r = parse_completion_request(body, ctx);
      fuzz::check(!r.chat, "a completion request is not a chat request");
      fuzz::check_request(r, ctx);
    } catch (const ApiError& e) {
      fuzz::check_api_error(e);
    }
  }
  return 0;
}
