// SentencePiece-style BPE (tokenizer.ggml.model == "llama"), as llama.cpp's "spm" tokenizer:
// every ' ' becomes U+2581 "▁" and, when the vocabulary's add_space_prefix is set, one "▁" is
// prepended to a fragment that starts the text or follows a special token. The fragment is
// split into UTF-8 characters (each byte of an ill-formed sequence is its own symbol), then the
// adjacent pair whose concatenation is a vocabulary token with the highest score is merged,
// repeatedly (ties: the leftmost pair). A final symbol that is not a token becomes its bytes'
// <0xXX> tokens (byte fallback), or one unknown token when the vocabulary lacks one of those.
#pragma once

#include "tokenizer/fragment_encoder.h"

namespace lift {

class SpmEncoder final : public FragmentEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);
  void encode(const Vocab& vocab, std::string_view fragment, bool starts_text,
              std::vector<int32_t>& out) const override;
  // "▁" -> ' '.
  std::string normal_piece(std::string_view token_text) const override;

 private:
  size_t max_token_len_ = 0;  // longest mergeable token, in bytes: longer pairs need no lookup
};

}  // namespace lift
