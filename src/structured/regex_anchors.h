// Pieces of a regex that may hold the anchors ^ and $ anywhere ("(^a|b)c", "x(a|$)"), kept
// as the strings they match in each of the four places a match can lie: at[s][e] with s = 1
// when the match starts at the start of the text, e = 1 when it ends at its end. A piece
// without anchors matches the same strings everywhere and stays one expression ("plain"), so
// ordinary patterns cost nothing extra.
//
// Anchors only assert (there is no negation), so a piece matches at least as much at an edge
// as away from it: at[0][e] is a subset of at[1][e], and at[s][0] of at[s][1]. The formulas in
// regex_anchors.cpp use that to stay exact without splitting off empty matches.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "structured/grammar.h"

namespace lift::structured::regex_detail {

struct Piece {
  bool plain = true;
  std::array<std::array<ExprId, 2>, 2> at{};
  std::array<std::array<bool, 2>, 2> nullable{};  // whether at[s][e] holds the empty string
};

class PieceAlgebra {
 public:
  explicit PieceAlgebra(GrammarBuilder& b) : b_(b), nothing_(b.nothing()) {}

  Piece plain(ExprId e, bool nullable) const;
  Piece start_anchor() const;  // ^
  Piece end_anchor() const;    // $
  Piece seq(const Piece& x, const Piece& y) const;
  Piece alt(std::span<const Piece> options) const;
  // A piece with anchors is unrolled: its bounds must be small (the caller checks).
  Piece repeat(const Piece& x, uint32_t min, uint32_t max) const;

  // The texts the whole pattern accepts: matched anywhere (unanchored: `any_string` may come
  // before and after the match), or as the whole text.
  ExprId whole_text(const Piece& p, bool anchored, ExprId any_string) const;

 private:
  Piece star(const Piece& x) const;
  ExprId cat(std::initializer_list<ExprId> parts) const { return b_.seq(parts); }
  ExprId union_of(std::vector<ExprId> terms) const;

  GrammarBuilder& b_;
  ExprId nothing_;
};

}  // namespace lift::structured::regex_detail
