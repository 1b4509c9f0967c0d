// Architecture hyper-parameters of a decoder-only model (model/arch.h), read from GGUF metadata
// and checked against the tensor shapes, so a file whose metadata and tensors disagree (or that
// asks for something lift does not implement) is refused early.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/arch.h"

namespace lift {
namespace gguf {
class File;
}

struct ModelConfig {
  std::string arch;
  ArchSpec spec;  // the architecture table's row for `arch`
  std::string name;
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;
  int ffn_dim = 0;
  // Mixture of experts (ArchSpec::experts): 0 experts is a dense FFN of ffn_dim.
  int n_experts = 0, n_experts_used = 0, expert_ffn_dim = 0;
  int shared_expert_ffn_dim = 0;  // ArchSpec::shared_expert
  int context_length = 0;
  float rope_base = 10000.0f;
  // Rope scaling: positions times rope_freq_scale (1 / rope.scaling.factor), for every pair
  // (linear) or blended by YaRN's ramp with the unscaled frequencies (ModelConfig::Yarn).
  float rope_freq_scale = 1.0f;
  // YaRN (rope.scaling.type yarn): pairs rotating fewer than beta_slow times over the original
  // context are scaled, those rotating more than beta_fast times are not, a linear ramp between;
  // cos and sin are multiplied by attn_factor * (1 + 0.1 ln(factor)).
  struct Yarn {
    bool on = false;
    double orig_ctx = 0;  // rope.scaling.original_context_length
    double beta_fast = 32.0, beta_slow = 1.0, attn_factor = 1.0;
  } yarn;
  // rope.scaling.attn_factor outside YaRN: cos and sin times it, whatever the scaling (as
  // llama.cpp; Phi-3's LongRoPE files carry sqrt(1 + ln(s) / ln(original context)) here).
  double rope_attn_factor = 1.0;
  // rope.scaling.original_context_length (else context_length): LongRoPE takes its long
  // factors when sequences may grow past it (LlamaModel::set_context_length).
  int rope_orig_ctx = 0;
  float rms_eps = 1e-5f;
  float attn_scale = 1.0f;     // the query scale
  float attn_softcap = 0.0f;   // attention scores' soft-capping, 0: none
  float final_softcap = 0.0f;  // the logits' soft-capping, 0: none

  // Sliding-window attention: on layer l, a token at position p attends only to positions
  // q with p - q < window(l); window 0 means the whole context. The KV manager may release a
  // sequence's blocks that every layer's window has left behind.
  std::vector<int> layer_window;  // per layer; empty: every layer is global

  int kv_dim() const { return n_kv_heads * head_dim; }
  int q_dim() const { return n_heads * head_dim; }
  // Gemma 3's local layers rotate with their own base and no scaling.
  bool local_rope(int layer) const { return spec.local_rope_base > 0.0f && window(layer) > 0; }
  int window(int layer) const {
    return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)];
  }
  // How far back any layer still looks: the largest window when every layer has one, 0 when
  // some layer is global (then no block of a sequence can be released early).
  int kv_window() const {
    if (layer_window.empty()) return 0;
    int w = layer_window[0];
    for (int x : layer_window) w = (x == 0 || w == 0) ? 0 : std::max(w, x);
    return w;
  }

  static ModelConfig from_gguf(const gguf::File& f);
};

}  // namespace lift
