#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "util/error.h"

namespace lift {

namespace {

size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

std::string tokens(size_t n) { return std::to_string(n) + " tokens"; }

}  // namespace

std::string format_bytes(size_t bytes) {
  char buf[64];
  const auto b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  } else if (bytes >= (size_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  }
  return buf;
}

size_t sequence_blocks(size_t n_tokens, size_t block_size, size_t window, size_t chunk) {
  const size_t all = div_up(n_tokens, block_size);
  if (window == 0) return all;
  // A chunk of c tokens from position a reads back to a - window + 1: window - 1 + c
  // positions, which may straddle one more block boundary than they fill.
  return std::min(all, div_up(window - 1 + std::max<size_t>(chunk, 1), block_size) + 1);
}

size_t pool_bytes_per_token(const ModelConfig& model, const ModelConfig* draft, KvType type) {
  return KvCache::bytes_per_token(model, type) +
         (draft ? KvCache::bytes_per_token(*draft, type) : 0);
}

size_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return unit == "kB" ? value * 1024 : 0;
  }
  return 0;
}

MemoryPlan plan_memory(const ModelConfig& model, size_t weight_bytes, const MemoryRequest& req,
                       size_t mem_available, size_t prefill_chunk) {
  if (req.block_size == 0) throw Error("the KV block size must be positive");
  const auto context = static_cast<size_t>(std::max(model.context_length, 1));
  if (req.max_model_len > context) {
    throw Error("--max-model-len " + std::to_string(req.max_model_len) +
                " is longer than the model's context of " + tokens(context) + "; use at most " +
                std::to_string(context));
  }
  const auto window = static_cast<size_t>(std::max(model.kv_window(), 0));
  const bool auto_budget = req.kv_blocks == 0 && req.kv_cache_bytes == 0;
  MemoryPlan p;
  p.block_size = req.block_size;
  p.max_model_len =
      req.max_model_len > 0 ? req.max_model_len : std::min(context, kDefaultMaxModelLen);
  p.seq_blocks = sequence_blocks(p.max_model_len, req.block_size, window, prefill_chunk);
  const auto per_token = [&](KvType t) { return pool_bytes_per_token(model, req.draft_model, t); };
  const auto seq_bytes = [&](KvType t) { return p.seq_blocks * req.block_size * per_token(t); };

  // An automatic budget is a share of what the machine has left after the weights (already
  // loaded, and perhaps counted in MemAvailable as page cache: subtracting them again errs on
  // the small side), and no more than max_seqs full-length sequences take.
  size_t spare = 0;
  if (auto_budget) {
    if (mem_available == 0) {
      throw Error(
          "cannot read MemAvailable from /proc/meminfo to size the KV cache; give "
          "--kv-cache-memory (e.g. 2GiB)");
    }
    spare = mem_available > weight_bytes ? mem_available - weight_bytes : 0;
    spare = static_cast<size_t>(static_cast<double>(spare) * kMemoryFraction);
  }
  const auto budget_for = [&](KvType t) {
    if (req.kv_blocks > 0) return req.kv_blocks * req.block_size * per_token(t);
    if (req.kv_cache_bytes > 0) return req.kv_cache_bytes;
    return std::min(spare, req.max_seqs * seq_bytes(t));
  };

  // f32 stays the default (exact, docs/exactness.md); f16 only where the machine-sized budget
  // would otherwise hold fewer than kAutoF32Sequences full-length sequences. A budget the user
  // sized keeps f32 unless --kv-type says otherwise.
  if (req.kv_type) {
    p.kv_type = *req.kv_type;
    p.kv_type_from = "--kv-type";
  } else if (!auto_budget) {
    p.kv_type = KvType::f32;
    p.kv_type_from = "default for a given budget";
  } else {
    const size_t want = std::min(kAutoF32Sequences, req.max_seqs);
    const size_t fit = budget_for(KvType::f32) / seq_bytes(KvType::f32);
    p.kv_type = fit >= want ? KvType::f32 : KvType::f16;
    p.kv_type_from = "auto: " + std::to_string(fit) + " full-length sequences fit in f32, " +
                     (fit >= want ? "at least " : "fewer than ") + std::to_string(want);
  }
  p.budget_bytes = budget_for(p.kv_type);
  p.bytes_per_token = per_token(p.kv_type);
  p.draft_bytes_per_token =
      req.draft_model ? KvCache::bytes_per_token(*req.draft_model, p.kv_type) : 0;
  if (req.kv_blocks > 0) {
    p.budget_from = "a pool of " + std::to_string(req.kv_blocks) + " blocks";
  } else if (!auto_budget) {
    p.budget_from = "--kv-cache-memory";
  } else {
    char buf[160];
    std::snprintf(buf, sizeof buf, "auto: %.2g x (%s available - %s weights), at most %zu",
                  kMemoryFraction, format_bytes(mem_available).c_str(),
                  format_bytes(weight_bytes).c_str(), req.max_seqs);
    p.budget_from = std::string(buf) + " full-length sequences (--max-seqs)";
  }
  p.n_blocks =
      req.kv_blocks > 0 ? req.kv_blocks : p.budget_bytes / (p.bytes_per_token * req.block_size);
  if (p.n_blocks >= p.seq_blocks) return p;

  // A default max-model-len shrinks to what the pool holds (vLLM's proposed "auto"), so a
  // small --kv-cache-memory still serves; one the user asked for is a start-up error.
  const size_t holds = p.n_blocks * req.block_size;
  if (req.max_model_len == 0 && holds >= 2) {
    p.max_model_len = holds;
    p.seq_blocks = sequence_blocks(holds, req.block_size, window, prefill_chunk);
    p.max_model_len_note = "the default " + std::to_string(std::min(context, kDefaultMaxModelLen)) +
                           " did not fit the KV cache";
    return p;
  }
  throw Error("the KV cache (" + format_bytes(p.budget_bytes) + ", " + p.budget_from + ") holds " +
              tokens(holds) + " of " + kv_type_name(p.kv_type) + " K/V" +
              (req.draft_model ? " (the model's and the draft model's)" : "") + ", but one " +
              "sequence of --max-model-len " + std::to_string(p.max_model_len) + " needs " +
              tokens(p.seq_blocks * req.block_size) + " (" + format_bytes(seq_bytes(p.kv_type)) +
              "); raise --kv-cache-memory or lower --max-model-len (-c)" +
              (p.kv_type == KvType::f32 ? ", or halve the K/V with --kv-type f16" : ""));
}

}  // namespace lift
