// libFuzzer target for POST /tokenize and /detokenize bodies: each parser either accepts the
// body (and the tokenizer then encodes or decodes it: ids in range, valid UTF-8 text) or
// refuses it with a short, valid-UTF-8 ApiError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "server/openai_request.h"
#include "tokenizer/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lift;
  const std::string body(reinterpret_cast<const char*>(data), size);
  const Tokenizer& tok = fuzz::tokenizer(size % 2 == 0 ? 2 : 1);  // stories260K or Phi-3
  const int n_vocab = tok.vocab().size();
  try {
    const TokenizeRequest r = parse_tokenize_request(body);
    const std::vector<int32_t> ids = tokenize(tok, r);
    for (const int32_t id : ids) fuzz::check(id >= 0 && id < n_vocab, "token ids are in range");
    fuzz::check(!r.text.empty() || ids.size() <= 1, "empty text gives at most BOS");
  } catch (const ApiError& e) {
    fuzz::check_api_error(e);
  }
  try {
    const DetokenizeRequest r = parse_detokenize_request(body, n_vocab);
    for (const int32_t id : r.tokens) fuzz::check(id >= 0 && id < n_vocab, "ids are in range");
    fuzz::check(is_valid_utf8(tok.decode(r.tokens)), "decoded text is valid UTF-8");
  } catch (const ApiError& e) {
    fuzz::check_api_error(e);
  }
  return 0;
}
