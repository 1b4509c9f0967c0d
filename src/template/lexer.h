// Splits a template source into tokens the way Jinja2's lexer does with HF's environment
// (trim_blocks=True, lstrip_blocks=True): text runs with whitespace control already applied
// ({%- -%} {{- -}} {#- -#}, {%+ to keep the indentation), then the expression tokens inside
// each {{ }} and {% %}. Line endings are normalised to "\n" and one trailing newline of the
// source is dropped, as Jinja2 does (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lift::tmpl {

enum class TokKind : uint8_t {
  text,
  var_begin,
  var_end,
  block_begin,
  block_end,
  name,
  string,
  integer,
  floating,
  op,
  eof
};

struct Token {
  TokKind kind;
  std::string text;  // text runs, names, operators, the value of string literals
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError naming the line for unterminated tags, strings or comments and for
// characters that cannot start a token.
std::vector<Token> lex(std::string_view source);

}  // namespace lift::tmpl
