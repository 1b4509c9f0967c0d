#include "template/lexer.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "template/py_text.h"
#include "template/value.h"

namespace lift::tmpl {

namespace {

// Python's str.splitlines() boundaries become "\n"; Jinja2 rejoins the lines with its
// newline_sequence and drops the final line break.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const auto c = static_cast<unsigned char>(src[i]);
    if (c == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      out += '\n';
    } else if (c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E) {
      out += '\n';
    } else if (c == 0xC2 && i + 1 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x85) {
      out += '\n';
      ++i;
    } else if (c == 0xE2 && i + 2 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(src[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(src[i + 2]) == 0xA9)) {
      out += '\n';
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's whitespace (\s in a str regex) at byte i; returns its length in bytes, 0 if none.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (i + n > s.size()) return 0;
  const std::vector<char32_t> cp = decode_utf8(s.substr(i, n));
  return cp.size() == 1 && py_isspace(cp[0]) ? n : 0;
}

std::string rstrip_space(std::string_view s) { return py_strip(s, std::nullopt, false, true); }

bool only_space(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Jinja2 decodes string literals with Python's "unicode-escape" codec.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < s.size() ? hex_value(s[i + 1 + k]) : -1;
          if (h < 0) {
            throw TemplateError("line " + std::to_string(line) + ": truncated \\" +
                                std::string(1, e) + " escape in a string");
          }
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
          // Python would keep a lone surrogate and fail to print it; say so up front.
          throw TemplateError("line " + std::to_string(line) +
                              ": escape for a surrogate or beyond U+10FFFF");
        }
        append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = 0;
          size_t k = 0;
          while (k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7') {
            cp = cp * 8 + static_cast<uint32_t>(s[i + k] - '0');
            ++k;
          }
          append_utf8(out, cp);
          i += k - 1;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        emit_text(std::move(text));
        pos_ = open;
        break;
      }
      const char type = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+' && type != '{') {
        // lstrip_blocks: indentation before a block or comment tag on its own line.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            only_space(std::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      emit_text(std::move(text));
      line_ += count_newlines(pos_, open);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        line_starting = comment();
      } else if (type == '%' && raw_ahead()) {
        line_starting = raw();
      } else {
        line_starting = tag(type == '{');
      }
    }
    out_.push_back({TokKind::eof, "", 0, 0, line_});
    return std::move(out_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  int count_newlines(size_t b, size_t e) const {
    int n = 0;
    for (size_t i = b; i < e; ++i) n += src_[i] == '\n' ? 1 : 0;
    return n;
  }

  void emit_text(std::string text) {
    if (!text.empty()) out_.push_back({TokKind::text, std::move(text), 0, 0, line_});
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError("template line " + std::to_string(line_) + ": " + what);
  }

  // After a closing %} or #}: '-' strips all following whitespace, otherwise trim_blocks
  // drops one newline. Returns whether the consumed text ends with a newline.
  bool after_close(bool strip, bool keep) {
    const size_t start = pos_;
    if (strip) {
      while (pos_ < src_.size()) {
        const size_t n = space_at(src_, pos_);
        if (n == 0) break;
        pos_ += n;
      }
    } else if (!keep && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_newlines(start, pos_);
    return pos_ > start && src_[pos_ - 1] == '\n';
  }

  bool comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail("unterminated comment");
    const char sign = close > pos_ ? src_[close - 1] : '\0';
    line_ += count_newlines(pos_, close);
    pos_ = close + 2;
    const bool ends_nl = after_close(sign == '-', sign == '+');
    // The whole match ends with "#}" unless a newline was consumed after it.
    return ends_nl;
  }

  bool raw_ahead() const {
    size_t i = pos_;
    while (i < src_.size() && (src_[i] == ' ' || src_[i] == '\t' || src_[i] == '\n')) ++i;
    if (src_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    return i < src_.size() && !is_name_char(src_[i]);
  }

  bool raw() {
    size_t i = src_.find("raw", pos_) + 3;
    while (i < src_.size() && (src_[i] == ' ' || src_[i] == '\t' || src_[i] == '\n')) ++i;
    bool strip_after = false;
    if (i < src_.size() && src_[i] == '-') {
      strip_after = true;
      ++i;
    }
    if (src_.compare(i, 2, "%}") != 0) fail("expected %} after raw");
    pos_ = i + 2;
    if (strip_after) after_close(true, false);
    // The body runs to the first {% endraw %}.
    for (size_t j = pos_; j + 1 < src_.size(); ++j) {
      if (src_[j] != '{' || src_[j + 1] != '%') continue;
      size_t k = j + 2;
      const char sign = k < src_.size() ? src_[k] : '\0';
      if (sign == '-' || sign == '+') ++k;
      while (k < src_.size() && (src_[k] == ' ' || src_[k] == '\t' || src_[k] == '\n')) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && (src_[k] == ' ' || src_[k] == '\t' || src_[k] == '\n')) ++k;
      const char close_sign = k < src_.size() ? src_[k] : '\0';
      if (close_sign == '-' || close_sign == '+') ++k;
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, j - pos_);
      if (sign == '-') body = rstrip_space(body);
      emit_text(std::move(body));
      line_ += count_newlines(pos_, k);
      pos_ = k + 2;
      return after_close(close_sign == '-', close_sign == '+');
    }
    fail("missing {% endraw %}");
  }

  // Tokens of one {{ ... }} or {% ... %}; returns line_starting for the next text.
  bool tag(bool variable) {
    out_.push_back({variable ? TokKind::var_begin : TokKind::block_begin, "", 0, 0, line_});
    int depth = 0;
    while (true) {
      while (pos_ < src_.size()) {
        const size_t n = space_at(src_, pos_);
        if (n == 0) break;
        if (src_[pos_] == '\n') ++line_;
        pos_ += n;
      }
      if (pos_ >= src_.size()) fail(variable ? "unterminated {{" : "unterminated {%");
      if (depth == 0) {
        const char* close = variable ? "}}" : "%}";
        for (char sign : {'-', '+', '\0'}) {
          if (sign == '+' && variable) continue;
          const size_t at = pos_ + (sign ? 1 : 0);
          if ((sign == '\0' || src_[pos_] == sign) && src_.compare(at, 2, close) == 0) {
            out_.push_back({variable ? TokKind::var_end : TokKind::block_end, "", 0, 0, line_});
            pos_ = at + 2;
            if (variable) {
              if (sign == '-') after_close(true, false);
              return false;
            }
            return after_close(sign == '-', sign == '+');
          }
        }
      }
      const char c = src_[pos_];
      if (is_name_start(c)) {
        const size_t b = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        out_.push_back({TokKind::name, src_.substr(b, pos_ - b), 0, 0, line_});
      } else if (is_digit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(depth);
      }
    }
  }

  void number() {
    const size_t b = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    bool is_float = false;
    const bool after_dot =
        !out_.empty() && out_.back().kind == TokKind::op && out_.back().text == ".";
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t k = pos_ + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        is_float = true;
        pos_ = k;
        digits();
      }
    }
    std::string text;
    for (size_t i = b; i < pos_; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token t{is_float ? TokKind::floating : TokKind::integer, text, 0, 0, line_};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      const auto r = std::from_chars(text.data(), text.data() + text.size(), t.int_value);
      if (r.ec != std::errc()) fail("integer literal too large: " + excerpt_utf8(text, 40));
    }
    out_.push_back(std::move(t));
  }

  void string_literal(char quote) {
    const size_t b = ++pos_;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      if (src_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    if (pos_ >= src_.size()) fail("unterminated string literal");
    const std::string_view raw_text = std::string_view(src_).substr(b, pos_ - b);
    const int start_line = line_;
    line_ += count_newlines(b, pos_);
    ++pos_;
    out_.push_back({TokKind::string, unescape(raw_text, start_line), 0, 0, start_line});
  }

  void op(int& depth) {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* t : two) {
      if (src_.compare(pos_, 2, t) == 0) {
        out_.push_back({TokKind::op, t, 0, 0, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static const std::string_view one = "+-*/%~[](){}<>=.:|,;";
    if (one.find(c) == std::string_view::npos) {
      const auto b = static_cast<unsigned char>(c);
      if (b < 0x21 || b > 0x7E) {  // not printable ASCII: the byte, not a broken character
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        fail(std::string("unexpected byte ") + hex + " in a tag");
      }
      fail("unexpected character '" + std::string(1, c) + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail("unexpected '" + std::string(1, c) + "'");
      --depth;
    }
    out_.push_back({TokKind::op, std::string(1, c), 0, 0, line_});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace lift::tmpl
