#include "cli/engine_options.h"

#include <cmath>
#include <csignal>
#include <cstdio>

#include "engine/request.h"
#include "parallel/comm.h"
#include "parallel/tp_backend.h"
#include "parallel/tp_step.h"
#include "util/error.h"
#include "util/thread_pool.h"

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

EngineConfig EngineOptions::to_config(LlamaModel* draft) const {
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
  if (tp < 1) throw Error("--tp must be at least 1");
  if (tp > 1) {
    c.tp = &Comm::world(tp);
    c.tp->set_timeout(tp_timeout);
    if (!c.tp->leader()) {
      throw Error(
          "--tp: this command does not run tensor-parallel (serve, generate and bench "
          "model do)");
    }
  }
  if (const std::string err = c.scheduler.validate(); !err.empty()) throw Error(err);
  c.spec.method = spec_method();
  c.spec.max_tokens = spec_tokens;
  c.spec.adaptive = !spec_fixed;
  c.spec.ngram_max = spec_ngram;
  if (c.spec.method == SpecMethod::draft) c.spec.draft_model = draft;
  if (const std::string err = c.spec.validate(); !err.empty()) throw Error(err);
  return c;
}

SpecMethod EngineOptions::spec_method() const {
  if (spec.empty()) return draft_model.empty() ? SpecMethod::off : SpecMethod::draft;
  const SpecMethod m = parse_spec_method(spec);
  // A draft model beside another proposer would be loaded for nothing; beside off it is kept
  // out of the way, so one command line can compare speculation on and off.
  if (m == SpecMethod::ngram && !draft_model.empty()) {
    throw Error("--draft-model is only used with --spec draft, not --spec ngram");
  }
  return m;
}

int run_tp_follower(const EngineOptions& o, const std::string& model_path) {
  if (o.tp <= 1) return -1;
  Comm& comm = Comm::world(o.tp);
  if (comm.leader()) return -1;
  comm.set_timeout(o.tp_timeout);
  // The leader decides when the group ends (a drain on SIGTERM finishes its requests, which
  // needs every rank): mpirun forwards signals to all ranks, and a follower ignores them.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  auto model = LlamaModel::load(model_path, comm.shard());
  ThreadPool pool(o.threads);
  BackendOptions bo;
  bo.quantize_activations = !o.exact_activations;
  TpBackend backend(make_cpu_backend(pool, bo), comm);
  tp_follow(comm, *model, backend);
  return 0;
}

std::unique_ptr<LlamaModel> EngineOptions::load_draft_model() const {
  if (spec_method() != SpecMethod::draft || draft_model.empty()) return nullptr;
  return LlamaModel::load(draft_model);
}

namespace {

void add_spec_options(CLI::App* app, EngineOptions& o) {
  app->add_option("--spec", o.spec,
                  "Speculative decoding: off, ngram (prompt lookup) or draft (--draft-model); "
                  "greedy output is the same either way (default: off, or draft with "
                  "--draft-model)")
      ->check(CLI::IsMember({"off", "ngram", "draft"}));
  app->add_option("--spec-tokens", o.spec_tokens,
                  "Most draft tokens a sequence verifies per step (requests may ask fewer with "
                  "spec_tokens)")
      ->check(CLI::Range(1, kMaxSpecTokens));
  app->add_option("--draft-model", o.draft_model,
                  "GGUF draft model with the target's vocabulary (implies --spec draft)");
  app->add_flag("--spec-fixed", o.spec_fixed,
                "Always propose --spec-tokens tokens, instead of choosing K per step from the "
                "measured acceptance and step costs");
  app->add_option("--spec-ngram", o.spec_ngram,
                  "Longest suffix (tokens) the n-gram proposer looks up in the sequence")
      ->check(CLI::Range(1, 64));
}

}  // namespace

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
  app->add_option("--tp", o.tp,
                  "Tensor-parallel ranks: run under mpirun -np N with the same arguments; rank 0 "
                  "serves, every rank computes 1/N of each matrix product")
      ->check(CLI::Range(1, 64));
  app->add_option("--tp-timeout", o.tp_timeout,
                  "Seconds a tensor-parallel exchange inside a forward pass may take before the "
                  "job is aborted (a rank hangs)")
      ->check(CLI::PositiveNumber);
  app->add_flag("--exact-activations", o.exact_activations,
                "Multiply quantized weights with f32 activations (no 8-bit rounding)");
  add_spec_options(app, o);
}

void print_memory_plan(const Engine& e) {
  std::fputs(e.memory_plan().c_str(), stderr);
  const SpecConfig& s = e.config().spec;
  if (s.method == SpecMethod::off) return;
  std::fprintf(stderr, "lift: speculative decoding %s, up to %zu draft tokens per step, %s\n",
               spec_method_name(s.method), s.max_tokens,
               s.adaptive ? "K chosen per step from measured acceptance and step costs"
                          : "K fixed (--spec-fixed)");
}

}  // namespace lift::cli
