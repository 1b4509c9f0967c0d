// The vocabulary as the constraint engine sees it: each token's bytes, laid out as a trie in
// depth-first order so one pass over an array walks every token with shared prefixes shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lift {
class Tokenizer;
}

namespace lift::structured {

class TokenVocab {
 public:
  // token_bytes[t]: the bytes token t spells. Tokens with no bytes (control tokens) are never
  // allowed, except the `end_tokens` (EOS, end of turn), allowed exactly where the constrained
  // text may end.
  TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);
  // Bytes from Tokenizer::token_to_piece (special = false); end tokens: the vocabulary's EOS
  // and `extra_end_tokens` (e.g. a chat template's end-of-turn id).
  static std::shared_ptr<const TokenVocab> from_tokenizer(
      const Tokenizer& tok, const std::vector<int32_t>& extra_end_tokens = {});

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t t) const { return bytes_[static_cast<size_t>(t)]; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t t) const { return is_end_[static_cast<size_t>(t)]; }

  // Trie in depth-first order; node 0 is the root (no byte). Node i's subtree is
  // [i, subtree_end[i]); tokens spelling exactly node i's path are
  // node_tokens[token_begin[i] .. token_begin[i + 1]).
  struct Trie {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;
    std::vector<uint32_t> subtree_end;
    std::vector<uint32_t> token_begin;  // size nodes + 1
    std::vector<int32_t> node_tokens;
    // Bytes below node i: at most height[i] more, and all of them plain JSON string
    // characters (printable ASCII but '"' and '\\') when plain_below[i]. Lets a walk accept a
    // whole subtree at once where every plain string of that length is known to fit.
    std::vector<uint16_t> height;
    std::vector<uint8_t> plain_below;
    size_t size() const { return byte.size(); }
  };
  const Trie& trie() const { return trie_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<bool> is_end_;
  Trie trie_;
};

}  // namespace lift::structured
