// The start-up memory plan on model shapes lift cannot load here (an 8B Llama 3.1 on this
// 24 GiB machine) and on small ones: defaults, the f32/f16 choice, the errors.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace lift {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

ModelConfig llama31_8b() {
  ModelConfig c;
  c.n_layers = 32;
  c.n_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.dim = 4096;
  c.context_length = 131072;
  return c;
}

ModelConfig tiny(int context = 2048) {
  ModelConfig c;
  c.n_layers = 5;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.head_dim = 8;
  c.dim = 64;
  c.context_length = context;
  return c;
}

std::string error_of(const ModelConfig& m, const MemoryRequest& r, size_t avail = 0) {
  try {
    plan_memory(m, 0, r, avail);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryPlan, Llama31On24GiBHoldsSeveralFullLengthSequencesInF16) {
  // Q4_K_M weights of an 8B model, and what this machine reports with nothing else running.
  const size_t weights = 4'900'000'000, avail = 22 * kGiB;
  const MemoryPlan p = plan_memory(llama31_8b(), weights, MemoryRequest{}, avail);
  EXPECT_EQ(p.max_model_len, kDefaultMaxModelLen);
  EXPECT_TRUE(p.max_model_len_note.empty());
  // f32 K/V is 256 KiB a token: 2 GiB per 8192-token sequence, fewer than 8 fit.
  EXPECT_EQ(p.kv_type, KvType::f16);
  // f16: 1 GiB per sequence; half of (22 GiB - 4.9 GB) holds 8.
  EXPECT_EQ(p.full_sequences(), 8u);
  EXPECT_LE(p.budget_bytes, (avail - weights) / 2);
}

TEST(MemoryPlan, SmallModelStaysF32AndReservesOnlyMaxSeqsSequences) {
  MemoryRequest r;
  r.max_seqs = 4;
  const MemoryPlan p = plan_memory(tiny(), 1 << 20, r, 22 * kGiB);
  EXPECT_EQ(p.kv_type, KvType::f32);
  EXPECT_EQ(p.max_model_len, 2048u);
  EXPECT_EQ(p.full_sequences(), 4u);
  EXPECT_EQ(p.n_blocks, 4u * 2048 / 16);
}

TEST(MemoryPlan, AGivenBudgetKeepsF32AndAGivenTypeWins) {
  MemoryRequest r;
  r.kv_cache_bytes = 3 * kGiB;
  EXPECT_EQ(plan_memory(llama31_8b(), 0, r, 0).kv_type, KvType::f32);
  r.kv_type = KvType::f16;
  const MemoryPlan p = plan_memory(llama31_8b(), 0, r, 0);
  EXPECT_EQ(p.kv_type, KvType::f16);
  EXPECT_EQ(p.full_sequences(), 3u);
}

TEST(MemoryPlan, MaxModelLenAboveTheContextIsRefused) {
  MemoryRequest r;
  r.max_model_len = 4096;
  r.kv_cache_bytes = kGiB;
  const std::string e = error_of(tiny(2048), r);
  EXPECT_NE(e.find("--max-model-len 4096"), std::string::npos) << e;
  EXPECT_NE(e.find("2048"), std::string::npos) << e;
}

TEST(MemoryPlan, NotOneSequenceFitsIsAStartUpErrorNamingBothNumbersAndFlags) {
  MemoryRequest r;
  r.max_model_len = 32768;
  r.kv_cache_bytes = 2 * kGiB;  // 8192 tokens of f32 K/V
  const std::string e = error_of(llama31_8b(), r);
  for (const char* want :
       {"8192 tokens", "32768", "--kv-cache-memory", "--max-model-len", "--kv-type f16"}) {
    EXPECT_NE(e.find(want), std::string::npos) << want << " in: " << e;
  }
  r.kv_type = KvType::f16;  // 16384 tokens: still short
  EXPECT_NE(error_of(llama31_8b(), r).find("16384 tokens"), std::string::npos);
  r.max_model_len = 16384;
  EXPECT_EQ(plan_memory(llama31_8b(), 0, r, 0).full_sequences(), 1u);
}

TEST(MemoryPlan, DefaultLengthShrinksToASmallPool) {
  MemoryRequest r;
  r.kv_blocks = 10;
  const MemoryPlan p = plan_memory(tiny(2048), 0, r, 0);
  EXPECT_EQ(p.max_model_len, 160u);
  EXPECT_FALSE(p.max_model_len_note.empty());
  EXPECT_EQ(p.full_sequences(), 1u);
}

TEST(MemoryPlan, AutomaticBudgetNeedsMemAvailable) {
  EXPECT_NE(error_of(tiny(), MemoryRequest{}, 0).find("--kv-cache-memory"), std::string::npos);
  // Weights larger than what is left: no budget at all.
  EXPECT_THROW(plan_memory(llama31_8b(), 4'900'000'000, MemoryRequest{}, 4 * kGiB), Error);
}

TEST(MemoryPlan, SlidingWindowOnEveryLayerBoundsASequenceByItsWindow) {
  ModelConfig m = tiny(4096);
  m.layer_window.assign(5, 20);
  // A chunk of 64 from position a reads back to a - 19: 83 positions, at most 7 blocks.
  EXPECT_EQ(sequence_blocks(4096, 16, 20, 64), 7u);
  EXPECT_EQ(sequence_blocks(40, 16, 20, 64), 3u);  // never more than the whole sequence
  EXPECT_EQ(sequence_blocks(4096, 16), 256u);
  MemoryRequest r;
  r.kv_blocks = 7;
  const MemoryPlan p = plan_memory(m, 0, r, 0, 64);
  EXPECT_EQ(p.max_model_len, 4096u);  // 7 blocks hold a full-length sequence
  EXPECT_EQ(p.seq_blocks, 7u);
  // One global layer: nothing can be released, the whole length counts.
  m.layer_window[2] = 0;
  EXPECT_EQ(plan_memory(m, 0, r, 0, 64).max_model_len, 7u * 16);
}

TEST(MemoryPlan, ADraftModelsKvSharesEveryBlock) {
  // Llama 3.1 8B with a 1-layer draft of the same attention shape: 33 layers of K/V per token.
  ModelConfig draft = llama31_8b();
  draft.n_layers = 1;
  MemoryRequest r;
  r.kv_cache_bytes = 3 * kGiB;
  r.kv_type = KvType::f16;
  const MemoryPlan alone = plan_memory(llama31_8b(), 0, r, 0);
  EXPECT_EQ(alone.bytes_per_token, 128u * 1024);
  EXPECT_EQ(alone.draft_bytes_per_token, 0u);
  r.draft_model = &draft;
  const MemoryPlan p = plan_memory(llama31_8b(), 0, r, 0);
  EXPECT_EQ(p.draft_bytes_per_token, 4096u);
  EXPECT_EQ(p.bytes_per_token, 33u * 4096);
  EXPECT_EQ(p.n_blocks, 3 * kGiB / (33 * 4096 * 16));
  EXPECT_LT(p.n_blocks, alone.n_blocks);

  // The automatic f32/f16 choice and the one-sequence check count both models.
  r.kv_cache_bytes = 0;
  r.kv_type.reset();
  ModelConfig big_draft = llama31_8b();  // as much K/V as the target: half the sequences fit
  r.draft_model = &big_draft;
  const size_t avail = 36 * kGiB;  // half of it: 18 GiB, 9 f32 sequences of the 8B alone
  EXPECT_EQ(plan_memory(llama31_8b(), 0, MemoryRequest{}, avail).kv_type, KvType::f32);
  EXPECT_EQ(plan_memory(llama31_8b(), 0, r, avail).kv_type, KvType::f16);
  r.kv_cache_bytes = 2 * kGiB;  // 8192 tokens of f32 K/V for the 8B alone, 4096 with the draft
  r.max_model_len = 8192;
  MemoryRequest without = r;
  without.draft_model = nullptr;
  EXPECT_EQ(error_of(llama31_8b(), without), "");
  const std::string e = error_of(llama31_8b(), r);
  EXPECT_NE(e.find("holds 4096 tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("draft model"), std::string::npos) << e;
}

TEST(MemoryPlan, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
  EXPECT_EQ(format_bytes(8 * kGiB), "8.0 GiB");
}

}  // namespace
}  // namespace lift
