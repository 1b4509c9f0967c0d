// Turns a scheduled step into one forward pass: builds the flat per-token arrays (ids,
// positions, block tables, which rows need logits), performs pending copy-on-write block
// copies, and runs the model. The arrays are reused from step to step.
#pragma once

#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"

namespace lift {

class ModelRunner {
 public:
  ModelRunner(LlamaModel& model, Backend& backend, KvCache& kv)
      : model_(model), backend_(backend), kv_(kv) {}

  // Runs the step. Afterwards `sampled()` lists the sequences whose chunk reached the end of
  // their tokens, and logits(i) is the i-th one's logits row.
  void run(const SchedulerOutput& step);
  const std::vector<Sequence*>& sampled() const { return sampled_; }
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
  std::vector<Sequence*> sampled_;
  std::vector<float> logits_;
};

}  // namespace lift
