// dependencies (drafts 4-7), dependentRequired and dependentSchemas (2019-09 on): "if property
// A is present, then ...". An object grammar cannot remember which keys it has seen, so each
// such rule becomes a case split that is exact and disjoint: objects without A (A declared
// false), and objects with A (A required) that also satisfy what the rule asks (more required
// names, or a schema merged in). Each split doubles the object's grammar, so only a few are
// taken; rules that cannot fire or ask nothing new are dropped first.
#include <algorithm>

#include "structured/json_schema_compiler.h"

namespace lift::structured {

namespace {

constexpr size_t kMaxSplits = 4;

bool contains_name(const Json& list, const std::string& name) {
  return list.is_array() && std::find(list.begin(), list.end(), Json(name)) != list.end();
}

// The names a dependentRequired / array-form dependencies entry asks for.
std::vector<std::string> names_of(const Json& v, const std::string& pointer) {
  if (!v.is_array()) schema_error(pointer, "must be an array of property names");
  std::vector<std::string> out;
  for (const Json& n : v) {
    if (!n.is_string()) schema_error(pointer, "must be an array of property names");
    out.push_back(n.get<std::string>());
  }
  return out;
}

struct Rule {
  std::string keyword, trigger;
  Json what;  // an array of names, or a schema
};

bool cannot_fire(const Json& s, const std::string& trigger) {
  auto it = s.find("properties");
  return it != s.end() && it->is_object() && it->contains(trigger) && (*it)[trigger] == false;
}

bool asks_nothing_new(const Json& s, const Rule& r) {
  if (r.what.is_boolean()) return r.what.get<bool>();
  if (!r.what.is_array()) return false;
  const Json req = s.value("required", Json::array());
  return std::all_of(r.what.begin(), r.what.end(),
                     [&](const Json& n) { return contains_name(req, n.get<std::string>()); });
}

Json with_required(Json s, const std::vector<std::string>& names) {
  Json req = s.value("required", Json::array());
  if (!req.is_array()) req = Json::array();
  for (const std::string& n : names)
    if (!contains_name(req, n)) req.push_back(n);
  s["required"] = req;
  return s;
}

}  // namespace

std::vector<Json> split_dependency(const Json& root, const Json& s, const std::string& pointer) {
  if (!s.is_object()) return {};
  std::vector<Rule> rules;
  for (const char* kw : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    auto it = s.find(kw);
    if (it == s.end()) continue;
    const std::string kp = pointer_join(pointer, kw);
    if (!it->is_object()) schema_error(kp, "must be an object");
    for (auto d = it->begin(); d != it->end(); ++d) {
      const std::string dp = pointer_join(kp, d.key());
      const bool names = std::string_view(kw) == "dependentRequired" ||
                         (std::string_view(kw) == "dependencies" && d.value().is_array());
      if (names) {
        Json list = Json::array();
        for (const std::string& n : names_of(d.value(), dp)) list.push_back(n);
        rules.push_back({kw, d.key(), list});
      } else {
        if (!d.value().is_object() && !d.value().is_boolean()) schema_error(dp, "must be a schema");
        rules.push_back({kw, d.key(), d.value()});
      }
    }
  }
  if (rules.empty()) return {};

  // What is left once the rule `r` is taken out of `s`.
  auto without_rule = [&](const Rule& r) {
    Json out = s;
    out[r.keyword].erase(r.trigger);
    if (out[r.keyword].empty()) out.erase(r.keyword);
    return out;
  };
  size_t live = 0;
  const Rule* first = nullptr;
  for (const Rule& r : rules) {
    if (cannot_fire(s, r.trigger) || asks_nothing_new(s, r)) {
      // Nothing to split: drop it and look again.
      return {without_rule(r)};
    }
    ++live;
    if (!first) first = &r;
  }
  if (live > kMaxSplits) {
    schema_error(pointer_join(pointer, first->keyword),
                 "more than " + std::to_string(kMaxSplits) + " property dependencies");
  }
  const Rule& r = *first;
  const std::string rp = pointer_join(pointer_join(pointer, r.keyword), r.trigger);
  const Json rest = without_rule(r);

  const Json req = rest.value("required", Json::array());
  if (contains_name(req, r.trigger)) {  // A is always there: the rule always applies
    if (r.what.is_array()) return {with_required(rest, names_of(r.what, rp))};
    return {merge_schemas(root, rest, r.what, rp)};
  }

  Json absent = rest;
  Json props = absent.value("properties", Json::object());
  props[r.trigger] = false;
  absent["properties"] = props;

  // Present: an object (other types already match the first branch) with A.
  Json present =
      merge_schemas(root, with_required(rest, {r.trigger}), Json{{"type", "object"}}, rp);
  if (r.what.is_array()) {
    present = with_required(present, names_of(r.what, rp));
  } else {
    present = merge_schemas(root, present, r.what, rp);
  }
  return {absent, present};
}

}  // namespace lift::structured
