// Code point sets and their two spellings: raw UTF-8, and one character of a JSON string
// literal (raw where JSON allows it, or any of its escapes). The escape forms are built digit
// by digit over hex ranges, so "any JSON string character" is a few dozen expressions, not one
// alternative per code point.
#include <algorithm>
#include <string>

#include "structured/regex.h"

namespace lift::structured {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

// Sorts and merges overlapping or adjacent ranges (the invariant CodePointSet promises).
Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// Hex digit values lo..hi (0..15) as the bytes that spell them, either case.
ByteSet hex_digits(unsigned lo, unsigned hi) {
  ByteSet s;
  for (unsigned v = lo; v <= hi; ++v) {
    if (v < 10) {
      s.set(static_cast<uint8_t>('0' + v));
    } else {
      s.set(static_cast<uint8_t>('a' + v - 10));
      s.set(static_cast<uint8_t>('A' + v - 10));
    }
  }
  return s;
}

ExprId any_hex(GrammarBuilder& b, unsigned digits) {
  return b.repeat(b.byte_set(hex_digits(0, 15)), digits, digits);
}

// The `digits`-digit hex spellings of the values lo..hi: fix the leading digit where lo and hi
// share it, otherwise a partial first digit, a run of full middle digits, a partial last one.
ExprId hex_range(GrammarBuilder& b, uint32_t lo, uint32_t hi, unsigned digits) {
  if (digits == 0) return b.empty();
  const uint32_t unit = uint32_t{1} << (4 * (digits - 1));
  const uint32_t dl = lo / unit, dh = hi / unit, rl = lo % unit, rh = hi % unit;
  if (dl == dh) return b.seq({b.byte_set(hex_digits(dl, dl)), hex_range(b, rl, rh, digits - 1)});
  std::vector<ExprId> parts;
  const uint32_t full_lo = rl == 0 ? dl : dl + 1;
  const uint32_t full_hi = rh == unit - 1 ? dh : dh - 1;
  if (rl != 0) {
    parts.push_back(
        b.seq({b.byte_set(hex_digits(dl, dl)), hex_range(b, rl, unit - 1, digits - 1)}));
  }
  if (full_lo <= full_hi) {
    parts.push_back(b.seq({b.byte_set(hex_digits(full_lo, full_hi)), any_hex(b, digits - 1)}));
  }
  if (rh != unit - 1) {
    parts.push_back(b.seq({b.byte_set(hex_digits(dh, dh)), hex_range(b, 0, rh, digits - 1)}));
  }
  return b.alt(parts);
}

// The hex digits after "\u" for code points lo..hi above U+FFFF: "D8xx\uDCxx" surrogate pairs.
// The high surrogate is fixed per 1024 code points, so a range splits into a partial first
// block, full middle blocks and a partial last block.
ExprId surrogate_pairs(GrammarBuilder& b, char32_t lo, char32_t hi) {
  const uint32_t vlo = lo - 0x10000, vhi = hi - 0x10000;
  const uint32_t hl = 0xD800 + (vlo >> 10), hh = 0xD800 + (vhi >> 10);
  const uint32_t ll = 0xDC00 + (vlo & 0x3FF), lh = 0xDC00 + (vhi & 0x3FF);
  const ExprId sep = b.literal("\\u");
  auto pair = [&](uint32_t h0, uint32_t h1, uint32_t l0, uint32_t l1) {
    return b.seq({hex_range(b, h0, h1, 4), sep, hex_range(b, l0, l1, 4)});
  };
  if (hl == hh) return pair(hl, hl, ll, lh);
  std::vector<ExprId> parts;
  const uint32_t full_lo = ll == 0xDC00 ? hl : hl + 1;
  const uint32_t full_hi = lh == 0xDFFF ? hh : hh - 1;
  if (ll != 0xDC00) parts.push_back(pair(hl, hl, ll, 0xDFFF));
  if (full_lo <= full_hi) parts.push_back(pair(full_lo, full_hi, 0xDC00, 0xDFFF));
  if (lh != 0xDFFF) parts.push_back(pair(hh, hh, 0xDC00, lh));
  return b.alt(parts);
}

bool contains(const CodePointSet& s, char32_t c) {
  // The first range starting after c; c is in the set iff the one before it reaches c.
  auto it = std::upper_bound(s.ranges.begin(), s.ranges.end(), c,
                             [](char32_t v, const auto& r) { return v < r.first; });
  return it != s.ranges.begin() && std::prev(it)->second >= c;
}

ExprId raw_utf8(GrammarBuilder& b, const CodePointSet& set) {
  std::vector<ExprId> parts;
  parts.reserve(set.ranges.size());
  for (const auto& [lo, hi] : set.ranges) parts.push_back(b.utf8_range(lo, hi));
  return b.alt(parts);
}

ExprId json_char(GrammarBuilder& b, const CodePointSet& set) {
  // Raw: everything but '"', '\' and the C0 controls, which JSON requires escaped.
  static const CodePointSet raw_ok =
      CodePointSet::range(0x20, kMaxCodePoint)
          .intersect(
              CodePointSet::range('"', '"').unite(CodePointSet::range('\\', '\\')).complement());
  std::vector<ExprId> forms;
  if (const CodePointSet raw = set.intersect(raw_ok); !raw.empty())
    forms.push_back(raw_utf8(b, raw));

  // Escapes: "\" then a short letter, or "u" and four hex digits (two groups above U+FFFF).
  static constexpr std::pair<char32_t, char> kShort[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},
                                                         {0x08, 'b'}, {0x0C, 'f'},  {0x0A, 'n'},
                                                         {0x0D, 'r'}, {0x09, 't'}};
  ByteSet letters;
  for (const auto& [c, letter] : kShort) {
    if (contains(set, c)) letters.set(static_cast<uint8_t>(letter));
  }
  std::vector<ExprId> after_u;
  for (const auto& [lo, hi] : set.ranges) {
    if (lo <= 0xFFFF) after_u.push_back(hex_range(b, lo, std::min<char32_t>(hi, 0xFFFF), 4));
    if (hi > 0xFFFF) after_u.push_back(surrogate_pairs(b, std::max<char32_t>(lo, 0x10000), hi));
  }
  std::vector<ExprId> after_backslash;
  if (!letters.empty()) after_backslash.push_back(b.byte_set(letters));
  if (!after_u.empty()) after_backslash.push_back(b.seq({b.byte_range('u', 'u'), b.alt(after_u)}));
  if (!after_backslash.empty()) {
    forms.push_back(b.seq({b.byte_range('\\', '\\'), b.alt(after_backslash)}));
  }
  return b.alt(forms);
}

}  // namespace

CodePointSet CodePointSet::all() {
  return CodePointSet{{{0, kSurrogateLo - 1}, {kSurrogateHi + 1, kMaxCodePoint}}};
}

CodePointSet CodePointSet::range(char32_t lo, char32_t hi) {
  if (lo > hi || lo > kMaxCodePoint) return {};
  CodePointSet s{{{lo, std::min(hi, kMaxCodePoint)}}};
  return s.intersect(all());
}

CodePointSet CodePointSet::complement() const {
  // all() minus this; sets never hold surrogates, so only the gaps between ranges remain.
  CodePointSet gaps;
  char32_t next = 0;
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) gaps.ranges.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) gaps.ranges.emplace_back(next, kMaxCodePoint);
  gaps.ranges = gaps.intersect(all()).ranges;
  return gaps;
}

CodePointSet CodePointSet::unite(const CodePointSet& o) const {
  Ranges r = ranges;
  r.insert(r.end(), o.ranges.begin(), o.ranges.end());
  return CodePointSet{normalized(std::move(r))};
}

CodePointSet CodePointSet::intersect(const CodePointSet& o) const {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < ranges.size() && j < o.ranges.size()) {
    const char32_t lo = std::max(ranges[i].first, o.ranges[j].first);
    const char32_t hi = std::min(ranges[i].second, o.ranges[j].second);
    if (lo <= hi) out.ranges.emplace_back(lo, hi);
    if (ranges[i].second < o.ranges[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

ExprId code_point(GrammarBuilder& b, const CodePointSet& set, bool json_string) {
  if (set.empty()) return b.nothing();
  return json_string ? json_char(b, set) : raw_utf8(b, set);
}

}  // namespace lift::structured
