#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "kernels/ops.h"
#include "util/error.h"

namespace lift {

const char* kv_type_name(KvType t) { return t == KvType::f16 ? "f16" : "f32"; }

KvType parse_kv_type(const std::string& s) {
  if (s == "f32") return KvType::f32;
  if (s == "f16") return KvType::f16;
  throw Error("unknown KV cache type '" + s + "' (use f32 or f16)");
}

size_t KvCache::bytes_per_token(const ModelConfig& cfg, KvType type) {
  return 2 * static_cast<size_t>(cfg.kv_dim()) * (type == KvType::f16 ? 2 : 4) *
         static_cast<size_t>(cfg.n_layers);
}

size_t KvCache::blocks_for_budget(const ModelConfig& cfg, KvType type, size_t block_size,
                                  size_t budget_bytes) {
  return budget_bytes / (bytes_per_token(cfg, type) * block_size);
}

KvCache::KvCache(const ModelConfig& cfg, size_t n_blocks, size_t block_size, KvType type,
                 TpShard shard)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_(tp_kv_part(cfg, shard).second),
      n_layers_(static_cast<size_t>(cfg.n_layers)),
      first_(tp_kv_part(cfg, shard).first),
      v_transposed_(v_transposed_for(static_cast<size_t>(cfg.head_dim))),
      v_run_(v_transposed_ ? 0 : static_cast<size_t>(cfg.head_dim)),
      run_(v_run_ == 0 ? kv_dim_ : v_run_),
      type_(type),
      elem_bytes_(type == KvType::f16 ? 2 : 4) {
  if (block_size == 0) throw Error("KV block size must be positive");
  const size_t bytes = n_blocks * block_size * kv_dim_ * elem_bytes_;
  const auto zeroed = [&] {
    try {
      return StreamedPtr<uint8_t>(static_cast<uint8_t*>(alloc_streamed(bytes)));
    } catch (const std::bad_alloc&) {
      throw Error("cannot allocate " + std::to_string(bytes) + " bytes per layer for the KV " +
                  "cache (" + std::to_string(n_blocks) + " blocks); lower --kv-cache-memory");
    }
  };
  // A first write to a huge page zeroes all 2 MB of it (about 2 ms on this VM, whose host backs
  // the page then too), and blocks are handed out from the lowest up, each at the same offset in
  // every layer's K and V: the first request's first step would fault every buffer's first page
  // (the 1.1B's 44: time to first token 20 -> 120 ms). Those are faulted in here; the rest of
  // the budget is committed as it is first used (each later 2 MB of every layer once).
  for (size_t l = 0; l < n_layers_; ++l) {
    k_.push_back(zeroed());
    v_.push_back(zeroed());
    populate_streamed(k_.back().get(), std::min(bytes, kHugePageBytes));
    populate_streamed(v_.back().get(), std::min(bytes, kHugePageBytes));
  }
}

void KvCache::write(size_t layer, size_t slot, const float* k, const float* v) {
  kernels::kv_store(layer_view(layer), slot, 0, kv_dim_, k + first_, v + first_);
}

KvLayerView KvCache::layer_view(size_t layer) const {
  return {type_ == KvType::f16 ? GgmlType::F16 : GgmlType::F32,
          k_[layer].get(),
          v_[layer].get(),
          kv_dim_,
          block_size_,
          v_transposed_,
          v_run_,
          n_blocks_ * block_size_ * run_};
}

size_t KvCache::run_bytes() const { return block_size_ * run_ * elem_bytes_; }

size_t KvCache::block_offset(int32_t block, size_t r) const {
  return (r * n_blocks_ + static_cast<size_t>(block)) * run_bytes();
}

MemRange KvCache::k_block(size_t layer, int32_t block, size_t r) const {
  return {k_[layer].get() + block_offset(block, r), run_bytes()};
}

MemRange KvCache::v_block(size_t layer, int32_t block, size_t r) const {
  return {v_[layer].get() + block_offset(block, r), run_bytes()};
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  for (size_t l = 0; l < n_layers_; ++l) {
    for (size_t r = 0; r < n_runs(); ++r) {
      const size_t s = block_offset(src, r), d = block_offset(dst, r);
      std::memcpy(k_[l].get() + d, k_[l].get() + s, run_bytes());
      std::memcpy(v_[l].get() + d, v_[l].get() + s, run_bytes());
    }
  }
}

}  // namespace lift
