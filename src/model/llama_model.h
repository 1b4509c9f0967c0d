// A decoder-only transformer of any architecture in the table (model/arch.h): weights viewed in
// place in the mapped GGUF file, and one forward pass, parameterized by the table, that serves
// prefill chunks and decode tokens of many sequences alike. (The name predates the table.)
#pragma once

#include <deque>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/backend.h"
#include "kernels/panel.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "parallel/tp_split.h"

namespace lift {

// One layer's weights; the optional ones (by the architecture table) are empty where absent.
struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  Matrix wq, wk, wv, wo;  // views of rows of attn_qkv where the architecture fuses them
  Matrix w_gate, w_up, w_down;
  std::vector<float> bq, bk, bv;                     // ArchSpec::qkv_bias
  std::vector<float> q_norm, k_norm;                 // ArchSpec::qk_norm: [head_dim]
  std::vector<float> post_attn_norm, post_ffn_norm;  // ArchSpec::post_norms
  // Mixture of experts (ModelConfig::n_experts > 0), instead of w_gate/w_up/w_down: the router
  // [n_experts x dim] and each expert's products, views of the *_exps tensors' rows.
  Matrix router;
  std::vector<Matrix> e_gate, e_up, e_down;
  Matrix s_gate_inp, s_gate, s_up, s_down;  // ArchSpec::shared_expert (s_gate_inp: one row)
};

class LlamaModel {
 public:
  // Maps the file and checks every tensor's presence, type and shape; throws lift::Error.
  // A tensor-parallel rank's `shard` repacks only its rows of each product (the rest of the
  // file is never read for them, except the embedding table's lookups).
  static std::unique_ptr<LlamaModel> load(const std::string& path, TpShard shard = {});
  static std::unique_ptr<LlamaModel> from_file(gguf::File file, TpShard shard = {});

  const ModelConfig& config() const { return cfg_; }
  const gguf::File& file() const { return file_; }
  size_t weight_bytes() const { return weight_bytes_; }
  bool tied_output() const { return tied_; }

  // The longest sequence the engine will run. Phi-3's LongRoPE files carry two sets of rope
  // factors: the long ones when sequences may pass the original context, else the short ones
  // (as llama.cpp decides by its context size; short until this is called). Fixed per engine,
  // so every K/V entry of a sequence is rotated alike.
  void set_context_length(size_t max_len);
  // "long" or "short" when the file has LongRoPE's factor sets, else empty.
  const std::string& rope_factor_set() const { return factor_set_; }

  // Runs the batch through the model, writing each token's K/V into `kv` at its position's
  // slot, and fills logits[i * n_vocab ...] for the i-th entry of batch.logit_rows.
  void forward(Backend& backend, const ForwardBatch& batch, KvCache& kv, float* logits);

 private:
  LlamaModel(gguf::File file, TpShard shard);
  void ensure_workspace(size_t n_tokens);
  // Repacks every matrix product's weights for the active kernels where they have a panel
  // layout (the embedding table keeps its rows: lookups read it by row).
  void pack_weights();
  void load_layer(int l);
  // The FFN of a mixture-of-experts layer: xn_ [n][dim] in, proj_ [n][dim] out.
  void moe_ffn(Backend& be, const LayerWeights& w, Rows rows);
  // What the work between products reads, named to the backend before the product that comes
  // first (Backend::prefetch_during_next): the K/V blocks layer l's attention reads, and the
  // small vectors (norm weights, biases) of the stages after a product.
  void hint_kv_reads(Backend& be, const ForwardBatch& batch, const KvCache& kv, int layer,
                     std::initializer_list<const std::vector<float>*> also);
  void hint_vectors(Backend& be, std::initializer_list<const std::vector<float>*> vs);
  // Fills inv_freq_: the global layers' frequencies and, for architectures with local rope,
  // the sliding layers'.
  void init_rope();

  gguf::File file_;
  TpShard shard_;
  ModelConfig cfg_;
  Matrix token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
  // The magnitude of the global layers' cos and sin: YaRN's, else rope.scaling.attn_factor.
  float rope_mscale_ = 1.0f;
  bool long_factors_ = false;  // set_context_length's choice
  std::string factor_set_;
  std::vector<float> inv_freq_[2];  // [0]: global layers, [1]: ModelConfig::local_rope layers
  std::deque<kernels::PanelMatrix> panels_;  // stable addresses: Matrix::panel points here
  size_t weight_bytes_ = 0;
  bool tied_ = false;

  // Activations, sized for the largest batch seen so far.
  size_t capacity_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_, hidden_;
  // Mixture of experts: router logits [n][experts]; per token and slot (its j-th expert) the
  // expert, its weight and its row among all experts' rows side by side (expert by expert),
  // whose inputs are moe_x_ and outputs moe_y_ [n * used][dim].
  std::vector<float> router_logits_, slot_weight_, moe_x_, moe_y_, shared_gate_;
  std::vector<int32_t> slot_expert_;
  std::vector<uint32_t> slot_pos_;
  std::vector<std::vector<uint32_t>> expert_slots_;  // per expert: token * used + slot
  std::vector<Product> products_, down_products_;    // gate and up of each expert; down
  std::vector<int32_t> n_ctx_;
  std::vector<size_t> slots_;      // per token: its cache slot
  std::vector<MemRange> hints_;    // hint_kv_reads' and hint_vectors' ranges
  std::vector<float> rope_cs_[2];  // per token: cos, sin of each rotated pair (by inv_freq_)
};

}  // namespace lift
