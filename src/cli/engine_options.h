// Engine options shared by serve, chat and the benchmarks, parsed and validated in one place,
// and the start-up memory plan every engine-backed command prints.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
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
  // Speculative decoding (engine/spec_config.h). --draft-model without --spec means draft.
  std::string spec;  // empty: not given
  size_t spec_tokens = 4;
  std::string draft_model;
  bool spec_fixed = false;
  size_t spec_ngram = 4;
  int tp = 1;              // tensor-parallel ranks (mpirun -np tp)
  double tp_timeout = 60;  // seconds a collective inside a forward pass may take

  // --spec resolved: what was asked, or draft when only --draft-model was given.
  SpecMethod spec_method() const;
  // Loads --draft-model when speculation uses it (nullptr otherwise). The model must outlive
  // every Engine built from to_config(draft).
  std::unique_ptr<LlamaModel> load_draft_model() const;
  // Throws lift::Error naming the flag when a value is out of range; draft: what
  // load_draft_model() returned.
  EngineConfig to_config(LlamaModel* draft = nullptr) const;
};

void add_engine_options(CLI::App* app, EngineOptions& o);
// With --tp N on a rank other than 0: loads the model and replays the leader's forward passes
// until it stops (parallel/tp_step.h), then returns 0; the command does nothing else there.
// Otherwise -1: the command runs as usual (rank 0 leads).
int run_tp_follower(const EngineOptions& o, const std::string& model_path);
// "2GiB", "512MiB", "1.5GB", "1000000" (bytes) -> bytes; throws lift::Error.
size_t parse_bytes(const std::string& s);
// Prints the engine's memory plan (model, max-model-len, K/V type and pool) to stderr.
void print_memory_plan(const Engine& e);

}  // namespace lift::cli
