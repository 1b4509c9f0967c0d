#include "model/arch.h"

#include <array>

namespace lift {

namespace {

// Facts from the published model definitions (Hugging Face transformers) and llama.cpp's GGUF
// conventions, checked against llama.cpp's outputs where ../shared/models/archs has a file.
constexpr std::array kArchs = {
    ArchSpec{.name = "llama", .rope_freqs = true, .experts = true},
    ArchSpec{.name = "qwen2", .rope = RopeStyle::neox, .qkv_bias = true},
    ArchSpec{.name = "qwen3", .rope = RopeStyle::neox, .qk_norm = true},
    ArchSpec{.name = "qwen2moe",
             .rope = RopeStyle::neox,
             .qkv_bias = true,
             .experts = true,
             .moe_only = true,
             .moe_renormalize = false,
             .shared_expert = true},
    ArchSpec{.name = "qwen3moe",
             .rope = RopeStyle::neox,
             .qk_norm = true,
             .experts = true,
             .moe_only = true},
    ArchSpec{.name = "phi3",
             .rope = RopeStyle::neox,
             .fused_qkv = true,
             .fused_up = true,
             .rope_factor_sets = true,
             .window = WindowLayers::all},
    // Gemma 1 (and CodeGemma): Gemma's embedding scale and GeGLU, no soft-capping or windows.
    ArchSpec{.name = "gemma",
             .rope = RopeStyle::neox,
             .act = Activation::gelu_tanh,
             .embed_scale = true},
    ArchSpec{.name = "gemma2",
             .rope = RopeStyle::neox,
             .act = Activation::gelu_tanh,
             .post_norms = true,
             .embed_scale = true,
             .softcaps = true,
             .window = WindowLayers::even,
             .query_scale = QueryScale::gemma,
             .gemma_large_layers = 46},
    ArchSpec{.name = "gemma3",
             .rope = RopeStyle::neox,
             .act = Activation::gelu_tanh,
             .qk_norm = true,
             .post_norms = true,
             .embed_scale = true,
             .window = WindowLayers::pattern,
             .window_pattern = 6,
             .local_rope_base = 10000.0f,
             .query_scale = QueryScale::gemma,
             .gemma_large_layers = 62},
};

}  // namespace

const ArchSpec* find_arch(std::string_view arch) {
  for (const ArchSpec& a : kArchs) {
    if (a.name == arch) return &a;
  }
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const ArchSpec& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace lift
