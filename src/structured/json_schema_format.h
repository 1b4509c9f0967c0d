// JSON Schema "format" values as regular languages over JSON string contents. Each is as strict
// as the RFC it names or stricter (e.g. a date's day is checked against its month and leap
// years, a URI's port must be digits), so a string the grammar allows always validates.
#pragma once

#include <optional>
#include <string_view>

#include "structured/grammar.h"

namespace lift::structured {

// The contents (between the quotes) of the JSON strings in `format`; nullopt for a name the
// specification does not define (an annotation: nothing to check), GrammarError naming
// `pointer` for a defined format lift cannot express.
std::optional<ExprId> json_string_format(GrammarBuilder& b, std::string_view format,
                                         std::string_view pointer);

}  // namespace lift::structured
