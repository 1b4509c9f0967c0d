// allOf and $ref-with-siblings, folded into one schema: the intersection of two schemas written
// keyword by keyword (bounds tighten, required lists unite, properties merge recursively, types
// intersect). Two different values of a keyword with no exact combination are refused.
#include <algorithm>

#include "structured/json_schema_compiler.h"
#include "structured/json_schema_number.h"
#include "structured/json_schema_refs.h"

namespace lift::structured {

namespace {

constexpr int kMaxDepth = 32;
constexpr size_t kMaxAnyOfProduct = 64;

// Draft 4's boolean exclusiveMinimum / exclusiveMaximum as the draft 6 numeric forms, so the
// two can be merged keyword by keyword.
Json normalize_exclusive(Json s) {
  for (auto [flag, bound] :
       {std::pair{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}}) {
    auto it = s.find(flag);
    if (it == s.end() || !it->is_boolean()) continue;
    const bool on = it->get<bool>();
    s.erase(flag);
    if (on && s.contains(bound)) {
      s[flag] = s[bound];
      s.erase(bound);
    }
  }
  return s;
}

Json type_names(unsigned bits) {
  Json out = Json::array();
  for (auto [bit, name] : {std::pair{kNull, "null"},
                           {kBoolean, "boolean"},
                           {kObject, "object"},
                           {kArray, "array"},
                           {kString, "string"}}) {
    if (bits & bit) out.push_back(name);
  }
  if ((bits & kNumber) == kNumber) {
    out.push_back("number");
  } else if (bits & kInteger) {
    out.push_back("integer");
  }
  return out;
}

bool closed(const Json& s) {
  if (s.contains("patternProperties")) return true;
  auto it = s.find("additionalProperties");
  return it != s.end() && !(it->is_boolean() && it->get<bool>());
}

class Merger {
 public:
  Merger(const Json& root, std::string_view pointer) : root_(root), pointer_(pointer) {}

  Json flatten(const Json& s, int depth) {
    if (!s.is_object()) return s;
    if (depth > kMaxDepth) schema_error(pointer_, "$ref / allOf nested too deeply to merge");
    if (!s.contains("$ref") && !s.contains("allOf")) return s;
    Json out = Json::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "$ref" && it.key() != "allOf") out[it.key()] = it.value();
    }
    if (s.contains("$ref")) {
      const Json& ref = s.at("$ref");
      if (!ref.is_string()) schema_error(pointer_join(pointer_, "$ref"), "must be a string");
      const ResolvedRef r = resolve_ref(root_, ref.get_ref<const std::string&>(), pointer_);
      out = merge(out, flatten(*r.schema, depth + 1), depth + 1);
    }
    if (s.contains("allOf")) {
      const Json& all = s.at("allOf");
      if (!all.is_array() || all.empty()) {
        schema_error(pointer_join(pointer_, "allOf"), "must be a non-empty array");
      }
      for (const Json& branch : all) out = merge(out, flatten(branch, depth + 1), depth + 1);
    }
    return out;
  }

  // a and b: flattened (no top-level $ref or allOf).
  Json merge(const Json& a0, const Json& b0, int depth) {
    if (depth > kMaxDepth) schema_error(pointer_, "schemas nested too deeply to merge");
    if (a0.is_boolean()) return a0.get<bool>() ? b0 : a0;
    if (b0.is_boolean()) return b0.get<bool>() ? a0 : b0;
    if (!a0.is_object() || !b0.is_object())
      schema_error(pointer_, "a schema must be an object or a boolean");
    const Json a = normalize_exclusive(a0), b = normalize_exclusive(b0);
    for (const auto& [x, y] : {std::pair{&a, &b}, {&b, &a}}) {
      if (!closed(*x)) continue;
      const Json xp = x->value("properties", Json::object());
      const Json yp = y->value("properties", Json::object());
      for (auto it = yp.begin(); it != yp.end(); ++it) {
        if (!xp.contains(it.key())) {
          fail("additionalProperties", "one side would take property \"" + it.key() +
                                           "\" of the other as an additional property");
        }
      }
    }
    const bool outer_impossible = impossible_;
    impossible_ = false;
    Json out = Json::object();
    auto take = [&](const std::string& k, const Json* va, const Json* vb) {
      if (!is_constraint_keyword(k)) return;  // annotations and foreign keywords drop out
      if (!va || !vb || *va == *vb) {
        out[k] = va ? *va : *vb;
        return;
      }
      out[k] = combine(k, *va, *vb, depth);
    };
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto jt = b.find(it.key());
      take(it.key(), &it.value(), jt == b.end() ? nullptr : &*jt);
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) take(it.key(), nullptr, &it.value());
    }
    const bool impossible = impossible_;
    impossible_ = outer_impossible;
    if (impossible) return false;
    return out;
  }

 private:
  [[noreturn]] void fail(std::string_view key, std::string_view why) {
    schema_error(pointer_,
                 "allOf / $ref: cannot combine \"" + std::string(key) + "\": " + std::string(why));
  }

  Json combine(const std::string& k, const Json& va, const Json& vb, int depth) {
    if (k == "type")
      return type_names(schema_types(Json{{"type", va}}, pointer_) &
                        schema_types(Json{{"type", vb}}, pointer_));
    if (k == "required") {
      if (!va.is_array() || !vb.is_array()) fail(k, "must be arrays");
      Json out = va;
      for (const Json& n : vb) {
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
      }
      return out;
    }
    if (k == "properties") {
      if (!va.is_object() || !vb.is_object()) fail(k, "must be objects");
      Json out = va;
      for (auto it = vb.begin(); it != vb.end(); ++it) {
        out[it.key()] = out.contains(it.key()) ? merge(flatten(out[it.key()], depth + 1),
                                                       flatten(it.value(), depth + 1), depth + 1)
                                               : it.value();
      }
      return out;
    }
    if (k == "additionalProperties" || k == "items" || k == "propertyNames" ||
        k == "additionalItems") {
      if (va.is_array() || vb.is_array()) fail(k, "two different tuples");
      return merge(flatten(va, depth + 1), flatten(vb, depth + 1), depth + 1);
    }
    if (k == "enum") {
      if (!va.is_array() || !vb.is_array()) fail(k, "must be arrays");
      Json out = Json::array();
      for (const Json& v : va) {
        if (std::find(vb.begin(), vb.end(), v) != vb.end()) out.push_back(v);
      }
      return out;
    }
    if (k == "const") {  // two different constants: nothing validates
      impossible_ = true;
      return va;
    }
    if (k == "uniqueItems") return true;
    const bool lower = k == "minimum" || k == "exclusiveMinimum" || k == "minLength" ||
                       k == "minItems" || k == "minProperties";
    const bool upper = k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" ||
                       k == "maxItems" || k == "maxProperties";
    if (lower || upper) {
      if (!va.is_number() || !vb.is_number()) fail(k, "must be numbers");
      const int c = compare(Decimal::from_json(va), Decimal::from_json(vb));
      return (c > 0) == lower ? va : vb;
    }
    if (k == "anyOf") {
      if (!va.is_array() || !vb.is_array()) fail(k, "must be arrays");
      if (va.size() * vb.size() > kMaxAnyOfProduct) fail(k, "too many combinations");
      Json out = Json::array();
      for (const Json& x : va) {
        for (const Json& y : vb)
          out.push_back(merge(flatten(x, depth + 1), flatten(y, depth + 1), depth + 1));
      }
      return out;
    }
    fail(k, "two different values");
  }

  const Json& root_;
  std::string pointer_;
  bool impossible_ = false;
};

}  // namespace

Json flatten_schema(const Json& root, const Json& s, std::string_view pointer, int depth) {
  return Merger(root, pointer).flatten(s, depth);
}

Json merge_schemas(const Json& root, const Json& a, const Json& b, std::string_view pointer) {
  Merger m(root, pointer);
  return m.merge(m.flatten(a, 0), m.flatten(b, 0), 0);
}

}  // namespace lift::structured
