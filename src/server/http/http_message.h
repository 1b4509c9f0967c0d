// HTTP/1.1 messages as lift's server sees them: a parsed request head plus its body, and a
// response to write. Header names compare case-insensitively (RFC 9110 §5.1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lift::http {

bool iequals(std::string_view a, std::string_view b);

using Headers = std::vector<std::pair<std::string, std::string>>;

// The value of the first header named `name`, or nullptr.
const std::string* find_header(const Headers& h, std::string_view name);

struct Request {
  std::string method;
  std::string target;     // as sent: path and query
  std::string path;       // target without the query
  int minor_version = 1;  // HTTP/1.x
  Headers headers;
  std::string body;
  bool keep_alive = true;  // what the client asked for (HTTP/1.0 defaults to close)
  std::string remote;      // peer address, for the access log
  std::string id;          // request id (X-Request-Id, or one the server made)

  const std::string* header(std::string_view name) const { return find_header(headers, name); }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;
  std::string body;
};

const char* status_reason(int status);

}  // namespace lift::http
