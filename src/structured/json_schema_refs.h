// $ref resolution within one schema document: "#", "#/json/pointer" (~0 ~1 escapes and
// %-encoding) and the same with the root's own $id in front. Anything else ($id-relative,
// remote documents, anchors) is a GrammarError: lift never fetches schemas.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lift::structured {

struct ResolvedRef {
  const nlohmann::ordered_json* schema;
  std::string pointer;  // "/definitions/x": where the target lives, for messages
};

ResolvedRef resolve_ref(const nlohmann::ordered_json& root, std::string_view ref,
                        std::string_view where);

}  // namespace lift::structured
