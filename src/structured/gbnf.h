// llama.cpp's GBNF grammar format (rules `name ::= ...`, "literals", [classes], ., ( ),
// * + ? {m,n}, # comments; the start rule is `root`), so its users' grammars work unchanged.
#pragma once

#include <string_view>

#include "structured/grammar.h"

namespace lift::structured {

// Throws GrammarError with the line and column of a syntax error, an undefined rule, or a
// missing `root`.
RuleId compile_gbnf(std::string_view text, GrammarBuilder& b);
Grammar gbnf_grammar(std::string_view text, const GrammarLimits& limits = {});

}  // namespace lift::structured
