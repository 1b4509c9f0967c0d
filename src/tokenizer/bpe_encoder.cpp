#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <limits>

#include "tokenizer/byte_level.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace lift {
namespace {

const PreTokenizerSpec& spec_of(const Vocab& vocab) {
  const PreTokenizerSpec* spec = find_pre_tokenizer(vocab.pre());
  if (spec == nullptr) {
    throw Error("tokenizer: tokenizer.ggml.pre '" + vocab.pre() +
                "' is not supported (known: " + known_pre_tokenizers() + ")");
  }
  return *spec;
}

// One symbol of the merge list; symbols are never removed, a merged right side is dead.
struct Symbol {
  int32_t id;  // token of the symbol's text, -1 when the byte has none
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index; the right one is sym[left].next when still valid
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

// Heap order: lowest rank on top, ties broken by the leftmost pair.
struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

struct BpeEncoder::Scratch {
  std::vector<std::string_view> pieces;
  std::string spelled;
  std::vector<Symbol> sym;
  std::vector<Candidate> heap;
};

BpeEncoder::BpeEncoder(const Vocab& vocab) : pre_(spec_of(vocab)) {
  for (uint32_t b = 0; b < 256; ++b) {
    std::string spelling;
    const char c = static_cast<char>(b);
    append_byte_level(spelling, std::string_view(&c, 1));
    byte_ids_[b] = vocab.find_mergeable(spelling);
  }
  const std::vector<std::string>& merges = vocab.merges();
  if (merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: tokenizer.ggml.merges has too many entries");
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    // Token texts of this alphabet hold no ' ', so the first space after the first byte
    // separates the two sides.
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos || sp + 1 == m.size()) {
      throw Error("tokenizer: tokenizer.ggml.merges[" + std::to_string(i) + "] = '" +
                  std::string(m) + "' is not two tokens separated by a space");
    }
    const std::string_view left = m.substr(0, sp);
    const std::string_view right = m.substr(sp + 1);
    joined.assign(left);
    joined.append(right);
    const int32_t l = vocab.find_mergeable(left);
    const int32_t r = vocab.find_mergeable(right);
    const int32_t id = vocab.find_mergeable(joined);
    // Hugging Face refuses such a merge list too: the merge could never apply to tokens.
    if (l < 0 || r < 0 || id < 0) {
      const std::string_view missing = l < 0 ? left : r < 0 ? right : std::string_view(joined);
      throw Error("tokenizer: tokenizer.ggml.merges[" + std::to_string(i) + "] = '" +
                  std::string(m) + "': '" + std::string(missing) +
                  "' is not a token of the vocabulary");
    }
    merges_.insert(pair_key(l, r), {static_cast<int32_t>(i), id});  // the first rank wins
  }
}

std::string BpeEncoder::normal_piece(std::string_view token_text) const {
  return byte_level_decode(token_text);
}

void BpeEncoder::encode(const Vocab& vocab, std::string_view fragment, bool /*starts_text*/,
                        std::vector<int32_t>& out) const {
  Scratch scratch;
  pre_.split(fragment, scratch.pieces);
  for (const std::string_view piece : scratch.pieces) encode_piece(vocab, piece, scratch, out);
}

void BpeEncoder::encode_piece(const Vocab& vocab, std::string_view piece, Scratch& scratch,
                              std::vector<int32_t>& out) const {
  if (piece.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: text piece too long (" + std::to_string(piece.size()) + " bytes)");
  }
  if (piece.empty()) return;
  if (pre_.spec().ignore_merges) {
    std::string& spelled = scratch.spelled;
    spelled.clear();
    append_byte_level(spelled, piece);
    const int32_t whole = vocab.find_mergeable(spelled);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol>& sym = scratch.sym;
  sym.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    sym[static_cast<size_t>(i)] = {byte_ids_[static_cast<uint8_t>(piece[static_cast<size_t>(i)])],
                                   i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  const CandidateAfter after;
  const auto try_add = [&](int32_t left) {
    if (left < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    if (l.next < 0) return;
    const Symbol& r = sym[static_cast<size_t>(l.next)];
    if (l.id < 0 || r.id < 0) return;
    const PairIndex::Value* m = merges_.find(pair_key(l.id, r.id));
    if (m == nullptr) return;
    heap.push_back({m->rank, left, l.id, r.id, m->id});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[static_cast<size_t>(c.left)];
    // Stale when either side has changed since the pair was queued.
    if (!l.alive || l.id != c.left_id || l.next < 0) continue;
    Symbol& r = sym[static_cast<size_t>(l.next)];
    if (r.id != c.right_id) continue;
    l.id = c.merged_id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.left;
    try_add(l.prev);
    try_add(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    if (s.id >= 0) {
      out.push_back(s.id);
    } else if (vocab.unk_id() >= 0) {
      out.push_back(vocab.unk_id());
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto b = static_cast<uint8_t>(piece[static_cast<size_t>(i)]);
      throw Error(std::string("tokenizer: byte 0x") + kHex[b >> 4] + kHex[b & 15] +
                  " has no token in this byte-level vocabulary and there is no unknown token");
    }
  }
}

}  // namespace lift
