// Helpers shared by the engine's end-to-end tests: a loaded model with its tokenizer, and an
// engine configuration small enough to force batching decisions.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "test_paths.h"

namespace lift::test {

struct LoadedModel {
  explicit LoadedModel(const std::string& relative_path)
      : model(LlamaModel::load(model_path(relative_path))),
        tok(Tokenizer::from_gguf(model->file())) {}
  std::unique_ptr<LlamaModel> model;
  Tokenizer tok;
};

// kv_blocks blocks of 16, 2 threads, invariants checked after every step.
inline EngineConfig small_engine_config(size_t kv_blocks, size_t max_prefill_chunk = 64) {
  EngineConfig c;
  c.kv_blocks = kv_blocks;
  c.threads = 2;
  c.check_invariants = true;
  c.scheduler.max_batched_tokens = 256;
  c.scheduler.max_seqs = 64;
  c.scheduler.max_prefill_chunk = max_prefill_chunk;
  return c;
}

}  // namespace lift::test
