// Prompt lookup (n-gram) speculation: when the sequence's last n tokens occurred before in
// its own prompt or output, propose what followed them there. No second model, no K/V: it pays
// wherever the output copies its input (edits, summaries, code, RAG answers) or repeats itself.
#pragma once

#include "engine/proposer.h"

namespace lift {

class NgramProposer final : public Proposer {
 public:
  // Suffixes of ngram_max down to ngram_min tokens are looked up, longest first.
  NgramProposer(size_t ngram_min, size_t ngram_max);
  std::string_view name() const override { return "ngram"; }
  void propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) override;

  // The lookup itself: for the longest suffix of `tokens` (ngram_max down to ngram_min) found
  // earlier in `tokens`, its most recent earlier occurrence; appends to `out` the k tokens
  // that followed it. The copy may run into the tokens it proposes itself (as LZ77's
  // overlapping copies do), so a pattern of period p < k still yields k tokens.
  static void lookup(std::span<const int32_t> tokens, size_t ngram_min, size_t ngram_max, size_t k,
                     std::vector<int32_t>& out);

 private:
  size_t min_, max_;
};

}  // namespace lift
