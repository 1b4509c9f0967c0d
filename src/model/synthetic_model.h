// Random-weight llama models of any size and weight type, for benchmarks and tests that need a
// model shaped like a real one (a 1B-parameter file is written in seconds, in bounded memory).
#pragma once

#include <cstdint>
#include <string>

#include "gguf/ggml_type.h"

namespace lift {

struct SyntheticSpec {
  int dim = 768;
  int n_layers = 12;
  int n_heads = 12;
  int n_kv_heads = 12;
  int ffn = 2048;
  // Type of every 2-D weight, token_embd and output included: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
  // Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS. Norm weights are always F32 (all
  // ones).
  GgmlType type = GgmlType::Q8_0;
  // llama-quantize's "_M" mix for a K type (k_mix_type): Q4_K_M, Q5_K_M: output.weight, and
  // attn_v and ffn_down of the first and last eighth of the layers and of every third layer
  // between, become Q6_K. Q3_K_M: output.weight Q6_K; attn_output Q4_K; attn_v Q5_K in the
  // first two layers, Q4_K after; ffn_down Q5_K in the first sixteenth, Q4_K after.
  bool k_mix = false;
  bool tied = false;  // no output.weight: the output projection reuses token_embd
  // Scales the spread of the residual branches' output projections (attn_output, ffn_down).
  // At 1 every layer's update outweighs the embedding, so a model cut to its first layers
  // (lift make-draft) never agrees with the whole; small values make later layers refine, as
  // in trained models, and such a draft agree often (speculative decoding benchmarks).
  float residual_scale = 1.0f;
  uint64_t seed = 0;
  int context_length = 4096;
  float rope_base = 10000;
  // Mixture of experts (Mixtral-style): n_experts SwiGLU experts of width ffn per layer, as
  // stacked *_exps tensors, n_experts_used per token; the router ffn_gate_inp stays F32, as
  // llama-quantize leaves it. 0: dense FFNs.
  int n_experts = 0;
  int n_experts_used = 0;
  // Every tokenizer.* key is copied from this GGUF; the vocabulary size is its token count.
  std::string vocab_from = "../shared/models/vocab/ggml-vocab-llama-spm.gguf";
};

// Writes a GGUF v3 `llama` model with ggml tensor names and shapes; weights are roughly
// N(0, 0.02), a deterministic function of spec.seed (the same spec gives the same bytes,
// whatever the thread count). A tensor whose rows the chosen type cannot tile in whole blocks
// takes llama-quantize's fallback (fit_rows). Throws lift::Error for an inconsistent spec (e.g.
// dim not a multiple of n_heads), an unreadable vocab file or a failed write.
void write_synthetic_model(const SyntheticSpec& spec, const std::string& path);

// The general.file_type (llama_ftype) value for a model whose weights are of type t (with the
// _M mix when k_mix); -1 for types without one.
int synthetic_file_type(GgmlType t, bool k_mix = false);

// Whether llama-quantize's Q4_K_M / Q5_K_M mixes give layer `layer` of n_layers more bits
// (Q6_K) for attn_v and ffn_down.
bool k_mix_more_bits(int layer, int n_layers);

// The weights whose type an _M mix may change (every other one keeps the base type).
enum class MixRole { other, attn_v, attn_output, ffn_down, output };
// The type of a weight of `role` in layer `layer` of n_layers under base's _M mix.
GgmlType k_mix_type(GgmlType base, MixRole role, int layer, int n_layers);

// The type a tensor of K type t with rows of row_elems elements is written in: t where its
// blocks tile the rows, else llama-quantize's fallback (Qwen2.5-0.5B's 896-wide rows, say):
// Q2_K/Q3_K/IQ4_XS IQ4_NL, Q4_K Q5_0, Q5_K Q5_1, Q6_K Q8_0, an output projection (`output`) Q8_0;
// F16 where that does not tile them either. Other types are returned as they are.
GgmlType fit_rows(GgmlType t, uint64_t row_elems, bool output);

}  // namespace lift
