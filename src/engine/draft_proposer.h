// Speculative decoding's draft-model proposer: a smaller model with the target's vocabulary
// guesses each sequence's next tokens, one batched forward pass per draft position over every
// speculating sequence.
//
// Its K/V lives in its own KvCache indexed by the target's block ids: one block table per
// sequence addresses both caches, and the memory plan counts both models' bytes per block
// (engine/memory_plan.h), so prefix caching, forks, copy-on-write and preemption need no
// second allocator. What the draft holds for a sequence is Sequence::proposer_computed
// positions; the engine lowers it on rollback and preemption, and the next propose() feeds the
// draft what it has not seen. Full blocks are also known by their prefix-cache hash: each block
// remembers the hash of the full block whose draft K/V it holds, so a block the prefix cache
// hands a sequence (admission, recompute after preemption, a merge with an equal block) is
// reused when the draft computed it and recomputed when not. A 64-bit hash collision could only
// cost acceptance: the target verifies every draft.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/proposer.h"
#include "engine/sampler.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"

namespace lift {

class DraftModelProposer : public Proposer {
 public:
  // Most tokens one draft forward pass feeds: a sequence catching up on a whole prompt (after
  // admission or preemption) does so in chunks of at most this many.
  static constexpr size_t kMaxPassTokens = 256;
  // A longer backlog feeds its last token in a pass of its own (build_pass).
  static constexpr size_t kCatchUpSplit = 4;

  // n_blocks, block_size and kv_type are the target's pool. Throws lift::Error when the draft
  // cannot serve this target: another vocabulary (its size, or the first token id whose text or
  // type differs), or sliding-window attention on every layer of either model (the engine
  // gives back blocks the target's window left behind, which the draft may still read).
  DraftModelProposer(LlamaModel& draft, const LlamaModel& target, Backend& backend, size_t n_blocks,
                     size_t block_size, KvType kv_type);

  std::string_view name() const override { return "draft"; }

  // Greedy requests get the draft's argmax after the request's logit bias, penalties and
  // min_tokens mask (Sampler::sample on the draft's logits) and no probs; sampled requests get
  // x ~ q = Sampler::distribution(draft logits), drawn with spec_uniform(seed, SpecDraw::draft,
  // sample, position), and q's row in Draft::probs. A draft stops early at EOS or a stop id.
  // Afterwards seq->proposer_computed = tokens.size() - 1 + drafts: the draft never runs its
  // own last proposal.
  void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override;
  void copy_block(int32_t src, int32_t dst) override { kv_.copy_block(src, dst); }
  // k draft passes over n_seqs rows each, by the measured seconds of passes of about that
  // many rows (EMA per power-of-two bucket); before any measurement, a memory-bound guess:
  // the draft's weights streamed at kPriorBytesPerSecond per pass.
  double cost_seconds(size_t n_seqs, size_t k) const override;
  // A pass over `rows` rows took `seconds` (propose records each; tests feed it directly).
  void record_pass(size_t rows, double seconds);

  const KvCache& kv() const { return kv_; }

 private:
  static constexpr double kPriorBytesPerSecond = 10e9;
  static constexpr size_t kCostBuckets = 8;  // rows 1, 2, 3-4, ..., 65+

  // One request's progress through propose().
  struct Slot {
    size_t fed = 0;                // next position to run through the draft
    size_t len = 0;                // seq->tokens.size() when propose() started
    size_t take = 0;               // tokens this pass feeds
    bool done = false;             // proposed all it may (or a finishing token)
    std::vector<int32_t> history;  // output tokens so far, drafts included (for penalties)
  };

  int32_t token_at(const DraftRequest& r, const Draft& d, size_t pos) const;
  // The first position of seq whose draft K/V is not known to be in its blocks.
  size_t valid_prefix(const Sequence& seq);
  // Positions [begin, end) of seq were just written: its blocks there now hold the K/V of
  // their full block's hash, or of own_tag() before the block is committed.
  void mark_written(const Sequence& seq, size_t begin, size_t end);
  static uint64_t own_tag(const Sequence& seq, size_t index);
  // Builds one pass: each unfinished slot's next tokens, prompt-kind rows first; returns the
  // number of logits rows.
  size_t build_pass(std::span<const DraftRequest> reqs, std::span<const Draft> drafts);
  void choose(const DraftRequest& r, Slot& slot, Draft& d, std::span<float> logits);
  static size_t cost_bucket(size_t rows);

  int32_t eos_id_;  // first: set by the checks, before the K/V is allocated
  LlamaModel& draft_;
  Backend& backend_;
  KvCache kv_;
  Sampler sampler_;
  size_t vocab_ = 0;
  // [block]: the hash of the full block whose draft K/V it holds, an own_tag(), or 0: none.
  std::vector<uint64_t> held_;
  std::vector<Slot> slots_;
  std::vector<int32_t> tokens_, positions_, logit_rows_;
  size_t pass_n_prompt_ = 0;  // of tokens_, the prompt-kind rows
  std::vector<const int32_t*> tables_;
  std::vector<size_t> row_slot_;  // logits row -> request index
  std::vector<float> logits_;
  double ema_[kCostBuckets] = {};  // seconds per pass; 0: not measured
  double prior_pass_seconds_ = 0;
};

}  // namespace lift
