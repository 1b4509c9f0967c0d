// Engine options shared by serve, chat and the benchmarks, parsed and validated in one place,
// and the start-up memory plan every engine-backed command prints.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine.h"

namespace lift::cli {

// "auto" and 0 leave the choice to the engine's memory plan (src/engine/memory_plan.h).
struct EngineOptions {
  size_t max_model_len = 0;
  std::string kv_cache_memory = "auto";
  std::string kv_type = "auto";
  size_t block_size = 16;
  size_t max_batched_tokens = 512;
  size_t max_seqs = 64;
  size_t max_prefill_chunk = 256;
  int threads = 0;
  bool no_prefix_caching = false;
  bool exact_activations = false;
  std::string scheduler = "continuous";
  std::string scheduling_policy = "fcfs";

  EngineConfig to_config() const;
};

void add_engine_options(CLI::App* app, EngineOptions& o);
// "2GiB", "512MiB", "1.5GB", "1000000" (bytes) -> bytes; throws lift::Error.
size_t parse_bytes(const std::string& s);
// Prints the engine's memory plan (model, max-model-len, K/V type and pool) to stderr.
void print_memory_plan(const Engine& e);

}  // namespace lift::cli
