// Tokenizers of the shared vocabularies, each loaded once per test program (the large ones
// take a noticeable fraction of a second).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace lift::test {

// `rel` is relative to ../shared/models, e.g. "vocab/ggml-vocab-qwen2.gguf".
inline const Tokenizer& cached_tokenizer(const std::string& rel) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const Tokenizer>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[rel];
  if (!slot) slot = std::make_unique<const Tokenizer>(Tokenizer::load(model_path(rel)));
  return *slot;
}

inline const Tokenizer& vocab_tokenizer(const std::string& name) {
  return cached_tokenizer("vocab/ggml-vocab-" + name + ".gguf");
}

}  // namespace lift::test
