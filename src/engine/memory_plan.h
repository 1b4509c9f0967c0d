// What the engine reserves for K/V, decided once at start-up from the model, the flags and the
// machine: the longest sequence it serves (max-model-len), the K/V storage type and the pool's
// size in blocks. Pure arithmetic, so the defaults and the "does one sequence fit" check are
// testable without a model or a machine of a given size.
//
// Defaults (each only where the user gave no value):
//   max-model-len  the model's context, capped at kDefaultMaxModelLen (an 8B Llama 3.1 says
//                  131072, whose K/V, 16 GiB in f16, no CPU box should hold per sequence),
//                  lowered to what the pool holds if it holds less;
//   KV budget      kMemoryFraction of (MemAvailable - weights), at most what max_seqs
//                  full-length sequences take;
//   K/V type       f32 (exact, see docs/exactness.md), except with that automatic budget when
//                  it holds fewer than kAutoF32Sequences full-length sequences in f32: f16.
// With a draft model every block also holds the draft's K/V for the same positions, so every
// byte count above is per token of both models together.
// A max-model-len the user gives that the pool cannot hold once is a start-up error.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "kv/kv_cache.h"
#include "model/model_config.h"

namespace lift {

inline constexpr size_t kDefaultMaxModelLen = 8192;
inline constexpr double kMemoryFraction = 0.5;
inline constexpr size_t kAutoF32Sequences = 8;

struct MemoryRequest {
  size_t max_model_len = 0;       // 0: the default above
  size_t kv_cache_bytes = 0;      // 0: from the machine's available memory
  size_t kv_blocks = 0;           // if set, the pool's size, overriding kv_cache_bytes
  std::optional<KvType> kv_type;  // empty: chosen as above
  size_t block_size = 16;
  size_t max_seqs = 64;
  // Speculative decoding's draft model: its K/V lives in the same blocks (block ids index both
  // caches), so every block costs the two models' bytes together.
  const ModelConfig* draft_model = nullptr;
};

struct MemoryPlan {
  size_t max_model_len = 0;
  KvType kv_type = KvType::f32;
  size_t block_size = 16;
  size_t n_blocks = 0;
  size_t budget_bytes = 0;         // what the pool was sized from (n_blocks' bytes may be less)
  size_t seq_blocks = 0;           // blocks one max-model-len sequence can hold at once
  std::string budget_from;         // "--kv-cache-memory", "--kv-blocks" or the machine's numbers
  std::string kv_type_from;        // "--kv-type" or why auto chose it
  std::string max_model_len_note;  // set when the default was lowered to fit the pool
  // K/V bytes one token costs in the pool, the draft model's (MemoryRequest::draft_model)
  // included; draft_bytes_per_token is that share (0 without a draft).
  size_t bytes_per_token = 0;
  size_t draft_bytes_per_token = 0;

  // Full-length sequences the pool holds at once.
  size_t full_sequences() const { return n_blocks / seq_blocks; }
};

// Blocks a sequence of n_tokens holds at its peak: all of them, or with a sliding window on
// every layer (window > 0), those its last window positions span during a prefill chunk of
// up to `chunk` tokens.
size_t sequence_blocks(size_t n_tokens, size_t block_size, size_t window = 0, size_t chunk = 0);

// K/V bytes per token of the pool: the model's, plus the draft's when there is one.
size_t pool_bytes_per_token(const ModelConfig& model, const ModelConfig* draft, KvType type);

// mem_available: bytes the machine can still give (MemAvailable), 0 when unknown, in which case
// an automatic budget is refused. Throws lift::Error naming the numbers and the flags to change
// when max-model-len exceeds the model's context or not one full-length sequence fits.
MemoryPlan plan_memory(const ModelConfig& model, size_t weight_bytes, const MemoryRequest& req,
                       size_t mem_available, size_t prefill_chunk = 0);

// MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read.
size_t mem_available_bytes();

// "1.5 GiB", "640.0 MiB", "12.0 KiB", "512 B".
std::string format_bytes(size_t bytes);

}  // namespace lift
