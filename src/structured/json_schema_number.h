// JSON numbers within decimal bounds (JSON Schema minimum / maximum / exclusiveMinimum /
// exclusiveMaximum), as grammar expressions over the number's digits. Bounds are compared as
// exact decimals, so 0.1 means one tenth, not the double nearest to it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "structured/grammar.h"

namespace lift::structured {

// A finite decimal: int_part has no leading zeros ("0" for values below one), frac_part no
// trailing zeros; zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_part = "0";
  std::string frac_part;

  // From a JSON number (integers exactly, floats by their shortest round-trip spelling).
  static Decimal from_json(const nlohmann::ordered_json& v);
  bool is_integer() const { return frac_part.empty(); }
  bool operator==(const Decimal&) const = default;
};

int compare(const Decimal& a, const Decimal& b);  // -1, 0, 1

struct NumberBounds {
  std::optional<Decimal> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
  // Tightens with one more lower / upper bound.
  void add_lo(const Decimal& d, bool exclusive);
  void add_hi(const Decimal& d, bool exclusive);
  bool bounded() const { return lo || hi; }
};

// The JSON numbers (integer: no fraction or exponent) whose value lies within `bounds`. Without
// bounds: the whole JSON number syntax; with bounds, numbers are written without an exponent
// (narrower than JSON, never wider).
ExprId json_number(GrammarBuilder& b, const NumberBounds& bounds, bool integer);

// The numbers within `bounds` that are multiples of m > 0 (JSON Schema multipleOf), or nullopt
// with `why` set where lift has no grammar for that set. An integer m takes integers only
// (spelled without fraction or exponent): without bounds, or with one bound whose far side is
// a finite set, by the remainder mod m digit by digit (m <= 1000, one rule per remainder); with
// two bounds, as the list of the multiples between them (at most 4096); for `integer`, a
// fractional m = p / q in lowest terms as p. m = 10^-k takes the numbers with at most k
// fraction digits and no exponent. Narrower than the schema where a
// multiple is spelled otherwise (10.0, 1e2, 0.500), never wider.
std::optional<ExprId> json_multiple(GrammarBuilder& b, const NumberBounds& bounds, bool integer,
                                    const Decimal& m, std::string& why);

}  // namespace lift::structured
