#include "tokenizer/spm_encoder.h"

#include <algorithm>
#include <limits>

#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace lift {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁"

// One symbol of the merge list: a run of the escaped fragment.
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

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string_view text = vocab.text(id);
    if (vocab.find_mergeable(text) == id) max_token_len_ = std::max(max_token_len_, text.size());
  }
}

std::string SpmEncoder::normal_piece(std::string_view t) const {
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

void SpmEncoder::encode(const Vocab& vocab, std::string_view fragment, bool starts_text,
                        std::vector<int32_t>& out) const {
  // Escape: ' ' -> "▁", plus the dummy prefix.
  std::string esc;
  esc.reserve(fragment.size() + 8);
  if (starts_text && vocab.add_space_prefix()) esc.append(kSpaceSymbol);
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
  std::vector<Symbol> sym;
  sym.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Sequence seq = next_utf8(s, pos);
    const uint32_t len = seq.status == Utf8Status::kValid ? seq.length : 1u;
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(pos), len, idx - 1, idx + 1,
                   vocab.find_mergeable(s.substr(pos, len))});
    pos += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::vector<Bigram> heap;
  heap.reserve(sym.size());
  const BigramLess less;
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const Symbol& r = sym[static_cast<size_t>(right)];
    const size_t len = size_t{l.len} + r.len;
    if (len > max_token_len_) return;
    const int32_t id = vocab.find_mergeable(s.substr(l.start, len));
    if (id < 0) return;
    heap.push_back({vocab.score(id), left, right, static_cast<uint32_t>(len), id});
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
      have_all = have_all && vocab.byte_token(static_cast<uint8_t>(s[x.start + k])) >= 0;
    }
    if (have_all) {
      for (uint32_t k = 0; k < x.len; ++k) {
        out.push_back(vocab.byte_token(static_cast<uint8_t>(s[x.start + k])));
      }
    } else if (vocab.unk_id() >= 0) {
      out.push_back(vocab.unk_id());
    } else {
      throw Error(
          "tokenizer: cannot encode a character: the vocabulary has no token for it, no byte "
          "tokens and no unknown token");
    }
  }
}

}  // namespace lift
