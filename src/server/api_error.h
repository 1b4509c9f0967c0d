// An error a client caused (or must be told about), carried to the HTTP layer and rendered
// as OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}. Messages quote a
// client's text only through excerpt(), so they stay short and valid UTF-8.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lift {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {},
           std::string type = "invalid_request_error", std::string code = {})
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        type_(std::move(type)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, type_, code_;
};

// Longest excerpt of a client's text an error message quotes, in bytes (before "...").
inline constexpr size_t kMaxExcerptBytes = 48;

// At most `max_bytes` of `s` for an error message: cut at a character boundary, "..." added
// when cut, each ill-formed UTF-8 subpart replaced by U+FFFD and ASCII control characters by
// spaces. The result is valid UTF-8 of at most max_bytes + 3 bytes.
std::string excerpt(std::string_view s, size_t max_bytes = kMaxExcerptBytes);

}  // namespace lift
