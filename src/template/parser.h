// Parses template tokens into statements (recursive descent in Jinja2's grammar and
// operator precedence). Unknown statements, filters and tests are errors here, at parse
// time, as in Jinja2; so is nesting deeper than kMaxParseDepth (a hostile template cannot
// exhaust the stack).
#pragma once

#include <string_view>

#include "template/ast.h"

namespace lift::tmpl {

inline constexpr int kMaxParseDepth = 200;

Body parse_template(std::string_view source);

}  // namespace lift::tmpl
