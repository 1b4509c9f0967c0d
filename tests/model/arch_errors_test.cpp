// A file asking for something lift does not compute is refused with an error naming it, never
// run with a silently different function.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "arch_test_util.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace lift {
namespace {

// Loading must fail with a lift::Error whose message contains `what`.
void expect_refused(const gguf::Writer& g, const std::string& what) {
  const std::string path = test::write_tiny(g, "refused");
  try {
    LlamaModel::load(path);
    ADD_FAILURE() << "loaded; expected an error naming '" << what << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

test::TinyArch llama() {
  test::TinyArch a;
  a.arch = "llama";
  a.qk_norm = false;
  a.neox = false;
  a.head_dim = 8;
  return a;
}

TEST(ArchErrors, ValidTinyFilesLoad) {
  // The baseline the other tests break one thing of.
  for (test::TinyArch a : {llama(), test::TinyArch{}}) {
    const auto w = test::tiny_weights(a);
    EXPECT_NO_THROW(LlamaModel::load(test::write_tiny(test::tiny_writer(a, w), "ok")));
  }
}

TEST(ArchErrors, UnknownArchitecture) {
  test::TinyArch a = llama();
  a.arch = "mamba";
  expect_refused(test::tiny_writer(a, test::tiny_weights(a)), "architecture 'mamba'");
}

TEST(ArchErrors, UnknownRopeScalingType) {
  const auto a = llama();
  auto g = test::tiny_writer(a, test::tiny_weights(a));
  g.set_string("llama.rope.scaling.type", "longrope");
  expect_refused(g, "rope.scaling.type' = 'longrope'");
  auto y = test::tiny_writer(a, test::tiny_weights(a));
  y.set_string("llama.rope.scaling.type", "yarn");
  expect_refused(y, "llama.rope.scaling.factor");
}

test::TinyArch phi3_longrope() {
  test::TinyArch a;
  a.arch = "phi3";
  a.qk_norm = false;
  a.longrope = true;
  a.longrope_orig_ctx = 64;
  return a;
}

// LongRoPE's two factor sets come together (and only where the architecture has them); which
// one runs is the engine's context against the original one.
TEST(ArchErrors, LongRopeFactorSets) {
  const test::TinyArch a = phi3_longrope();
  for (const char* drop : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    auto w = test::tiny_weights(a);
    w.erase(drop);
    expect_refused(test::tiny_writer(a, w), std::string(drop) == "rope_factors_long.weight"
                                                ? "rope_factors_short.weight without"
                                                : "rope_factors_long.weight without");
  }
  auto w = test::tiny_weights(a);
  auto model = LlamaModel::load(test::write_tiny(test::tiny_writer(a, w), "longrope"));
  EXPECT_EQ(model->rope_factor_set(), "short");
  model->set_context_length(64);
  EXPECT_EQ(model->rope_factor_set(), "short");
  model->set_context_length(65);
  EXPECT_EQ(model->rope_factor_set(), "long");
  model->set_context_length(8);
  EXPECT_EQ(model->rope_factor_set(), "short");

  // A llama file with LongRoPE's factors would run without them: refused.
  test::TinyArch l = llama();
  l.longrope = true;
  l.longrope_orig_ctx = 64;
  expect_refused(test::tiny_writer(l, test::tiny_weights(l)), "rope_factors_");
}

// Numbers whose arithmetic would overflow or vanish (a denormal rope base, infinite factors or
// caps, a NaN epsilon) are refused at load, naming the key, rather than giving NaN logits.
TEST(ArchErrors, NumbersOutOfRangeAreRefused) {
  const float inf = std::numeric_limits<float>::infinity();
  auto with = [](auto change) {
    test::TinyArch a = llama();
    change(a);
    return a;
  };
  for (const float base : {1e-44f, 0.5f, 1.0f, inf, std::nanf("")}) {
    const auto a = with([&](test::TinyArch& x) { x.rope_base = base; });
    expect_refused(test::tiny_writer(a, test::tiny_weights(a)), "llama.rope.freq_base");
  }
  {  // Bounds count as their f32: an epsilon of 1e-12 (stored as 9.99999996e-13) loads.
    const auto a = with([](test::TinyArch& x) { x.eps = 1e-12f; });
    EXPECT_NO_THROW(
        LlamaModel::load(test::write_tiny(test::tiny_writer(a, test::tiny_weights(a)), "eps")));
  }
  for (const float eps : {0.0f, 1.0f, inf, std::nanf("")}) {
    const auto a = with([&](test::TinyArch& x) { x.eps = eps; });
    expect_refused(test::tiny_writer(a, test::tiny_weights(a)),
                   "llama.attention.layer_norm_rms_epsilon");
  }
  for (const float factor : {inf, 1e30f}) {
    const auto y = with([](test::TinyArch& x) {
      x.yarn_factor = 4.0f;
      x.yarn_orig_ctx = 64;
    });
    auto g = test::tiny_writer(y, test::tiny_weights(y));
    g.set_f32("llama.rope.scaling.attn_factor", factor);
    expect_refused(g, "llama.rope.scaling.attn_factor");
    const auto l = with([&](test::TinyArch& x) { x.rope_linear = factor; });
    expect_refused(test::tiny_writer(l, test::tiny_weights(l)), "llama.rope.scaling.factor");
  }
  test::TinyArch gemma2;
  gemma2.arch = "gemma2";
  gemma2.qk_norm = false;
  gemma2.post_norms = true;
  gemma2.embed_scale = true;
  gemma2.gelu = true;
  gemma2.window = 4;
  for (const char* key : {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"}) {
    auto g = test::tiny_writer(gemma2, test::tiny_weights(gemma2));
    EXPECT_NO_THROW(LlamaModel::load(test::write_tiny(g, "gemma2")));
    g.set_f32(key, inf);
    expect_refused(g, key);
  }
  auto w = test::tiny_weights(phi3_longrope());
  w["rope_factors_short.weight"][1] = inf;
  expect_refused(test::tiny_writer(phi3_longrope(), w), "rope_factors_short.weight holds inf");
}

TEST(ArchErrors, LinearScalingWithoutFactor) {
  const auto a = llama();
  auto g = test::tiny_writer(a, test::tiny_weights(a));
  g.set_string("llama.rope.scaling.type", "linear");
  expect_refused(g, "llama.rope.scaling.factor");
}

TEST(ArchErrors, UnexpectedBias) {
  const auto a = llama();
  auto w = test::tiny_weights(a);
  w["blk.1.attn_q.bias"] = std::vector<float>(32, 0.5f);
  expect_refused(test::tiny_writer(a, w), "blk.1.attn_q.bias");
}

TEST(ArchErrors, MissingRequiredTensor) {
  test::TinyArch a;
  a.arch = "qwen2";
  a.qk_norm = false;
  a.qkv_bias = true;
  auto w = test::tiny_weights(a);
  EXPECT_NO_THROW(LlamaModel::load(test::write_tiny(test::tiny_writer(a, w), "qwen2")));
  w.erase("blk.0.attn_k.bias");
  expect_refused(test::tiny_writer(a, w), "blk.0.attn_k.bias");
}

TEST(ArchErrors, MissingQkNorm) {
  test::TinyArch a;  // qwen3
  auto w = test::tiny_weights(a);
  w.erase("blk.1.attn_q_norm.weight");
  expect_refused(test::tiny_writer(a, w), "blk.1.attn_q_norm.weight");
}

TEST(ArchErrors, MixtureOfExperts) {
  // Experts where the architecture has none; a llama file asking for experts but missing their
  // count in use or their tensors; shared experts; qwen3moe without experts.
  test::TinyArch q;
  q.arch = "qwen2";
  q.qk_norm = false;
  auto g = test::tiny_writer(q, test::tiny_weights(q));
  g.set_u32("qwen2.expert_count", 8);
  expect_refused(g, "mixture-of-experts models of architecture 'qwen2'");
  const auto a = llama();
  auto l = test::tiny_writer(a, test::tiny_weights(a));
  l.set_u32("llama.expert_count", 8);
  expect_refused(l, "llama.expert_used_count");
  l.set_u32("llama.expert_used_count", 2);
  expect_refused(l, "ffn_gate_inp.weight");
  test::TinyArch m = llama();
  m.experts = 4;
  m.experts_used = 2;
  m.expert_ffn = 16;
  auto s = test::tiny_writer(m, test::tiny_weights(m));
  s.set_u32("llama.expert_shared_count", 1);
  expect_refused(s, "shared experts");
  test::TinyArch d;
  d.arch = "qwen3moe";
  expect_refused(test::tiny_writer(d, test::tiny_weights(d)), "qwen3moe.expert_count");
}

TEST(ArchErrors, SoftCappingOnAnArchitectureWithout) {
  const auto a = llama();
  auto g = test::tiny_writer(a, test::tiny_weights(a));
  g.set_f32("llama.final_logit_softcapping", 30.0f);
  expect_refused(g, "final_logit_softcapping");
}

TEST(ArchErrors, SlidingWindowOnAnArchitectureWithout) {
  test::TinyArch a = llama();
  a.window = 64;
  expect_refused(test::tiny_writer(a, test::tiny_weights(a)), "attention.sliding_window");
}

TEST(ArchErrors, Gemma3NeedsItsWindow) {
  test::TinyArch a;
  a.arch = "gemma3";
  a.post_norms = true;
  expect_refused(test::tiny_writer(a, test::tiny_weights(a)), "gemma3.attention.sliding_window");
}

TEST(ArchErrors, ValueLengthDiffersFromKeyLength) {
  test::TinyArch a = llama();
  a.value_length = 16;
  expect_refused(test::tiny_writer(a, test::tiny_weights(a)), "value_length");
}

}  // namespace
}  // namespace lift
