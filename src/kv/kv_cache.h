// Storage for every layer's keys and values, cut into fixed-size blocks of token slots.
// Which sequence owns which block is decided by the block manager; this class only holds
// the bytes and knows where slot s of layer l lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/model_config.h"
#include "parallel/tp_split.h"
#include "util/large_alloc.h"

namespace lift {

enum class KvType { f32, f16 };
const char* kv_type_name(KvType t);
KvType parse_kv_type(const std::string& s);  // "f32" | "f16"; throws lift::Error

class KvCache {
 public:
  // A tensor-parallel rank's cache (`shard`) holds only that rank's K/V heads (maybe none).
  KvCache(const ModelConfig& cfg, size_t n_blocks, size_t block_size, KvType type = KvType::f32,
          TpShard shard = {});

  // Bytes of K and V for one token over all layers.
  static size_t bytes_per_token(const ModelConfig& cfg, KvType type);
  // How many blocks fit in a memory budget.
  static size_t blocks_for_budget(const ModelConfig& cfg, KvType type, size_t block_size,
                                  size_t budget_bytes);

  size_t n_blocks() const { return n_blocks_; }
  size_t block_size() const { return block_size_; }
  size_t kv_dim() const { return kv_dim_; }
  KvType type() const { return type_; }
  size_t bytes_per_token() const { return 2 * kv_dim_ * elem_bytes_ * n_layers_; }
  size_t total_bytes() const { return bytes_per_token() * n_blocks_ * block_size_; }

  // Stores one token's K and V rows (converted to the cache's type) at a slot: of the whole
  // rows k and v, the elements this cache holds.
  void write(size_t layer, size_t slot, const float* k, const float* v);
  KvLayerView layer_view(size_t layer) const;
  // Runs per slot: the regions a layer's K and V are kept in, one per K/V head (one for narrow
  // heads, whose V is transposed; KvLayerView::head_stride).
  size_t n_runs() const { return run_ == 0 ? 0 : kv_dim_ / run_; }  // 0: a rank without heads
  // Where one block's K and where its V of a layer lie in run r's region: each one run of bytes.
  MemRange k_block(size_t layer, int32_t block, size_t r) const;
  MemRange v_block(size_t layer, int32_t block, size_t r) const;
  // Copies every layer's K/V of one block into another (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

 private:
  size_t n_blocks_, block_size_, kv_dim_, n_layers_, first_;
  bool v_transposed_;
  size_t v_run_;             // KvLayerView::v_run: one head's dimensions (0 with V transposed)
  size_t run_;               // dimensions per run: v_run_, or kv_dim_ for 0
  size_t run_bytes() const;  // one block's share of a run's region, in K or in V
  size_t block_offset(int32_t block, size_t r) const;  // bytes into a layer's K or V
  KvType type_;
  size_t elem_bytes_;
  // Fresh zeroed pages, huge where the kernel has them: a long context's decode streams them as
  // it does the weights (util/large_alloc.h).
  std::vector<StreamedPtr<uint8_t>> k_, v_;
};

}  // namespace lift
