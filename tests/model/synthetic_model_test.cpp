#include "model/synthetic_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/dequant.h"
#include "temp_file.h"
#include "test_compare.h"
#include "test_paths.h"
#include "util/error.h"

namespace lift {
namespace {

namespace fs = std::filesystem;

// A temporary file removed when the test ends.
class TempFile : public test::TempFile {
 public:
  explicit TempFile(const std::string& tag) : test::TempFile("lift-synth", tag) {}
};

SyntheticSpec tiny(GgmlType t) {
  SyntheticSpec s;
  s.dim = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.ffn = 128;
  s.type = t;
  s.seed = 42;
  s.context_length = 256;
  s.rope_base = 500000.0f;
  s.vocab_from = test::model_path("stories260K/stories260K.gguf");
  return s;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void expect_shape(const gguf::File& f, const std::string& name, GgmlType type, uint64_t ne0,
                  uint64_t ne1) {
  SCOPED_TRACE(name);
  const gguf::TensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, type);
  EXPECT_EQ(t->n_dims, ne1 == 0 ? 1u : 2u);
  EXPECT_EQ(t->ne[0], ne0);
  EXPECT_EQ(t->ne[1], ne1 == 0 ? 1 : ne1);
}

// The Q4_K_M mix: Q6_K for output.weight and for attn_v/ffn_down of the layers llama-quantize
// picks (8 layers: 0, 3, 6 and 7), Q4_K everywhere else.
// A small model of base's _M mix with n_layers layers (widths multiples of 256), read back.
gguf::File mixed_model(GgmlType base, int n_layers, const TempFile& tmp) {
  SyntheticSpec s = tiny(base);
  s.dim = 256;
  s.ffn = 512;
  s.n_layers = n_layers;
  s.k_mix = true;
  write_synthetic_model(s, tmp.path());
  return gguf::File::open(tmp.path());
}

TEST(SyntheticModel, KMixTypesPerTensor) {
  TempFile tmp("q4_k_m");
  const gguf::File f = mixed_model(GgmlType::Q4_K, 8, tmp);
  EXPECT_EQ(f.get_int("general.file_type"), 15);
  EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q4_K);
  for (int l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const GgmlType more = (l == 0 || l == 3 || l == 6 || l == 7) ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(f.find_tensor(p + "attn_v.weight")->type, more) << l;
    EXPECT_EQ(f.find_tensor(p + "ffn_down.weight")->type, more) << l;
    EXPECT_EQ(f.find_tensor(p + "attn_q.weight")->type, GgmlType::Q4_K) << l;
    EXPECT_EQ(f.find_tensor(p + "ffn_up.weight")->type, GgmlType::Q4_K) << l;
  }
}

// The Q3_K_M mix: Q6_K output; Q4_K attn_output; attn_v Q5_K in layers 0-1 and Q4_K after;
// ffn_down Q5_K in the first sixteenth (layer 0 of 16), Q4_K after; Q3_K everywhere else.
TEST(SyntheticModel, Q3KMixTypesPerTensor) {
  TempFile tmp("q3_k_m");
  const gguf::File f = mixed_model(GgmlType::Q3_K, 16, tmp);
  EXPECT_EQ(f.get_int("general.file_type"), 12);
  EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q3_K);
  for (int l = 0; l < 16; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(f.find_tensor(p + "attn_v.weight")->type, l < 2 ? GgmlType::Q5_K : GgmlType::Q4_K)
        << l;
    EXPECT_EQ(f.find_tensor(p + "ffn_down.weight")->type, l < 1 ? GgmlType::Q5_K : GgmlType::Q4_K)
        << l;
    EXPECT_EQ(f.find_tensor(p + "attn_output.weight")->type, GgmlType::Q4_K) << l;
    EXPECT_EQ(f.find_tensor(p + "attn_q.weight")->type, GgmlType::Q3_K) << l;
    EXPECT_EQ(f.find_tensor(p + "ffn_gate.weight")->type, GgmlType::Q3_K) << l;
  }
}

// Rows K blocks cannot tile (dim 128 here, Qwen2.5-0.5B's 896) take llama-quantize's
// fallbacks: Q4_K -> Q5_0, Q6_K -> Q8_0, the output projection (a tied token_embd is one) Q8_0;
// ffn_down, whose rows are ffn wide (256), keeps its K types.
TEST(SyntheticModel, RowsKBlocksCannotTileTakeLlamaQuantizesFallbacks) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TempFile tmp(tied ? "fallback-tied" : "fallback");
    SyntheticSpec s = tiny(GgmlType::Q4_K);
    s.dim = 128;
    s.ffn = 256;
    s.n_layers = 8;
    s.k_mix = true;
    s.tied = tied;
    write_synthetic_model(s, tmp.path());
    const gguf::File f = gguf::File::open(tmp.path());
    if (tied) {
      EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
      EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q8_0);
    } else {
      EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q8_0);
      EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q5_0);
    }
    for (int l = 0; l < 8; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool more = l == 0 || l == 3 || l == 6 || l == 7;
      EXPECT_EQ(f.find_tensor(p + "attn_q.weight")->type, GgmlType::Q5_0) << l;
      EXPECT_EQ(f.find_tensor(p + "attn_v.weight")->type, more ? GgmlType::Q8_0 : GgmlType::Q5_0)
          << l;
      EXPECT_EQ(f.find_tensor(p + "ffn_gate.weight")->type, GgmlType::Q5_0) << l;
      EXPECT_EQ(f.find_tensor(p + "ffn_down.weight")->type, more ? GgmlType::Q6_K : GgmlType::Q4_K)
          << l;
    }
  }
  EXPECT_EQ(fit_rows(GgmlType::Q3_K, 896, false), GgmlType::IQ4_NL);
  EXPECT_EQ(fit_rows(GgmlType::Q5_K, 896, false), GgmlType::Q5_1);
  EXPECT_EQ(fit_rows(GgmlType::Q4_K, 48, false), GgmlType::F16);
  EXPECT_EQ(fit_rows(GgmlType::Q4_0, 48, false), GgmlType::Q4_0);  // refused by the writer
  EXPECT_EQ(fit_rows(GgmlType::Q6_K, 512, true), GgmlType::Q6_K);
}

TEST(SyntheticModel, TinyModelOfEveryTypeReadsBack) {
  const gguf::File vocab = gguf::File::open(test::model_path("stories260K/stories260K.gguf"));
  const auto vocab_tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(vocab_tokens);
  const uint64_t n_vocab = vocab_tokens->size();
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const SyntheticSpec spec = tiny(t);
    TempFile tmp(std::string(ggml_type_name(t)));
    write_synthetic_model(spec, tmp.path());
    EXPECT_LT(fs::file_size(tmp.path()), 10u << 20);
    const gguf::File f = gguf::File::open(tmp.path());

    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_TRUE(f.get_string("general.name"));
    EXPECT_EQ(f.get_int("general.file_type"), synthetic_file_type(t));
    EXPECT_EQ(f.get_int("llama.context_length"), 256);
    EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
    EXPECT_EQ(f.get_int("llama.block_count"), 2);
    EXPECT_EQ(f.get_int("llama.feed_forward_length"), 128);
    EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
    EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 16);
    EXPECT_EQ(f.get_float("llama.rope.freq_base"), 500000.0);
    EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                    1e-5f);
    // Every tokenizer key of the vocab file, unchanged.
    size_t n_tok_keys = 0;
    for (const auto& [key, v] : vocab.metadata()) {
      if (!key.starts_with("tokenizer.")) continue;
      ++n_tok_keys;
      const gguf::Value* got = f.find(key);
      ASSERT_NE(got, nullptr) << key;
      EXPECT_EQ(got->type, v.type) << key;
      EXPECT_EQ(got->count, v.count) << key;
    }
    EXPECT_GE(n_tok_keys, 3u);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), vocab_tokens);
    EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores"),
              vocab.get_float_array("tokenizer.ggml.scores"));

    EXPECT_EQ(f.tensors().size(), 3u + 2u * 9u);
    expect_shape(f, "token_embd.weight", t, 64, n_vocab);
    expect_shape(f, "output_norm.weight", GgmlType::F32, 64, 0);
    expect_shape(f, "output.weight", t, 64, n_vocab);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      expect_shape(f, p + "attn_norm.weight", GgmlType::F32, 64, 0);
      expect_shape(f, p + "attn_q.weight", t, 64, 64);
      expect_shape(f, p + "attn_k.weight", t, 64, 32);
      expect_shape(f, p + "attn_v.weight", t, 64, 32);
      expect_shape(f, p + "attn_output.weight", t, 64, 64);
      expect_shape(f, p + "ffn_norm.weight", GgmlType::F32, 64, 0);
      expect_shape(f, p + "ffn_gate.weight", t, 64, 128);
      expect_shape(f, p + "ffn_up.weight", t, 64, 128);
      expect_shape(f, p + "ffn_down.weight", t, 128, 64);
    }
    const gguf::TensorInfo& norm = f.tensor("blk.1.ffn_norm.weight");
    std::vector<float> ones(64);
    std::memcpy(ones.data(), norm.data, 64 * 4);
    for (float v : ones) EXPECT_EQ(v, 1.0f);
  }
}

TEST(SyntheticModel, WeightsAreRoughlyNormal002) {
  TempFile tmp("stats");
  write_synthetic_model(tiny(GgmlType::Q8_0), tmp.path());
  const gguf::File f = gguf::File::open(tmp.path());
  for (const char* name : {"token_embd.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight"}) {
    SCOPED_TRACE(name);
    const gguf::TensorInfo& t = f.tensor(name);
    std::vector<float> x = test::unwritten_floats(t.n_elems);
    kernels::dequantize_row(t.type, t.data, x.data(), x.size());
    double sum = 0, sq = 0, amax = 0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v)) << test::describe_bad(v);
      sum += v;
      sq += static_cast<double>(v) * v;
      amax = std::max(amax, std::fabs(static_cast<double>(v)));
    }
    const double n = static_cast<double>(x.size());
    const double mean = sum / n;
    const double stddev = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.002);
    EXPECT_NEAR(stddev, 0.02, 0.002);
    EXPECT_GT(amax, 0.05);  // tails exist (about 2.5 sigma and beyond)
    EXPECT_LT(amax, 0.08);  // and are bounded (Irwin-Hall stops near 3.5 sigma)
  }
  // Different tensors get different values.
  EXPECT_NE(std::memcmp(f.tensor("blk.0.attn_q.weight").data, f.tensor("blk.1.attn_q.weight").data,
                        f.tensor("blk.0.attn_q.weight").n_bytes),
            0);
}

TEST(SyntheticModel, TiedOmitsOutput) {
  SyntheticSpec spec = tiny(GgmlType::Q4_0);
  spec.tied = true;
  TempFile tmp("tied");
  write_synthetic_model(spec, tmp.path());
  const gguf::File f = gguf::File::open(tmp.path());
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_NE(f.find_tensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 2u + 2u * 9u);
}

TEST(SyntheticModel, SameSeedSameBytes) {
  TempFile a("seed-a"), b("seed-b"), c("seed-c");
  SyntheticSpec spec = tiny(GgmlType::Q5_1);
  write_synthetic_model(spec, a.path());
  write_synthetic_model(spec, b.path());
  spec.seed = 43;
  write_synthetic_model(spec, c.path());
  EXPECT_EQ(slurp(a.path()), slurp(b.path()));
  EXPECT_NE(slurp(a.path()), slurp(c.path()));
  EXPECT_EQ(slurp(a.path()).size(), slurp(c.path()).size());
}

TEST(SyntheticModel, DefaultVocabIsLlamaSpm) {
  SyntheticSpec spec = tiny(GgmlType::Q4_0);
  spec.vocab_from = test::model_path("vocab/ggml-vocab-llama-spm.gguf");
  spec.n_layers = 1;
  TempFile tmp("spm");
  write_synthetic_model(spec, tmp.path());
  const gguf::File f = gguf::File::open(tmp.path());
  EXPECT_EQ(f.tensor("token_embd.weight").ne[1], 32000u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(SyntheticSpec{}.vocab_from, "../shared/models/vocab/ggml-vocab-llama-spm.gguf");
}

TEST(SyntheticModel, RejectsInconsistentSpecs) {
  TempFile tmp("bad");
  auto error_of = [&](const SyntheticSpec& s) -> std::string {
    try {
      write_synthetic_model(s, tmp.path());
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  SyntheticSpec s = tiny(GgmlType::Q8_0);
  s.n_heads = 3;
  EXPECT_NE(error_of(s).find("not a multiple of n_heads 3"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::Q8_0);
  s.n_kv_heads = 3;
  EXPECT_NE(error_of(s).find("n_kv_heads 3"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::Q8_0);
  s.ffn = 100;
  EXPECT_NE(error_of(s).find("multiples of 32"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::IQ2_XXS);
  EXPECT_NE(error_of(s).find("IQ2_XXS"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::Q6_K);  // no _M mix of Q6_K
  s.dim = 256;
  s.ffn = 512;
  s.k_mix = true;
  EXPECT_NE(error_of(s).find("_M mix"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::Q4_K);  // K types fall back where 256 does not tile a width (fit_rows)
  EXPECT_EQ(error_of(s), "<no error>");
  s = tiny(GgmlType::Q8_0);
  s.n_layers = 0;
  EXPECT_NE(error_of(s).find("must be positive"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::Q8_0);
  s.vocab_from = "/nonexistent/vocab.gguf";
  EXPECT_NE(error_of(s).find("/nonexistent/vocab.gguf"), std::string::npos) << error_of(s);
  s = tiny(GgmlType::F32);  // F32 has no block constraint: odd widths are fine
  s.dim = 40;
  s.n_heads = 4;
  s.n_kv_heads = 4;
  s.ffn = 100;
  EXPECT_EQ(error_of(s), "<no error>");
  // What the loader would refuse is refused, and no file is left behind.
  s.n_layers = 1025;
  EXPECT_NE(error_of(s).find("lift would not load it"), std::string::npos) << error_of(s);
  EXPECT_NE(error_of(s).find("block_count"), std::string::npos) << error_of(s);
  EXPECT_FALSE(std::filesystem::exists(tmp.path()));
  s.n_layers = 1;
  s.rope_base = 0.5f;
  EXPECT_NE(error_of(s).find("rope.freq_base"), std::string::npos) << error_of(s);
}

}  // namespace
}  // namespace lift
