// oneOf as a union, which is exact only when no instance can match two branches. The compiler
// proves that per pair of branches (different JSON types, disjoint enum/const values, disjoint
// numeric ranges, or objects told apart by a required property whose schemas are disjoint or
// that the other branch forbids); a pair it cannot prove apart is compiled as each branch
// without the other (json_schema_not.cpp), and the oneOf refused where neither works.
#include <algorithm>

#include "structured/json_schema_compiler.h"
#include "structured/json_schema_number.h"

namespace lift::structured {

namespace {

constexpr int kMaxDepth = 8;

class Disjointness {
 public:
  Disjointness(const Json& root, const std::string& pointer) : root_(root), pointer_(pointer) {}

  bool proven(const Json& a0, const Json& b0, int depth) {
    if (depth > kMaxDepth) return false;
    const Json a = flatten_schema(root_, a0, pointer_), b = flatten_schema(root_, b0, pointer_);
    const unsigned ta = types(a), tb = types(b);
    if ((ta & tb) == 0) return true;
    const std::vector<Json> va = values(a), vb = values(b);
    if (has_values(a) && has_values(b)) {
      const bool common = std::any_of(va.begin(), va.end(), [&](const Json& v) {
        return std::find(vb.begin(), vb.end(), v) != vb.end();
      });
      if (!common) return true;
    }
    const unsigned overlap = ta & tb;
    if ((overlap & ~kNumber) == 0 && ranges_disjoint(a, b)) return true;
    if (overlap == kObject) return objects_disjoint(a, b, depth) || objects_disjoint(b, a, depth);
    return false;
  }

 private:
  static bool has_values(const Json& s) {
    return s.is_object() && (s.contains("enum") || s.contains("const"));
  }
  static std::vector<Json> values(const Json& s) {
    std::vector<Json> out;
    if (!s.is_object()) return out;
    if (s.contains("enum") && s.at("enum").is_array())
      out.assign(s["enum"].begin(), s["enum"].end());
    if (s.contains("const")) {
      const bool keep =
          !s.contains("enum") || std::find(out.begin(), out.end(), s["const"]) != out.end();
      out.clear();
      if (keep) out.push_back(s["const"]);
    }
    return out;
  }
  unsigned types(const Json& s) const {
    unsigned t = schema_types(s, pointer_);
    if (has_values(s)) {
      unsigned vt = 0;
      for (const Json& v : values(s)) vt |= value_type(v);
      t &= vt;
    }
    return t;
  }
  bool ranges_disjoint(const Json& a, const Json& b) const {
    if (!a.is_object() || !b.is_object()) return false;
    const NumberBounds ra = schema_number_bounds(a, pointer_),
                       rb = schema_number_bounds(b, pointer_);
    auto below = [](const NumberBounds& x, const NumberBounds& y) {  // x entirely below y
      if (!x.hi || !y.lo) return false;
      const int c = compare(*x.hi, *y.lo);
      return c < 0 || (c == 0 && (x.hi_exclusive || y.lo_exclusive));
    };
    return below(ra, rb) || below(rb, ra);
  }
  // Some property `a` requires is forbidden by `b`, or required by both with disjoint schemas.
  bool objects_disjoint(const Json& a, const Json& b, int depth) {
    if (!a.is_object() || !b.is_object() || !a.contains("required") || !a["required"].is_array()) {
      return false;
    }
    const Json ap = a.value("properties", Json::object()),
               bp = b.value("properties", Json::object());
    const Json breq = b.value("required", Json::array());
    const bool b_closed = b.contains("additionalProperties") &&
                          b["additionalProperties"] == false && !b.contains("patternProperties");
    for (const Json& n : a["required"]) {
      if (!n.is_string()) continue;
      const std::string& name = n.get_ref<const std::string&>();
      if (!bp.contains(name)) {
        if (b_closed) return true;
        continue;
      }
      if (bp[name] == false) return true;
      const bool both = std::find(breq.begin(), breq.end(), n) != breq.end();
      if (both && ap.contains(name) && proven(ap[name], bp[name], depth + 1)) return true;
    }
    return false;
  }

  const Json& root_;
  std::string pointer_;
};

}  // namespace

ExprId SchemaCompiler::one_of(const Json& s, const std::string& pointer) {
  const Json& branches = s.at("oneOf");
  const std::string op = pointer_join(pointer, "oneOf");
  if (!branches.is_array() || branches.empty()) schema_error(op, "must be a non-empty array");
  Json base = s;
  base.erase("oneOf");
  std::vector<Json> merged;
  for (size_t i = 0; i < branches.size(); ++i) {
    merged.push_back(merge_schemas(root_, base, branches[i], pointer_join(op, std::to_string(i))));
  }
  // A pair not proven exclusive is made so: "exactly one of A, B" is (A and not B) or (B and
  // not A), each side with the other's own branch negated (the base holds on both). That takes
  // one "not" per branch, so each branch may overlap one other at most.
  Disjointness d(root_, op);
  std::vector<int> partner(merged.size(), -1);
  for (size_t i = 0; i < merged.size(); ++i) {
    for (size_t j = i + 1; j < merged.size(); ++j) {
      if (d.proven(merged[i], merged[j], 0)) continue;
      const bool free = partner[i] < 0 && partner[j] < 0 && merged[i].is_object() &&
                        merged[j].is_object() && !merged[i].contains("not") &&
                        !merged[j].contains("not");
      if (!free) {
        schema_error(op, "cannot prove branches " + std::to_string(i) + " and " +
                             std::to_string(j) +
                             " exclusive (oneOf is only supported for branches that no instance "
                             "can match both of, or pairs of overlapping branches)");
      }
      partner[i] = static_cast<int>(j);
      partner[j] = static_cast<int>(i);
    }
  }
  std::vector<ExprId> alts;
  for (size_t i = 0; i < merged.size(); ++i) {
    const std::string bp = pointer_join(op, std::to_string(i));
    if (partner[i] < 0) {
      alts.push_back(value(merged[i], bp));
      continue;
    }
    Json only = merged[i];
    only["not"] = branches[static_cast<size_t>(partner[i])];
    try {
      alts.push_back(value(only, bp));
    } catch (const GrammarError& e) {
      schema_error(op, "cannot prove branches " + std::to_string(i) + " and " +
                           std::to_string(partner[i]) + " exclusive, nor exclude one from the " +
                           "other (" + e.what() + ")");
    }
  }
  return b_.alt(alts);
}

}  // namespace lift::structured
