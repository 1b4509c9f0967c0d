#include "kv/kv_cache.h"

#include <sys/resource.h>

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

namespace {

// Every buffer's first 2 MB, then every buffer's next 2 MB, ...: blocks are handed out from the
// lowest up, and each block lies at the same offset in every layer's K and V. The faulting
// leaves bytes as they are, so it may race the engine's writes; where the kernel cannot do it,
// pages fault as they are first used.
constexpr size_t kChunk = size_t{2} << 20;

// Faults in [from, to) of each buffer, chunk by chunk; false where the kernel refuses.
bool prefault(const std::stop_token& stop, const std::vector<uint8_t*>& bufs, size_t from,
              size_t to) {
  for (size_t off = from; off < to; off += kChunk) {
    for (uint8_t* buf : bufs) {
      if (stop.stop_requested()) return false;
      if (!populate_streamed(buf + off, std::min(to, off + kChunk) - off)) return false;
    }
  }
  return true;
}

}  // namespace

KvCache::KvCache(const ModelConfig& cfg, size_t n_blocks, size_t block_size, KvType type,
                 TpShard shard)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_(tp_kv_part(cfg, shard).second),
      n_layers_(static_cast<size_t>(cfg.n_layers)),
      first_(tp_kv_part(cfg, shard).first),
      v_transposed_(v_transposed_for(static_cast<size_t>(cfg.head_dim))),
      v_run_(v_transposed_ ? 0 : static_cast<size_t>(cfg.head_dim)),
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
  std::vector<uint8_t*> bufs;
  for (size_t l = 0; l < n_layers_; ++l) {
    k_.push_back(zeroed());
    v_.push_back(zeroed());
    bufs.push_back(k_.back().get());
    bufs.push_back(v_.back().get());
  }
  // The first chunk of every buffer here (the 1.1B's 44 take ~100 ms), so that a request
  // arriving with the model does not wait on them; the rest behind, at low priority.
  const size_t first = std::min(bytes, kChunk);
  if (prefault({}, bufs, 0, first) && first < bytes) {
    prefault_ = std::jthread(
        [first, bytes](const std::stop_token& stop, const std::vector<uint8_t*>& b) {
          setpriority(PRIO_PROCESS, 0, 19);  // Linux: this thread only
          prefault(stop, b, first, bytes);
        },
        std::move(bufs));
  }
}

void KvCache::finish_prefault() {
  if (prefault_.joinable()) prefault_.join();
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
          v_run_};
}

MemRange KvCache::k_block(size_t layer, int32_t block) const {
  const size_t n = block_size_ * kv_dim_ * elem_bytes_;
  return {k_[layer].get() + static_cast<size_t>(block) * n, n};
}

MemRange KvCache::v_block(size_t layer, int32_t block) const {
  const size_t n = block_size_ * kv_dim_ * elem_bytes_;
  return {v_[layer].get() + static_cast<size_t>(block) * n, n};
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  const size_t n = block_size_ * kv_dim_ * elem_bytes_;
  const size_t s = static_cast<size_t>(src) * n, d = static_cast<size_t>(dst) * n;
  for (size_t l = 0; l < n_layers_; ++l) {
    std::memcpy(k_[l].get() + d, k_[l].get() + s, n);
    std::memcpy(v_[l].get() + d, v_[l].get() + s, n);
  }
}

}  // namespace lift
