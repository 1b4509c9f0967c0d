// Byte-level BPE (tokenizer.ggml.model == "gpt2"), as GPT-2, Llama 3, Qwen2 and others use it
// (and as llama.cpp's "bpe" tokenizer does): the fragment is split by the vocabulary's
// pre-tokenizer (tokenizer.ggml.pre, see pre_tokenizer.h); each piece is spelled in GPT-2's
// byte alphabet (byte_level.h), one symbol per byte; then the adjacent pair with the lowest
// rank in tokenizer.ggml.merges is merged, repeatedly (ties: the leftmost pair). With the
// pre-tokenizer's ignore_merges (Llama 3), a piece that is itself a token is emitted whole.
// No dummy prefix is added and no text is normalized. Decoding maps the alphabet back to bytes,
// so encoding is lossless for any input, ill-formed UTF-8 included.
#pragma once

#include <array>

#include "tokenizer/flat_index.h"
#include "tokenizer/fragment_encoder.h"
#include "tokenizer/pre_tokenizer.h"

namespace lift {

class BpeEncoder final : public FragmentEncoder {
 public:
  // Builds the merge table (ids, not texts) once; throws lift::Error for a malformed merge or
  // a pre-tokenizer name not in the table.
  explicit BpeEncoder(const Vocab& vocab);
  void encode(const Vocab& vocab, std::string_view fragment, bool starts_text,
              std::vector<int32_t>& out) const override;
  std::string normal_piece(std::string_view token_text) const override;

 private:
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  struct Scratch;  // work buffers of one encode() call, reused across its pieces
  void encode_piece(const Vocab& vocab, std::string_view piece, Scratch& scratch,
                    std::vector<int32_t>& out) const;

  PreTokenizer pre_;
  // pair_key(left, right) -> {rank: index in tokenizer.ggml.merges (lower merges first), id:
  // the token the pair becomes}.
  PairIndex merges_;
  std::array<int32_t, 256> byte_ids_{};  // token of each byte's one-character spelling, or -1
};

}  // namespace lift
