// The draft-model proposer on stories260K with its 4-layer draft (the shared models'
// stories260K-draft-L4.gguf): its greedy proposals are the draft's own greedy continuation,
// what it keeps of its K/V after rollbacks and copy-on-write gives the proposals a fresh start
// gives, bit for bit, and a draft that cannot serve the target is refused by name.
#include "engine/draft_proposer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/rng.h"
#include "engine/spec_verify.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

constexpr size_t kBlock = 16;
constexpr size_t kBlocks = 192;

struct Models {
  std::unique_ptr<LlamaModel> target =
      LlamaModel::load(test::model_path("stories260K/stories260K.gguf"));
  std::unique_ptr<LlamaModel> draft =
      LlamaModel::load(test::model_path("stories260K/stories260K-draft-L4.gguf"));
  ThreadPool pool{2};
  std::unique_ptr<Backend> backend = make_cpu_backend(pool);

  static Models& get() {
    static Models m;
    return m;
  }
  DraftModelProposer proposer() {
    return DraftModelProposer(*draft, *target, *backend, kBlocks, kBlock, KvType::f32);
  }
};

// A sequence as the engine hands it over: prompt + output, its last token not computed yet.
struct Seq {
  RequestState req;
  Sequence seq;
  Seq(std::vector<int32_t> prompt, const std::vector<int32_t>& output, RequestParams p,
      std::vector<int32_t> blocks) {
    req.params = std::move(p);
    seq.req = &req;
    seq.n_prompt = prompt.size();
    seq.tokens = std::move(prompt);
    seq.tokens.insert(seq.tokens.end(), output.begin(), output.end());
    seq.n_computed = seq.tokens.size() - 1;
    seq.table.blocks = std::move(blocks);
  }
  Seq(const Seq&) = delete;
  // What the engine does after verification: `kept` of the drafts stand, then the target's
  // own token; the rest roll back.
  void accept(const Draft& d, size_t kept, int32_t target_token) {
    seq.tokens.insert(seq.tokens.end(), d.tokens.begin(),
                      d.tokens.begin() + static_cast<std::ptrdiff_t>(kept));
    seq.tokens.push_back(target_token);
    seq.n_computed = seq.tokens.size() - 1;
    seq.proposer_computed = std::min(seq.proposer_computed, seq.n_computed);
  }
};

std::vector<int32_t> blocks(int32_t first, size_t n) {
  std::vector<int32_t> b(n);
  std::iota(b.begin(), b.end(), first);
  return b;
}

RequestParams greedy() {
  RequestParams p;
  p.sampling.temperature = 0;
  return p;
}

RequestParams sampled() {
  RequestParams p;
  p.sampling.temperature = 0.9f;
  p.sampling.top_p = 0.95f;
  p.sampling.seed = 7;
  return p;
}

// The draft model's own greedy continuation of `prompt` (the plain decoding path).
std::vector<int32_t> draft_greedy(const std::vector<int32_t>& prompt, int n) {
  Models& m = Models::get();
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return generate(*m.draft, *m.backend, r).tokens;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t b, size_t e) {
  return {v.begin() + static_cast<std::ptrdiff_t>(b), v.begin() + static_cast<std::ptrdiff_t>(e)};
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};  // "Once upon a time"

// 300 tokens: more than one draft pass takes, so the catch-up comes in chunks.
std::vector<int32_t> long_prompt() {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < 300; ++i) p.push_back(3 + (i * 37) % 500);
  return p;
}

TEST(DraftProposer, GreedyDraftsAreTheDraftModelsOwnContinuation) {
  Models& m = Models::get();
  const std::vector<int32_t> g = draft_greedy(kPrompt, 13);
  const std::vector<int32_t> lp = long_prompt();
  const std::vector<int32_t> lg = draft_greedy(lp, 4);
  ASSERT_EQ(g.size(), 13u);
  DraftModelProposer p = m.proposer();
  // The short one stands as if the target had chosen g[0]; the long one is fresh from prefill.
  Seq a(kPrompt, {g[0]}, greedy(), blocks(0, 2));
  Seq b(lp, {lg[0]}, greedy(), blocks(2, 20));
  std::vector<Draft> d(2);
  const std::vector<DraftRequest> both = {{&a.seq, 3}, {&b.seq, 3}};
  p.propose(both, d);
  EXPECT_EQ(d[0].tokens, slice(g, 1, 4));
  EXPECT_EQ(d[1].tokens, slice(lg, 1, 4));
  EXPECT_TRUE(d[0].probs.empty());
  // It ran everything but its last proposal.
  EXPECT_EQ(a.seq.proposer_computed, kPrompt.size() + 1 + 2);
  EXPECT_EQ(b.seq.proposer_computed, lp.size() + 1 + 2);

  // Two accepted, then the target's own token (g[3]): the draft feeds only that.
  a.accept(d[0], 2, g[3]);
  EXPECT_EQ(a.seq.proposer_computed, kPrompt.size() + 3);
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&a.seq, 4}}, std::span(d).first(1));
  EXPECT_EQ(d[0].tokens, slice(g, 4, 8));
  // All accepted and the bonus token: the last draft and the bonus are fed.
  a.accept(d[0], 4, g[8]);
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&a.seq, 4}}, std::span(d).first(1));
  EXPECT_EQ(d[0].tokens, slice(g, 9, 13));
  EXPECT_EQ(a.seq.proposer_computed, kPrompt.size() + 13 - 1);
}

TEST(DraftProposer, GreedyDraftsFollowTheRequestsLogitBias) {
  Models& m = Models::get();
  const std::vector<int32_t> g = draft_greedy(kPrompt, 3);
  RequestParams params = greedy();
  params.sampling.logit_bias = {{g[1], -INFINITY}};
  DraftModelProposer p = m.proposer();
  Seq a(kPrompt, {g[0]}, params, blocks(0, 1));
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 1}}, d);
  ASSERT_EQ(d[0].tokens.size(), 1u);
  EXPECT_NE(d[0].tokens[0], g[1]);
}

TEST(DraftProposer, SampledDraftsCarryTheirDistributionAndItsDraw) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  Seq a(kPrompt, {432}, sampled(), blocks(0, 1));
  a.seq.index = 2;
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 4}}, d);
  const size_t v = 512;
  ASSERT_EQ(d[0].tokens.size(), 4u);
  ASSERT_EQ(d[0].probs.size(), 4 * v);
  for (size_t i = 0; i < 4; ++i) {
    const std::span<const float> q(d[0].probs.data() + i * v, v);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-5);
    const double u = spec_uniform(7, SpecDraw::draft, 2, 1 + i);  // output index 1 + i
    EXPECT_EQ(d[0].tokens[i], draw_from(q, u));
    EXPECT_GT(q[static_cast<size_t>(d[0].tokens[i])], 0.0f);
  }
}

// After a rollback the draft's stale K/V past proposer_computed is overwritten, never read:
// the proposals (and their distributions, bit for bit) are those of a fresh proposer.
TEST(DraftProposer, AfterARejectionItProposesWhatAFreshStartWould) {
  Models& m = Models::get();
  const std::vector<int32_t> lp = long_prompt();
  DraftModelProposer p = m.proposer();
  Seq a(lp, {432, 383}, sampled(), blocks(0, 20));
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 4}}, d);
  ASSERT_EQ(d[0].tokens.size(), 4u);
  a.accept(d[0], 1, (d[0].tokens[1] + 1) % 512);  // rejected at the second draft
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&a.seq, 4}}, d);

  DraftModelProposer fresh = m.proposer();
  Seq b(lp, slice(a.seq.tokens, lp.size(), a.seq.tokens.size()), sampled(), blocks(30, 20));
  std::vector<Draft> e(1);
  fresh.propose(std::vector<DraftRequest>{{&b.seq, 4}}, e);
  EXPECT_EQ(d[0].tokens, e[0].tokens);
  EXPECT_EQ(d[0].probs, e[0].probs);
  EXPECT_EQ(a.seq.proposer_computed, b.seq.proposer_computed);
}

// Copy-on-write: a sequence whose second block was copied sees the draft K/V of the original.
TEST(DraftProposer, CopyBlockCarriesTheDraftsKv) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  std::vector<int32_t> out(15);
  std::iota(out.begin(), out.end(), 300);  // 20 tokens: the last four in the second block
  Seq a(kPrompt, out, sampled(), blocks(0, 2));
  std::vector<Draft> da(1), db(1), dc(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 3}}, da);
  // b shares block 0, owns a copy of block 1 in block 5; c gets block 7 without the copy.
  Seq b(kPrompt, out, sampled(), {0, 5});
  Seq c(kPrompt, out, sampled(), {0, 7});
  b.seq.proposer_computed = c.seq.proposer_computed = a.seq.tokens.size() - 1;
  p.copy_block(1, 5);
  std::vector<Draft> bc(2);
  p.propose(std::vector<DraftRequest>{{&b.seq, 3}, {&c.seq, 3}}, bc);
  EXPECT_EQ(bc[0].tokens, da[0].tokens);
  EXPECT_EQ(bc[0].probs, da[0].probs);
  // Without the copy the draft reads zeros there: the test can tell.
  EXPECT_NE(bc[1].probs, da[0].probs);
}

// Full blocks are known by their prefix-cache hash: a block the draft computed is reused by any
// sequence whose table holds it under that hash; one it did not compute is run again, whatever
// the sequence's own count says.
TEST(DraftProposer, FullBlocksAreReusedOrRecomputedByTheirPrefixHash) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  std::vector<int32_t> out(35);
  std::iota(out.begin(), out.end(), 300);  // 40 tokens: two full blocks and 8 more
  Seq a(kPrompt, out, sampled(), blocks(0, 4));
  a.seq.table.hashes = {11, 22};  // as the block manager committed positions 0..31
  std::vector<Draft> da(1), d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 3}}, da);
  // Another sequence whose table holds blocks 0 and 1 under those hashes (a prefix-cache hit):
  // only positions 32.. are run, so even a first token of its own does not change the drafts.
  std::vector<int32_t> other = kPrompt;
  other[1] = 404;
  Seq b(other, out, sampled(), {0, 1, 9, 10});
  b.seq.table.hashes = {11, 22};
  p.propose(std::vector<DraftRequest>{{&b.seq, 3}}, d);
  EXPECT_EQ(d[0].probs, da[0].probs);
  // A table that took an equal block the draft never computed (a merge): recomputed from 16.
  Seq c(kPrompt, out, sampled(), {0, 12, 13, 14});
  c.seq.table.hashes = {11, 22};
  c.seq.proposer_computed = c.seq.tokens.size() - 1;
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&c.seq, 3}}, d);
  EXPECT_EQ(d[0].tokens, da[0].tokens);
  EXPECT_EQ(d[0].probs, da[0].probs);
  // Block 12 now holds that block: a's table may take it too.
  Seq e(kPrompt, out, sampled(), {0, 12, 15, 16});
  e.seq.table.hashes = {11, 22};
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&e.seq, 3}}, d);
  EXPECT_EQ(d[0].probs, da[0].probs);
}

// Blocks the draft filled before the target committed them stay valid once they are: they are
// not run again (here a changed token there would show), and they become known by their hash.
TEST(DraftProposer, BlocksCommittedAfterTheDraftRanThemAreKept) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  std::vector<int32_t> out(35);
  std::iota(out.begin(), out.end(), 300);
  Seq f(kPrompt, out, sampled(), blocks(20, 4));
  std::vector<Draft> df(1), d(1);
  p.propose(std::vector<DraftRequest>{{&f.seq, 3}}, df);
  f.seq.table.hashes = {11, 22};
  f.seq.tokens[1] = 404;
  p.propose(std::vector<DraftRequest>{{&f.seq, 3}}, d);
  EXPECT_EQ(d[0].probs, df[0].probs);
  std::vector<int32_t> other = kPrompt;
  other[2] = 405;
  Seq g(other, out, sampled(), {20, 21, 30, 31});
  g.seq.table.hashes = {11, 22};
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&g.seq, 3}}, d);
  EXPECT_EQ(d[0].probs, df[0].probs);
}

TEST(DraftProposer, AOneRowPassIsNotPricedAtACatchUpPass) {
  // A probe's one pass also runs every token the draft has not seen: here 24 rows that took a
  // second. That bounds a one-row pass from above, but the memory-bound guess is the estimate
  // while one row was never measured; priced at the catch-up, drafting never looked worth it
  // and the one-row pass never ran to be measured.
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  const double guess = static_cast<double>(m.draft->weight_bytes()) / 10e9;
  p.record_pass(24, 1.0);
  EXPECT_DOUBLE_EQ(p.cost_seconds(1, 1), guess);
  EXPECT_DOUBLE_EQ(p.cost_seconds(24, 1), 1.0);  // its own bucket: measured
  EXPECT_DOUBLE_EQ(p.cost_seconds(64, 1), std::min(2.0, 4 * guess));
  // Measured, one row costs what it took, however far from the guess.
  p.record_pass(1, 10 * guess);
  EXPECT_DOUBLE_EQ(p.cost_seconds(1, 2), 20 * guess);
}

// A probe on a sequence the draft has not seen (here a 300-token prompt): the catch-up runs in
// its own pass and the one draft comes from a one-row pass, so the controller's price of a
// draft pass is measured at once. Without the split the one pass ran all 301 rows, one row
// stayed at the guess, and a round could stay at probes for a thousand steps.
TEST(DraftProposer, AProbeMeasuresAOneRowPass) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  const double guess = static_cast<double>(m.draft->weight_bytes()) / 10e9;
  const std::vector<int32_t> lp = long_prompt();
  const std::vector<int32_t> lg = draft_greedy(lp, 2);
  Seq b(lp, {lg[0]}, greedy(), blocks(0, 20));
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&b.seq, 1}}, d);
  EXPECT_EQ(d[0].tokens, slice(lg, 1, 2));
  EXPECT_NE(p.cost_seconds(1, 1), guess) << "no one-row pass was measured";
}

TEST(DraftProposer, CostBeforeAnyMeasurementIsTheDraftsWeightsAt10GBPerSecond) {
  Models& m = Models::get();
  DraftModelProposer p = m.proposer();
  const double pass = static_cast<double>(m.draft->weight_bytes()) / 10e9;
  EXPECT_DOUBLE_EQ(p.cost_seconds(1, 1), pass);
  EXPECT_DOUBLE_EQ(p.cost_seconds(4, 3), 3 * pass);
  EXPECT_EQ(p.cost_seconds(4, 0), 0.0);
  Seq a(kPrompt, {432}, greedy(), blocks(0, 1));
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 2}}, d);
  // Measured now: a pass over one row, however long it took, and k passes cost k times that.
  EXPECT_GT(p.cost_seconds(1, 1), 0.0);
  EXPECT_DOUBLE_EQ(p.cost_seconds(1, 5), 5 * p.cost_seconds(1, 1));
}

// A GGUF like `path` with one metadata value replaced (as a whole file in memory).
std::vector<uint8_t> with_value(const gguf::File& f, std::string_view key,
                                const std::function<void(gguf::Writer&)>& set) {
  gguf::Writer w(static_cast<uint32_t>(f.alignment()));
  for (const auto& [k, v] : f.metadata()) {
    if (k == key) {
      set(w);
    } else if (k != "general.alignment") {
      w.copy_value(k, v);
    }
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  return w.to_bytes();
}

// Near the end of the draft's context (here cut to 64 positions) it proposes what it can run.
TEST(DraftProposer, ProposesNothingPastTheDraftsContext) {
  Models& m = Models::get();
  const std::vector<uint8_t> bytes =
      with_value(m.draft->file(), "llama.context_length",
                 [](gguf::Writer& w) { w.set_u32("llama.context_length", 64); });
  const auto short_draft = LlamaModel::from_file(gguf::File::parse(bytes));
  DraftModelProposer p(*short_draft, *m.target, *m.backend, kBlocks, kBlock, KvType::f32);
  Seq a(kPrompt, std::vector<int32_t>(64 - kPrompt.size() - 2, 300), greedy(), blocks(0, 5));
  std::vector<Draft> d(1);
  p.propose(std::vector<DraftRequest>{{&a.seq, 8}}, d);
  // 62 tokens: the last one and two drafts run at positions 61 .. 63 and propose three.
  EXPECT_EQ(d[0].tokens.size(), 3u);
  EXPECT_EQ(a.seq.proposer_computed, 64u);
  Seq b(kPrompt, std::vector<int32_t>(64 - kPrompt.size(), 300), greedy(), blocks(5, 5));
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&b.seq, 8}}, d);
  EXPECT_EQ(d[0].tokens.size(), 1u);  // its last token at position 63 still proposes one
  Seq c(kPrompt, std::vector<int32_t>(64 - kPrompt.size() + 1, 300), greedy(), blocks(10, 5));
  d[0].clear();
  p.propose(std::vector<DraftRequest>{{&c.seq, 8}}, d);
  EXPECT_TRUE(d[0].tokens.empty());
  EXPECT_EQ(c.seq.proposer_computed, 0u);
}

std::string refusal(LlamaModel& draft, const LlamaModel& target) {
  try {
    DraftModelProposer p(draft, target, *Models::get().backend, 4, kBlock, KvType::f32);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DraftProposer, RefusesADraftWithAnotherVocabulary) {
  Models& m = Models::get();
  EXPECT_EQ(refusal(*m.draft, *m.target), "");
  const auto other =
      LlamaModel::load(test::model_path("llama-2-tiny-random/llama-2-tiny-random.gguf"));
  const std::string size = refusal(*other, *m.target);
  EXPECT_NE(size.find("has 32000 tokens, the target's 512"), std::string::npos) << size;
  EXPECT_NE(size.find("must have the target's vocabulary"), std::string::npos) << size;

  // Same size, one token spelled differently; then one of another type.
  const gguf::File& f = m.draft->file();
  std::vector<std::string_view> texts = *f.get_string_array("tokenizer.ggml.tokens");
  texts[300] = "\xe2\x96\x81lift";
  std::vector<int64_t> types64 = *f.get_int_array("tokenizer.ggml.token_type");
  std::vector<int32_t> types(types64.begin(), types64.end());
  types[301] = 4;  // user-defined
  const std::vector<uint8_t> renamed = with_value(f, "tokenizer.ggml.tokens", [&](gguf::Writer& w) {
    w.set_string_array("tokenizer.ggml.tokens", texts);
  });
  const std::vector<uint8_t> retyped =
      with_value(f, "tokenizer.ggml.token_type",
                 [&](gguf::Writer& w) { w.set_i32_array("tokenizer.ggml.token_type", types); });
  auto d1 = LlamaModel::from_file(gguf::File::parse(renamed));
  auto d2 = LlamaModel::from_file(gguf::File::parse(retyped));
  const std::string e1 = refusal(*d1, *m.target), e2 = refusal(*d2, *m.target);
  EXPECT_NE(e1.find("token 300 is '\\xe2\\x96\\x81lift' in the draft model"), std::string::npos)
      << e1;
  EXPECT_NE(e2.find("token 301"), std::string::npos) << e2;
  EXPECT_NE(e2.find("type 4 in the draft model and 1 in the target"), std::string::npos) << e2;
}

TEST(DraftProposer, RefusesSlidingWindowModels) {
  Models& m = Models::get();
  const auto phi3 = LlamaModel::load(test::model_path("archs/archs-phi3.gguf"));
  const std::string e = refusal(*phi3, *phi3);
  EXPECT_NE(e.find("the target model has a sliding window"), std::string::npos) << e;
  (void)m;
}

}  // namespace
}  // namespace lift
