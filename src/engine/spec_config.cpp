#include "engine/spec_config.h"

#include "engine/request.h"
#include "util/error.h"

namespace lift {

const char* spec_method_name(SpecMethod m) {
  switch (m) {
    case SpecMethod::ngram:
      return "ngram";
    case SpecMethod::draft:
      return "draft";
    case SpecMethod::custom:
      return "custom";
    default:
      return "off";
  }
}

SpecMethod parse_spec_method(const std::string& s) {
  if (s == "off") return SpecMethod::off;
  if (s == "ngram") return SpecMethod::ngram;
  if (s == "draft") return SpecMethod::draft;
  throw Error("unknown speculative method '" + s + "' (use off, ngram or draft)");
}

std::string SpecConfig::validate() const {
  if (method == SpecMethod::off) return {};
  if (max_tokens < 1 || max_tokens > static_cast<size_t>(kMaxSpecTokens)) {
    return "spec-tokens must be in [1, " + std::to_string(kMaxSpecTokens) + "]";
  }
  if (ngram_min < 1 || ngram_min > ngram_max) {
    return "the n-gram lengths must satisfy 1 <= min <= max";
  }
  if (method == SpecMethod::draft && draft_model == nullptr) {
    return "speculative method draft needs a draft model (--draft-model PATH)";
  }
  if (method == SpecMethod::custom && !proposer)
    return "speculative method custom needs a proposer";
  return {};
}

}  // namespace lift
