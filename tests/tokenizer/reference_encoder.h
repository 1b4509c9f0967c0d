// A deliberately simple encoder, written from the rules in tokenizer/spm_encoder.h and
// tokenizer/bpe_encoder.h without any of Tokenizer::encode's machinery (no heap, no linked
// list, no special-token index by first byte, byte-level merges looked up by text pairs as
// llama.cpp does rather than by token ids), to cross-check it: the tokenizer tests compare the
// two on random text, and fuzz/fuzz_tokenizer.cpp on whatever libFuzzer finds. It shares only
// the pre-tokenizer's regex split (checked by the test vectors instead). O(n^2) merges over the
// text and a lookup of every length at every position: for short texts only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace lift::test {

class ReferenceEncoder {
 public:
  explicit ReferenceEncoder(const Tokenizer& tok) : v_(tok.vocab()) {
    for (int32_t id = 0; id < v_.size(); ++id) {  // ascending: the lowest id of a text stays
      const TokenType t = v_.type(id);
      const std::string_view text = v_.text(id);
      if (text.empty()) continue;
      if (t == TokenType::kUserDefined) always_.emplace(text, id);
      if (t == TokenType::kUserDefined || t == TokenType::kControl || t == TokenType::kUnknown) {
        any_.emplace(text, id);
        max_special_ = std::max(max_special_, text.size());
      }
    }
    if (v_.model() == "gpt2") {
      pre_ = std::make_unique<PreTokenizer>(*find_pre_tokenizer(v_.pre()));
      for (size_t i = 0; i < v_.merges().size(); ++i) {
        const std::string& m = v_.merges()[i];
        const size_t sp = m.find(' ', 1);
        ranks_.emplace(std::make_pair(m.substr(0, sp), m.substr(sp + 1)), i);
      }
    }
  }

  // Tokenizer::encode(text, add_bos, parse_special, add_eos), the slow way.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              bool add_eos = false) const {
    std::vector<int32_t> out;
    if (add_bos && v_.bos_id() >= 0) out.push_back(v_.bos_id());
    bool after_special = true;
    size_t pos = 0;
    while (pos < text.size()) {
      // The leftmost special token, the longest there, the lowest id among equals.
      const auto& specials = parse_special ? any_ : always_;
      size_t at = text.size();
      int32_t best = -1;
      for (size_t i = pos; i < text.size() && best < 0; ++i) {
        for (size_t len = std::min(max_special_, text.size() - i); len > 0 && best < 0; --len) {
          const auto it = specials.find(text.substr(i, len));
          if (it != specials.end()) best = it->second;
        }
        if (best >= 0) at = i;
      }
      if (at > pos) {
        encode_fragment(text.substr(pos, at - pos), after_special, out);
        after_special = false;
      }
      if (best < 0) break;
      out.push_back(best);
      after_special = true;
      pos = at + v_.text(best).size();
    }
    if (add_eos && v_.eos_id() >= 0) out.push_back(v_.eos_id());
    return out;
  }

  void encode_fragment(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
    if (pre_) {
      std::vector<std::string_view> pieces;
      pre_->split(text, pieces);
      for (const std::string_view p : pieces) encode_byte_level(p, out);
    } else {
      encode_spm(text, space_prefix, out);
    }
  }

  // One pre-tokenizer piece: spell each byte, (ignore_merges: the whole piece when it is a
  // token), merge the pair of lowest rank (leftmost) until none merges.
  void encode_byte_level(std::string_view piece, std::vector<int32_t>& out) const {
    std::vector<std::string> sym;
    for (const char c : piece) {
      sym.emplace_back();
      append_byte_level(sym.back(), std::string_view(&c, 1));
    }
    if (pre_->spec().ignore_merges) {
      std::string whole;
      for (const std::string& s : sym) whole += s;
      const int32_t id = v_.find_mergeable(whole);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    while (true) {
      size_t best = sym.size();
      size_t best_rank = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        const auto it = ranks_.find(std::make_pair(sym[i], sym[i + 1]));
        if (it != ranks_.end() && (best == sym.size() || it->second < best_rank)) {
          best = i;
          best_rank = it->second;
        }
      }
      if (best == sym.size()) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const std::string& s : sym) {
      const int32_t id = v_.find_mergeable(s);
      if (id >= 0) {
        out.push_back(id);
      } else if (v_.unk_id() >= 0) {
        out.push_back(v_.unk_id());
      } else {
        throw Error("reference encoder: no token for a byte");
      }
    }
  }

  // One fragment between special tokens: escape, split into characters, merge the best pair
  // (highest score, leftmost) until none merges, then byte fallback.
  void encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
    std::string esc = space_prefix && v_.add_space_prefix() ? "\xE2\x96\x81" : "";
    for (const char c : text) esc += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    std::vector<std::string> sym;
    for (size_t pos = 0; pos < esc.size();) {
      const Utf8Sequence s = next_utf8(esc, pos);
      const size_t len = s.status == Utf8Status::kValid ? s.length : 1;
      sym.push_back(esc.substr(pos, len));
      pos += len;
    }
    while (true) {
      int best = -1;
      float best_score = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        const int32_t id = v_.find_mergeable(sym[i] + sym[i + 1]);
        if (id >= 0 && (best < 0 || v_.score(id) > best_score)) {
          best = static_cast<int>(i);
          best_score = v_.score(id);
        }
      }
      if (best < 0) break;
      sym[static_cast<size_t>(best)] += sym[static_cast<size_t>(best) + 1];
      sym.erase(sym.begin() + best + 1);
    }
    for (const std::string& s : sym) {
      const int32_t id = v_.find_mergeable(s);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      bool all_bytes = true;
      for (const char c : s) all_bytes = all_bytes && v_.byte_token(static_cast<uint8_t>(c)) >= 0;
      if (all_bytes) {
        for (const char c : s) out.push_back(v_.byte_token(static_cast<uint8_t>(c)));
      } else if (v_.unk_id() >= 0) {
        out.push_back(v_.unk_id());
      } else {
        throw Error("reference encoder: no token for a character");
      }
    }
  }

 private:
  const Vocab& v_;
  // Special tokens by text (the lowest id of each text): user-defined ones, atomic even
  // without parse_special, and all of them.
  std::map<std::string_view, int32_t> always_, any_;
  size_t max_special_ = 0;
  // Byte-level vocabularies: the real pre-tokenizer, and merge ranks by text pair.
  std::unique_ptr<PreTokenizer> pre_;
  std::map<std::pair<std::string, std::string>, size_t> ranks_;
};

}  // namespace lift::test
