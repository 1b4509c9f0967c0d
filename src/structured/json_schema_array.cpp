// Arrays: a tuple prefix (prefixItems, or items as an array in older drafts) then the rest
// (items, or additionalItems), with minItems / maxItems counted in the regular part of the
// rule, so "[" ... "]" is one deterministic rule calling its element rules.
#include <algorithm>

#include "structured/json_schema_compiler.h"

namespace lift::structured {

namespace {

uint32_t item_count(const Json& s, const char* key, const std::string& pointer) {
  const double d = schema_count(s, key, pointer);
  return d > 1e9 ? 1'000'000'000u : static_cast<uint32_t>(d);
}

// Above this many items the grammar stops (narrower than the schema) instead of spelling out
// a huge count.
constexpr uint32_t kMaxSpelledItems = 256;

}  // namespace

ExprId SchemaCompiler::array_expr(const Json& s, const std::string& pointer) {
  GrammarBuilder& b = b_;
  std::vector<std::pair<Json, std::string>> prefix;
  Json rest = true;
  std::string rest_pointer = pointer_join(pointer, "items");
  auto tuple = [&](const Json& items, const std::string& ptr) {
    if (!items.is_array()) schema_error(ptr, "must be an array of schemas");
    for (size_t i = 0; i < items.size(); ++i)
      prefix.emplace_back(items[i], pointer_join(ptr, std::to_string(i)));
  };
  if (s.contains("prefixItems")) {
    tuple(s.at("prefixItems"), pointer_join(pointer, "prefixItems"));
    if (s.contains("items")) rest = s.at("items");
  } else if (s.contains("items") && s.at("items").is_array()) {
    tuple(s.at("items"), pointer_join(pointer, "items"));
    rest_pointer = pointer_join(pointer, "additionalItems");
    if (s.contains("additionalItems")) rest = s.at("additionalItems");
  } else if (s.contains("items")) {
    rest = s.at("items");
  }
  if (!rest.is_boolean() && !rest.is_object()) schema_error(rest_pointer, "must be a schema");
  const bool rest_none = rest.is_boolean() && !rest.get<bool>();
  const uint32_t k = static_cast<uint32_t>(prefix.size());
  const uint32_t min = s.contains("minItems") ? item_count(s, "minItems", pointer) : 0;
  uint32_t max = s.contains("maxItems") ? item_count(s, "maxItems", pointer) : kUnbounded;
  if (rest_none) max = std::min(max, k);
  if (s.contains("uniqueItems") && s.at("uniqueItems").is_boolean() &&
      s.at("uniqueItems").get<bool>() && max > 1) {
    schema_error(pointer_join(pointer, "uniqueItems"), "keyword \"uniqueItems\" is not supported");
  }
  if (min > max) return b.nothing();
  if (min > kMaxSpelledItems) schema_error(pointer_join(pointer, "minItems"), "is too large");
  if (max != kUnbounded && max > std::max(min, kMaxSpelledItems))
    max = std::max(min, kMaxSpelledItems);

  const ExprId comma = b.seq({ws_, b.literal(","), ws_});
  // Elements from position i on (i elements written), nonempty unless allow_empty.
  auto elements = [&](auto&& self, uint32_t i, bool allow_empty) -> ExprId {
    if (i >= max) return allow_empty ? b.empty() : b.nothing();
    if (i < k) {
      const ExprId part =
          b.seq({i > 0 ? comma : b.empty(), value(prefix[i].first, prefix[i].second),
                 self(self, i + 1, true)});
      return allow_empty && i >= min ? b.opt(part) : part;
    }
    uint32_t lo = min > k ? min - k : 0;
    const uint32_t hi = max == kUnbounded ? kUnbounded : max - k;
    if (!allow_empty) lo = std::max(lo, 1u);
    if (rest_none) return lo == 0 ? b.empty() : b.nothing();
    const ExprId item = value(rest, rest_pointer);
    if (k > 0) return b.repeat(b.seq({comma, item}), lo, hi);
    return b.seq(
        {item, b.repeat(b.seq({comma, item}), lo - 1, hi == kUnbounded ? kUnbounded : hi - 1)});
  };
  const ExprId close = b.literal("]");
  const ExprId items = b.seq({elements(elements, 0, false), ws_, close});
  return b.seq({b.literal("["), ws_, min == 0 ? b.alt({close, items}) : items});
}

}  // namespace lift::structured
