// ECMAScript regular expressions (JSON Schema "pattern", guided_regex) compiled straight to
// grammar expressions by recursive descent. Matching is over code points (the `u` flag's
// view); ^ and $ may stand anywhere (regex_anchors.h keeps them exact). Every construct that
// is not regular or not implemented is refused by name and offset, because a constraint that
// silently widened a pattern would let invalid text out.
#include "structured/regex.h"

#include <string>

#include "structured/regex_anchors.h"

namespace lift::structured {
namespace {

constexpr char32_t kEnd = 0xFFFFFFFF;  // past the last code point of the pattern
constexpr uint32_t kMaxCount = 1'000'000;
// A group holding an anchor is unrolled per repetition (regex_anchors.h).
constexpr uint32_t kMaxAnchoredRepeat = 16;
constexpr int kMaxDepth = 256;  // group nesting: the parser recurses once per level

using regex_detail::Piece;
using regex_detail::PieceAlgebra;

CodePointSet single(char32_t c) { return CodePointSet::range(c, c); }

CodePointSet of(std::initializer_list<std::pair<char32_t, char32_t>> ranges) {
  CodePointSet s;
  for (const auto& [lo, hi] : ranges) s = s.unite(CodePointSet::range(lo, hi));
  return s;
}

const CodePointSet& digit_set() {
  static const CodePointSet s = of({{'0', '9'}});
  return s;
}
const CodePointSet& word_set() {
  static const CodePointSet s = of({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return s;
}
// ECMAScript's WhiteSpace and LineTerminator code points.
const CodePointSet& space_set() {
  static const CodePointSet s = of({{0x09, 0x0D},
                                    {0x20, 0x20},
                                    {0xA0, 0xA0},
                                    {0x1680, 0x1680},
                                    {0x2000, 0x200A},
                                    {0x2028, 0x2029},
                                    {0x202F, 0x202F},
                                    {0x205F, 0x205F},
                                    {0x3000, 0x3000},
                                    {0xFEFF, 0xFEFF}});
  return s;
}
const CodePointSet& dot_set() {
  static const CodePointSet s = of({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}).complement();
  return s;
}

bool is_hex(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint32_t hex_value(char32_t c) {
  if (c <= '9') return c - '0';
  return (c | 0x20) - 'a' + 10;
}
bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, GrammarBuilder& b, const RegexOptions& opt)
      : pattern_(pattern), b_(b), opt_(opt) {
    decode();
  }

  ExprId compile() {
    const Piece p = alternation();
    if (peek() == ')') fail(pos_, "unmatched ')'");
    return pieces_.whole_text(p, opt_.anchored, b_.star(set_expr(CodePointSet::all())));
  }

 private:
  // ---- input ---------------------------------------------------------------
  void decode() {
    size_t i = 0;
    while (i < pattern_.size()) {
      const auto c0 = static_cast<uint8_t>(pattern_[i]);
      const size_t len = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC2 ? 2 : 0;
      if (len == 0 || i + len > pattern_.size()) fail_at_byte(i, "invalid UTF-8");
      char32_t c = len == 1 ? c0 : c0 & (0x3F >> (len - 1));
      for (size_t k = 1; k < len; ++k) {
        const auto ck = static_cast<uint8_t>(pattern_[i + k]);
        if ((ck & 0xC0) != 0x80) fail_at_byte(i, "invalid UTF-8");
        c = (c << 6) | (ck & 0x3F);
      }
      static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        fail_at_byte(i, "invalid UTF-8");
      }
      cps_.push_back(c);
      offsets_.push_back(i);
      i += len;
    }
    offsets_.push_back(pattern_.size());
  }

  char32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : kEnd;
  }
  char32_t next() {
    if (pos_ >= cps_.size()) fail(pos_, "unexpected end of pattern");
    return cps_[pos_++];
  }

  [[noreturn]] void fail(size_t cp_index, const std::string& what) const {
    fail_at_byte(offsets_[std::min(cp_index, offsets_.size() - 1)], what);
  }
  [[noreturn]] void fail_at_byte(size_t offset, const std::string& what) const {
    std::string shown(pattern_.substr(0, 200));
    if (pattern_.size() > 200) shown += "...";
    throw GrammarError("regex /" + shown + "/: " + what + " at offset " + std::to_string(offset));
  }

  ExprId set_expr(const CodePointSet& s) { return code_point(b_, s, opt_.json_string); }
  Piece set_piece(const CodePointSet& s) { return pieces_.plain(set_expr(s), false); }

  // ---- structure -------------------------------------------------------------
  // Alternatives up to ')' or the end of the pattern.
  Piece alternation() {
    std::vector<Piece> options{sequence()};
    while (peek() == '|') {
      ++pos_;
      options.push_back(sequence());
    }
    return options.size() == 1 ? options[0] : pieces_.alt(options);
  }

  Piece sequence() {
    Piece acc = pieces_.plain(b_.empty(), true);
    bool first = true;
    while (peek() != kEnd && peek() != '|' && peek() != ')') {
      const Piece item = quantified(atom());
      acc = first ? item : pieces_.seq(acc, item);
      first = false;
    }
    return acc;
  }

  Piece group() {
    const size_t open = pos_++;  // '('
    if (peek() == '?') {
      const char32_t kind = peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        fail(open, "lookahead is not supported");
      } else if (kind == '<' && (peek(2) == '=' || peek(2) == '!')) {
        fail(open, "lookbehind is not supported");
      } else if (kind == '<') {
        pos_ += 2;
        const size_t name_at = pos_;
        while (peek() != '>') {
          const char32_t n = next();
          if (!is_ascii_alnum(n) && n != '_' && n != '$') fail(pos_ - 1, "invalid group name");
        }
        if (pos_ == name_at) fail(name_at, "empty group name");
        ++pos_;
      } else {
        fail(open, "group modifier '(?' is not supported");
      }
    }
    if (++depth_ > kMaxDepth) fail(open, "groups nested deeper than " + std::to_string(kMaxDepth));
    Piece p = alternation();
    --depth_;
    if (peek() != ')') fail(open, "unclosed '('");
    ++pos_;
    return p;
  }

  Piece atom() {
    const char32_t c = peek();
    switch (c) {
      case '(':
        return group();
      case '[':
        return set_piece(char_class());
      case '.':
        ++pos_;
        return set_piece(dot_set());
      case '\\':
        return set_piece(atom_escape());
      case '^':
      case '$': {
        ++pos_;
        const char32_t q = peek();
        if (q == '*' || q == '+' || q == '?' || (q == '{' && counted_quantifier_ahead())) {
          fail(pos_, "an anchor cannot be repeated");
        }
        return c == '^' ? pieces_.start_anchor() : pieces_.end_anchor();
      }
      case '*':
      case '+':
      case '?':
        fail(pos_, std::string("nothing to repeat before '") + static_cast<char>(c) + "'");
      case '{':
        if (counted_quantifier_ahead()) fail(pos_, "nothing to repeat before '{'");
        break;
      default:
        break;
    }
    ++pos_;  // a literal, including ']' '}' and a '{' that is no quantifier (Annex B)
    return set_piece(single(c));
  }

  // ---- quantifiers -----------------------------------------------------------
  bool counted_quantifier_ahead() const {
    size_t i = 1;
    auto digits = [&] {
      const size_t start = i;
      while (peek(i) >= '0' && peek(i) <= '9') ++i;
      return i > start;
    };
    if (!digits()) return false;
    if (peek(i) == ',') {
      ++i;
      digits();
    }
    return peek(i) == '}';
  }

  uint32_t number() {
    const size_t at = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (next() - '0');
      if (v > kMaxCount) fail(at, "repetition count above " + std::to_string(kMaxCount));
    }
    return static_cast<uint32_t>(v);
  }

  Piece quantified(const Piece& e) {
    uint32_t min = 0, max = 0;
    const size_t at = pos_;
    switch (peek()) {
      case '*':
        min = 0, max = kUnbounded;
        ++pos_;
        break;
      case '+':
        min = 1, max = kUnbounded;
        ++pos_;
        break;
      case '?':
        min = 0, max = 1;
        ++pos_;
        break;
      case '{':
        if (!counted_quantifier_ahead()) return e;
        ++pos_;
        min = max = number();
        if (peek() == ',') {
          ++pos_;
          max = peek() == '}' ? kUnbounded : number();
        }
        ++pos_;  // '}'
        if (max < min) fail(at, "repetition {min,max} with max below min");
        break;
      default:
        return e;
    }
    if (!e.plain && (max != kUnbounded ? max : min) > kMaxAnchoredRepeat) {
      fail(at, "a repetition above " + std::to_string(kMaxAnchoredRepeat) +
                   " of a group with an anchor (^ or $) is not supported");
    }
    if (peek() == '?') ++pos_;  // lazy: the same language
    const char32_t after = peek();
    if (after == '*' || after == '+' || after == '?' ||
        (after == '{' && counted_quantifier_ahead())) {
      fail(pos_, "nothing to repeat (a quantifier follows a quantifier)");
    }
    return pieces_.repeat(e, min, max);
  }

  // ---- escapes ---------------------------------------------------------------
  uint32_t hex_digits(size_t count, size_t esc_at) {
    uint32_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      if (!is_hex(peek())) fail(esc_at, "expected " + std::to_string(count) + " hex digits");
      v = v * 16 + hex_value(next());
    }
    return v;
  }

  // After "\u": XXXX or {X...}; a high surrogate followed by "\u" and a low one is one code
  // point (how patterns spell characters above U+FFFF without the `u` flag's braces).
  char32_t unicode_escape(size_t esc_at) {
    if (peek() == '{') {
      ++pos_;
      uint32_t v = 0;
      size_t n = 0;
      while (peek() != '}') {
        if (!is_hex(peek())) fail(esc_at, "malformed \\u{...} escape");
        v = v * 16 + hex_value(next());
        if (++n > 6 || v > 0x10FFFF) fail(esc_at, "\\u{...} escape above U+10FFFF");
      }
      if (n == 0) fail(esc_at, "empty \\u{} escape");
      ++pos_;
      if (v >= 0xD800 && v <= 0xDFFF) fail(esc_at, "surrogate code point in \\u{...}");
      return v;
    }
    const uint32_t v = hex_digits(4, esc_at);
    if (v >= 0xDC00 && v <= 0xDFFF) fail(esc_at, "lone low surrogate \\u escape");
    if (v < 0xD800 || v > 0xDBFF) return v;
    if (peek() == '\\' && peek(1) == 'u') {
      const size_t save = pos_;
      pos_ += 2;
      bool four = true;
      for (size_t k = 0; k < 4; ++k) four = four && is_hex(peek(k));
      if (four) {
        const uint32_t lo = hex_digits(4, save);
        if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
      }
      pos_ = save;
    }
    fail(esc_at, "lone high surrogate \\u escape");
  }

  // The code point of a character escape (the part after '\' common to atoms and classes),
  // or kEnd when `c` is a class escape (\d \D \w \W \s \S), whose set goes to *cls.
  char32_t escape_body(size_t esc_at, bool in_class, CodePointSet* cls) {
    if (peek() == kEnd) fail(esc_at, "'\\' at the end of the pattern");
    const char32_t c = next();
    switch (c) {
      case 'd':
        *cls = digit_set();
        return kEnd;
      case 'D':
        *cls = digit_set().complement();
        return kEnd;
      case 'w':
        *cls = word_set();
        return kEnd;
      case 'W':
        *cls = word_set().complement();
        return kEnd;
      case 's':
        *cls = space_set();
        return kEnd;
      case 'S':
        *cls = space_set().complement();
        return kEnd;
      case 't':
        return '\t';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case 'b':
        if (in_class) return '\b';
        fail(esc_at, "word boundary \\b is not supported");
      case 'B':
        fail(esc_at, "word boundary \\B is not supported");
      case '0':
        if (peek() >= '0' && peek() <= '9') fail(esc_at, "octal escape is not supported");
        return 0;
      case 'x':
        return hex_digits(2, esc_at);
      case 'u':
        return unicode_escape(esc_at);
      case 'c': {
        const char32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) {
          fail(esc_at, "\\c must be followed by a letter");
        }
        ++pos_;
        return l % 32;
      }
      case 'k':
        fail(esc_at, "named backreference \\k is not supported");
      case 'p':
      case 'P':
        fail(esc_at, "Unicode property escape \\p{...} is not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail(esc_at, "backreference is not supported");
    // Identity escapes: punctuation and any non-ASCII character stand for themselves; an
    // undefined letter escape (\A, \Z, \z, \e, ...) means different things in other dialects.
    if (is_ascii_alnum(c)) fail(esc_at, std::string("unknown escape \\") + static_cast<char>(c));
    return c;
  }

  CodePointSet atom_escape() {
    const size_t at = pos_++;  // '\'
    CodePointSet cls;
    const char32_t c = escape_body(at, /*in_class=*/false, &cls);
    return c == kEnd ? cls : single(c);
  }

  // ---- classes ---------------------------------------------------------------
  // One class atom: a code point, or (return kEnd) a class escape whose set goes to *cls.
  char32_t class_atom(CodePointSet* cls) {
    if (peek() == kEnd) fail(pos_, "unclosed '['");
    if (peek() != '\\') return next();
    const size_t at = pos_++;
    return escape_body(at, /*in_class=*/true, cls);
  }

  CodePointSet char_class() {
    const size_t open = pos_++;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointSet s;
    while (peek() != ']') {
      if (peek() == kEnd) fail(open, "unclosed '['");
      CodePointSet lo_cls;
      const char32_t lo = class_atom(&lo_cls);
      if (peek() == '-' && peek(1) != ']' && peek(1) != kEnd) {
        const size_t dash = pos_++;
        CodePointSet hi_cls;
        const char32_t hi = class_atom(&hi_cls);
        if (lo == kEnd || hi == kEnd) {
          // Annex B: a class escape on either side makes the '-' literal ([\w-.]).
          s = s.unite(lo == kEnd ? lo_cls : single(lo));
          s = s.unite(single('-'));
          s = s.unite(hi == kEnd ? hi_cls : single(hi));
          continue;
        }
        if (hi < lo) fail(dash, "class range out of order");
        s = s.unite(CodePointSet::range(lo, hi));
        continue;
      }
      s = s.unite(lo == kEnd ? lo_cls : single(lo));
    }
    ++pos_;  // ']'
    return negated ? s.complement() : s;
  }

  std::string_view pattern_;
  GrammarBuilder& b_;
  RegexOptions opt_;
  PieceAlgebra pieces_{b_};
  std::vector<char32_t> cps_;
  std::vector<size_t> offsets_;  // byte offset of each code point, then the pattern's size
  size_t pos_ = 0;               // index into cps_
  int depth_ = 0;                // groups open around pos_
};

}  // namespace

ExprId compile_regex(std::string_view pattern, GrammarBuilder& b, const RegexOptions& opt) {
  return RegexCompiler(pattern, b, opt).compile();
}

}  // namespace lift::structured
