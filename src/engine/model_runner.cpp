#include "engine/model_runner.h"

namespace lift {

void ModelRunner::run(const SchedulerOutput& step) {
  for (const auto& [src, dst] : step.copies) kv_.copy_block(src, dst);
  tokens_.clear();
  positions_.clear();
  tables_.clear();
  logit_rows_.clear();
  sampled_.clear();
  // Prompt tokens first, then generated ones (kernels::RowKind); after a preemption one
  // sequence's chunk can hold both.
  size_t n_prompt = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (const ScheduledSeq& s : step.batch) {
      Sequence* seq = s.seq;
      const auto [b, e] =
          chunk_part(seq->n_computed, seq->n_computed + s.n_tokens, seq->n_prompt, pass);
      for (size_t p = b; p < e; ++p) {
        tokens_.push_back(seq->tokens[p]);
        positions_.push_back(static_cast<int32_t>(p));
        tables_.push_back(seq->table.blocks.data());
      }
      if (b < e && e == seq->tokens.size()) {
        logit_rows_.push_back(static_cast<int32_t>(tokens_.size() - 1));
        sampled_.push_back(seq);
      }
    }
    if (pass == 0) n_prompt = tokens_.size();
  }
  const size_t vocab = static_cast<size_t>(model_.config().n_vocab);
  if (logits_.size() < logit_rows_.size() * vocab) logits_.resize(logit_rows_.size() * vocab);
  model_.forward(backend_, ForwardBatch{tokens_, positions_, tables_, logit_rows_, n_prompt}, kv_,
                 logits_.data());
}

}  // namespace lift
