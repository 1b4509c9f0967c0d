#include "engine/ngram_proposer.h"

#include <algorithm>

namespace lift {

NgramProposer::NgramProposer(size_t ngram_min, size_t ngram_max)
    : min_(ngram_min), max_(ngram_max) {}

void NgramProposer::lookup(std::span<const int32_t> tokens, size_t ngram_min, size_t ngram_max,
                           size_t k, std::vector<int32_t>& out) {
  const size_t len = tokens.size();
  if (k == 0 || len < 2) return;
  for (size_t n = std::min(ngram_max, len - 1); n >= ngram_min && n >= 1; --n) {
    const int32_t* suffix = tokens.data() + len - n;
    // Most recent earlier occurrence: it starts at j < len - n, so it is followed by at least
    // one known token.
    for (size_t j = len - n; j-- > 0;) {
      if (tokens[j] != suffix[0] || !std::equal(suffix, suffix + n, tokens.data() + j)) continue;
      const size_t from = j + n;  // first token that followed the match
      const size_t start = out.size();
      for (size_t t = 0; t < k; ++t) {
        const size_t src = from + t;
        out.push_back(src < len ? tokens[src] : out[start + (src - len)]);
      }
      return;
    }
  }
}

void NgramProposer::propose(std::span<const DraftRequest> reqs, std::span<Draft> drafts) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    lookup(reqs[i].seq->tokens, min_, max_, reqs[i].max_tokens, drafts[i].tokens);
  }
}

}  // namespace lift
