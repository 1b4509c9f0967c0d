#include "model/model_config.h"

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

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.path() + ": missing metadata key 'general.architecture'");
  c.arch = std::string(*arch);
  if (c.arch != "llama") {
    throw Error(f.path() + ": architecture '" + c.arch + "' is not supported (lift runs 'llama')");
  }
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
  if (c.dim % c.n_heads != 0) {
    throw Error(f.path() + ": embedding_length " + std::to_string(c.dim) +
                " is not divisible by head_count " + std::to_string(c.n_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error(f.path() + ": head_count " + std::to_string(c.n_heads) +
                " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
  }
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = f.get_int(p + "rope.dimension_count")
                   ? static_cast<int>(require_int(f, p + "rope.dimension_count", 2, c.head_dim))
                   : c.head_dim;
  if (c.rope_dim % 2 != 0) throw Error(f.path() + ": rope.dimension_count must be even");
  c.rope_base = static_cast<float>(f.get_float(p + "rope.freq_base").value_or(10000.0));
  c.rms_eps =
      static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rope_base > 0.0f)) throw Error(f.path() + ": rope.freq_base must be positive");
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f)) {
    throw Error(f.path() + ": layer_norm_rms_epsilon is out of range");
  }
  const auto& emb = f.tensor("token_embd.weight");
  c.n_vocab = static_cast<int>(emb.ne[1]);
  if (const auto tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->count != emb.ne[1]) {
    throw Error(f.path() + ": token_embd.weight has " + std::to_string(emb.ne[1]) +
                " rows but the vocabulary has " + std::to_string(tokens->count) + " tokens");
  }
  return c;
}

}  // namespace lift
