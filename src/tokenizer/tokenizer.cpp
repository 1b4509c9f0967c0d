#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {
namespace {

constexpr std::string_view kUnknownPiece = " \xE2\x81\x87 ";  // " ⁇ ", as SentencePiece

// One row per tokenizer.ggml.model (Vocab rejects the others).
struct ModelRow {
  std::string_view model;
  std::unique_ptr<const FragmentEncoder> (*make)(const Vocab&);
};
constexpr ModelRow kModels[] = {
    {"llama",
     [](const Vocab& v) -> std::unique_ptr<const FragmentEncoder> {
       return std::make_unique<SpmEncoder>(v);
     }},
    {"gpt2",
     [](const Vocab& v) -> std::unique_ptr<const FragmentEncoder> {
       return std::make_unique<BpeEncoder>(v);
     }},
};

std::unique_ptr<const FragmentEncoder> make_encoder(const Vocab& v) {
  for (const ModelRow& row : kModels) {
    if (row.model == v.model()) return row.make(v);
  }
  throw Error("tokenizer: tokenizer model '" + v.model() + "' is not supported yet");
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), encoder_(make_encoder(vocab_)) {
  const int32_t n = vocab_.size();
  pieces_.resize(static_cast<size_t>(n));
  std::vector<Special> specials;
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view text = vocab_.text(id);
    std::string& piece = pieces_[static_cast<size_t>(id)];
    switch (vocab_.type(id)) {
      case TokenType::kByte:
        piece.assign(1, static_cast<char>(vocab_.byte_value(id)));
        break;
      case TokenType::kControl:
        if (!text.empty()) specials.push_back({text, id, false});
        break;
      case TokenType::kUnknown:
        piece = kUnknownPiece;
        if (!text.empty()) specials.push_back({text, id, false});
        break;
      case TokenType::kUserDefined:
        piece = text;
        if (!text.empty()) specials.push_back({text, id, true});
        break;
      case TokenType::kNormal:
      case TokenType::kUndefined:
      case TokenType::kUnused:
        piece = encoder_->normal_piece(text);
        break;
    }
  }
  // First byte ascending, then longest first, then lowest id.
  std::sort(specials.begin(), specials.end(), [](const Special& a, const Special& b) {
    if (a.text[0] != b.text[0]) {
      return static_cast<uint8_t>(a.text[0]) < static_cast<uint8_t>(b.text[0]);
    }
    if (a.text.size() != b.text.size()) return a.text.size() > b.text.size();
    return a.id < b.id;
  });
  specials_ = std::move(specials);
  size_t k = 0;
  for (size_t b = 0; b < 256; ++b) {
    first_[b] = static_cast<uint32_t>(k);
    while (k < specials_.size() && static_cast<uint8_t>(specials_[k].text[0]) == b) {
      if (specials_[k].always) first_always_[b] = has_always_ = true;
      ++k;
    }
  }
  first_[256] = static_cast<uint32_t>(k);
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) { return Tokenizer(Vocab::from_gguf(file)); }

Tokenizer Tokenizer::load(const std::string& gguf_path) {
  return Tokenizer(Vocab::load(gguf_path));
}

Tokenizer::Match Tokenizer::find_special(std::string_view text, size_t from,
                                         bool parse_special) const {
  if (parse_special ? !specials_.empty() : has_always_) {
    for (size_t i = from; i < text.size(); ++i) {
      const auto b = static_cast<uint8_t>(text[i]);
      if (first_[b] == first_[b + 1u] || (!parse_special && !first_always_[b])) continue;
      const std::string_view rest = text.substr(i);
      for (uint32_t k = first_[b]; k < first_[b + 1u]; ++k) {
        const Special& s = specials_[k];
        if ((parse_special || s.always) && rest.starts_with(s.text)) {
          return {i, s.text.size(), s.id};
        }
      }
    }
  }
  return {text.size(), 0, -1};
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                       bool add_eos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 2);
  if (add_bos && vocab_.bos_id() >= 0) out.push_back(vocab_.bos_id());
  bool after_special = true;  // the text's start counts as "after a special token"
  size_t pos = 0;
  while (pos < text.size()) {
    const Match m = find_special(text, pos, parse_special);
    if (m.pos > pos) {
      encoder_->encode(vocab_, text.substr(pos, m.pos - pos), after_special, out);
      after_special = false;
    }
    if (m.id < 0) break;
    out.push_back(m.id);
    after_special = true;
    pos = m.pos + m.len;
  }
  if (add_eos && vocab_.eos_id() >= 0) out.push_back(vocab_.eos_id());
  return out;
}

std::string_view Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (!vocab_.valid_id(id)) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is out of range (vocabulary has " +
                std::to_string(vocab_.size()) + " tokens)");
  }
  if (special) {
    const TokenType t = vocab_.type(id);
    if (t == TokenType::kControl || t == TokenType::kUnknown) return vocab_.text(id);
  }
  return pieces_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  StreamDecoder d(*this, /*at_start=*/true, special);
  std::string out;
  for (const int32_t id : ids) d.push(id, out);
  d.flush(out);
  return out;
}

// ---- StreamDecoder ----------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool at_start, bool special)
    : tok_(&tokenizer), special_(special) {
  reset(at_start);
}

void StreamDecoder::reset(bool at_start) {
  strip_space_ = at_start && tok_->vocab().add_space_prefix();
  pending_len_ = 0;
}

std::string StreamDecoder::push(int32_t token) {
  std::string out;
  push(token, out);
  return out;
}

void StreamDecoder::push(int32_t token, std::string& out) {
  std::string_view piece = tok_->token_to_piece(token, special_);
  const Vocab& v = tok_->vocab();
  if (token == v.bos_id()) {
    // A new sequence starts: its first text piece carries the dummy-prefix space.
    strip_space_ = v.add_space_prefix();
    if (piece.empty()) return;
  } else if (!piece.empty() && strip_space_) {
    strip_space_ = false;
    if (!v.is_byte(token) && piece.front() == ' ') piece.remove_prefix(1);
  }
  if (piece.empty()) return;
  size_t held;
  if (pending_len_ == 0) {
    held = append_sanitized_utf8(out, piece, /*final=*/false);
    std::memcpy(pending_.data(), piece.data() + piece.size() - held, held);
  } else {
    buf_.assign(pending_.data(), pending_len_);
    buf_.append(piece);
    held = append_sanitized_utf8(out, buf_, /*final=*/false);
    std::memcpy(pending_.data(), buf_.data() + buf_.size() - held, held);
  }
  pending_len_ = held;
}

std::string StreamDecoder::flush() {
  std::string out;
  flush(out);
  return out;
}

void StreamDecoder::flush(std::string& out) {
  append_sanitized_utf8(out, std::string_view(pending_.data(), pending_len_), /*final=*/true);
  pending_len_ = 0;
}

}  // namespace lift
