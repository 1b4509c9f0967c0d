#include "structured/regex_anchors.h"

#include <algorithm>
#include <vector>

namespace lift::structured::regex_detail {
namespace {

constexpr int kEdges[] = {0, 1};

}  // namespace

Piece PieceAlgebra::plain(ExprId e, bool nullable) const {
  Piece p;
  for (int s : kEdges) {
    for (int e2 : kEdges) {
      p.at[s][e2] = e;
      p.nullable[s][e2] = nullable;
    }
  }
  return p;
}

Piece PieceAlgebra::start_anchor() const {
  Piece p;
  p.plain = false;
  for (int e : kEdges) {
    p.at[0][e] = nothing_;
    p.at[1][e] = b_.empty();
    p.nullable[1][e] = true;
  }
  return p;
}

Piece PieceAlgebra::end_anchor() const {
  Piece p;
  p.plain = false;
  for (int s : kEdges) {
    p.at[s][0] = nothing_;
    p.at[s][1] = b_.empty();
    p.nullable[s][1] = true;
  }
  return p;
}

// xy placed at (s, e) is the union of
//   t1 = x(s,0) y(0,e)         both halves non-empty: the middle is at neither edge,
//   t2 = y(s,e)                if x may be empty at (s,0),
//   t3 = x(s,e)                if y may be empty at (0,e),
//   t4 = the empty string      if both may be empty at (s,e).
// Terms that are subsets of kept ones are dropped (by the subset property), so a chain of
// plain pieces after ^ stays one sequence instead of growing a union at every step.
Piece PieceAlgebra::seq(const Piece& x, const Piece& y) const {
  if (x.plain && y.plain) {
    return plain(cat({x.at[0][0], y.at[0][0]}), x.nullable[0][0] && y.nullable[0][0]);
  }
  const ExprId eps = b_.empty();
  Piece p;
  p.plain = false;
  for (int s : kEdges) {
    for (int e : kEdges) {
      bool t1 = true, t2 = x.nullable[s][0], t3 = y.nullable[0][e];
      if (t2 && y.at[s][e] == y.at[0][e]) t2 = false;  // t2 is within t1
      if (t3 && x.at[s][e] == x.at[s][0]) t3 = false;  // t3 is within t1
      if (t2 && x.at[s][0] == eps) {
        t1 = false;  // t1 = y(0,e), within t2
      } else if (t3 && y.at[0][e] == eps) {
        t1 = false;  // t1 = x(s,0), within t3
      }
      p.nullable[s][e] = x.nullable[s][e] && y.nullable[s][e];
      const bool eps_covered = (t1 && x.nullable[s][0] && y.nullable[0][e]) ||
                               (t2 && y.nullable[s][e]) || (t3 && x.nullable[s][e]);
      std::vector<ExprId> terms;
      if (t1) terms.push_back(cat({x.at[s][0], y.at[0][e]}));
      if (t2) terms.push_back(y.at[s][e]);
      if (t3) terms.push_back(x.at[s][e]);
      if (p.nullable[s][e] && !eps_covered) terms.push_back(eps);
      p.at[s][e] = union_of(std::move(terms));
    }
  }
  return p;
}

Piece PieceAlgebra::alt(std::span<const Piece> options) const {
  std::vector<ExprId> terms;
  bool nullable = false;
  if (std::all_of(options.begin(), options.end(), [](const Piece& o) { return o.plain; })) {
    for (const Piece& o : options) {
      terms.push_back(o.at[0][0]);
      nullable = nullable || o.nullable[0][0];
    }
    return plain(b_.alt(terms), nullable);
  }
  Piece p;
  p.plain = false;
  for (int s : kEdges) {
    for (int e : kEdges) {
      terms.clear();
      nullable = false;
      for (const Piece& o : options) {
        terms.push_back(o.at[s][e]);
        nullable = nullable || o.nullable[s][e];
      }
      p.at[s][e] = union_of(terms);
      p.nullable[s][e] = nullable;
    }
  }
  return p;
}

// x* at (s, e): nothing, one x in the whole place, or a first x at (s, 0), middle ones at
// (0, 0) and a last at (0, e). An empty iteration can always be dropped, so this is all.
Piece PieceAlgebra::star(const Piece& x) const {
  Piece p;
  p.plain = false;
  const ExprId middle = b_.star(x.at[0][0]);
  for (int s : kEdges) {
    for (int e : kEdges) {
      p.at[s][e] = union_of({b_.empty(), x.at[s][e], cat({x.at[s][0], middle, x.at[0][e]})});
      p.nullable[s][e] = true;
    }
  }
  return p;
}

Piece PieceAlgebra::repeat(const Piece& x, uint32_t min, uint32_t max) const {
  if (x.plain) return plain(b_.repeat(x.at[0][0], min, max), min == 0 || x.nullable[0][0]);
  const Piece unit = plain(b_.empty(), true);
  const Piece optional_x = alt(std::initializer_list<Piece>{x, unit});
  Piece p = unit;
  bool first = true;
  auto append = [&](const Piece& q) {
    p = first ? q : seq(p, q);
    first = false;
  };
  for (uint32_t i = 0; i < min; ++i) append(x);
  if (max == kUnbounded) {
    append(star(x));
  } else {
    for (uint32_t i = min; i < max; ++i) append(optional_x);
  }
  return p;
}

ExprId PieceAlgebra::whole_text(const Piece& p, bool anchored, ExprId any_string) const {
  if (anchored) return p.at[1][1];
  if (p.plain) return cat({any_string, p.at[0][0], any_string});
  // A match at the start, at the end, at both or at neither; a place whose strings equal those
  // of a stricter place adds nothing (the stricter place's term already covers it).
  std::vector<ExprId> terms;
  const auto& a = p.at;
  if (a[1][1] != a[1][0] && a[1][1] != a[0][1] && a[1][1] != a[0][0]) terms.push_back(a[1][1]);
  if (a[1][0] != a[0][0]) terms.push_back(cat({a[1][0], any_string}));
  if (a[0][1] != a[0][0]) terms.push_back(cat({any_string, a[0][1]}));
  terms.push_back(cat({any_string, a[0][0], any_string}));
  return union_of(std::move(terms));
}

// Equal ids are equal languages (the builder shares identical expressions): listing one
// twice would only grow the automaton it determinizes.
ExprId PieceAlgebra::union_of(std::vector<ExprId> terms) const {
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  return b_.alt(terms);
}

}  // namespace lift::structured::regex_detail
