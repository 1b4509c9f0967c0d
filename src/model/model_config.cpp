#include "model/model_config.h"

#include <cmath>
#include <cstdio>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace lift {

namespace {

int64_t require_int(const gguf::File& f, const std::string& key, int64_t lo, int64_t hi) {
  const auto v = f.get_int(key);
  if (!v) throw Error(f.path() + ": missing metadata key '" + key + "'");
  if (*v < lo || *v > hi) {
    throw Error(f.path() + ": metadata '" + key + "' = " + std::to_string(*v) +
                " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return *v;
}

// A float key (or its default) within [lo, hi]: NaN, infinities and values whose arithmetic
// would overflow (a denormal rope base, an infinite soft-cap) become load errors here rather
// than NaN logits later.
double float_in(const gguf::File& f, const std::string& key, double fallback, double lo,
                double hi) {
  const double v = f.get_float(key).value_or(fallback);
  // Files store these as f32: a bound counts as its nearest f32 (1e-12f is just below 1e-12).
  if (!(v >= static_cast<float>(lo) && v <= static_cast<float>(hi))) {
    auto g = [](double x) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", x);
      return std::string(buf);
    };
    throw Error(f.path() + ": metadata '" + key + "' = " + g(v) + " is out of range [" + g(lo) +
                ", " + g(hi) + "]");
  }
  return v;
}

// `{arch}.rope.scaling.*`: the factor positions are multiplied by, and YaRN's parameters.
float read_rope_scaling(const gguf::File& f, const std::string& p, int context_length,
                        ModelConfig::Yarn& yarn) {
  if (f.get_float(p + "rope.scale_linear")) {
    return static_cast<float>(1.0 / float_in(f, p + "rope.scale_linear", 1.0, 1e-6, 1e6));
  }
  const auto type = f.get_string(p + "rope.scaling.type");
  if (!type || *type == "none") return 1.0f;
  if (*type != "linear" && *type != "yarn") {
    throw Error(f.path() + ": metadata '" + p + "rope.scaling.type' = '" + std::string(*type) +
                "' is not supported (lift implements 'none', 'linear' and 'yarn')");
  }
  if (!f.get_float(p + "rope.scaling.factor")) {
    throw Error(f.path() + ": missing metadata key '" + p + "rope.scaling.factor'");
  }
  const double factor = float_in(f, p + "rope.scaling.factor", 1.0, 1e-6, 1e6);
  if (*type == "yarn") {
    yarn.on = true;
    // As llama.cpp: the training context when the file does not name the original one.
    yarn.orig_ctx = float_in(f, p + "rope.scaling.original_context_length",
                             static_cast<double>(context_length), 1.0, 1e9);
    yarn.beta_fast = float_in(f, p + "rope.scaling.yarn_beta_fast", 32.0, 1e-6, 1e6);
    yarn.beta_slow = float_in(f, p + "rope.scaling.yarn_beta_slow", 1.0, 1e-6, 1e6);
    yarn.attn_factor = float_in(f, p + "rope.scaling.attn_factor", 1.0, 1e-6, 1e3);
  }
  return static_cast<float>(1.0 / factor);
}

// Metadata a file may carry that would change the function in ways lift does not compute.
void refuse_unsupported(const gguf::File& f, const ModelConfig& c, const std::string& p) {
  if (!c.spec.experts && f.get_int(p + "expert_count").value_or(0) > 0) {
    throw Error(f.path() + ": metadata '" + p +
                "expert_count': mixture-of-experts models of "
                "architecture '" +
                c.arch +
                "' are not supported (lift runs them for llama and "
                "qwen3moe)");
  }
  if (!c.spec.shared_expert && f.get_int(p + "expert_shared_count").value_or(0) > 0) {
    throw Error(f.path() + ": metadata '" + p +
                "expert_shared_count': shared experts are not "
                "supported");
  }
  if (!c.spec.softcaps) {
    for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      if (f.get_float(p + k).value_or(0.0) != 0.0) {
        throw Error(f.path() + ": metadata '" + p + k + "' is not supported for architecture '" +
                    c.arch + "'");
      }
    }
  }
  if (c.spec.window == WindowLayers::none &&
      f.get_int(p + "attention.sliding_window").value_or(0) > 0) {
    throw Error(f.path() + ": metadata '" + p +
                "attention.sliding_window' is not supported for architecture '" + c.arch + "'");
  }
}

// Which layers slide, and how far (ModelConfig::layer_window).
std::vector<int> layer_windows(const gguf::File& f, const ModelConfig& c, const std::string& p) {
  const std::string key = p + "attention.sliding_window";
  int w = 0;
  if (c.spec.window == WindowLayers::none) return {};
  if (f.get_int(key)) {
    w = static_cast<int>(require_int(f, key, 0, 1 << 24));
  } else if (c.spec.window == WindowLayers::pattern) {
    throw Error(f.path() + ": missing metadata key '" + key + "'");
  } else if (c.spec.softcaps) {
    w = 4096;  // Gemma 2's published window, the reference implementations' default
  }
  if (w == 0) return {};
  // The file may say which layers slide (newer converters): a period n as the table's pattern,
  // or one flag per layer (non-zero: sliding). Otherwise the table's rule.
  const std::string pkey = p + "attention.sliding_window_pattern";
  std::vector<int64_t> flags;
  int period = c.spec.window == WindowLayers::pattern ? c.spec.window_pattern : 0;
  if (const gguf::Value* v = f.find(pkey)) {
    if (v->type == gguf::ValueType::ARRAY) {
      flags = *f.get_int_array(pkey);
      if (flags.size() != static_cast<size_t>(c.n_layers)) {
        throw Error(f.path() + ": metadata '" + pkey + "' has " + std::to_string(flags.size()) +
                    " entries for " + std::to_string(c.n_layers) + " layers");
      }
    } else {
      period = static_cast<int>(require_int(f, pkey, 1, 1 << 16));
    }
  }
  std::vector<int> out(static_cast<size_t>(c.n_layers), 0);
  for (int l = 0; l < c.n_layers; ++l) {
    bool slides =
        c.spec.window == WindowLayers::all || (c.spec.window == WindowLayers::even && l % 2 == 0);
    if (period > 0) slides = (l + 1) % period != 0;
    if (!flags.empty()) slides = flags[static_cast<size_t>(l)] != 0;
    out[static_cast<size_t>(l)] = slides ? w : 0;
  }
  return out;
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.path() + ": missing metadata key 'general.architecture'");
  c.arch = std::string(*arch);
  const ArchSpec* spec = find_arch(c.arch);
  if (!spec) {
    throw Error(f.path() + ": architecture '" + c.arch + "' is not supported (lift runs " +
                supported_archs() + ")");
  }
  c.spec = *spec;
  c.name = std::string(f.get_string("general.name").value_or(c.arch));
  const std::string p = c.arch + ".";
  c.dim = static_cast<int>(require_int(f, p + "embedding_length", 1, 1 << 16));
  c.n_layers = static_cast<int>(require_int(f, p + "block_count", 1, 1024));
  c.n_heads = static_cast<int>(require_int(f, p + "attention.head_count", 1, 1024));
  c.n_kv_heads = f.get_int(p + "attention.head_count_kv")
                     ? static_cast<int>(require_int(f, p + "attention.head_count_kv", 1, 1024))
                     : c.n_heads;
  c.ffn_dim = static_cast<int>(require_int(f, p + "feed_forward_length", 1, 1 << 20));
  c.context_length = static_cast<int>(require_int(f, p + "context_length", 1, 1 << 24));
  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error(f.path() + ": head_count " + std::to_string(c.n_heads) +
                " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
  }
  // Heads may be narrower or wider than dim / heads (Gemma, Qwen 3): key_length says.
  if (f.get_int(p + "attention.key_length")) {
    c.head_dim = static_cast<int>(require_int(f, p + "attention.key_length", 2, 1 << 12));
  } else {
    if (c.dim % c.n_heads != 0) {
      throw Error(f.path() + ": embedding_length " + std::to_string(c.dim) +
                  " is not divisible by head_count " + std::to_string(c.n_heads));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  if (f.get_int(p + "attention.value_length") &&
      require_int(f, p + "attention.value_length", 1, 1 << 12) != c.head_dim) {
    throw Error(f.path() + ": attention.value_length differs from the key length " +
                std::to_string(c.head_dim) + " (not supported)");
  }
  c.rope_dim = f.get_int(p + "rope.dimension_count")
                   ? static_cast<int>(require_int(f, p + "rope.dimension_count", 2, c.head_dim))
                   : c.head_dim;
  if (c.rope_dim % 2 != 0) throw Error(f.path() + ": rope.dimension_count must be even");
  // Above 1: YaRN's ramp divides by log(base), and a base below 1 turns the highest pair
  // fastest (a denormal one overflows the frequencies).
  c.rope_base = static_cast<float>(float_in(f, p + "rope.freq_base", 10000.0, 1.0 + 1e-6, 1e12));
  c.rope_freq_scale = read_rope_scaling(f, p, c.context_length, c.yarn);
  if (!c.yarn.on) {
    c.rope_attn_factor =
        static_cast<float>(float_in(f, p + "rope.scaling.attn_factor", 1.0, 1e-6, 1e3));
  }
  c.rope_orig_ctx = static_cast<int>(float_in(f, p + "rope.scaling.original_context_length",
                                              static_cast<double>(c.context_length), 1.0, 1e9));
  c.rms_eps =
      static_cast<float>(float_in(f, p + "attention.layer_norm_rms_epsilon", 1e-5, 1e-12, 0.5));
  refuse_unsupported(f, c, p);
  if (c.spec.experts && f.get_int(p + "expert_count").value_or(0) > 0) {
    c.n_experts = static_cast<int>(require_int(f, p + "expert_count", 1, 1 << 12));
    c.n_experts_used = static_cast<int>(
        require_int(f, p + "expert_used_count", 1, std::min<int64_t>(c.n_experts, 64)));
    c.expert_ffn_dim =
        f.get_int(p + "expert_feed_forward_length")
            ? static_cast<int>(require_int(f, p + "expert_feed_forward_length", 1, 1 << 20))
            : c.ffn_dim;
    if (c.spec.shared_expert) {
      c.shared_expert_ffn_dim =
          static_cast<int>(require_int(f, p + "expert_shared_feed_forward_length", 1, 1 << 20));
    }
  } else if (c.spec.moe_only) {
    throw Error(f.path() + ": missing metadata key '" + p + "expert_count'");
  }
  const bool large_gemma =
      c.spec.query_scale == QueryScale::gemma && c.n_layers == c.spec.gemma_large_layers;
  const int scale_dim = large_gemma ? c.dim / c.n_heads : c.head_dim;
  c.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(scale_dim)));
  if (c.spec.softcaps) {
    // 0 turns a cap off.
    c.attn_softcap = static_cast<float>(float_in(f, p + "attn_logit_softcapping", 50.0, 0.0, 1e6));
    c.final_softcap =
        static_cast<float>(float_in(f, p + "final_logit_softcapping", 30.0, 0.0, 1e6));
  }
  c.layer_window = layer_windows(f, c, p);
  const auto& emb = f.tensor("token_embd.weight");
  c.n_vocab = static_cast<int>(emb.ne[1]);
  if (const auto tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->count != emb.ne[1]) {
    throw Error(f.path() + ": token_embd.weight has " + std::to_string(emb.ne[1]) +
                " rows but the vocabulary has " + std::to_string(tokens->count) + " tokens");
  }
  return c;
}

}  // namespace lift
