#include "engine/model_runner.h"

#include <algorithm>

#include "parallel/tp_step.h"

namespace lift {

void ModelRunner::apply_copies(const SchedulerOutput& step) {
  for (const auto& [src, dst] : step.copies) {
    kv_.copy_block(src, dst);
    if (tp_ != nullptr) copies_.emplace_back(src, dst);
  }
}

void ModelRunner::run(const SchedulerOutput& step) {
  tokens_.clear();
  positions_.clear();
  tables_.clear();
  logit_rows_.clear();
  sampled_.clear();
  where_.clear();
  // Prompt tokens first, then generated ones (kernels::RowKind); after a preemption one
  // sequence's chunk can hold both, and so can the step that verifies drafts made right
  // after its prompt's last token.
  size_t n_prompt = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < step.batch.size(); ++i) {
      const ScheduledSeq& s = step.batch[i];
      Sequence* seq = s.seq;
      const auto [b, e] =
          chunk_part(seq->n_computed, seq->n_computed + s.n_tokens, seq->n_prompt, pass);
      if (pass == 0) where_.push_back({});
      where_[i].first[pass] = b;
      where_[i].index[pass] = tokens_.size();
      for (size_t p = b; p < e; ++p) {
        tokens_.push_back(seq->tokens[p]);
        positions_.push_back(static_cast<int32_t>(p));
        tables_.push_back(seq->table.blocks.data());
      }
    }
    if (pass == 0) n_prompt = tokens_.size();
  }
  // A sequence whose chunk reaches the end of its tokens needs logits after its last accepted
  // token and after each draft; the forward pass wants prompt tokens' rows first.
  for (size_t i = 0; i < step.batch.size(); ++i) {
    Sequence* seq = step.batch[i].seq;
    if (seq->n_computed + step.batch[i].n_tokens != seq->tokens.size()) continue;
    const size_t rows = std::min(step.batch[i].n_tokens, 1 + seq->n_draft);
    sampled_.push_back({seq, 0, 0, rows});
  }
  for (int pass = 0; pass < 2; ++pass) {
    size_t k = 0;
    for (size_t i = 0; i < step.batch.size(); ++i) {
      Sequence* seq = step.batch[i].seq;
      if (k == sampled_.size() || sampled_[k].seq != seq) continue;
      Sampled& out = sampled_[k++];
      const size_t end = seq->tokens.size();
      for (size_t p = end - out.n_rows; p < end; ++p) {
        const int part = p < seq->n_prompt ? 0 : 1;
        if (part != pass) continue;
        const size_t row = logit_rows_.size();
        if (p == end - out.n_rows) out.first = row;
        if (p == end - out.n_rows + 1) out.rest = row;
        logit_rows_.push_back(
            static_cast<int32_t>(where_[i].index[part] + (p - where_[i].first[part])));
      }
    }
  }
  const size_t vocab = static_cast<size_t>(model_.config().n_vocab);
  if (logits_.size() < logit_rows_.size() * vocab) logits_.resize(logit_rows_.size() * vocab);
  const ForwardBatch batch{tokens_, positions_, tables_, logit_rows_, n_prompt};
  if (tp_ != nullptr) {
    tp_->forward(model_, backend_, batch, kv_, logits_.data(), copies_);
    copies_.clear();
    return;
  }
  model_.forward(backend_, batch, kv_, logits_.data());
}

}  // namespace lift
