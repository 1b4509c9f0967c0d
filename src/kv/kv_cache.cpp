#include "kv/kv_cache.h"

#include <algorithm>

namespace lift {

KvCache::KvCache(const ModelConfig& cfg, size_t n_blocks, size_t block_size)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_(static_cast<size_t>(cfg.kv_dim())),
      n_layers_(static_cast<size_t>(cfg.n_layers)) {
  k_.resize(n_layers_);
  v_.resize(n_layers_);
  for (size_t l = 0; l < n_layers_; ++l) {
    k_[l].assign(n_blocks * block_size * kv_dim_, 0.0f);
    v_[l].assign(n_blocks * block_size * kv_dim_, 0.0f);
  }
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  const size_t n = block_size_ * kv_dim_;
  for (size_t l = 0; l < n_layers_; ++l) {
    std::copy_n(k_[l].data() + static_cast<size_t>(src) * n, n,
                k_[l].data() + static_cast<size_t>(dst) * n);
    std::copy_n(v_[l].data() + static_cast<size_t>(src) * n, n,
                v_[l].data() + static_cast<size_t>(dst) * n);
  }
}

}  // namespace lift
