// An error a client caused (or must be told about), carried to the HTTP layer and rendered
// as OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <stdexcept>
#include <string>

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

}  // namespace lift
