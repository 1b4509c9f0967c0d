// Helpers for model tests: run a model over token sequences through the paged forward pass.
#pragma once

#include <numeric>
#include <vector>

#include "kernels/backend.h"
#include "model/llama_model.h"

namespace lift::test {

// One sequence's K/V blocks inside a shared cache.
struct TestSequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;
  size_t cached = 0;  // tokens whose K/V are already in the cache
};

// Runs `take[i]` new tokens of each sequence i in one batch and returns each sequence's
// logits for its last token of this step (empty for sequences with take 0).
inline std::vector<std::vector<float>> step(LlamaModel& m, Backend& be, KvCache& kv,
                                            std::vector<TestSequence*> seqs,
                                            const std::vector<size_t>& take) {
  std::vector<int32_t> tok, pos, rows;
  std::vector<const int32_t*> tables;
  std::vector<size_t> owner;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (size_t j = 0; j < take[s]; ++j) {
      const size_t p = seqs[s]->cached + j;
      tok.push_back(seqs[s]->tokens[p]);
      pos.push_back(static_cast<int32_t>(p));
      tables.push_back(seqs[s]->table.data());
    }
    if (take[s] > 0) {
      rows.push_back(static_cast<int32_t>(tok.size() - 1));
      owner.push_back(s);
    }
  }
  const size_t vocab = static_cast<size_t>(m.config().n_vocab);
  std::vector<float> logits(rows.size() * vocab);
  m.forward(be, ForwardBatch{tok, pos, tables, rows}, kv, logits.data());
  std::vector<std::vector<float>> out(seqs.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    out[owner[r]].assign(logits.begin() + static_cast<ptrdiff_t>(r * vocab),
                         logits.begin() + static_cast<ptrdiff_t>((r + 1) * vocab));
  }
  for (size_t s = 0; s < seqs.size(); ++s) seqs[s]->cached += take[s];
  return out;
}

// Gives each sequence a disjoint run of blocks [first, first + n).
inline void assign_blocks(TestSequence& s, int32_t first, size_t n) {
  s.table.resize(n);
  std::iota(s.table.begin(), s.table.end(), first);
}

inline float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace lift::test
