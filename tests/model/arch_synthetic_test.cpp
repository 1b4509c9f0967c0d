// Architectures without llama.cpp references here (Qwen 3, Gemma 3): tiny random-weight files
// run by lift and by an independent float64 forward pass (arch_test_util.h) must agree within
// the exactness tolerance, and leaving any one feature out of that oracle must break the
// agreement, so the comparison does see each feature.
#include <gtest/gtest.h>

#include <numeric>

#include "arch_test_util.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "model_test_util.h"
#include "test_compare.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

std::vector<int32_t> some_tokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

// lift's logits of every position, one forward pass, block size 4 (windows skip blocks).
std::vector<float> lift_logits(LlamaModel& m, Backend& be, const std::vector<int32_t>& toks) {
  const size_t n = toks.size(), bs = 4;
  KvCache kv(m.config(), (n + bs - 1) / bs, bs);
  std::vector<int32_t> table((n + bs - 1) / bs), pos(n), rows(n);
  std::iota(table.begin(), table.end(), 0);
  std::iota(pos.begin(), pos.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<const int32_t*> tables(n, table.data());
  std::vector<float> logits = test::unwritten_floats(n * static_cast<size_t>(m.config().n_vocab));
  m.forward(be, ForwardBatch{toks, pos, tables, rows, n}, kv, logits.data());
  return logits;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// The prompt in uneven chunks, then decode steps: the last logits bitwise those of one pass.
void expect_chunks_bitwise(LlamaModel& model, Backend& be, const std::vector<int32_t>& toks,
                           const std::vector<float>& one_pass) {
  const size_t n_tokens = toks.size(), vocab = static_cast<size_t>(model.config().n_vocab);
  KvCache kv(model.config(), (n_tokens + 3) / 4, 4);
  test::TestSequence s;
  s.tokens = toks;
  test::assign_blocks(s, 0, (n_tokens + 3) / 4);
  s.n_prompt = n_tokens - 3;
  std::vector<float> last;
  for (size_t take : {size_t{5}, size_t{9}, n_tokens - 17, size_t{1}, size_t{1}, size_t{1}}) {
    last = test::step(model, be, kv, {&s}, {take})[0];
  }
  ASSERT_EQ(s.cached, n_tokens);
  EXPECT_TRUE(test::bitwise_equal(
      last, std::vector<float>(one_pass.end() - static_cast<ptrdiff_t>(vocab), one_pass.end())));
}

struct Feature {
  const char* name;
  void (*drop)(test::TinyArch&);
};

// `context`: the engine's max-model-len, where the rope depends on it (0: never set).
void check_arch(const test::TinyArch& a, const std::vector<Feature>& features, size_t n_tokens,
                size_t context = 0) {
  const test::Weights w = test::tiny_weights(a);
  auto model = LlamaModel::load(test::write_tiny(test::tiny_writer(a, w), a.arch));
  if (context > 0) model->set_context_length(context);
  const auto toks = some_tokens(n_tokens, a.vocab, a.seed + 7);
  const size_t vocab = static_cast<size_t>(a.vocab);
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(pool, BackendOptions{.quantize_activations = false});
  auto ref = make_reference_backend(BackendOptions{.quantize_activations = false});
  const std::vector<float> got = lift_logits(*model, *cpu, toks);
  const std::vector<float> want = to_float(test::oracle_logits(a, w, toks));
  EXPECT_TRUE(test::within_tolerance(got, want, n_tokens, vocab)) << "cpu backend vs oracle";
  EXPECT_TRUE(test::within_tolerance(lift_logits(*model, *ref, toks), want, n_tokens, vocab))
      << "reference backend vs oracle";
  for (const Feature& f : features) {
    test::TinyArch without = a;
    f.drop(without);
    EXPECT_FALSE(test::within_tolerance(got, to_float(test::oracle_logits(without, w, toks)),
                                        n_tokens, vocab))
        << "the oracle without " << f.name << " still agrees: the test would not see it";
  }

  expect_chunks_bitwise(*model, *cpu, toks, got);
}

TEST(ArchSynthetic, Qwen3MatchesFloat64Oracle) {
  test::TinyArch a;
  a.arch = "qwen3";
  a.head_dim = 12;  // heads x head_dim = 48 != dim 32
  check_arch(a,
             {{"q/k norm", [](test::TinyArch& x) { x.qk_norm = false; }},
              {"NEOX rope", [](test::TinyArch& x) { x.neox = false; }}},
             24);
}

// YaRN rope scaling (Qwen 3 and Llama files use it for long contexts): a short original context
// so that the ramp falls inside the pairs and the positions span many turns of the fast ones.
TEST(ArchSynthetic, YarnMatchesFloat64Oracle) {
  for (const char* arch : {"qwen3", "llama"}) {
    SCOPED_TRACE(arch);
    test::TinyArch a;
    a.arch = arch;
    a.head_dim = 16;
    a.rope_base = 10000.0f;
    a.yarn_factor = 4.0f;
    a.yarn_orig_ctx = 4096;
    if (a.arch == "llama") {
      a.qk_norm = false;
      a.neox = false;
      a.head_dim = 8;
    }
    check_arch(
        a,
        {{"YaRN's ramp (linear scaling instead)", [](test::TinyArch& x) { x.yarn_ramp = false; }},
         {"YaRN's magnitude", [](test::TinyArch& x) { x.yarn_mscale = false; }}},
        40);
  }
}

// Phi-3's LongRoPE (Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini): the long factor set when the
// engine's context passes the original one, else the short set; cos and sin times
// rope.scaling.attn_factor; with Phi-4-mini's partial rotation (3/4 of each head).
TEST(ArchSynthetic, Phi3LongRopeMatchesFloat64Oracle) {
  test::TinyArch a;
  a.arch = "phi3";
  a.qk_norm = false;
  a.head_dim = 16;
  a.rope_dim = 12;
  a.rope_base = 10000.0f;
  a.longrope = true;
  a.longrope_orig_ctx = 64;
  a.longrope_attn = 1.19f;
  {
    SCOPED_TRACE("long factors");
    a.longrope_long = true;
    check_arch(a,
               {{"the long factors (short ones instead)",
                 [](test::TinyArch& x) { x.longrope_long = false; }},
                {"the attention factor", [](test::TinyArch& x) { x.longrope_attn = 0.0f; }},
                {"partial rotation (all dimensions)", [](test::TinyArch& x) { x.rope_dim = 0; }}},
               40, 65);
  }
  {
    SCOPED_TRACE("short factors");
    a.longrope_long = false;
    check_arch(a,
               {{"the short factors (long ones instead)",
                 [](test::TinyArch& x) { x.longrope_long = true; }},
                {"the short factors (none)", [](test::TinyArch& x) { x.longrope = false; }}},
               40, 64);
  }
}

// Mixture of experts: Qwen3-MoE (every layer) and Mixtral (a llama file with expert_count).
TEST(ArchSynthetic, MixtureOfExpertsMatchesFloat64Oracle) {
  for (const char* arch : {"qwen3moe", "llama"}) {
    SCOPED_TRACE(arch);
    test::TinyArch a;
    a.arch = arch;
    a.experts = 6;
    a.experts_used = 2;
    a.expert_ffn = 24;
    if (a.arch == "llama") {
      a.qk_norm = false;
      a.neox = false;
      a.head_dim = 8;
    }
    check_arch(
        a,
        {{"the renormalization of the chosen experts' weights",
          [](test::TinyArch& x) { x.moe_renormalize = false; }},
         {"the second expert (one per token)", [](test::TinyArch& x) { x.experts_used = 1; }},
         {"the routing (the first experts always)",
          [](test::TinyArch& x) { x.experts_used = x.experts; }}},
        40);
  }
}

// Qwen2-MoE: the chosen probabilities not renormalized, a shared expert behind a sigmoid gate,
// Q/K/V biases.
TEST(ArchSynthetic, Qwen2MoeMatchesFloat64Oracle) {
  test::TinyArch a;
  a.arch = "qwen2moe";
  a.qk_norm = false;
  a.qkv_bias = true;
  a.head_dim = 8;
  a.experts = 6;
  a.experts_used = 2;
  a.expert_ffn = 24;
  a.moe_renormalize = false;
  a.shared_ffn = 40;
  check_arch(a,
             {{"the chosen weights as they are (renormalized instead)",
               [](test::TinyArch& x) { x.moe_renormalize = true; }},
              {"the shared expert", [](test::TinyArch& x) { x.shared_ffn = 0; }},
              {"the shared expert's gate", [](test::TinyArch& x) { x.shared_gate = false; }}},
             40);
}

// Quantized experts (Q8_0 panels, 8-bit activations): the fast kernels against the reference
// backend within the exactness tolerance, and chunking-invariant bitwise.
TEST(ArchSynthetic, QuantizedExpertsMatchReference) {
  test::TinyArch a;
  a.arch = "qwen3moe";
  a.head_dim = 16;
  a.experts = 6;
  a.experts_used = 2;
  a.expert_ffn = 32;
  a.matrix_type = GgmlType::Q8_0;
  auto model =
      LlamaModel::load(test::write_tiny(test::tiny_writer(a, test::tiny_weights(a)), "moe-q8"));
  const auto toks = some_tokens(40, a.vocab, 3);
  ThreadPool pool(2);
  auto cpu = make_cpu_backend(pool, BackendOptions{});
  auto ref = make_reference_backend(BackendOptions{});
  const std::vector<float> got = lift_logits(*model, *cpu, toks);
  EXPECT_TRUE(test::within_tolerance(got, lift_logits(*model, *ref, toks), toks.size(),
                                     static_cast<size_t>(a.vocab)));
  expect_chunks_bitwise(*model, *cpu, toks, got);
}

// Gemma 1: embedding scale, GeGLU, NEOX rope, heads wider than dim / heads.
TEST(ArchSynthetic, GemmaMatchesFloat64Oracle) {
  test::TinyArch a;
  a.arch = "gemma";
  a.qk_norm = false;
  a.head_dim = 16;
  a.rope_base = 10000.0f;
  a.embed_scale = true;
  a.gelu = true;
  check_arch(a,
             {{"embedding scale", [](test::TinyArch& x) { x.embed_scale = false; }},
              {"GeGLU", [](test::TinyArch& x) { x.gelu = false; }},
              {"NEOX rope", [](test::TinyArch& x) { x.neox = false; }}},
             40);
}

TEST(ArchSynthetic, Gemma3MatchesFloat64Oracle) {
  test::TinyArch a;
  a.arch = "gemma3";
  a.layers = 7;  // local 0-4, global 5, local 6
  a.head_dim = 16;
  a.window = 5;
  a.window_pattern = 6;
  a.rope_base = 1e6f;
  a.local_rope_base = 10000.0f;
  a.rope_linear = 8.0f;
  a.post_norms = true;
  a.embed_scale = true;
  a.gelu = true;
  check_arch(
      a,
      {{"q/k norm", [](test::TinyArch& x) { x.qk_norm = false; }},
       {"the local/global pattern (all local)", [](test::TinyArch& x) { x.window_pattern = 0; }},
       {"sliding windows", [](test::TinyArch& x) { x.window = 0; }},
       {"the local layers' rope base", [](test::TinyArch& x) { x.local_rope_base = 0.0f; }},
       {"linear rope scaling", [](test::TinyArch& x) { x.rope_linear = 0.0f; }},
       {"post norms", [](test::TinyArch& x) { x.post_norms = false; }},
       {"embedding scale", [](test::TinyArch& x) { x.embed_scale = false; }},
       {"GeGLU", [](test::TinyArch& x) { x.gelu = false; }},
       {"NEOX rope", [](test::TinyArch& x) { x.neox = false; }}},
      40);
}

// A file that names its pattern (attention.sliding_window_pattern) is run by it.
TEST(ArchSynthetic, Gemma3PatternFromMetadata) {
  test::TinyArch a;
  a.arch = "gemma3";
  a.layers = 4;
  a.head_dim = 16;
  a.window = 3;
  a.window_pattern = 2;  // local, global, local, global
  a.pattern_key = true;
  a.local_rope_base = 10000.0f;
  a.post_norms = true;
  a.embed_scale = true;
  a.gelu = true;
  check_arch(a,
             {{"the file's pattern (the table's 6 instead)",
               [](test::TinyArch& x) { x.window_pattern = 6; }}},
             24);
}

}  // namespace
}  // namespace lift
