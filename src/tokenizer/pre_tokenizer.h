// Pre-tokenizers of byte-level BPE vocabularies, chosen by tokenizer.ggml.pre. Before BPE, a
// text is split into pieces that merges never cross (words, runs of digits, punctuation,
// whitespace). Each model publishes its split rules as regexes in its tokenizer.json; most use
// one, some apply several in sequence: each regex splits every piece left by the previous one
// into its matches and the text between them (Hugging Face's Split with "Isolated"), so
// nothing is dropped and the pieces concatenate back to the text. The regexes are compiled
// with PCRE2 (UTF, Unicode properties, JIT); ill-formed UTF-8 never matches and ends up in the
// text between matches.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lift {

struct PreTokenizerSpec {
  std::string_view name;                     // value of tokenizer.ggml.pre
  std::span<const std::string_view> splits;  // regexes, applied in sequence
  bool ignore_merges;  // a piece that is itself a vocabulary token is emitted whole (Llama 3)
  bool add_bos;        // default of tokenizer.ggml.add_bos_token, as llama.cpp applies it
};

// The table row for `name`, or nullptr when there is none.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
// Every known name, comma-separated, for error messages.
std::string known_pre_tokenizers();

class PreTokenizer {
 public:
  // Compiles the spec's regexes once; throws lift::Error naming the pre-tokenizer if one fails.
  explicit PreTokenizer(const PreTokenizerSpec& spec);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  const PreTokenizerSpec& spec() const { return *spec_; }

  // Replaces `out` with the pieces of `text` (views into it, in order, none empty). Safe to
  // call from several threads at once: match buffers are per call.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Compiled;
  const PreTokenizerSpec* spec_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace lift
