#include "cli/engine_options.h"

#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace lift::cli {

size_t parse_bytes(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw Error("cannot read '" + s + "' as a size (examples: 2GiB, 512MiB, 1e9)");
  }
  const std::string unit = s.substr(pos);
  double mul = 1;
  if (unit.empty() || unit == "B")
    mul = 1;
  else if (unit == "KiB")
    mul = 1024.0;
  else if (unit == "MiB")
    mul = 1024.0 * 1024;
  else if (unit == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else if (unit == "KB" || unit == "K")
    mul = 1e3;
  else if (unit == "MB" || unit == "M")
    mul = 1e6;
  else if (unit == "GB" || unit == "G")
    mul = 1e9;
  else
    throw Error("unknown size unit '" + unit + "' in '" + s +
                "' (use B, KiB, MiB, GiB, KB, MB, GB)");
  if (!(v > 0) || !std::isfinite(v)) throw Error("size '" + s + "' must be positive");
  return static_cast<size_t>(v * mul);
}

EngineConfig EngineOptions::to_config() const {
  EngineConfig c;
  c.max_model_len = max_model_len;
  if (kv_cache_memory != "auto") c.kv_cache_bytes = parse_bytes(kv_cache_memory);
  if (kv_type != "auto") c.kv_type = parse_kv_type(kv_type);
  c.block_size = block_size;
  c.scheduler.max_batched_tokens = max_batched_tokens;
  c.scheduler.max_seqs = max_seqs;
  c.scheduler.max_prefill_chunk = max_prefill_chunk;
  c.scheduler.policy = parse_batch_policy(scheduler);
  c.scheduler.scheduling = parse_scheduling_policy(scheduling_policy);
  c.threads = threads;
  c.prefix_caching = !no_prefix_caching;
  c.backend.quantize_activations = !exact_activations;
  if (const std::string err = c.scheduler.validate(); !err.empty()) throw Error(err);
  return c;
}

void add_engine_options(CLI::App* app, EngineOptions& o) {
  app->add_option("-c,--max-model-len", o.max_model_len,
                  "Longest prompt + output a request may have (default: the model's context, at "
                  "most " +
                      std::to_string(kDefaultMaxModelLen) + ")")
      ->check(CLI::PositiveNumber);
  app->add_option("--kv-cache-memory", o.kv_cache_memory,
                  "KV cache budget, e.g. 2GiB (auto: half of available memory after the weights, "
                  "at most --max-seqs full-length sequences)");
  app->add_option("--kv-type", o.kv_type,
                  "K/V storage type: f32, f16 or auto (f32 unless the automatic budget holds "
                  "fewer than " +
                      std::to_string(kAutoF32Sequences) + " full-length sequences)")
      ->check(CLI::IsMember({"auto", "f32", "f16"}));
  app->add_option("--block-size", o.block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  app->add_option("--max-batched-tokens", o.max_batched_tokens, "Token budget of one step");
  app->add_option("--max-seqs", o.max_seqs, "Most sequences running at once");
  app->add_option("--max-prefill-chunk", o.max_prefill_chunk,
                  "Most prompt tokens one request may prefill per step");
  app->add_option("--scheduling-policy", o.scheduling_policy,
                  "Who is served first: fcfs (arrival order; request priorities refused) or "
                  "priority (lower priority value first, then arrival)")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  app->add_option("-t,--threads", o.threads, "Threads (0 = all cores)");
  app->add_flag("--no-prefix-caching", o.no_prefix_caching, "Disable automatic prefix caching");
  app->add_flag("--exact-activations", o.exact_activations,
                "Multiply quantized weights with f32 activations (no 8-bit rounding)");
}

void print_memory_plan(const Engine& e) { std::fputs(e.memory_plan().c_str(), stderr); }

}  // namespace lift::cli
