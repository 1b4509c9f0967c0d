// What the libFuzzer targets share: where the real vocabularies are, the byte layouts of the
// structured inputs (so fuzz/make_text_seeds.cpp writes seeds the targets read the same way),
// and the checks every client-facing error must pass.
//
// Models: $LIFT_FUZZ_MODELS, else ../shared/models beside the source tree the target was
// built from (as the tests find them).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#ifndef LIFT_FUZZ_NO_LIBRARY
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#endif

namespace lift::fuzz {

// Fails the run with a message (libFuzzer saves the input that got here).
[[noreturn]] inline void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  if (!detail.empty()) {
    std::fprintf(stderr, "  %.*s\n", static_cast<int>(std::min<size_t>(detail.size(), 400)),
                 detail.data());
  }
  std::abort();
}
inline void check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// The vocabularies the tokenizer targets cycle through, as paths under the models folder:
// SentencePiece Llama (32000 tokens, every byte token), Phi-3 (user-defined and control
// tokens such as <|user|>), stories260K (512 tokens, the model the tests serve), Baichuan
// (a large CJK vocabulary), Gemma 3 (262k tokens, many user-defined ones), and the byte-level
// BPE vocabularies of Qwen2 (user-defined <think>) and Llama 3 (ignore_merges).
inline const std::vector<std::string>& vocab_files() {
  static const std::vector<std::string> v = {
      "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
      "stories260K/stories260K.gguf",    "vocab/ggml-vocab-baichuan.gguf",
      "vocab/ggml-vocab-gemma3.gguf",    "vocab/ggml-vocab-qwen2.gguf",
      "vocab/ggml-vocab-llama-bpe.gguf",
  };
  return v;
}

// ---- Input layouts -----------------------------------------------------------------------------

// fuzz_tokenizer: [flags][text...]; flags bit 0 add_bos, bit 1 parse_special, bit 2 add_eos,
// bits 4-6 the vocabulary (index into vocab_files(), modulo its size).
struct TokenizerInput {
  size_t vocab = 0;
  bool add_bos = false, parse_special = false, add_eos = false;
  std::string_view text;
};
inline TokenizerInput read_tokenizer_input(const uint8_t* data, size_t size) {
  TokenizerInput in;
  if (size == 0) return in;
  in.add_bos = data[0] & 1;
  in.parse_special = data[0] & 2;
  in.add_eos = data[0] & 4;
  in.vocab = ((data[0] >> 4) & 7) % vocab_files().size();
  in.text = std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1);
  return in;
}

// fuzz_stream_decoder: [flags][id as 2 bytes little-endian, modulo the vocabulary size]...;
// flags bit 0 special (control tokens shown), bit 1 at_start, bit 2 also push one id out of
// range (must throw lift::Error), bits 4-6 the vocabulary (modulo the number of them). Ids of
// more than 16 bits (Gemma 3) come from 3 bytes where bit 3 of the flags is set.
struct DecoderInput {
  size_t vocab = 0;
  bool special = false, at_start = true, out_of_range = false;
  std::vector<uint32_t> raw_ids;  // reduce modulo the vocabulary size
};
inline DecoderInput read_decoder_input(const uint8_t* data, size_t size) {
  DecoderInput in;
  if (size == 0) return in;
  in.special = data[0] & 1;
  in.at_start = data[0] & 2;
  in.out_of_range = data[0] & 4;
  const size_t width = data[0] & 8 ? 3 : 2;
  in.vocab = ((data[0] >> 4) & 7) % vocab_files().size();
  for (size_t i = 1; i + width <= size; i += width) {
    uint32_t id = 0;
    for (size_t k = 0; k < width; ++k) id |= static_cast<uint32_t>(data[i + k]) << (8 * k);
    in.raw_ids.push_back(id);
  }
  return in;
}
inline std::string write_decoder_input(uint8_t flags, const std::vector<uint32_t>& ids) {
  std::string s(1, static_cast<char>(flags));
  const size_t width = flags & 8 ? 3 : 2;
  for (uint32_t id : ids) {
    for (size_t k = 0; k < width; ++k) s.push_back(static_cast<char>((id >> (8 * k)) & 0xFF));
  }
  return s;
}

// fuzz_chat_template: [flags][message]\x1e[message]\x1e...; flags bits 0-2 the format (index
// into all_chat_formats(), modulo their count), bit 3 add_generation_prompt. A message is
// [role byte][content...]; role bytes 0-5 are system, user, assistant, developer, tool and "";
// any other byte starts a literal role name that runs to the first \x1f, then the content.
inline constexpr char kMessageSep = '\x1e';
inline constexpr char kRoleEnd = '\x1f';
struct ChatInputMessage {
  std::string role;
  std::string content;
};
struct ChatInput {
  unsigned format = 0;
  bool add_generation_prompt = true;
  std::vector<ChatInputMessage> messages;
};
inline ChatInput read_chat_input(const uint8_t* data, size_t size) {
  static const char* const kRoles[] = {"system", "user", "assistant", "developer", "tool", ""};
  ChatInput in;
  if (size == 0) return in;
  in.format = data[0] & 7;
  in.add_generation_prompt = data[0] & 8;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t end = rest.find(kMessageSep, pos);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view m = rest.substr(pos, end - pos);
    pos = end + 1;
    if (m.empty()) continue;
    ChatInputMessage msg;
    const auto r = static_cast<uint8_t>(m[0]);
    if (r < 6) {
      msg.role = kRoles[r];
      msg.content = m.substr(1);
    } else {
      const size_t e = m.find(kRoleEnd);
      msg.role = m.substr(0, e);
      if (e != std::string_view::npos) msg.content = m.substr(e + 1);
    }
    in.messages.push_back(std::move(msg));
  }
  return in;
}
inline std::string write_chat_input(uint8_t flags, const std::vector<ChatInputMessage>& ms) {
  static const char* const kRoles[] = {"system", "user", "assistant", "developer", "tool", ""};
  std::string s(1, static_cast<char>(flags));
  for (size_t i = 0; i < ms.size(); ++i) {
    if (i) s.push_back(kMessageSep);
    char code = 6;
    for (char k = 0; k < 6; ++k) {
      if (ms[i].role == kRoles[static_cast<int>(k)]) code = k;
    }
    if (code < 6) {
      s.push_back(code);
    } else {
      s += ms[i].role;
      s.push_back(kRoleEnd);
    }
    s += ms[i].content;
  }
  return s;
}

#ifndef LIFT_FUZZ_NO_LIBRARY

inline std::string models_dir() {
  if (const char* env = std::getenv("LIFT_FUZZ_MODELS"); env && *env) return env;
  return std::string(LIFT_SOURCE_DIR) + "/../shared/models";
}

// Vocabulary i of vocab_files(), loaded once (exits with a message when missing: a fuzzer
// without its data must not pass quietly).
inline const Tokenizer& tokenizer(size_t i) {
  static std::vector<std::unique_ptr<const Tokenizer>> cache(vocab_files().size());
  auto& slot = cache.at(i);
  if (!slot) {
    const std::string path = models_dir() + "/" + vocab_files()[i];
    try {
      slot = std::make_unique<const Tokenizer>(Tokenizer::load(path));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz: cannot load %s (set LIFT_FUZZ_MODELS): %s\n", path.c_str(),
                   e.what());
      std::exit(2);
    }
  }
  return *slot;
}

// Every error a client may see: a 4xx status, a message that is short and valid UTF-8 (so
// it can be written as JSON and read in a log), a short param.
inline void check_api_error(const ApiError& e) {
  const std::string_view msg = e.what();
  check(e.status() >= 400 && e.status() < 500, "ApiError status is 4xx", msg);
  check(!msg.empty(), "ApiError message is not empty");
  check(msg.size() <= 400, "ApiError message is at most 400 bytes", msg);
  check(is_valid_utf8(msg), "ApiError message is valid UTF-8", msg);
  check(e.param().size() <= 64, "ApiError param is at most 64 bytes", e.param());
  check(is_valid_utf8(e.param()), "ApiError param is valid UTF-8", e.param());
}

#endif

}  // namespace lift::fuzz
