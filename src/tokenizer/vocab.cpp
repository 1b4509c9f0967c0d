#include "tokenizer/vocab.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "gguf/gguf_file.h"
#include "tokenizer/pre_tokenizer.h"
#include "util/error.h"

namespace lift {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xXX>" -> XX, else -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]);
  const int lo = hex_digit(t[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

int32_t checked_id(const std::string& label, const char* key, int64_t id, size_t n_tokens) {
  if (id == -1) return -1;
  if (id < 0 || static_cast<uint64_t>(id) >= n_tokens) {
    throw Error(label + ": " + key + " = " + std::to_string(id) +
                " is out of range for a vocabulary of " + std::to_string(n_tokens) + " tokens");
  }
  return static_cast<int32_t>(id);
}

void check_model(const std::string& label, const std::string& model) {
  if (model != "llama" && model != "gpt2") {
    throw Error(label + ": tokenizer model '" + model +
                "' is not supported yet (supported: 'llama', SentencePiece BPE; 'gpt2', "
                "byte-level BPE)");
  }
}

// The pre-tokenizer row of a gpt2 vocabulary; an empty name means llama.cpp's "default".
const PreTokenizerSpec& pre_spec(const std::string& label, const std::string& pre) {
  const PreTokenizerSpec* spec = find_pre_tokenizer(pre.empty() ? "default" : pre);
  if (spec == nullptr) {
    throw Error(label + ": tokenizer.ggml.pre '" + pre +
                "' is not supported (known: " + known_pre_tokenizers() + ")");
  }
  return *spec;
}

}  // namespace

Vocab::Vocab(VocabData data, const std::string& label) {
  check_model(label, data.model);
  const bool bpe = data.model == "gpt2";
  if (bpe) {
    if (data.merges.empty()) throw Error(label + ": tokenizer.ggml.merges is missing or empty");
    if (data.pre.empty()) {
      warning_ = label +
                 ": tokenizer.ggml.pre is missing; using llama.cpp's 'default' pre-tokenizer, "
                 "which may split text differently from the model's own tokenizer";
      data.pre = "default";
    }
    pre_spec(label, data.pre);
  }
  const size_t n = data.tokens.size();
  if (n == 0) throw Error(label + ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error(label + ": tokenizer.ggml.tokens has too many entries (" + std::to_string(n) + ")");
  }
  if (data.scores.empty()) data.scores.assign(n, 0.0f);
  if (data.types.empty()) data.types.assign(n, TokenType::kNormal);
  if (data.scores.size() != n) {
    throw Error(label + ": tokenizer.ggml.scores has " + std::to_string(data.scores.size()) +
                " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  if (data.types.size() != n) {
    throw Error(label + ": tokenizer.ggml.token_type has " + std::to_string(data.types.size()) +
                " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }

  model_ = std::move(data.model);
  pre_ = std::move(data.pre);
  tokens_ = std::move(data.tokens);
  merges_ = std::move(data.merges);
  scores_ = std::move(data.scores);
  types_ = std::move(data.types);
  bos_id_ = checked_id(label, "tokenizer.ggml.bos_token_id", data.bos_id, n);
  eos_id_ = checked_id(label, "tokenizer.ggml.eos_token_id", data.eos_id, n);
  unk_id_ = checked_id(label, "tokenizer.ggml.unknown_token_id", data.unk_id, n);
  pad_id_ = checked_id(label, "tokenizer.ggml.padding_token_id", data.pad_id, n);
  add_bos_ = data.add_bos;
  add_eos_ = data.add_eos;
  add_space_prefix_ = !bpe && data.add_space_prefix;

  byte_tokens_.fill(-1);
  mergeable_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (std::isnan(scores_[i])) {
      throw Error(label + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is NaN");
    }
    const TokenType t = types_[i];
    if (static_cast<uint8_t>(t) > static_cast<uint8_t>(TokenType::kByte)) {
      throw Error(label + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                  std::to_string(static_cast<int>(t)) + " is not a known token type (0-6)");
    }
    if (t == TokenType::kByte) {
      const int b = parse_byte_token(tokens_[i]);
      if (b < 0) {
        throw Error(label + ": token " + std::to_string(i) + " has type byte but its text '" +
                    tokens_[i] + "' is not of the form <0xXX>");
      }
      if (byte_tokens_[static_cast<size_t>(b)] < 0) byte_tokens_[static_cast<size_t>(b)] = id;
    }
    const bool mergeable =
        t == TokenType::kNormal || t == TokenType::kUndefined || t == TokenType::kUserDefined;
    if (mergeable && !tokens_[i].empty()) mergeable_.insert(tokens_[i], id);  // first id wins
  }
}

int Vocab::byte_value(int32_t id) const {
  if (!valid_id(id) || !is_byte(id)) return -1;
  return parse_byte_token(text(id));
}

Vocab Vocab::from_gguf(const gguf::File& file) {
  const std::string& label = file.path();
  const auto model = file.get_string("tokenizer.ggml.model");
  if (!model) throw Error(label + ": no tokenizer (metadata key tokenizer.ggml.model is missing)");
  VocabData d;
  d.model = std::string(*model);
  check_model(label, d.model);
  const bool bpe = d.model == "gpt2";
  if (const auto pre = file.get_string("tokenizer.ggml.pre")) d.pre = std::string(*pre);
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) throw Error(label + ": metadata key tokenizer.ggml.tokens is missing");
  const size_t n = tokens->size();
  d.tokens.reserve(n);
  for (std::string_view t : *tokens) d.tokens.emplace_back(t);
  if (bpe) {
    const auto merges = file.get_string_array("tokenizer.ggml.merges");
    if (!merges) throw Error(label + ": metadata key tokenizer.ggml.merges is missing");
    d.merges.reserve(merges->size());
    for (std::string_view m : *merges) d.merges.emplace_back(m);
  }
  if (auto scores = file.get_float_array("tokenizer.ggml.scores")) d.scores = std::move(*scores);
  if (auto types = file.get_int_array("tokenizer.ggml.token_type")) {
    d.types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
        throw Error(label + ": tokenizer.ggml.token_type[" + std::to_string(i) +
                    "] = " + std::to_string(t) + " is not a known token type (0-6)");
      }
      d.types.push_back(static_cast<TokenType>(t));
    }
  }
  // llama.cpp's defaults per model, used when a key is absent.
  const auto id_or = [&](const char* key, int64_t def) -> int64_t {
    const auto v = file.get_int(key);
    if (!v) return static_cast<uint64_t>(def) < n ? def : -1;
    if (*v == -1 || *v == 0xFFFFFFFF) return -1;  // written as "unset" by converters
    return *v;
  };
  d.bos_id = id_or("tokenizer.ggml.bos_token_id", bpe ? 11 : 1);
  d.eos_id = id_or("tokenizer.ggml.eos_token_id", bpe ? 11 : 2);
  d.unk_id = id_or("tokenizer.ggml.unknown_token_id", bpe ? -1 : 0);
  d.pad_id = id_or("tokenizer.ggml.padding_token_id", -1);
  const bool bos_default = !bpe || pre_spec(label, d.pre).add_bos;
  d.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(bos_default);
  d.add_eos = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  d.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  Vocab v(std::move(d), label);
  if (!v.warning().empty()) std::fprintf(stderr, "lift: warning: %s\n", v.warning().c_str());
  return v;
}

Vocab Vocab::load(const std::string& gguf_path) { return from_gguf(gguf::File::open(gguf_path)); }

}  // namespace lift
