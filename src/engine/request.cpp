#include "engine/request.h"

#include "structured/matcher.h"

namespace lift {

std::string RequestParams::validate(int vocab_size) const {
  if (max_tokens < 1) return "max_tokens must be at least 1, got " + std::to_string(max_tokens);
  if (min_tokens < 0) return "min_tokens must be >= 0, got " + std::to_string(min_tokens);
  if (min_tokens > max_tokens) return "min_tokens must not exceed max_tokens";
  if (n < 1 || n > 128) return "n must be in [1, 128], got " + std::to_string(n);
  if (stop.size() > 16) return "at most 16 stop strings are allowed";
  for (const auto& s : stop) {
    if (s.empty()) return "stop strings must not be empty";
    if (s.size() > 256) return "stop strings must be at most 256 bytes";
  }
  for (int32_t t : stop_token_ids) {
    if (t < 0 || t >= vocab_size) return "stop token id " + std::to_string(t) + " is out of range";
  }
  if (spec_tokens < -1 || spec_tokens > kMaxSpecTokens) {
    return "spec_tokens must be in [-1, " + std::to_string(kMaxSpecTokens) + "], got " +
           std::to_string(spec_tokens);
  }
  if (constraint && constraint->vocab().size() != vocab_size) {
    return "the output constraint was compiled for a vocabulary of " +
           std::to_string(constraint->vocab().size()) + " tokens, but the model has " +
           std::to_string(vocab_size);
  }
  return sampling.validate(vocab_size);
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::abort:
      return "abort";
    case FinishReason::error:
      return "error";
    default:
      return "";
  }
}

}  // namespace lift
