// Storage for every layer's keys and values, cut into fixed-size blocks of token slots.
// Which sequence owns which block is decided by the block manager; this class only holds
// the bytes and knows where slot s of layer l lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/model_config.h"

namespace lift {

class KvCache {
 public:
  KvCache(const ModelConfig& cfg, size_t n_blocks, size_t block_size);

  size_t n_blocks() const { return n_blocks_; }
  size_t block_size() const { return block_size_; }
  size_t kv_dim() const { return kv_dim_; }
  // Bytes of K and V for one token over all layers.
  size_t bytes_per_token() const { return 2 * kv_dim_ * sizeof(float) * n_layers_; }

  float* k(size_t layer, size_t slot) { return k_[layer].data() + slot * kv_dim_; }
  float* v(size_t layer, size_t slot) { return v_[layer].data() + slot * kv_dim_; }
  KvLayerView layer_view(size_t layer) const {
    return {k_[layer].data(), v_[layer].data(), kv_dim_, block_size_};
  }
  // Copies every layer's K/V of one block into another (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

 private:
  size_t n_blocks_, block_size_, kv_dim_, n_layers_;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace lift
