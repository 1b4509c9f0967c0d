#include "server/http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace lift::http {

namespace {

// RFC 9110 §5.6.2 token characters.
bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Next line of `in` from `pos` (LF or CRLF ended); false if no line end is there yet.
bool next_line(std::string_view in, size_t& pos, std::string_view& line) {
  const size_t lf = in.find('\n', pos);
  if (lf == std::string_view::npos) return false;
  size_t end = lf;
  if (end > pos && in[end - 1] == '\r') --end;
  line = in.substr(pos, end - pos);
  pos = lf + 1;
  return true;
}

// Whether a comma-separated header value lists `token` (case-insensitively).
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (iequals(trim_ows(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

bool parse_size(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  out = v;
  return true;
}

HeadResult error(int status, std::string msg) {
  HeadResult r;
  r.state = HeadResult::State::error;
  r.error = {status, std::move(msg)};
  return r;
}

}  // namespace

HeadResult parse_head(std::string_view in, const ParseLimits& limits, Request& req) {
  // RFC 9112 §2.2: ignore empty lines before the request line (robustness after a body).
  size_t start = 0;
  while (start < in.size() && (in[start] == '\r' || in[start] == '\n')) ++start;
  const std::string_view rest = in.substr(start);
  size_t end = rest.find("\r\n\r\n");
  size_t term = 4;
  if (const size_t lf = rest.find("\n\n"); lf != std::string_view::npos && lf < end) {
    end = lf;
    term = 2;
  }
  if (end == std::string_view::npos) {
    if (in.size() > limits.max_head_bytes) {
      return error(431, "the request head is larger than " + std::to_string(limits.max_head_bytes) +
                            " bytes");
    }
    return {};
  }
  const size_t head_bytes = start + end + term;
  if (head_bytes > limits.max_head_bytes) {
    return error(
        431, "the request head is larger than " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  const std::string_view head = rest.substr(0, end + term);

  size_t pos = 0;
  std::string_view line;
  next_line(head, pos, line);
  // request-line = method SP request-target SP HTTP-version
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return error(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return error(400, "malformed request method");
  if (target.empty() || (target[0] != '/' && target != "*") ||
      std::any_of(target.begin(), target.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return error(400, "malformed request target");
  }
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' ||
      version[7] > '9') {
    if (version.substr(0, 5) == "HTTP/") return error(505, "only HTTP/1.x is supported");
    return error(400, "malformed HTTP version");
  }
  req.method = method;
  req.target = target;
  req.path = target.substr(0, target.find('?'));
  req.minor_version = version[7] - '0';
  req.headers.clear();

  HeadResult r;
  // An index, not a pointer: later headers may move the vector's elements.
  std::optional<size_t> content_length;
  bool chunked = false, has_te = false, close = false, keep_alive = false;
  while (next_line(head, pos, line) && !line.empty()) {
    if (line[0] == ' ' || line[0] == '\t') return error(400, "obsolete header line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return error(400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return error(400, "malformed header name");
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(),
                    [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
      return error(400, "malformed header value");
    }
    if (req.headers.size() >= limits.max_headers) {
      return error(431, "more than " + std::to_string(limits.max_headers) + " header fields");
    }
    req.headers.emplace_back(std::string(name), std::string(value));
    const std::string& v = req.headers.back().second;
    if (iequals(name, "Content-Length")) {
      if (content_length && req.headers[*content_length].second != v) {
        return error(400, "conflicting Content-Length");
      }
      content_length = req.headers.size() - 1;
    } else if (iequals(name, "Transfer-Encoding")) {
      has_te = true;
      // Codings over all Transfer-Encoding lines, in order: lift decodes "chunked" alone (a
      // compression under it would reach the handler undecoded: 501), and chunked applied
      // twice is malformed (RFC 9112 6.1: 400).
      for (std::string_view codings = v; !codings.empty();) {
        const size_t comma = codings.find(',');
        const std::string_view coding = trim_ows(codings.substr(0, comma));
        if (!coding.empty()) {
          if (!iequals(coding, "chunked")) {
            return error(501, "unsupported Transfer-Encoding '" + v.substr(0, 32) + "'");
          }
          if (chunked) return error(400, "Transfer-Encoding applies chunked twice");
          chunked = true;
        }
        if (comma == std::string_view::npos) break;
        codings.remove_prefix(comma + 1);
      }
      if (!chunked) return error(501, "unsupported Transfer-Encoding '" + v.substr(0, 32) + "'");
    } else if (iequals(name, "Connection")) {
      close = close || lists_token(v, "close");
      keep_alive = keep_alive || lists_token(v, "keep-alive");
    } else if (iequals(name, "Expect")) {
      if (!iequals(v, "100-continue")) return error(417, "unsupported Expect");
      r.expect_continue = true;
    }
  }
  if (has_te && content_length) {
    // Both framings at once is how requests are smuggled past proxies: refuse (§6.3).
    return error(400, "both Transfer-Encoding and Content-Length");
  }
  if (req.minor_version >= 1 && !req.header("Host")) return error(400, "no Host header");
  req.keep_alive = req.minor_version >= 1 ? !close : keep_alive && !close;
  if (chunked) {
    r.framing = BodyFraming::chunked;
  } else if (content_length) {
    if (!parse_size(req.headers[*content_length].second, r.content_length)) {
      return error(400, "malformed Content-Length");
    }
    if (r.content_length > limits.max_body_bytes) {
      return error(413, "the request body is larger than " + std::to_string(limits.max_body_bytes) +
                            " bytes");
    }
    r.framing = r.content_length > 0 ? BodyFraming::length : BodyFraming::none;
  }
  r.state = HeadResult::State::done;
  r.head_bytes = head_bytes;
  return r;
}

void ChunkedDecoder::fail(int status, std::string msg) {
  state_ = State::failed;
  error_ = {status, std::move(msg)};
}

size_t ChunkedDecoder::feed(std::string_view in, std::string& body) {
  size_t pos = 0;
  auto read_line = [&](std::string_view& line) {
    // Lines may span feeds: gather into line_ until LF.
    const size_t lf = in.find('\n', pos);
    const size_t take = (lf == std::string_view::npos ? in.size() : lf + 1) - pos;
    if (line_.size() + take > max_line_) {
      fail(400, "a chunk line is longer than " + std::to_string(max_line_) + " bytes");
      return false;
    }
    line_.append(in.substr(pos, take));
    pos += take;
    if (lf == std::string_view::npos) return false;
    line = line_;
    line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  };
  while (pos < in.size() && state_ != State::done && state_ != State::failed) {
    std::string_view line;
    switch (state_) {
      case State::size_line: {
        if (!read_line(line)) break;
        const std::string_view size = trim_ows(line.substr(0, line.find(';')));
        size_t n = 0;
        if (size.empty() || size.size() > 15) {
          fail(400, "malformed chunk size");
          break;
        }
        for (char c : size) {
          const int d =
              std::isxdigit(static_cast<unsigned char>(c))
                  ? (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10)
                  : -1;
          if (d < 0) {
            fail(400, "malformed chunk size");
            break;
          }
          n = n * 16 + static_cast<size_t>(d);
        }
        if (state_ == State::failed) break;
        line_.clear();
        if (n > max_body_ || body.size() > max_body_ - n) {
          fail(413, "the request body is larger than " + std::to_string(max_body_) + " bytes");
          break;
        }
        remaining_ = n;
        state_ = n == 0 ? State::trailer : State::data;
        break;
      }
      case State::data: {
        const size_t take = std::min(remaining_, in.size() - pos);
        body.append(in.substr(pos, take));
        pos += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::data_crlf;
        break;
      }
      case State::data_crlf: {
        if (!read_line(line)) break;
        if (!line.empty()) {
          fail(400, "chunk data longer than its size");
          break;
        }
        line_.clear();
        state_ = State::size_line;
        break;
      }
      case State::trailer: {
        if (!read_line(line)) break;
        const bool end = line.empty();
        line_.clear();
        if (end) state_ = State::done;
        break;
      }
      default:
        break;
    }
  }
  return pos;
}

}  // namespace lift::http
