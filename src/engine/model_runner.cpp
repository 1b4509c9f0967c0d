#include "engine/model_runner.h"

namespace lift {

void ModelRunner::run(const SchedulerOutput& step) {
  for (const auto& [src, dst] : step.copies) kv_.copy_block(src, dst);
  tokens_.clear();
  positions_.clear();
  tables_.clear();
  logit_rows_.clear();
  sampled_.clear();
  for (const ScheduledSeq& s : step.batch) {
    Sequence* seq = s.seq;
    for (size_t j = 0; j < s.n_tokens; ++j) {
      const size_t p = seq->n_computed + j;
      tokens_.push_back(seq->tokens[p]);
      positions_.push_back(static_cast<int32_t>(p));
      tables_.push_back(seq->table.blocks.data());
    }
    if (seq->n_computed + s.n_tokens == seq->tokens.size()) {
      logit_rows_.push_back(static_cast<int32_t>(tokens_.size() - 1));
      sampled_.push_back(seq);
    }
  }
  const size_t vocab = static_cast<size_t>(model_.config().n_vocab);
  if (logits_.size() < logit_rows_.size() * vocab) logits_.resize(logit_rows_.size() * vocab);
  model_.forward(backend_, ForwardBatch{tokens_, positions_, tables_, logit_rows_}, kv_,
                 logits_.data());
}

}  // namespace lift
