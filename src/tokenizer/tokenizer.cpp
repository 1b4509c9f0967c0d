#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "gguf/gguf_file.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";     // U+2581 "▁"
constexpr std::string_view kUnknownPiece = " \xE2\x81\x87 ";  // " ⁇ ", as SentencePiece

std::string unescape_spaces(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = t.find(kSpaceSymbol, pos);
    if (hit == std::string_view::npos) break;
    out.append(t.substr(pos, hit - pos));
    out.push_back(' ');
    pos = hit + kSpaceSymbol.size();
  }
  out.append(t.substr(pos));
  return out;
}

}  // namespace

struct Tokenizer::Scratch {
  // One symbol of the BPE linked list: a run of the escaped fragment.
  struct Symbol {
    uint32_t start;
    uint32_t len;  // 0: merged into its left neighbour
    int32_t prev;
    int32_t next;
    int32_t id;  // token id of the text, or -1
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t len;  // left.len + right.len when queued; stale once either side changed
    int32_t id;
  };
  // Heap order: highest score on top, ties broken by the leftmost pair.
  struct BigramLess {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  std::string esc;
  std::vector<Symbol> sym;
  std::vector<Bigram> heap;
};

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
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
        piece = unescape_spaces(text);
        break;
    }
    if (vocab_.find_mergeable(text) == id) max_token_len_ = std::max(max_token_len_, text.size());
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
  Scratch scratch;
  bool after_special = true;  // the text's start counts as "after a special token"
  size_t pos = 0;
  while (pos < text.size()) {
    const Match m = find_special(text, pos, parse_special);
    if (m.pos > pos) {
      encode_fragment(text.substr(pos, m.pos - pos), after_special, scratch, out);
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

void Tokenizer::encode_fragment(std::string_view fragment, bool space_prefix, Scratch& scratch,
                                std::vector<int32_t>& out) const {
  using Symbol = Scratch::Symbol;
  using Bigram = Scratch::Bigram;
  std::string& esc = scratch.esc;
  std::vector<Symbol>& sym = scratch.sym;
  std::vector<Bigram>& heap = scratch.heap;
  // Escape: ' ' -> "▁", plus the dummy prefix.
  esc.clear();
  if (space_prefix && vocab_.add_space_prefix()) esc.append(kSpaceSymbol);
  for (const char c : fragment) {
    if (c == ' ') {
      esc.append(kSpaceSymbol);
    } else {
      esc.push_back(c);
    }
  }
  if (esc.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: text fragment too long (" + std::to_string(esc.size()) + " bytes)");
  }
  const std::string_view s = esc;

  // One symbol per UTF-8 character; each byte of an ill-formed sequence stands alone.
  sym.clear();
  sym.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Sequence seq = next_utf8(s, pos);
    const uint32_t len = seq.status == Utf8Status::kValid ? seq.length : 1u;
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(pos), len, idx - 1, idx + 1,
                   vocab_.find_mergeable(s.substr(pos, len))});
    pos += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  heap.clear();
  heap.reserve(sym.size());
  const Scratch::BigramLess less;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const Symbol& r = sym[static_cast<size_t>(right)];
    const size_t len = size_t{l.len} + r.len;
    if (len > max_token_len_) return;
    const int32_t id = vocab_.find_mergeable(s.substr(l.start, len));
    if (id < 0) return;
    heap.push_back({vocab_.score(id), left, right, static_cast<uint32_t>(len), id});
    std::push_heap(heap.begin(), heap.end(), less);
  };
  for (size_t i = 1; i < sym.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), less);
    const Bigram bg = heap.back();
    heap.pop_back();
    Symbol& l = sym[static_cast<size_t>(bg.left)];
    Symbol& r = sym[static_cast<size_t>(bg.right)];
    if (l.len == 0 || r.len == 0 || l.next != bg.right || l.len + r.len != bg.len) continue;
    l.len = bg.len;
    l.id = bg.id;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = bg.left;
    r.len = 0;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& x = sym[static_cast<size_t>(i)];
    if (x.id >= 0) {
      out.push_back(x.id);
      continue;
    }
    // Byte fallback; one unknown token for the symbol when a byte token is missing.
    bool have_all = true;
    for (uint32_t k = 0; k < x.len; ++k) {
      have_all = have_all && vocab_.byte_token(static_cast<uint8_t>(s[x.start + k])) >= 0;
    }
    if (have_all) {
      for (uint32_t k = 0; k < x.len; ++k) {
        out.push_back(vocab_.byte_token(static_cast<uint8_t>(s[x.start + k])));
      }
    } else if (vocab_.unk_id() >= 0) {
      out.push_back(vocab_.unk_id());
    } else {
      throw Error(
          "tokenizer: cannot encode a character: the vocabulary has no token for it, no byte "
          "tokens and no unknown token");
    }
  }
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
