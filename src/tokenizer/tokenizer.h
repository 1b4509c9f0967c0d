// Tokenizer over a GGUF vocabulary, behaving like llama.cpp's tokenizer for the same file:
//
//  * Encoding: the text is split into fragments around special tokens (see encode()); each
//    text fragment is encoded by the vocabulary's model (one class per tokenizer.ggml.model):
//    "llama" by SpmEncoder (SentencePiece BPE, spm_encoder.h), "gpt2" by BpeEncoder
//    (byte-level BPE with a pre-tokenizer per tokenizer.ggml.pre, bpe_encoder.h).
//  * Decoding: token_to_piece() gives each token's text (SentencePiece: "▁" turned back into
//    ' '; byte-level: the raw bytes the token spells), and StreamDecoder turns a token stream
//    into valid UTF-8 text piece by piece.
//
// A Tokenizer is immutable after construction; its const methods may be called from several
// threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/fragment_encoder.h"
#include "tokenizer/vocab.h"

namespace lift {

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  static Tokenizer from_gguf(const gguf::File& file);
  static Tokenizer load(const std::string& gguf_path);

  const Vocab& vocab() const { return vocab_; }

  // Tokenizes `text`. add_bos prepends the BOS token and add_eos appends the EOS token (when
  // the vocabulary has them; see vocab().add_bos()/add_eos() for the model's preference).
  // Special tokens: user-defined tokens found literally in the text are always kept atomic
  // (as in llama.cpp and Hugging Face); with parse_special, control and unknown tokens (e.g.
  // "<s>", "</s>", "<unk>") are too. The leftmost, then longest, match wins. Without
  // parse_special, "<s>" is ordinary text. Empty text gives no tokens besides BOS/EOS.
  // Ill-formed UTF-8 never fails: SentencePiece sends its bytes through byte fallback, and
  // byte-level BPE spells every byte anyway. The one failure is a byte with no token in a
  // vocabulary without an unknown token (Falcon's lacks 0xFF and most C0 controls): a
  // lift::Error naming the byte. Time O(n log n), memory O(n) in the text length.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              bool add_eos = false) const;

  // The text of one token: normal tokens with "▁" -> ' ' (SentencePiece) or as the bytes they
  // spell (byte-level BPE, possibly not valid UTF-8 alone), byte tokens as their raw byte
  // (possibly not valid UTF-8 alone), control tokens empty and the unknown token " ⁇ "
  // (U+2047, as SentencePiece), or, with `special`, the literal text of control and unknown
  // tokens ("<s>"). User-defined tokens are returned verbatim. The view stays valid as long
  // as the Tokenizer. Throws lift::Error for an id out of range.
  std::string_view token_to_piece(int32_t id, bool special = false) const;

  // Whole-sequence decoding with StreamDecoder's rules (at_start = true), then flushed.
  std::string decode(std::span<const int32_t> ids, bool special = false) const;

 private:
  struct Special {
    std::string_view text;
    int32_t id;
    bool always;  // user-defined: atomic even without parse_special
  };
  struct Match {
    size_t pos;
    size_t len;
    int32_t id;  // -1: no match
  };
  Match find_special(std::string_view text, size_t from, bool parse_special) const;

  Vocab vocab_;
  std::unique_ptr<const FragmentEncoder> encoder_;
  std::vector<std::string> pieces_;  // decoded text per id (special = false)
  // Special tokens sorted by first byte, then longest first; [first_[b], first_[b + 1]) are
  // those starting with byte b.
  std::vector<Special> specials_;
  std::array<uint32_t, 257> first_{};
  std::array<bool, 256> first_always_{};  // some user-defined special starts with this byte
  bool has_always_ = false;               // there is a user-defined special
};

// Streaming detokenizer: push() returns the text that became final with each token, flush()
// the rest at the end. The concatenated output is always valid UTF-8:
//  * bytes of an incomplete UTF-8 character (at most 3) are held back until a later token
//    completes it;
//  * each maximal subpart of an ill-formed sequence becomes one U+FFFD (see utf8.h), also an
//    incomplete sequence left at flush().
// Leading space (SentencePiece vocabularies with add_space_prefix only; byte-level pieces are
// never stripped): encode() prepends "▁" to the text, so, as SentencePiece's decoder does,
// the first piece that produces text at the start of the stream (when at_start) or after a BOS
// token loses one leading ' ' when the vocabulary's add_space_prefix is set. Pieces of byte
// tokens are never stripped. Pass at_start = false to decode a continuation (e.g. generated
// tokens after a prompt), whose leading space is real.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool at_start = true, bool special = false);

  std::string push(int32_t token);
  // Appends instead of returning a new string.
  void push(int32_t token, std::string& out);
  std::string flush();
  void flush(std::string& out);
  // Forgets held-back bytes and starts a new stream.
  void reset(bool at_start = true);

  size_t pending_bytes() const { return pending_len_; }

 private:
  const Tokenizer* tok_;
  bool special_;
  bool strip_space_;
  std::array<char, 4> pending_{};
  size_t pending_len_ = 0;
  std::string buf_;
};

}  // namespace lift
