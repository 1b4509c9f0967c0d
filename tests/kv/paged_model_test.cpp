// The block manager driving the model: sequences sharing one paged cache (mixed prefill
// chunks and decode tokens in each batch), fork with copy-on-write, and prefix caching all
// give bitwise the logits and greedy tokens of each sequence run alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <tuple>

#include "kv/block_manager.h"
#include "model/llama_model.h"
#include "model/model_test_util.h"
#include "model/synthetic_model.h"
#include "test_paths.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

using test::bitwise_equal;
using test::random_tokens;

// A sequence driven through the block manager.
struct PagedSeq {
  BlockTable table;
  std::vector<int32_t> tokens;  // prompt, then fed tokens
  size_t computed = 0;          // tokens whose K/V are in the cache
};

// Model, backend, cache and block manager together; counts the tokens put in forward batches.
struct Paged {
  LlamaModel& model;
  Backend& backend;
  KvCache kv;
  BlockManager bm;
  size_t forwarded = 0;

  Paged(LlamaModel& m, Backend& be, size_t n_blocks, size_t block_size, KvType type,
        bool prefix_caching = true)
      : model(m),
        backend(be),
        kv(m.config(), n_blocks, block_size, type),
        bm(n_blocks, block_size, prefix_caching) {}

  // Reuses cached prompt blocks; returns how many prompt tokens were reused.
  size_t admit(PagedSeq& s) {
    s.computed = bm.allocate_prompt(s.table, s.tokens);
    return s.computed;
  }

  // Runs take[i] new tokens of seqs[i] in one batch (slots from the block manager, CoW
  // copies applied first) and returns each sequence's logits for its last token of the step.
  std::vector<std::vector<float>> step(const std::vector<PagedSeq*>& seqs,
                                       const std::vector<size_t>& take) {
    std::vector<std::pair<int32_t, int32_t>> copies;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (seqs[i]->table.n_tokens != seqs[i]->computed) throw std::logic_error("slots ahead");
      if (!bm.append_slots(seqs[i]->table, take[i], &copies)) {
        throw std::runtime_error("test cache too small");
      }
    }
    for (auto [src, dst] : copies) kv.copy_block(src, dst);
    std::vector<int32_t> tok, pos, rows;
    std::vector<const int32_t*> tables;
    std::vector<size_t> owner;
    for (size_t i = 0; i < seqs.size(); ++i) {
      PagedSeq& s = *seqs[i];
      for (size_t j = 0; j < take[i]; ++j) {
        const size_t p = s.computed + j;
        tok.push_back(s.tokens.at(p));
        pos.push_back(static_cast<int32_t>(p));
        tables.push_back(s.table.blocks.data());
      }
      if (take[i] > 0) {
        rows.push_back(static_cast<int32_t>(tok.size() - 1));
        owner.push_back(i);
      }
    }
    const auto vocab = static_cast<size_t>(model.config().n_vocab);
    std::vector<float> logits = test::unwritten_floats(rows.size() * vocab);
    model.forward(backend, ForwardBatch{tok, pos, tables, rows}, kv, logits.data());
    forwarded += tok.size();
    std::vector<std::vector<float>> out(seqs.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      out[owner[r]].assign(logits.begin() + static_cast<ptrdiff_t>(r * vocab),
                           logits.begin() + static_cast<ptrdiff_t>((r + 1) * vocab));
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->computed += take[i];
      bm.commit(seqs[i]->table, seqs[i]->tokens, seqs[i]->computed);
    }
    return out;
  }

  void check(const std::vector<const PagedSeq*>& live) const {
    std::vector<const BlockTable*> tables;
    for (const PagedSeq* s : live) tables.push_back(&s->table);
    bm.check_invariants(tables);
  }
};

int32_t greedy(const std::vector<float>& logits) {
  // max_element would pick around a NaN silently: a NaN logit fails the test instead.
  for (float x : logits) EXPECT_TRUE(std::isfinite(x)) << "non-finite logit";
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Logits of one sequence run alone in a fresh cache with the same block size (attention's
// online softmax rescales once per block, so the block size is part of the arithmetic; where
// the blocks sit is not): after the prompt, then after each fed token. feed[k] < 0 means
// "feed the greedy token".
struct AloneRun {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> fed;
};
AloneRun run_alone(LlamaModel& m, Backend& be, KvType type, size_t block_size,
                   const std::vector<int32_t>& prompt, const std::vector<int32_t>& feed) {
  Paged p(m, be, 1024 / block_size, block_size, type, /*prefix_caching=*/false);
  PagedSeq s{{}, prompt, 0};
  p.admit(s);
  AloneRun r;
  r.logits.push_back(p.step({&s}, {prompt.size()})[0]);
  for (int32_t f : feed) {
    const int32_t t = f >= 0 ? f : greedy(r.logits.back());
    r.fed.push_back(t);
    s.tokens.push_back(t);
    r.logits.push_back(p.step({&s}, {1})[0]);
  }
  p.bm.free(s.table);
  return r;
}

class PagedKv : public ::testing::TestWithParam<std::tuple<const char*, KvType>> {
 protected:
  void SetUp() override { model_ = LlamaModel::load(test::resolve_model(std::get<0>(GetParam()))); }
  KvType kv_type() const { return std::get<1>(GetParam()); }
  std::unique_ptr<LlamaModel> model_;
};

// Several sequences of mixed lengths, started at different steps, prefilled in random
// chunks while others decode in the same batches, with blocks from one shared manager.
TEST_P(PagedKv, SharedCacheMixedBatchesMatchAlone) {
  LlamaModel& m = *model_;
  const int vocab = m.config().n_vocab;
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  const std::vector<size_t> prompt_len{37, 5, 64, 20, 1};
  const std::vector<size_t> start_step{0, 0, 1, 3, 4};
  const size_t n_decode = 6, n = prompt_len.size();
  std::vector<AloneRun> alone;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < n; ++i) {
    prompts.push_back(random_tokens(prompt_len[i], vocab, 100 + static_cast<uint32_t>(i)));
    alone.push_back(
        run_alone(m, *be, kv_type(), 8, prompts[i], std::vector<int32_t>(n_decode, -1)));
  }

  Paged p(m, *be, 40, 8, kv_type());
  std::vector<PagedSeq> seqs(n);
  std::vector<size_t> outputs(n, 0);  // logits rows checked so far
  std::vector<bool> admitted(n, false);
  std::mt19937 rng(1);
  size_t n_mixed = 0;
  for (size_t step = 0;; ++step) {
    std::vector<PagedSeq*> batch;
    std::vector<size_t> take, idx;
    for (size_t i = 0; i < n; ++i) {
      if (step < start_step[i] || outputs[i] == n_decode + 1) continue;
      if (!admitted[i]) {
        seqs[i].tokens = prompts[i];
        ASSERT_EQ(p.admit(seqs[i]), 0u);  // random prompts share no full block
        admitted[i] = true;
      }
      const size_t left = prompts[i].size() > seqs[i].computed
                              ? prompts[i].size() - seqs[i].computed
                              : 1;  // decode: the last fed token
      batch.push_back(&seqs[i]);
      take.push_back(std::min(left, std::uniform_int_distribution<size_t>(1, 13)(rng)));
      idx.push_back(i);
    }
    if (batch.empty()) break;
    bool any_prefill = false, any_decode = false;
    for (size_t b = 0; b < batch.size(); ++b) {
      (batch[b]->computed < prompts[idx[b]].size() ? any_prefill : any_decode) = true;
    }
    n_mixed += any_prefill && any_decode;
    const auto out = p.step(batch, take);
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = idx[b];
      if (seqs[i].computed < prompts[i].size()) continue;  // mid-prompt chunk
      const size_t k = outputs[i]++;
      EXPECT_TRUE(bitwise_equal(out[b], alone[i].logits[k]))
          << "sequence " << i << ", output " << k << ", step " << step;
      if (k < n_decode) {
        const int32_t t = greedy(out[b]);
        EXPECT_EQ(t, alone[i].fed[k]) << "sequence " << i << ", greedy token " << k;
        seqs[i].tokens.push_back(t);
      }
    }
    std::vector<const PagedSeq*> live;
    for (size_t i = 0; i < n; ++i) {
      if (admitted[i]) live.push_back(&seqs[i]);
    }
    ASSERT_NO_THROW(p.check(live));
  }
  EXPECT_GT(n_mixed, 0u) << "no batch mixed prefill chunks and decode tokens";
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(outputs[i], n_decode + 1);
  for (auto& s : seqs) p.bm.free(s.table);
  EXPECT_EQ(p.bm.n_used(), 0u);
  EXPECT_EQ(p.bm.n_free() + p.bm.n_cached(), p.bm.n_total());
}

// A prompt prefilled once and forked; the two branches decode different forced tokens in
// shared batches. The shared partial block is copied on write; each branch equals its own
// unforked run.
TEST_P(PagedKv, ForkCopyOnWriteMatchesUnforkedRuns) {
  LlamaModel& m = *model_;
  const int vocab = m.config().n_vocab;
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  const auto prompt = random_tokens(21, vocab, 7);  // 2 full blocks of 8 + 5 tokens
  const auto feed_a = random_tokens(12, vocab, 8), feed_b = random_tokens(12, vocab, 9);
  const AloneRun alone_a = run_alone(m, *be, kv_type(), 8, prompt, feed_a);
  const AloneRun alone_b = run_alone(m, *be, kv_type(), 8, prompt, feed_b);

  Paged p(m, *be, 16, 8, kv_type());
  PagedSeq a{{}, prompt, 0};
  p.admit(a);
  const auto first = p.step({&a}, {prompt.size()})[0];
  EXPECT_TRUE(bitwise_equal(first, alone_a.logits[0]));
  PagedSeq b;
  p.bm.fork(a.table, b.table);
  b.tokens = a.tokens;
  b.computed = a.computed;
  for (int32_t blk : a.table.blocks) EXPECT_EQ(p.bm.ref_count(blk), 2);
  const size_t used_after_fork = p.bm.n_used();
  for (size_t k = 0; k < feed_a.size(); ++k) {
    a.tokens.push_back(feed_a[k]);
    b.tokens.push_back(feed_b[k]);
    // Alternate the order so each branch is sometimes the first to write after the fork.
    const auto out = k % 2 == 0 ? p.step({&b, &a}, {1, 1}) : p.step({&a, &b}, {1, 1});
    const auto& la = k % 2 == 0 ? out[1] : out[0];
    const auto& lb = k % 2 == 0 ? out[0] : out[1];
    EXPECT_TRUE(bitwise_equal(la, alone_a.logits[k + 1])) << "branch a, token " << k;
    EXPECT_TRUE(bitwise_equal(lb, alone_b.logits[k + 1])) << "branch b, token " << k;
    if (k == 0) {
      EXPECT_EQ(p.bm.stats().cow_copies, 1u);
      EXPECT_EQ(p.bm.n_used(), used_after_fork + 1);
      EXPECT_EQ(a.table.blocks[0], b.table.blocks[0]);
      EXPECT_EQ(a.table.blocks[1], b.table.blocks[1]);
      EXPECT_NE(a.table.blocks[2], b.table.blocks[2]);
      EXPECT_EQ(p.bm.ref_count(a.table.blocks[0]), 2);
      EXPECT_EQ(p.bm.ref_count(a.table.blocks[2]), 1);
      EXPECT_EQ(p.bm.ref_count(b.table.blocks[2]), 1);
    }
    ASSERT_NO_THROW(p.check({&a, &b}));
  }
  EXPECT_EQ(p.bm.stats().cow_copies, 1u);
  p.bm.free(a.table);
  ASSERT_NO_THROW(p.check({&b}));
  p.bm.free(b.table);
  ASSERT_NO_THROW(p.check({}));
  EXPECT_EQ(p.bm.n_used(), 0u);
  EXPECT_EQ(p.bm.n_free() + p.bm.n_cached(), p.bm.n_total());
}

// A second request sharing a 3-block prefix computes only its remaining tokens, and its
// logits and greedy tokens equal a run without prefix caching.
TEST_P(PagedKv, PrefixCacheComputesOnlyTheRest) {
  LlamaModel& m = *model_;
  const int vocab = m.config().n_vocab;
  ThreadPool pool(2);
  auto be = make_cpu_backend(pool);
  const size_t bs = 16, n_decode = 5;
  const auto shared = random_tokens(3 * bs, vocab, 21);
  auto with_suffix = [&](size_t n, uint32_t seed) {
    auto p = shared;
    const auto extra = random_tokens(n + 1, vocab, seed);
    p.insert(p.end(), extra.begin() + 1, extra.end());
    return p;
  };
  const auto p1 = with_suffix(10, 22), p2 = with_suffix(7, 23);
  const auto& p3 = shared;  // the whole prompt is cached: one block is recomputed

  Paged p(m, *be, 32, bs, kv_type());
  // Runs one request to the end (prefill, greedy decode) and frees it; returns the tokens
  // it put into forward batches and checks it against an uncached run.
  const auto serve = [&](const std::vector<int32_t>& prompt, PagedSeq* keep) {
    const AloneRun ref =
        run_alone(m, *be, kv_type(), bs, prompt, std::vector<int32_t>(n_decode, -1));
    PagedSeq s{{}, prompt, 0};
    const size_t before = p.forwarded;
    const size_t reused = p.admit(s);
    auto out = p.step({&s}, {prompt.size() - reused})[0];
    EXPECT_TRUE(bitwise_equal(out, ref.logits[0])) << "prompt logits";
    for (size_t k = 0; k < n_decode; ++k) {
      const int32_t t = greedy(out);
      EXPECT_EQ(t, ref.fed[k]);
      s.tokens.push_back(t);
      out = p.step({&s}, {1})[0];
      EXPECT_TRUE(bitwise_equal(out, ref.logits[k + 1])) << "decode " << k;
    }
    if (keep != nullptr) {
      *keep = s;
    } else {
      p.bm.free(s.table);
    }
    return std::pair{reused, p.forwarded - before};
  };

  PagedSeq held;
  EXPECT_EQ(serve(p1, &held), (std::pair<size_t, size_t>{0, p1.size() + n_decode}));
  // While the first request still holds its blocks (shared, used).
  EXPECT_EQ(serve(p2, nullptr), (std::pair<size_t, size_t>{3 * bs, 7 + n_decode}));
  EXPECT_EQ(p.bm.stats().prefix_hits, 3u);
  EXPECT_EQ(p.bm.stats().prefix_hit_tokens, 3 * bs);
  ASSERT_NO_THROW(p.check({&held}));
  p.bm.free(held.table);
  // After everything was freed: the blocks come back from the cached state.
  EXPECT_EQ(p.bm.n_cached(), 3u);  // the shared prefix; partial tail blocks went free
  EXPECT_EQ(serve(p1, nullptr), (std::pair<size_t, size_t>{3 * bs, 10 + n_decode}));
  EXPECT_EQ(serve(p3, nullptr), (std::pair<size_t, size_t>{2 * bs, bs + n_decode}));
  ASSERT_NO_THROW(p.check({}));
  EXPECT_EQ(p.bm.n_used(), 0u);
  EXPECT_EQ(p.bm.n_free() + p.bm.n_cached(), p.bm.n_total());
}

INSTANTIATE_TEST_SUITE_P(PagedKv, PagedKv,
                         ::testing::Combine(::testing::Values("stories260K/stories260K.gguf",
                                                              "synthetic:Q8_0"),
                                            ::testing::Values(KvType::f32, KvType::f16)),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param);
                           name = name.substr(0, name.find('/'));
                           name = name.substr(name.find(':') + 1);
                           return name + "_" + kv_type_name(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace lift
