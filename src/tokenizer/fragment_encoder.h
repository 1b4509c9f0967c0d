// What a tokenizer model contributes to Tokenizer: encoding one fragment of text (the runs
// between special tokens) and spelling a normal token as text. Tokenizer does the rest
// (special tokens, BOS/EOS, decoding). One implementation per tokenizer.ggml.model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lift {

class Vocab;

class FragmentEncoder {
 public:
  virtual ~FragmentEncoder() = default;
  // Appends the ids of `fragment`, which is not empty. `starts_text` is true when the fragment
  // begins the text or follows a special token. Called concurrently from several threads.
  virtual void encode(const Vocab& vocab, std::string_view fragment, bool starts_text,
                      std::vector<int32_t>& out) const = 0;
  // The decoded text of a normal (or undefined or unused) token.
  virtual std::string normal_piece(std::string_view token_text) const = 0;
};

}  // namespace lift
