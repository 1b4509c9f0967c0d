// One forward pass's input: a flat list of tokens, possibly from many sequences, each with
// its position and its sequence's block table. Built once per step as plain arrays.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace lift {

struct ForwardBatch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;
  std::span<const int32_t* const> block_tables;  // per token
  // Indices into tokens whose logits are wanted (usually each sequence's last token), those
  // below n_prompt first.
  std::span<const int32_t> logit_rows;
  // Tokens [0, n_prompt) are prompt tokens, the rest generated ones (kernels::RowKind): a
  // token's kind is fixed by its position in its own sequence, never by the batch.
  size_t n_prompt = 0;
};

// Of a sequence's chunk [begin, end), the positions of one kind, for the batch's two passes
// (pass 0: prompt tokens, those before n_prompt; pass 1: generated ones).
inline std::pair<size_t, size_t> chunk_part(size_t begin, size_t end, size_t n_prompt, int pass) {
  const size_t split = std::clamp(n_prompt, begin, end);
  return pass == 0 ? std::pair{begin, split} : std::pair{split, end};
}

}  // namespace lift
