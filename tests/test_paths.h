// Where tests find the shared read-only models (../shared/models beside the checkout), and the
// reference outputs recorded for them.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace lift::test {

inline std::string model_path(const std::string& rel) {
  // Appended step by step: gcc 12 raises a false -Warray-bounds on `std::string(...) + "..." + rel`
  // when it sees the header through the precompiled header.
  std::string path = LIFT_SOURCE_DIR;
  path += "/../shared/models/";
  path += rel;
  return path;
}
inline std::string lift_binary() { return LIFT_BINARY; }

// The "runs" array of stories260K/reference_outputs.json (llama2.c's run.c outputs; see
// ../shared/models/README.md), read once. Each run has name, prompt, prompt_ids,
// generated_ids and, for some, text.
inline const nlohmann::json& stories260k_runs() {
  static const nlohmann::json runs = [] {
    std::ifstream in(model_path("stories260K/reference_outputs.json"));
    return nlohmann::json::parse(in).at("runs");
  }();
  return runs;
}

// The run called `name`; throws std::runtime_error when there is none.
inline const nlohmann::json& stories260k_run(const std::string& name) {
  for (const auto& r : stories260k_runs()) {
    if (r.at("name") == name) return r;
  }
  throw std::runtime_error("no record " + name + " in stories260K/reference_outputs.json");
}

}  // namespace lift::test
