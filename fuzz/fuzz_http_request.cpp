// libFuzzer target: the HTTP/1.1 request parser every client reaches first (request line,
// headers, limits, chunked bodies). Checks, beyond "no crash": a head is never said to use
// more bytes than it was given, limits hold, and the chunked decoder gives the same body and
// the same verdict however the bytes are split across feeds.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http/request_parser.h"

using namespace lift::http;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte: where to split the body between two feeds.
  const size_t split_seed = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  ParseLimits lim;
  lim.max_head_bytes = 2048;
  lim.max_headers = 16;
  lim.max_body_bytes = 4096;
  Request req;
  const HeadResult h = parse_head(in, lim, req);
  if (h.state == HeadResult::State::error) {
    check(h.error.status >= 400 && h.error.status < 600 && !h.error.message.empty());
    return 0;
  }
  if (h.state == HeadResult::State::incomplete) {
    check(in.size() <= lim.max_head_bytes);
    return 0;
  }
  check(h.head_bytes <= in.size() && h.head_bytes <= lim.max_head_bytes);
  check(req.headers.size() <= lim.max_headers);
  check(!req.path.empty() && req.target.substr(0, req.path.size()) == req.path);
  if (h.framing == BodyFraming::length) check(h.content_length <= lim.max_body_bytes);
  if (h.framing != BodyFraming::chunked) return 0;

  const std::string_view body = in.substr(h.head_bytes);
  ChunkedDecoder whole(lim.max_body_bytes, 256);
  std::string a;
  const size_t used_a = whole.feed(body, a);
  check(used_a <= body.size());
  check(a.size() <= lim.max_body_bytes);

  ChunkedDecoder parts(lim.max_body_bytes, 256);
  std::string b;
  const size_t split = body.empty() ? 0 : split_seed % (body.size() + 1);
  size_t used_b = parts.feed(body.substr(0, split), b);
  if (!parts.done() && !parts.error()) used_b += parts.feed(body.substr(used_b), b);
  check(whole.done() == parts.done());
  check(whole.error().status == parts.error().status);
  if (whole.done()) {
    check(a == b);
    check(used_a == used_b);
  }
  return 0;
}
