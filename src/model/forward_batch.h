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
  // Indices into tokens whose logits are wanted (usually each sequence's last token).
  std::span<const int32_t> logit_rows;
};

}  // namespace lift
