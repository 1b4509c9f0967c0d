// The architecture table: for each `general.architecture` lift runs, which tensors a layer has
// and how the one forward pass (LlamaModel::forward) uses them. Everything an architecture
// changes about the function is a field here, so adding one is a row, not a copy of the
// forward pass; a file asking for anything not described here is refused.
#pragma once

#include <string>
#include <string_view>

#include "kernels/backend.h"

namespace lift {

enum class Activation { silu, gelu_tanh };  // the FFN's gate: SwiGLU or GeGLU

// Which layers use `{arch}.attention.sliding_window`.
enum class WindowLayers {
  none,     // no sliding window: a file that sets the key is refused
  all,      // every layer (Phi-3)
  even,     // layers 0, 2, 4, ... (Gemma 2)
  pattern,  // all but every n-th: layer l is global when (l + 1) % n == 0 (Gemma 3)
};

// How the query is scaled before the dot products.
enum class QueryScale {
  head_dim,  // 1 / sqrt(head_dim)
  // Gemma: 1 / sqrt(dim / heads) for the largest model of the family (the original code's
  // query_pre_attn_scalar, not in GGUF), recognized by its layer count; else 1 / sqrt(head_dim)
  gemma,
};

struct ArchSpec {
  std::string_view name;
  RopeStyle rope = RopeStyle::adjacent;
  Activation act = Activation::silu;
  bool qkv_bias = false;     // attn_{q,k,v}.bias after the projections (Qwen 2)
  bool qk_norm = false;      // attn_{q,k}_norm: RMSNorm per head before rope (Qwen 3, Gemma 3)
  bool post_norms = false;   // post_attention_norm, post_ffw_norm on each branch's output (Gemma)
  bool fused_qkv = false;    // attn_qkv = [Q; K; V] rows instead of attn_q/k/v (Phi-3)
  bool fused_up = false;     // ffn_up = [gate; up] rows and no ffn_gate (Phi-3)
  bool embed_scale = false;  // embeddings times sqrt(dim) (Gemma)
  bool softcaps = false;     // attn_logit_softcapping, final_logit_softcapping (Gemma 2)
  bool rope_freqs = false;   // optional rope_freqs.weight divides the frequencies (Llama 3)
  // Optional rope_factors_long.weight and rope_factors_short.weight (Phi-3's LongRoPE): one of
  // them divides the frequencies, by the context the engine runs with.
  bool rope_factor_sets = false;
  // Mixture-of-experts FFNs where {arch}.expert_count > 0 (Mixtral's llama files, Qwen3-MoE):
  // a router picks expert_used_count of expert_count SwiGLU experts per token, weighted by
  // their softmax probabilities renormalized over the chosen ones. moe_only: always.
  bool experts = false;
  bool moe_only = false;
  bool moe_renormalize = true;  // false: the chosen probabilities as they are (Qwen2-MoE)
  // Qwen2-MoE's shared expert: a SwiGLU FFN (*_shexp, expert_shared_feed_forward_length wide)
  // every token runs, scaled by sigmoid(ffn_gate_inp_shexp . x), added to the routed experts.
  bool shared_expert = false;
  WindowLayers window = WindowLayers::none;
  int window_pattern = 0;        // WindowLayers::pattern's n
  float local_rope_base = 0.0f;  // >0: sliding layers use this base, unscaled (Gemma 3)
  QueryScale query_scale = QueryScale::head_dim;
  int gemma_large_layers = 0;  // QueryScale::gemma: the large model's block_count
};

// The row for `arch`, or nullptr.
const ArchSpec* find_arch(std::string_view arch);
// "llama, qwen2, ...": for error messages and docs.
std::string supported_archs();

}  // namespace lift
