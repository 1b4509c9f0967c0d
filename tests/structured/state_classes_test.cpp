#include "structured/state_classes.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "structured/grammar_data.h"
#include "structured/matcher.h"

namespace lift::structured {
namespace {

// `{"s": "` then a counted string of up to `n` letters, then `"}`: the string rule is called
// from the object, so tokens run past its end (`ab"}`).
Grammar counted_string_grammar(uint32_t n) {
  GrammarBuilder b;
  RuleId str = b.add_rule(
      "string", b.seq({b.literal("\""), b.repeat(b.byte_range('a', 'c'), 0, n), b.literal("\"")}));
  RuleId root = b.add_rule("root", b.seq({b.literal("{\"s\": "), b.call(str), b.literal("}")}));
  b.set_start(root);
  return b.build();
}

std::vector<uint8_t> all_reached(const Grammar::Data& d) {
  return std::vector<uint8_t>(d.states.size(), 1);
}

TEST(StructuredStateClasses, CountedStringCollapsesBeyondTheDepth) {
  Grammar g = counted_string_grammar(200);
  const Grammar::Data& d = g.data();
  int32_t string_rule = -1;
  for (size_t r = 0; r < d.rules.size(); ++r)
    if (d.rules[r].name == "string") string_rule = static_cast<int32_t>(r);
  ASSERT_GE(string_rule, 0);
  for (size_t depth : {size_t{1}, size_t{5}, size_t{17}}) {
    const std::vector<int32_t> cls = depth_bounded_classes(d, all_reached(d), depth);
    std::set<int32_t> string_classes, other_classes;
    for (size_t s = 0; s < d.states.size(); ++s) {
      ASSERT_GE(cls[s], 0);
      (d.state_rule[s] == string_rule ? string_classes : other_classes).insert(cls[s]);
    }
    // Inside the string, r letters left: every r >= depth is one class, each r < depth its
    // own; plus the state before the opening quote and the one after the closing quote.
    EXPECT_EQ(string_classes.size(), depth + 1 + 2) << "depth " << depth;
    // Different rules never share a class.
    for (int32_t c : string_classes) EXPECT_EQ(other_classes.count(c), 0u);
  }
}

TEST(StructuredStateClasses, FixpointSeparatesOnlyInequivalentStates) {
  // Unbounded: every position in `a*` is the same state already, and a deep bound changes
  // nothing; the literal's states all differ.
  GrammarBuilder b;
  RuleId root = b.add_rule("root", b.seq({b.literal("xyz"), b.star(b.literal("a"))}));
  b.set_start(root);
  Grammar g = b.build();
  const Grammar::Data& d = g.data();
  const std::vector<int32_t> cls = depth_bounded_classes(d, all_reached(d), 1000);
  EXPECT_EQ(std::set<int32_t>(cls.begin(), cls.end()).size(), d.states.size());
}

TEST(StructuredStateClasses, DifferentCallsKeepStatesApart) {
  // Two positions that differ only in the rule they call next.
  GrammarBuilder b;
  RuleId x = b.add_rule("x", b.literal("x"));
  RuleId y = b.add_rule("y", b.literal("y"));
  RuleId root = b.add_rule(
      "root", b.alt({b.seq({b.literal("a"), b.call(x)}), b.seq({b.literal("b"), b.call(y)})}));
  b.set_start(root);
  Grammar g = b.build();
  const Grammar::Data& d = g.data();
  const std::vector<int32_t> cls = depth_bounded_classes(d, all_reached(d), 4);
  const int32_t start = d.rules[static_cast<size_t>(d.start_rule)].start;
  const int32_t after_a = d.step(start, 'a'), after_b = d.step(start, 'b');
  ASSERT_GE(after_a, 0);
  ASSERT_GE(after_b, 0);
  EXPECT_NE(cls[static_cast<size_t>(after_a)], cls[static_cast<size_t>(after_b)]);
}

// Tokens up to 9 bytes long around a string of up to 40 letters: shared cache entries must
// give exactly the masks that running every token gives, also near the string's end where
// positions differ only in how long a run still fits.
TEST(StructuredStateClasses, SharedEntriesGiveBruteForceMasks) {
  std::vector<std::string> toks = {""};
  for (const char* t : {"{", "}", "\"", ":", " ", "{\"s\": ", "\"}", "s", "\": "})
    toks.push_back(t);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t(1 + rng() % 9, 'a');
    for (char& ch : t) ch = static_cast<char>('a' + rng() % 4);  // 'd' is outside the set
    if (rng() % 3 == 0) t += '"';
    if (rng() % 4 == 0) t += '}';
    toks.push_back(t);
  }
  auto v = std::make_shared<const TokenVocab>(toks, std::vector<int32_t>{0});
  auto cg = CompiledGrammar::compile(counted_string_grammar(40), v);
  std::vector<uint64_t> mask(v->mask_words());
  for (int walk = 0; walk < 6; ++walk) {
    Matcher m(cg);
    for (int step = 0; step < 80 && !m.is_terminated(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < v->size(); ++t) {
        Matcher probe = m;
        const bool want = probe.accept(t);
        const bool got = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
        ASSERT_EQ(got, want) << "walk " << walk << " step " << step << " token '" << toks[t] << "'";
        if (want) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer long letter runs so walks reach the string's last positions.
      int32_t pick = allowed[rng() % allowed.size()];
      for (int tries = 0; tries < 4 && toks[pick].size() < 5; ++tries)
        pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(pick));
    }
  }
}

}  // namespace
}  // namespace lift::structured
