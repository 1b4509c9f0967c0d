// Turns a scheduled step into one forward pass: builds the flat per-token arrays (ids,
// positions, block tables, which rows need logits), performs pending copy-on-write block
// copies, and runs the model. The arrays are reused from step to step.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "engine/scheduler.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"

namespace lift {

class TpLeader;

class ModelRunner {
 public:
  ModelRunner(LlamaModel& model, Backend& backend, KvCache& kv)
      : model_(model), backend_(backend), kv_(kv) {}

  // Copies the step's copy-on-write blocks (before anything writes K/V this step).
  void apply_copies(const SchedulerOutput& step);
  // Runs the step (copies applied first). Afterwards `sampled()` lists the sequences whose
  // chunk reached the end of their tokens, with their logits rows: one, or with n_draft draft
  // tokens at the end of a sequence's tokens, 1 + n_draft (the rows after its last accepted
  // token and after each draft).
  struct Sampled {
    Sequence* seq;
    size_t first;   // logits row after the last accepted token
    size_t rest;    // and after the first draft; the others follow it
    size_t n_rows;  // 1 + seq->n_draft
    size_t row(size_t i) const { return i == 0 ? first : rest + i - 1; }
  };
  void run(const SchedulerOutput& step);
  // Tensor parallelism: each forward pass (with the step's block copies) goes to the
  // followers first.
  void set_tp(TpLeader* leader) { tp_ = leader; }
  const std::vector<Sampled>& sampled() const { return sampled_; }
  std::span<float> logits(size_t i) {
    const size_t v = static_cast<size_t>(model_.config().n_vocab);
    return {logits_.data() + i * v, v};
  }

 private:
  LlamaModel& model_;
  Backend& backend_;
  KvCache& kv_;
  std::vector<int32_t> tokens_, positions_, logit_rows_;
  std::vector<const int32_t*> tables_;
  std::vector<Sampled> sampled_;
  struct Where {
    size_t first[2];  // first position of the entry's prompt and generated parts
    size_t index[2];  // where they start in tokens_
  };
  std::vector<Where> where_;
  std::vector<float> logits_;
  TpLeader* tp_ = nullptr;
  std::vector<std::pair<int32_t, int32_t>> copies_;  // applied here, not yet sent
};

}  // namespace lift
