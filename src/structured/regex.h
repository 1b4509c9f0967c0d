// Regular expressions (the ECMAScript syntax JSON Schema's "pattern" uses, which also covers
// the usual guided_regex patterns) compiled to grammar expressions over code points, written
// either as raw UTF-8 or as the contents of a JSON string literal.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace lift::structured {

// A set of code points as sorted, disjoint, non-adjacent closed ranges.
struct CodePointSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  static CodePointSet all();  // U+0000..U+10FFFF without surrogates
  static CodePointSet range(char32_t lo, char32_t hi);
  CodePointSet complement() const;
  CodePointSet unite(const CodePointSet& o) const;
  CodePointSet intersect(const CodePointSet& o) const;
  bool empty() const { return ranges.empty(); }
};

struct RegexOptions {
  // true: the whole text must match (guided_regex). false: JSON Schema "pattern" semantics,
  // the pattern may match anywhere unless anchored with ^ / $.
  bool anchored = true;
  // true: the language is JSON string *contents* (between the quotes, not including them)
  // whose decoded value matches: each code point may be written raw (where JSON allows it)
  // or as an escape (\" \\ \/ \b \f \n \r \t \uXXXX, surrogate pairs beyond the BMP).
  bool json_string = false;
};

// Throws GrammarError for a malformed pattern or a feature that is not regular or not
// implemented (backreferences, lookaround), naming it.
ExprId compile_regex(std::string_view pattern, GrammarBuilder& b, const RegexOptions& opt = {});

// One code point of `set`, as raw UTF-8 (json_string = false) or as one JSON string character
// (json_string = true: raw where JSON allows it, or escaped).
ExprId code_point(GrammarBuilder& b, const CodePointSet& set, bool json_string);

}  // namespace lift::structured
