// llama.cpp's GBNF read by recursive descent into GrammarBuilder rules: each `name ::= ...`
// becomes one rule, a reference to it a call(), and everything else (literals, classes,
// groups, repetitions) stays inside the rule body, where build() determinizes it.
// Whitespace follows llama.cpp: spaces, tabs and # comments separate items; a newline ends a
// rule except inside parentheses and right after '::=' or '|'.
#include "structured/gbnf.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "structured/regex.h"

namespace lift::structured {
namespace {

constexpr int kMaxDepth = 256;  // parenthesis nesting: the parser recurses once per level

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

void append_utf8(std::string& out, char32_t c) {
  auto byte = [&](uint32_t v) { out.push_back(static_cast<char>(v)); };
  if (c < 0x80) {
    byte(c);
  } else if (c < 0x800) {
    byte(0xC0 | (c >> 6));
    byte(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    byte(0xE0 | (c >> 12));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  } else {
    byte(0xF0 | (c >> 18));
    byte(0x80 | ((c >> 12) & 0x3F));
    byte(0x80 | ((c >> 6) & 0x3F));
    byte(0x80 | (c & 0x3F));
  }
}

class GbnfCompiler {
 public:
  GbnfCompiler(std::string_view text, GrammarBuilder& b) : text_(text), b_(b) {}

  RuleId compile() {
    space(/*newlines=*/true);
    while (!at_end()) {
      rule();
      space(true);
    }
    const std::pair<const std::string, Rule>* undefined = nullptr;
    for (const auto& entry : rules_) {
      if (!entry.second.defined &&
          (!undefined || entry.second.first_use < undefined->second.first_use)) {
        undefined = &entry;
      }
    }
    if (undefined) fail(undefined->second.first_use, "undefined rule '" + undefined->first + "'");
    auto root = rules_.find("root");
    if (root == rules_.end()) fail(text_.size(), "no 'root' rule");
    return root->second.id;
  }

 private:
  struct Rule {
    RuleId id;
    bool defined = false;
    size_t first_use = 0;  // offset of the first reference, for "undefined rule"
  };

  // ---- input ---------------------------------------------------------------
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    offset = std::min(offset, text_.size());
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("GBNF " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string name() {
    const size_t start = pos_;
    while (is_name_char(peek())) ++pos_;
    if (pos_ == start) fail(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  Rule& rule_named(const std::string& n, size_t at) {
    auto [it, added] = rules_.try_emplace(n, Rule{0, false, at});
    if (added) it->second.id = b_.declare(n);
    return it->second;
  }

  // ---- rules -----------------------------------------------------------------
  void rule() {
    const size_t at = pos_;
    const std::string n = name();
    space(false);
    if (text_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after rule name '" + n + "'");
    pos_ += 3;
    space(true);
    const ExprId body = alternatives(/*nested=*/false);
    Rule& r = rule_named(n, at);
    if (r.defined) fail(at, "rule '" + n + "' defined twice");
    r.defined = true;
    b_.define(r.id, body);
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      fail(pos_, std::string("unexpected '") + peek() + "' (expected a newline or the end)");
    }
  }

  ExprId alternatives(bool nested) {
    std::vector<ExprId> options{sequence(nested)};
    while (peek() == '|') {
      ++pos_;
      space(true);
      options.push_back(sequence(nested));
    }
    return b_.alt(options);
  }

  ExprId sequence(bool nested) {
    std::vector<ExprId> items;
    while (true) {
      const char c = peek();
      const size_t at = pos_;
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) fail(at, std::string("'") + c + "' with nothing before it to repeat");
        items.back() = repetition(items.back());
      } else if (c == '"') {
        items.push_back(literal());
      } else if (c == '[') {
        items.push_back(code_point(b_, char_class(), false));
      } else if (c == '.') {
        ++pos_;
        items.push_back(code_point(b_, CodePointSet::all(), false));
      } else if (c == '(') {
        ++pos_;
        if (++depth_ > kMaxDepth) {
          fail(at, "parentheses nested deeper than " + std::to_string(kMaxDepth));
        }
        space(true);
        items.push_back(alternatives(/*nested=*/true));
        --depth_;
        if (peek() != ')') fail(at, "unclosed '('");
        ++pos_;
      } else if (is_name_char(c)) {
        const std::string n = name();
        space(nested);
        if (text_.substr(pos_, 3) == "::=") {
          fail(at, "'::=' inside a rule: a rule must end with a newline before '" + n + "'");
        }
        items.push_back(b_.call(rule_named(n, at).id));
        continue;  // space already skipped
      } else if (c == '<' || (c == '!' && peek(1) == '<')) {
        fail(at, "token references (<...>) are not supported");
      } else {
        return b_.seq(items);
      }
      space(nested);
    }
  }

  uint32_t number() {
    const size_t at = pos_;
    uint64_t v = 0;
    if (!(peek() >= '0' && peek() <= '9')) fail(at, "expected a number");
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      ++pos_;
      if (v > 1'000'000) fail(at, "repetition count above 1000000");
    }
    return static_cast<uint32_t>(v);
  }

  ExprId repetition(ExprId e) {
    const char c = text_[pos_++];
    if (c == '*') return b_.star(e);
    if (c == '+') return b_.plus(e);
    if (c == '?') return b_.opt(e);
    const size_t open = pos_ - 1;
    space(true);
    const uint32_t min = number();
    uint32_t max = min;
    space(true);
    if (peek() == ',') {
      ++pos_;
      space(true);
      max = peek() == '}' ? kUnbounded : number();
      space(true);
    }
    if (peek() != '}') fail(open, "expected '}' to close the repetition");
    ++pos_;
    if (max < min) fail(open, "repetition {m,n} with n below m");
    return b_.repeat(e, min, max);
  }

  // ---- characters ------------------------------------------------------------
  uint32_t hex(size_t count, size_t esc_at) {
    uint32_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      const char h = peek();
      uint32_t d;
      if (h >= '0' && h <= '9') {
        d = static_cast<uint32_t>(h - '0');
      } else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') {
        d = static_cast<uint32_t>((h | 0x20) - 'a' + 10);
      } else {
        fail(esc_at, "expected " + std::to_string(count) + " hex digits");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  char32_t character() {
    const size_t at = pos_;
    if (at_end()) fail(at, "unexpected end of grammar");
    const auto c0 = static_cast<uint8_t>(text_[pos_]);
    if (c0 == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      char32_t v;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
          return static_cast<char32_t>(e);
        case 'x':
          v = hex(2, at);
          break;
        case 'u':
          v = hex(4, at);
          break;
        case 'U':
          v = hex(8, at);
          break;
        default:
          fail(at, e == '\0' ? std::string("'\\' at the end of the grammar")
                             : std::string("unknown escape '\\") + e + "'");
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail(at, "escape is not a code point");
      return v;
    }
    const size_t len = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC2 ? 2 : 0;
    if (len == 0 || pos_ + len > text_.size()) fail(at, "invalid UTF-8");
    char32_t c = len == 1 ? c0 : c0 & (0x3F >> (len - 1));
    for (size_t k = 1; k < len; ++k) {
      const auto ck = static_cast<uint8_t>(text_[pos_ + k]);
      if ((ck & 0xC0) != 0x80) fail(at, "invalid UTF-8");
      c = (c << 6) | (ck & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) fail(at, "invalid UTF-8");
    pos_ += len;
    return c;
  }

  ExprId literal() {
    const size_t open = pos_++;  // '"'
    std::string bytes;
    while (peek() != '"') {
      if (at_end()) fail(open, "unterminated string literal");
      append_utf8(bytes, character());
    }
    ++pos_;
    return b_.literal(bytes);
  }

  CodePointSet char_class() {
    const size_t open = pos_++;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointSet s;
    while (peek() != ']') {
      if (at_end()) fail(open, "unclosed '['");
      const char32_t lo = character();
      char32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        const size_t dash = pos_++;
        hi = character();
        if (hi < lo) fail(dash, "class range out of order");
      }
      s = s.unite(CodePointSet::range(lo, hi));
    }
    ++pos_;
    return negated ? s.complement() : s;
  }

  std::string_view text_;
  GrammarBuilder& b_;
  size_t pos_ = 0;
  int depth_ = 0;  // parentheses open around pos_
  std::unordered_map<std::string, Rule> rules_;
};

}  // namespace

RuleId compile_gbnf(std::string_view text, GrammarBuilder& b) {
  return GbnfCompiler(text, b).compile();
}

Grammar gbnf_grammar(std::string_view text, const GrammarLimits& limits) {
  GrammarBuilder b;
  b.set_start(compile_gbnf(text, b));
  return b.build(limits);
}

}  // namespace lift::structured
