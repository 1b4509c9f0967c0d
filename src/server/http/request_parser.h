// Incremental parsing of HTTP/1.1 requests from untrusted bytes (RFC 9112). Every limit is
// checked as bytes arrive, so a client can never make the server hold more than the limits
// say, and every malformed input ends in a status code to answer with, never a crash.
// Pure functions over buffers: the event loop feeds them, the fuzzer too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/http_message.h"

namespace lift::http {

struct ParseLimits {
  size_t max_head_bytes = 16 * 1024;  // request line + headers
  size_t max_headers = 100;
  size_t max_body_bytes = size_t{8} << 20;
};

enum class BodyFraming { none, length, chunked };

struct ParseError {
  int status = 0;  // 0: no error
  std::string message;
  explicit operator bool() const { return status != 0; }
};

struct HeadResult {
  enum class State { incomplete, done, error } state = State::incomplete;
  size_t head_bytes = 0;  // with done: bytes of `in` the head took
  ParseError error;
  BodyFraming framing = BodyFraming::none;
  size_t content_length = 0;
  bool expect_continue = false;
};

// Parses the head at the start of `in` into `req` (method, target, path, version, headers,
// keep_alive). Returns incomplete while no blank line has arrived and the limits still allow
// one; content_length over max_body_bytes is an error (413) before any body byte is read.
HeadResult parse_head(std::string_view in, const ParseLimits& limits, Request& req);

// Decodes a chunked body incrementally (RFC 9112 §7.1): feed() consumes what it can of `in`,
// appends chunk data to `body` and returns the bytes consumed. Chunk extensions and trailer
// fields are read and dropped, within the same limits.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(size_t max_body, size_t max_line = 4096)
      : max_body_(max_body), max_line_(max_line) {}
  size_t feed(std::string_view in, std::string& body);
  bool done() const { return state_ == State::done; }
  const ParseError& error() const { return error_; }

 private:
  enum class State { size_line, data, data_crlf, trailer, done, failed };
  void fail(int status, std::string msg);

  State state_ = State::size_line;
  size_t max_body_, max_line_;
  size_t remaining_ = 0;  // of the current chunk
  std::string line_;
  ParseError error_;
};

}  // namespace lift::http
