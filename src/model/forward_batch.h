// One forward pass's input: a flat list of tokens, possibly from many sequences, each with
// its position and its sequence's block table. Built once per step as plain arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

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

}  // namespace lift
