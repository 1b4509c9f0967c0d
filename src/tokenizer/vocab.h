// Tokenizer vocabulary as stored in GGUF metadata (tokenizer.ggml.*). Loading validates every
// field (array lengths agree, special ids in range, token types known, byte tokens well
// formed) and reports a bad vocabulary with a lift::Error naming the key and the problem.
//
// Supported models: "llama" (SentencePiece BPE with scores and byte fallback) and "gpt2"
// (byte-level BPE with tokenizer.ggml.merges and a pre-tokenizer named by tokenizer.ggml.pre);
// any other model (e.g. "bert", WordPiece) is rejected with "tokenizer model 'X' is not
// supported yet".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/flat_index.h"

namespace lift {

namespace gguf {
class File;
}

// Values of tokenizer.ggml.token_type (SentencePiece piece types).
enum class TokenType : uint8_t {
  kUndefined = 0,  // treated like kNormal
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything a vocabulary is made of, before validation. Special ids are -1 when unset.
struct VocabData {
  std::string model = "llama";  // tokenizer.ggml.model
  std::string pre;              // tokenizer.ggml.pre; gpt2: empty means "default"
  std::vector<std::string> tokens;
  std::vector<std::string> merges;  // gpt2 only: "left right", by rank
  std::vector<float> scores;        // empty: all 0
  std::vector<TokenType> types;     // empty: all kNormal
  int64_t bos_id = -1;
  int64_t eos_id = -1;
  int64_t unk_id = -1;
  int64_t pad_id = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
};

class Vocab {
 public:
  // Validates `data`; throws lift::Error naming the problem. `label` prefixes messages.
  explicit Vocab(VocabData data, const std::string& label = "vocab");
  // Reads tokenizer.ggml.* from a GGUF file. Absent optional keys take llama.cpp's defaults:
  // for "llama" bos 1, eos 2, unk 0 (when in range), add_bos true, add_space_prefix true; for
  // "gpt2" bos = eos = 11 (when in range), no unk, add_bos as the pre-tokenizer's row says
  // (true for Llama 3), and "default" for a missing tokenizer.ggml.pre (with a warning: the
  // model's own split rule is unknown). Both: no padding, add_eos false, scores 0, types
  // normal. Ids stored as -1 or 0xFFFFFFFF are unset.
  static Vocab from_gguf(const gguf::File& file);
  static Vocab load(const std::string& gguf_path);

  // Token texts are viewed by the lookup table, so a Vocab moves but does not copy.
  Vocab(Vocab&&) noexcept = default;
  Vocab& operator=(Vocab&&) noexcept = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }
  const std::vector<std::string>& merges() const { return merges_; }
  // Non-empty when loading guessed something the user should know (printed to stderr too).
  const std::string& warning() const { return warning_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool valid_id(int64_t id) const { return id >= 0 && id < static_cast<int64_t>(tokens_.size()); }

  // These require valid_id(id).
  std::string_view text(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  bool is_control(int32_t id) const { return type(id) == TokenType::kControl; }
  bool is_byte(int32_t id) const { return type(id) == TokenType::kByte; }

  // -1 when unset.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // Always false for "gpt2": byte-level BPE spells spaces itself and adds no dummy prefix.
  bool add_space_prefix() const { return add_space_prefix_; }

  // Id of the byte token <0xXX> for `b`, or -1 when the vocabulary has none.
  int32_t byte_token(uint8_t b) const { return byte_tokens_[b]; }
  // Value of a byte token, or -1 when `id` is not a byte token.
  int byte_value(int32_t id) const;
  // Id of the token that BPE merges may produce for `text` (normal, undefined and
  // user-defined tokens; the lowest id when texts repeat), or -1.
  int32_t find_mergeable(std::string_view text) const { return mergeable_.find(text); }

 private:
  std::string model_;
  std::string pre_;
  std::string warning_;
  std::vector<std::string> tokens_;
  std::vector<std::string> merges_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
  bool add_bos_ = true;
  bool add_eos_ = false;
  bool add_space_prefix_ = true;
  std::array<int32_t, 256> byte_tokens_{};
  TextIndex mergeable_;  // views into tokens_
};

}  // namespace lift
