#include "model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/quantize.h"
#include "model/model_config.h"
#include "util/error.h"

namespace lift {
namespace {

constexpr float kWeightStd = 0.02f;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256+ : fast, and its upper bits (the ones used here) are of good quality.
class Xoshiro {
 public:
  explicit Xoshiro(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }

 private:
  uint64_t s_[4];
};

// Approximately normal values: the sum of four 16-bit uniforms (Irwin-Hall), centred and
// scaled to the requested standard deviation. Bounded at about 3.5 sigma, which is all a
// synthetic weight needs, at a couple of nanoseconds per value.
void fill_normal(Xoshiro& rng, float stddev, float* out, size_t n) {
  // Each 16-bit uniform has variance (2^32 - 1) / 12; four of them 4x that.
  const float scale = stddev / 37837.23f;  // sqrt(4 * (65536^2 - 1) / 12)
  for (size_t k = 0; k < n; ++k) {
    const uint64_t r = rng.next();
    const uint32_t sum = static_cast<uint32_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) +
                                               ((r >> 32) & 0xFFFF) + (r >> 48));
    out[k] = (static_cast<float>(sum) - 131070.0f) * scale;
  }
}

struct WeightFill {
  GgmlType type;
  uint64_t ne0;
  uint64_t rows;
  uint64_t seed;  // of this tensor; row r uses seed + r, so rows are independent streams
  float stddev = kWeightStd;

  void operator()(uint8_t* dst, size_t n_bytes) const {
    const size_t row_bytes = ggml_row_bytes(type, ne0);
    if (n_bytes != row_bytes * rows) throw Error("synthetic model: internal size mismatch");
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t n_threads = std::min<size_t>({hw, 32, std::max<size_t>(1, rows / 16)});
    auto work = [&](size_t first, size_t last) {
      std::vector<float> x(ne0);
      for (size_t r = first; r < last; ++r) {
        uint64_t s = seed + r;
        Xoshiro rng(splitmix64(s));
        fill_normal(rng, stddev, x.data(), x.size());
        kernels::quantize_row(type, x.data(), dst + r * row_bytes, ne0);
      }
    };
    if (n_threads == 1) {
      work(0, rows);
      return;
    }
    std::vector<std::thread> threads;
    threads.reserve(n_threads);
    for (size_t t = 0; t < n_threads; ++t) {
      threads.emplace_back(work, rows * t / n_threads, rows * (t + 1) / n_threads);
    }
    for (std::thread& th : threads) th.join();
  }
};

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("synthetic model: " + what);
}

}  // namespace

bool k_mix_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

GgmlType k_mix_type(GgmlType base, MixRole role, int layer, int n_layers) {
  if (role == MixRole::output) return GgmlType::Q6_K;
  if (base == GgmlType::Q3_K) {
    switch (role) {
      case MixRole::attn_v:
        return layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
      case MixRole::ffn_down:
        return layer < n_layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
      case MixRole::attn_output:
        return GgmlType::Q4_K;
      default:
        return base;
    }
  }
  const bool more = role == MixRole::attn_v || role == MixRole::ffn_down;
  return more && k_mix_more_bits(layer, n_layers) ? GgmlType::Q6_K : base;
}

// llama-quantize's nearest 32-element type for a K-quant tensor whose rows 256 does not tile.
static GgmlType k_fallback(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::IQ4_XS:
      return GgmlType::IQ4_NL;
    case GgmlType::Q4_K:
      return GgmlType::Q5_0;
    case GgmlType::Q5_K:
      return GgmlType::Q5_1;
    case GgmlType::Q6_K:
      return GgmlType::Q8_0;
    default:
      return GgmlType::F16;
  }
}

GgmlType fit_rows(GgmlType t, uint64_t row_elems, bool output) {
  auto fits = [&](GgmlType u) { return row_elems % ggml_type_info(u).block_elems == 0; };
  if (fits(t) || ggml_type_info(t).block_elems != 256) return t;
  // An output projection gets Q8_0 there (llama-quantize), any other tensor k_fallback's type.
  const GgmlType f = output ? GgmlType::Q8_0 : k_fallback(t);
  return fits(f) ? f : GgmlType::F16;
}

int synthetic_file_type(GgmlType t, bool k_mix) {
  if (k_mix) {
    return t == GgmlType::Q3_K ? 12 : t == GgmlType::Q4_K ? 15 : t == GgmlType::Q5_K ? 17 : -1;
  }
  switch (t) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    case GgmlType::Q4_0:
      return 2;
    case GgmlType::Q4_1:
      return 3;
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::Q5_0:
      return 8;
    case GgmlType::Q5_1:
      return 9;
    case GgmlType::BF16:
      return 32;
    case GgmlType::IQ4_NL:
      return 25;
    // Uniform K files have no ftype of their own; these are the nearest (Q2_K, _S, Q6_K).
    case GgmlType::Q2_K:
      return 10;
    case GgmlType::Q3_K:
      return 11;
    case GgmlType::Q4_K:
      return 14;
    case GgmlType::Q5_K:
      return 16;
    case GgmlType::Q6_K:
      return 18;
    case GgmlType::IQ4_XS:
      return 30;
    default:
      return -1;
  }
}

void write_synthetic_model(const SyntheticSpec& spec, const std::string& path) {
  const int file_type = synthetic_file_type(spec.type, spec.k_mix);
  check(file_type >= 0, "weight type " + std::string(ggml_type_name(spec.type)) +
                            (spec.k_mix ? " with the _M mix" : "") +
                            " is not supported (use F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                            "Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS; the _M mix with "
                            "Q3_K, Q4_K or Q5_K)");
  check(spec.dim > 0 && spec.n_layers > 0 && spec.n_heads > 0 && spec.n_kv_heads > 0 &&
            spec.ffn > 0 && spec.context_length > 0,
        "dim, n_layers, n_heads, n_kv_heads, ffn and context_length must be positive");
  check(spec.dim % spec.n_heads == 0, "dim " + std::to_string(spec.dim) +
                                          " is not a multiple of n_heads " +
                                          std::to_string(spec.n_heads));
  check(spec.n_heads % spec.n_kv_heads == 0, "n_heads " + std::to_string(spec.n_heads) +
                                                 " is not a multiple of n_kv_heads " +
                                                 std::to_string(spec.n_kv_heads));
  const int head_dim = spec.dim / spec.n_heads;
  check(head_dim % 2 == 0, "the head dimension " + std::to_string(head_dim) +
                               " must be even (rotary embeddings rotate pairs)");
  // K types fall back where their blocks cannot tile a row (fit_rows); llama-quantize refuses
  // the 32-element types there, and so does this.
  const uint32_t block = ggml_type_info(spec.type).block_elems;
  check(block == 256 || (spec.dim % block == 0 && spec.ffn % block == 0),
        "dim and ffn must be multiples of " + std::to_string(block) + " for " +
            std::string(ggml_type_name(spec.type)));
  check(spec.rope_base > 0.0f, "rope_base must be positive");
  check(spec.n_experts == 0 || (spec.n_experts_used > 0 && spec.n_experts_used <= spec.n_experts &&
                                spec.n_experts_used <= 64 && spec.n_experts <= 4096),
        "with experts, 0 < experts used <= min(experts, 64) and experts <= 4096");
  check(spec.residual_scale >= 0.0f && std::isfinite(spec.residual_scale),
        "residual_scale must be a finite non-negative number");

  const gguf::File vocab = gguf::File::open(spec.vocab_from);
  const gguf::Value* tokens = vocab.find("tokenizer.ggml.tokens");
  check(tokens != nullptr && tokens->type == gguf::ValueType::ARRAY &&
            tokens->elem_type == gguf::ValueType::STRING && tokens->count > 0,
        spec.vocab_from + " has no tokenizer.ggml.tokens string array to take the vocabulary from");
  const uint64_t n_vocab = tokens->count;

  const auto dim = static_cast<uint64_t>(spec.dim);
  const auto ffn = static_cast<uint64_t>(spec.ffn);
  const uint64_t kv_dim = static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(spec.n_kv_heads);

  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "synthetic-llama-" + std::to_string(spec.dim) + "d-" +
                                   std::to_string(spec.n_layers) + "L-" +
                                   std::string(ggml_type_name(spec.type)) +
                                   (spec.k_mix ? "_M" : ""));
  w.set_u32("general.file_type", static_cast<uint32_t>(file_type));
  if (ggml_type_info(spec.type).block_elems > 1) w.set_u32("general.quantization_version", 2);
  w.set_u32("llama.context_length", static_cast<uint32_t>(spec.context_length));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(spec.dim));
  w.set_u32("llama.block_count", static_cast<uint32_t>(spec.n_layers));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(spec.ffn));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(spec.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(spec.n_kv_heads));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_f32("llama.rope.freq_base", spec.rope_base);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("llama.vocab_size", static_cast<uint32_t>(n_vocab));
  if (spec.n_experts > 0) {
    w.set_u32("llama.expert_count", static_cast<uint32_t>(spec.n_experts));
    w.set_u32("llama.expert_used_count", static_cast<uint32_t>(spec.n_experts_used));
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) w.copy_value(key, value);
  }

  // Each weight tensor draws from its own seed, so its values do not depend on the others.
  uint64_t seed_state = spec.seed;
  // A matrix [ne1][ne0], or a stack of `stack` of them (experts).
  auto weight = [&](const std::string& name, uint64_t ne0, uint64_t ne1,
                    MixRole role = MixRole::other, int layer = 0, float stddev = kWeightStd,
                    uint64_t stack = 0, std::optional<GgmlType> type = std::nullopt) {
    const uint64_t tensor_seed = splitmix64(seed_state);
    const GgmlType t =
        type ? *type
             : fit_rows(spec.k_mix ? k_mix_type(spec.type, role, layer, spec.n_layers) : spec.type,
                        ne0, role == MixRole::output);
    if (stack > 0) {
      w.add_tensor(name, t, {ne0, ne1, stack},
                   WeightFill{t, ne0, ne1 * stack, tensor_seed, stddev});
    } else {
      w.add_tensor(name, t, {ne0, ne1}, WeightFill{t, ne0, ne1, tensor_seed, stddev});
    }
  };
  auto norm = [&](const std::string& name) {
    w.add_tensor(name, GgmlType::F32, {dim}, [](uint8_t* dst, size_t n_bytes) {
      const float one = 1.0f;
      for (size_t k = 0; k + 4 <= n_bytes; k += 4) std::memcpy(dst + k, &one, 4);
    });
  };

  // llama-quantize treats a tied token_embd as the output projection it also is.
  weight("token_embd.weight", dim, n_vocab, spec.tied ? MixRole::output : MixRole::other);
  for (int l = 0; l < spec.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float residual_std = kWeightStd * spec.residual_scale;
    norm(p + "attn_norm.weight");
    weight(p + "attn_q.weight", dim, dim);
    weight(p + "attn_k.weight", dim, kv_dim);
    weight(p + "attn_v.weight", dim, kv_dim, MixRole::attn_v, l);
    weight(p + "attn_output.weight", dim, dim, MixRole::attn_output, l, residual_std);
    norm(p + "ffn_norm.weight");
    if (spec.n_experts > 0) {
      const auto ne = static_cast<uint64_t>(spec.n_experts);
      weight(p + "ffn_gate_inp.weight", dim, ne, MixRole::other, l, kWeightStd, 0, GgmlType::F32);
      weight(p + "ffn_gate_exps.weight", dim, ffn, MixRole::other, l, kWeightStd, ne);
      weight(p + "ffn_up_exps.weight", dim, ffn, MixRole::other, l, kWeightStd, ne);
      weight(p + "ffn_down_exps.weight", ffn, dim, MixRole::ffn_down, l, residual_std, ne);
    } else {
      weight(p + "ffn_gate.weight", dim, ffn);
      weight(p + "ffn_up.weight", dim, ffn);
      weight(p + "ffn_down.weight", ffn, dim, MixRole::ffn_down, l, residual_std);
    }
  }
  norm("output_norm.weight");
  if (!spec.tied) weight("output.weight", dim, n_vocab, MixRole::output);

  w.write(path);
  // The loader's limits are the ones that count (ModelConfig::from_gguf): a file it would refuse
  // (e.g. 2048 heads) is not left behind as if it were a model.
  try {
    (void)ModelConfig::from_gguf(gguf::File::open(path));
  } catch (const Error& e) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    throw Error(std::string("synthetic model: lift would not load it: ") + e.what());
  }
}

}  // namespace lift
