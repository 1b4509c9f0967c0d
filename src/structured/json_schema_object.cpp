// Objects: declared properties in the order the schema writes them, each at most once, and any
// other properties (additionalProperties, patternProperties) anywhere between them. The
// grammar stays deterministic: rule S(i, c) is "members so far: c (capped); declared
// properties i.. may still come"; a declared property j moves to S(j + 1, ...), an additional
// one stays at i, and additional keys never spell a declared key.
#include <algorithm>
#include <optional>

#include "structured/json_schema_compiler.h"
#include "structured/regex.h"

namespace lift::structured {

namespace {

struct Property {
  std::string name;
  Json schema;
  std::string pointer;
  bool required = false;
  bool absent = false;  // its schema is false: the key must not appear
};

// Whether the regex `pattern` (JSON Schema semantics: may match anywhere) matches `text`.
bool pattern_matches(const std::string& pattern, const std::string& text,
                     const std::string& pointer) {
  GrammarBuilder b;
  RegexOptions o;
  o.anchored = false;
  o.json_string = false;
  try {
    b.set_start(b.add_rule("pattern", compile_regex(pattern, b, o)));
    return b.build().matches(text);
  } catch (const GrammarError& e) {
    schema_error(pointer, e.what());
  }
}

uint32_t count_keyword(const Json& s, const char* key, const std::string& pointer) {
  const double d = schema_count(s, key, pointer);
  return d > 1e9 ? 1'000'000'000u : static_cast<uint32_t>(d);
}

// Keywords a propertyNames schema may use: those that apply to strings (names are strings).
bool names_keyword_ok(std::string_view k) {
  for (std::string_view bad :
       {"anyOf", "oneOf", "not", "if", "then", "else", "allOf", "$ref", "dependencies",
        "dependentSchemas", "dependentRequired", "unevaluatedProperties", "unevaluatedItems",
        "$dynamicRef", "$recursiveRef", "extends", "disallow"}) {
    if (k == bad) return false;
  }
  return true;
}

}  // namespace

ExprId SchemaCompiler::object_expr(const Json& s, const std::string& pointer) {
  GrammarBuilder& b = b_;
  std::vector<Property> props;
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) schema_error(pointer_join(pointer, "properties"), "must be an object");
    const std::string pp = pointer_join(pointer, "properties");
    for (auto p = it->begin(); p != it->end(); ++p) {
      props.push_back({p.key(), p.value(), pointer_join(pp, p.key())});
    }
  }
  Json additional = opt_.strict ? Json(false) : Json(true);
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    if (!it->is_boolean() && !it->is_object()) {
      schema_error(pointer_join(pointer, "additionalProperties"), "must be a schema");
    }
    additional = *it;
  }
  const std::string ap_pointer = pointer_join(pointer, "additionalProperties");
  std::vector<std::pair<std::string, Json>> patterns;
  if (auto it = s.find("patternProperties"); it != s.end()) {
    if (!it->is_object())
      schema_error(pointer_join(pointer, "patternProperties"), "must be an object");
    for (auto p = it->begin(); p != it->end(); ++p) patterns.emplace_back(p.key(), p.value());
  }
  const std::string pat_pointer = pointer_join(pointer, "patternProperties");

  // A declared property that a pattern also matches must satisfy both schemas.
  auto with_patterns = [&](Json schema, const std::string& name) {
    for (const auto& [pattern, ps] : patterns) {
      if (pattern_matches(pattern, name, pointer_join(pat_pointer, pattern))) {
        schema = merge_schemas(root_, schema, ps, pointer_join(pat_pointer, pattern));
      }
    }
    return schema;
  };
  for (Property& p : props) p.schema = with_patterns(p.schema, p.name);

  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array())
      schema_error(pointer_join(pointer, "required"), "must be an array of names");
    for (const Json& n : *it) {
      if (!n.is_string())
        schema_error(pointer_join(pointer, "required"), "must be an array of names");
      const std::string& name = n.get_ref<const std::string&>();
      auto p = std::find_if(props.begin(), props.end(),
                            [&](const Property& q) { return q.name == name; });
      if (p != props.end()) {
        p->required = true;
        continue;
      }
      // Required but not declared: an additional property that must be there, placed last.
      bool matched = false;
      Json schema = true;
      for (const auto& [pattern, ps] : patterns) {
        if (pattern_matches(pattern, name, pointer_join(pat_pointer, pattern))) {
          schema = merge_schemas(root_, schema, ps, pointer_join(pat_pointer, pattern));
          matched = true;
        }
      }
      props.push_back(
          {name, matched ? schema : additional, matched ? pat_pointer : ap_pointer, true});
    }
  }

  const Json* names = nullptr;
  Json names_flat;
  const std::string names_pointer = pointer_join(pointer, "propertyNames");
  if (auto it = s.find("propertyNames"); it != s.end()) {
    names_flat = flatten_schema(root_, *it, names_pointer);
    if (names_flat.is_object()) {
      for (auto k = names_flat.begin(); k != names_flat.end(); ++k) {
        if (!names_keyword_ok(k.key())) {
          schema_error(pointer_join(names_pointer, k.key()),
                       "propertyNames only supports string keywords");
        }
      }
    }
    names = &names_flat;
  }
  for (Property& p : props) {
    if (p.schema.is_boolean() && !p.schema.get<bool>()) p.absent = true;
    if (names && !p.absent && !probe(*names, Json(p.name), names_pointer)) p.absent = true;
    if (p.absent && p.required) return b.nothing();
  }

  // The additional members: a class per pattern, keys that match no other pattern and spell
  // no declared name, then additionalProperties for keys no pattern matches.
  std::vector<ExprId> declared_keys;
  for (const Property& p : props) declared_keys.push_back(string_literal_contents(p.name));
  ExprId names_expr = -1;
  if (names) {
    const unsigned t = schema_types(*names, names_pointer);
    names_expr = (t & kString) ? (names->is_object() ? string_contents(*names, names_pointer)
                                                     : b.star(string_char()))
                               : b.nothing();
  }
  std::vector<ExprId> pattern_keys;
  RegexOptions ro;
  ro.anchored = false;
  ro.json_string = true;
  for (const auto& [pattern, ps] : patterns) {
    try {
      pattern_keys.push_back(compile_regex(pattern, b, ro));
    } catch (const GrammarError& e) {
      schema_error(pointer_join(pat_pointer, pattern), e.what());
    }
  }
  const ExprId colon = b.seq({ws_, b.literal(":"), ws_});
  const ExprId quote = b.literal("\"");
  std::vector<ExprId> extra;
  auto add_class = [&](ExprId key, const std::vector<ExprId>& excluded, const Json& schema,
                       const std::string& ptr) {
    if (schema.is_boolean() && !schema.get<bool>()) return;
    // Intersection first: the difference may leave nothing (a ".*" pattern takes every key).
    ExprId k = names_expr >= 0 ? b.intersect(key, names_expr) : key;
    if (!excluded.empty()) k = b.difference(k, b.alt(excluded));
    extra.push_back(b.seq({quote, k, quote, colon, value(schema, ptr)}));
  };
  for (size_t j = 0; j < patterns.size(); ++j) {
    std::vector<ExprId> excluded = declared_keys;
    for (size_t k = 0; k < patterns.size(); ++k) {
      if (k != j) excluded.push_back(pattern_keys[k]);
    }
    add_class(pattern_keys[j], excluded, patterns[j].second,
              pointer_join(pat_pointer, patterns[j].first));
  }
  // A pattern that matches every key leaves additionalProperties nothing to apply to.
  const bool universal = std::any_of(patterns.begin(), patterns.end(), [](const auto& p) {
    return p.first.empty() || p.first == ".*" || p.first == "^.*$" || p.first == "^.*" ||
           p.first == ".*$";
  });
  if (!universal) {
    std::vector<ExprId> excluded = declared_keys;
    excluded.insert(excluded.end(), pattern_keys.begin(), pattern_keys.end());
    add_class(b.star(string_char()), excluded, additional, ap_pointer);
  }
  const bool has_extra = !extra.empty();
  // One rule, called from every state: inlined, each of the (n + 1) (cap + 1) states' automata
  // would hold its own copy of the key classes (a difference with every declared name), and
  // the mask cache one entry per copied state.
  const ExprId extra_member =
      has_extra ? b.call(b.add_rule(pointer + "/{additional member}", b.alt(extra))) : b.nothing();

  // Member counts matter only where minProperties / maxProperties are not implied.
  const size_t n = props.size();
  size_t required_count = 0, present_count = 0;
  for (const Property& p : props) {
    required_count += p.required;
    present_count += !p.absent;
  }
  uint32_t min_props = s.contains("minProperties") ? count_keyword(s, "minProperties", pointer) : 0;
  std::optional<uint32_t> max_props;
  if (s.contains("maxProperties")) max_props = count_keyword(s, "maxProperties", pointer);
  // A billion members (count_keyword's cap) fit no context lift runs (at most 2^24 tokens).
  if (max_props && *max_props >= 1'000'000'000u) max_props.reset();
  if (min_props <= required_count) min_props = 0;
  if (max_props && !has_extra && *max_props >= present_count) max_props.reset();
  if (max_props && *max_props < required_count) return b.nothing();
  const uint32_t cap = max_props ? *max_props : min_props;
  if ((n + 1) * (cap + 1) > 4096) {
    schema_error(pointer, "minProperties / maxProperties too large for this many properties");
  }
  auto can_add = [&](uint32_t c) { return !max_props || c < *max_props; };
  auto next = [&](uint32_t c) { return std::min(c + 1, cap); };

  std::vector<size_t> first_required(n + 1, n);
  for (size_t i = n; i-- > 0;) first_required[i] = props[i].required ? i : first_required[i + 1];
  std::vector<ExprId> member_value(n);
  for (size_t j = 0; j < n; ++j) {
    if (!props[j].absent) member_value[j] = value(props[j].schema, props[j].pointer);
  }

  // rules[i][c] = S(i, c): after at least one member.
  std::vector<std::vector<RuleId>> rules(n + 1, std::vector<RuleId>(cap + 1));
  for (size_t i = 0; i <= n; ++i) {
    for (uint32_t c = 0; c <= cap; ++c) {
      rules[i][c] = b.declare(pointer + "/{object members " + std::to_string(i) + "," +
                              std::to_string(c) + "}");
    }
  }
  // Calls only into states that can still end the object (defined first: transitions go to a
  // later property or a higher count).
  std::vector<std::vector<bool>> dead(n + 1, std::vector<bool>(cap + 1, false));
  auto go = [&](size_t i, uint32_t c) { return dead[i][c] ? b.nothing() : b.call(rules[i][c]); };
  const ExprId comma = b.seq({ws_, b.literal(","), ws_});
  const ExprId close = b.literal("}");
  // Member j's key, then a call of the rest (colon, value, the state after it) as one rule per
  // (j, c): a state's automaton holds only the keys it may take next, so the states over all
  // (i, c) grow with the key lengths, not with the values and whitespace around them.
  std::vector<std::vector<ExprId>> member(n, std::vector<ExprId>(cap + 1, -1));
  auto member_at = [&](size_t j, uint32_t c) {
    ExprId& m = member[j][c];
    if (m >= 0) return m;
    const ExprId rest = b.seq({colon, member_value[j], go(j + 1, next(c))});
    m = rest == b.nothing() ? rest
                            : b.seq({quote, declared_keys[j], quote,
                                     b.call(b.add_rule(pointer + "/{member " + std::to_string(j) +
                                                           "," + std::to_string(c) + "}",
                                                       rest))});
    return m;
  };
  // The alternatives from state (i, c); `lead` goes before each member (a comma or nothing).
  auto choices = [&](size_t i, uint32_t c, ExprId lead, bool first) {
    std::vector<ExprId> alts;
    if (can_add(c)) {
      for (size_t j = i; j < n && j <= first_required[i]; ++j) {
        if (!props[j].absent) alts.push_back(b.seq({lead, member_at(j, c)}));
      }
    }
    if (first_required[i] == n && c >= min_props)
      alts.push_back(first ? close : b.seq({ws_, close}));
    if (has_extra && can_add(c) && (first || next(c) != c)) {
      alts.push_back(b.seq({lead, extra_member, go(i, next(c))}));
    }
    ExprId out = b.alt(alts);
    if (has_extra && can_add(c) && !first && next(c) == c) {
      out = b.seq({b.star(b.seq({comma, extra_member})), out});  // saturated count: a loop
    }
    return out;
  };
  for (size_t i = n + 1; i-- > 0;) {
    for (uint32_t c = cap + 1; c-- > 0;) {
      const ExprId body = choices(i, c, comma, false);
      dead[i][c] = body == b.nothing();
      b.define(rules[i][c], body);
    }
  }
  return b.seq({b.literal("{"), ws_, choices(0, 0, b.empty(), true)});
}

}  // namespace lift::structured
