#include "structured/grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "structured/grammar_data.h"

namespace lift::structured {
namespace {

Grammar one_rule(GrammarBuilder& b, ExprId body) {
  b.set_start(b.add_rule("root", body));
  return b.build();
}

TEST(StructuredGrammar, LiteralsAlternativesAndRepeats) {
  GrammarBuilder b;
  ExprId digit = b.byte_range('0', '9');
  ExprId body = b.seq({b.alt({b.literal("ab"), b.literal("c")}), b.repeat(digit, 2, 3)});
  Grammar g = one_rule(b, body);
  EXPECT_TRUE(g.matches("ab12"));
  EXPECT_TRUE(g.matches("c123"));
  EXPECT_FALSE(g.matches("c1"));
  EXPECT_FALSE(g.matches("c1234"));
  EXPECT_FALSE(g.matches("a12"));
  EXPECT_FALSE(g.matches(""));
}

TEST(StructuredGrammar, UnboundedRepeatAndEmpty) {
  GrammarBuilder b;
  Grammar g = one_rule(b, b.seq({b.literal("x"), b.star(b.literal("yz"))}));
  EXPECT_TRUE(g.matches("x"));
  EXPECT_TRUE(g.matches("xyzyzyz"));
  EXPECT_FALSE(g.matches("xyzy"));
  GrammarBuilder e;
  Grammar ge = one_rule(e, e.empty());
  EXPECT_TRUE(ge.matches(""));
  EXPECT_FALSE(ge.matches("a"));
}

TEST(StructuredGrammar, RecursionBalancedParentheses) {
  GrammarBuilder b;
  RuleId p = b.declare("parens");
  b.define(p, b.star(b.seq({b.literal("("), b.call(p), b.literal(")")})));
  b.set_start(p);
  Grammar g = b.build();
  EXPECT_TRUE(g.matches(""));
  EXPECT_TRUE(g.matches("()(())"));
  EXPECT_TRUE(g.matches("((()()))"));
  EXPECT_FALSE(g.matches("(()"));
  EXPECT_FALSE(g.matches("())("));
}

TEST(StructuredGrammar, LeftRecursionIsRefused) {
  GrammarBuilder b;
  RuleId e = b.declare("expr");
  b.define(e, b.alt({b.seq({b.call(e), b.literal("+1")}), b.literal("1")}));
  b.set_start(e);
  try {
    b.build();
    FAIL() << "left recursion accepted";
  } catch (const GrammarError& err) {
    EXPECT_NE(std::string(err.what()).find("left recursion"), std::string::npos) << err.what();
  }
  // Through a nullable rule too.
  GrammarBuilder b2;
  RuleId a = b2.declare("a"), n = b2.declare("n");
  b2.define(n, b2.opt(b2.literal("x")));
  b2.define(a, b2.alt({b2.seq({b2.call(n), b2.call(a), b2.literal("y")}), b2.literal("z")}));
  b2.set_start(a);
  EXPECT_THROW(b2.build(), GrammarError);
}

TEST(StructuredGrammar, UndefinedRuleAndEmptyLanguageAreRefused) {
  GrammarBuilder b;
  RuleId r = b.declare("r"), u = b.declare("undefined");
  b.define(r, b.call(u));
  b.set_start(r);
  EXPECT_THROW(b.build(), GrammarError);
  // A rule that never finishes: "x" r with no way out.
  GrammarBuilder b2;
  RuleId loop = b2.declare("loop");
  b2.define(loop, b2.seq({b2.literal("x"), b2.call(loop)}));
  b2.set_start(loop);
  EXPECT_THROW(b2.build(), GrammarError);
}

// Parts that match nothing (an empty intersection, a rule whose body is nothing()) are
// pruned, not a crash, and the rest of the grammar still works.
TEST(StructuredGrammar, EmptyPartsArePruned) {
  GrammarBuilder b;
  RuleId never = b.add_rule("never", b.nothing());
  ExprId as = b.star(b.literal("a"));
  ExprId empty_diff = b.difference(as, as);
  b.set_start(b.add_rule("root", b.alt({b.seq({b.literal("x"), b.call(never)}),
                                        b.seq({b.literal("x"), empty_diff}), b.literal("y")})));
  Grammar g = b.build();
  EXPECT_TRUE(g.matches("y"));
  EXPECT_FALSE(g.matches("x"));
  GrammarBuilder only;
  only.set_start(only.add_rule("root", only.intersect(only.literal("a"), only.literal("b"))));
  EXPECT_THROW(only.build(), GrammarError);
}

TEST(StructuredGrammar, HugeRepetitionsAreRefusedNotRunForever) {
  GrammarBuilder b;
  ExprId any = b.star(b.byte_range(0, 255));
  b.set_start(b.add_rule("root", b.seq({any, b.repeat(b.literal("a"), 1000000, 1000000), any})));
  EXPECT_THROW(b.build(), GrammarError);
}

TEST(StructuredGrammar, IntersectionAndDifference) {
  GrammarBuilder b;
  ExprId lower = b.plus(b.byte_range('a', 'z'));
  ExprId has_q =
      b.seq({b.star(b.byte_range('a', 'z')), b.literal("q"), b.star(b.byte_range('a', 'z'))});
  ExprId len3 = b.repeat(b.byte_range(0, 255), 3, 3);
  Grammar g = one_rule(b, b.intersect(b.intersect(lower, has_q), len3));
  EXPECT_TRUE(g.matches("aqz"));
  EXPECT_TRUE(g.matches("qqq"));
  EXPECT_FALSE(g.matches("abc"));
  EXPECT_FALSE(g.matches("aq"));
  EXPECT_FALSE(g.matches("aqzz"));

  GrammarBuilder d;
  ExprId word = d.plus(d.byte_range('a', 'z'));
  Grammar gd = one_rule(d, d.difference(word, d.alt({d.literal("if"), d.literal("for")})));
  EXPECT_TRUE(gd.matches("i"));
  EXPECT_TRUE(gd.matches("iff"));
  EXPECT_TRUE(gd.matches("fo"));
  EXPECT_FALSE(gd.matches("if"));
  EXPECT_FALSE(gd.matches("for"));

  GrammarBuilder c;
  RuleId inner = c.add_rule("inner", c.literal("x"));
  EXPECT_FALSE(c.is_regular(c.call(inner)));
  c.set_start(c.add_rule("root", c.intersect(c.call(inner), c.literal("x"))));
  EXPECT_THROW(c.build(), GrammarError);
}

// Every state left in the tables can still reach a complete text, so a sequence steered by
// the masks can always finish.
TEST(StructuredGrammar, DeadEndsArePruned) {
  GrammarBuilder b;
  // "ab" then digits, intersected with length 4: after "abc" nothing is possible, and after
  // "ab1" only one more digit.
  ExprId e = b.intersect(b.seq({b.literal("ab"), b.star(b.byte_range('0', '9'))}),
                         b.repeat(b.byte_range(0, 255), 4, 4));
  Grammar g = one_rule(b, b.alt({e, b.literal("zz")}));
  const Grammar::Data& d = g.data();
  for (size_t s = 0; s < d.states.size(); ++s) {
    if (!(d.states[s].flags & (Grammar::Data::kHasBytes | Grammar::Data::kHasCalls))) {
      // A state with no way on must be one where the rule ends (or unreachable: no flags).
      EXPECT_TRUE(d.states[s].flags == 0 || (d.states[s].flags & Grammar::Data::kAccepting));
    }
  }
  EXPECT_TRUE(g.matches("ab12"));
  EXPECT_FALSE(g.matches("ab1"));
  EXPECT_TRUE(g.matches("zz"));
}

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

TEST(StructuredGrammar, Utf8RangesMatchExactlyTheirCodePoints) {
  const std::pair<char32_t, char32_t> ranges[] = {
      {0x41, 0x5A},     {0x7E, 0x101},     {0x7FF, 0x800},      {0x3A9, 0x4E2D},
      {0xD000, 0xE100}, {0xFFF0, 0x10010}, {0x10FF00, 0x10FFFF}};
  for (auto [lo, hi] : ranges) {
    GrammarBuilder b;
    Grammar g = one_rule(b, b.utf8_range(lo, hi));
    // Probe around both ends and through the range; surrogates are never matched.
    std::vector<char32_t> probes = {lo, hi, lo - 1, hi + 1, (lo + hi) / 2};
    for (char32_t c = lo; c <= hi && c < lo + 300; ++c) probes.push_back(c);
    for (char32_t c = hi > 300 ? hi - 300 : 0; c <= hi + 2; ++c) probes.push_back(c);
    for (char32_t c : probes) {
      if (c > 0x10FFFF) continue;
      bool want = c >= lo && c <= hi && !(c >= 0xD800 && c <= 0xDFFF);
      EXPECT_EQ(g.matches(utf8(c)), want)
          << std::hex << "U+" << static_cast<uint32_t>(c) << " in [" << static_cast<uint32_t>(lo)
          << ", " << static_cast<uint32_t>(hi) << "]";
    }
  }
}

TEST(StructuredGrammar, ExpressionsAreSharedAndReusable) {
  GrammarBuilder b;
  ExprId x = b.literal("xy");
  EXPECT_EQ(x, b.literal("xy"));
  ExprId twice = b.seq({x, b.literal(","), x});
  Grammar g = one_rule(b, twice);
  EXPECT_TRUE(g.matches("xy,xy"));
  EXPECT_FALSE(g.matches("xy,x"));
}

TEST(StructuredGrammar, SizeLimitsAreEnforced) {
  GrammarBuilder b;
  b.set_start(b.add_rule("big", b.repeat(b.byte_range('a', 'z'), 0, 5000)));
  GrammarLimits lim;
  lim.max_rule_states = 1000;
  EXPECT_THROW(b.build(lim), GrammarError);
}

}  // namespace
}  // namespace lift::structured
