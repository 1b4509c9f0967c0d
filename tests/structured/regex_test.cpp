// ECMAScript regex compilation: each construct on strings it must and must not match, JSON
// Schema's unanchored semantics, the JSON-string spelling of code points (checked for every
// BMP code point against the set), and the errors for what is not regular or not supported.
#include "structured/regex.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace lift::structured {
namespace {

Grammar regex_grammar(std::string_view pattern, RegexOptions opt = {}) {
  GrammarBuilder b;
  b.set_start(b.add_rule("regex", compile_regex(pattern, b, opt)));
  return b.build();
}

Grammar set_grammar(const CodePointSet& s, bool json) {
  GrammarBuilder b;
  b.set_start(b.add_rule("cp", code_point(b, s, json)));
  return b.build();
}

// Expects `g` to match every string of `yes` and none of `no`, naming the failing one.
void expect_language(const Grammar& g, const std::vector<std::string>& yes,
                     const std::vector<std::string>& no, std::string_view pattern) {
  for (const auto& s : yes)
    EXPECT_TRUE(g.matches(s)) << "/" << pattern << "/ should match '" << s << "'";
  for (const auto& s : no)
    EXPECT_FALSE(g.matches(s)) << "/" << pattern << "/ should not match '" << s << "'";
}

void expect_regex(std::string_view pattern, const std::vector<std::string>& yes,
                  const std::vector<std::string>& no, RegexOptions opt = {}) {
  expect_language(regex_grammar(pattern, opt), yes, no, pattern);
}

// Expects a GrammarError whose message contains every one of `parts`.
void expect_error(std::string_view pattern, const std::vector<std::string>& parts,
                  RegexOptions opt = {}) {
  try {
    GrammarBuilder b;
    compile_regex(pattern, b, opt);
    ADD_FAILURE() << "/" << pattern << "/ compiled";
  } catch (const GrammarError& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "/" << pattern << "/: '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

bool in_set(const CodePointSet& s, char32_t c) {
  for (const auto& [lo, hi] : s.ranges) {
    if (c >= lo && c <= hi) return true;
  }
  return false;
}

std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

std::string u_escape(uint32_t v, bool upper) {
  char buf[16];
  std::snprintf(buf, sizeof buf, upper ? "\\u%04X" : "\\u%04x", v);
  return buf;
}

TEST(RegexCodePointSet, OperationsKeepRangesSortedDisjointAndSurrogateFree) {
  const CodePointSet all = CodePointSet::all();
  ASSERT_EQ(all.ranges.size(), 2u);
  EXPECT_TRUE(all.complement().empty());
  EXPECT_EQ(CodePointSet{}.complement().ranges, all.ranges);
  EXPECT_EQ(CodePointSet::range(0xD000, 0xE000).ranges,
            (CodePointSet{{{0xD000, 0xD7FF}, {0xE000, 0xE000}}}.ranges));
  EXPECT_TRUE(CodePointSet::range(0xD800, 0xDFFF).empty());
  EXPECT_TRUE(CodePointSet::range('b', 'a').empty());
  const CodePointSet ab = CodePointSet::range('a', 'c').unite(CodePointSet::range('d', 'f'));
  EXPECT_EQ(ab.ranges, (CodePointSet{{{'a', 'f'}}}.ranges));  // adjacent ranges merge
  const CodePointSet x = CodePointSet::range('a', 'm').intersect(CodePointSet::range('k', 'z'));
  EXPECT_EQ(x.ranges, (CodePointSet{{{'k', 'm'}}}.ranges));
  const CodePointSet not_az = CodePointSet::range('a', 'z').complement();
  EXPECT_EQ(not_az.ranges,
            (CodePointSet{{{0, 'a' - 1}, {'z' + 1, 0xD7FF}, {0xE000, 0x10FFFF}}}.ranges));
  EXPECT_TRUE(not_az.intersect(CodePointSet::range('a', 'z')).empty());
}

TEST(RegexCodePoint, RawUtf8AndJsonSpellingsOfEveryBmpCodePoint) {
  // A set with ranges that start and end inside hex digits, so every split of hex_range runs.
  const CodePointSet s = CodePointSet::range(0x09, 0x22)
                             .unite(CodePointSet::range(0x5C, 0x5C))
                             .unite(CodePointSet::range(0x2F, 0x2F))
                             .unite(CodePointSet::range(0x3A7, 0x1234))
                             .unite(CodePointSet::range(0xD7FE, 0xE0A1))
                             .unite(CodePointSet::range(0xFFF0, 0x10401))
                             .unite(CodePointSet::range(0x1F600, 0x1F64F))
                             .unite(CodePointSet::range(0x20123, 0x20DFE))
                             .unite(CodePointSet::range(0x10FC00, 0x10FFFF));
  const Grammar raw = set_grammar(s, false);
  const Grammar json = set_grammar(s, true);
  for (char32_t c = 0; c <= 0xFFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const bool in = in_set(s, c);
    ASSERT_EQ(raw.matches(utf8(c)), in) << std::hex << "raw U+" << uint32_t{c};
    ASSERT_EQ(json.matches(u_escape(c, false)), in) << std::hex << "\\u" << uint32_t{c};
    ASSERT_EQ(json.matches(u_escape(c, true)), in) << std::hex << "\\U" << uint32_t{c};
    const bool raw_allowed = c >= 0x20 && c != '"' && c != '\\';
    ASSERT_EQ(json.matches(utf8(c)), in && raw_allowed) << std::hex << "json raw U+" << uint32_t{c};
  }
  // Above U+FFFF: raw UTF-8 and the surrogate pair, in each 1024-block at the offsets where
  // the set's ranges start and end.
  for (char32_t base = 0x10000; base <= 0x10FFFF; base += 0x400) {
    for (const char32_t offset :
         {0x0, 0x1, 0x122, 0x123, 0x1FE, 0x1FF, 0x200, 0x24F, 0x250, 0x3FF}) {
      const char32_t c = base + offset;
      const bool in = in_set(s, c);
      const uint32_t v = c - 0x10000;
      const std::string pair =
          u_escape(0xD800 + (v >> 10), false) + u_escape(0xDC00 + (v & 0x3FF), true);
      ASSERT_EQ(raw.matches(utf8(c)), in) << std::hex << "raw U+" << uint32_t{c};
      ASSERT_EQ(json.matches(utf8(c)), in) << std::hex << "json raw U+" << uint32_t{c};
      ASSERT_EQ(json.matches(pair), in) << pair;
    }
  }
  // The short escapes for exactly the characters they stand for.
  for (const auto& [esc, c] : std::vector<std::pair<std::string, char32_t>>{{"\\\"", '"'},
                                                                            {"\\\\", '\\'},
                                                                            {"\\/", '/'},
                                                                            {"\\b", 8},
                                                                            {"\\f", 12},
                                                                            {"\\n", 10},
                                                                            {"\\r", 13},
                                                                            {"\\t", 9}}) {
    EXPECT_EQ(json.matches(esc), in_set(s, c)) << esc;
  }
  EXPECT_FALSE(json.matches("\\a"));
  EXPECT_FALSE(json.matches("\\u00e"));
  EXPECT_FALSE(json.matches("\\ud801"));  // half a pair
}

TEST(RegexCodePoint, AnyJsonStringCharacterIsCompact) {
  // The schema compiler asks for this once per string rule; its DFA must stay small.
  const Grammar g = set_grammar(CodePointSet::all(), true);
  EXPECT_LT(g.state_count(), 40u);
  EXPECT_TRUE(g.matches("\\uD83D\\uDE00"));
  EXPECT_FALSE(g.matches("\\uDE00\\uD83D"));
  EXPECT_FALSE(g.matches("\""));
  EXPECT_FALSE(g.matches("\x1f"));
}

TEST(RegexSyntax, LiteralsAlternationAndGroups) {
  expect_regex("abc", {"abc"}, {"ab", "abcd", ""});
  expect_regex("a(b|cd)e", {"abe", "acde"}, {"ae", "abcde"});
  expect_regex("(?:ab)+", {"ab", "abab"}, {"", "aba"});
  expect_regex("(?<year>\\d{4})-(?<m>\\d\\d)", {"2024-01"}, {"2024-1"});
  expect_regex("a|", {"a", ""}, {"b"});
  expect_regex("()", {""}, {"a"});
  expect_regex("é😀", {"é😀"}, {"e😀", "é"});
}

TEST(RegexSyntax, QuantifiersGreedyAndLazy) {
  expect_regex("a*", {"", "a", "aaaa"}, {"b"});
  expect_regex("a+b", {"ab", "aaab"}, {"b"});
  expect_regex("ab?c", {"ac", "abc"}, {"abbc"});
  expect_regex("a{3}", {"aaa"}, {"aa", "aaaa"});
  expect_regex("a{2,}", {"aa", "aaaaaa"}, {"a"});
  expect_regex("a{2,4}", {"aa", "aaa", "aaaa"}, {"a", "aaaaa"});
  expect_regex("a{0}b", {"b"}, {"ab"});
  expect_regex("a*?b+?c??d{1,2}?", {"bd", "aabbcdd"}, {"abcddd"});
  expect_regex("(ab|c){2}", {"abab", "cab", "abc", "cc"}, {"ab", "abcab", "ca"});
  // Annex B: a brace that starts no quantifier is a literal, as are ']' and '}'.
  expect_regex("a{,2}", {"a{,2}"}, {"aa"});
  expect_regex("\\{x}]", {"{x}]"}, {"x"});
  expect_regex("{a}", {"{a}"}, {"a"});
}

TEST(RegexSyntax, ClassesRangesNegationAndEscapes) {
  expect_regex("[a-cx]", {"a", "b", "c", "x"}, {"d", "", "ab"});
  expect_regex("[^a-c]", {"d", "é", "\n", "😀"}, {"a", "c", ""});
  expect_regex("[\\d.-]+", {"1.5-2"}, {"a"});
  expect_regex("[-a]", {"-", "a"}, {"b"});
  expect_regex("[a-]", {"-", "a"}, {"b"});
  expect_regex("[\\w-.]", {"-", ".", "a", "_"}, {"/"});
  expect_regex("[.-\\d]", {"-", ".", "5"}, {"/"});         // class escape: '-' is literal
  expect_regex("[a-c-e]", {"a", "-", "e"}, {"d"});         // '-' after a range is literal
  expect_regex("[\\]\\\\\\b]", {"]", "\\", "\b"}, {"b"});  // \b in a class is backspace
  expect_regex("[\\^^]", {"^"}, {"a"});
  expect_regex("a[]|b", {"b"}, {"a", ""});  // [] matches nothing
  expect_regex("[^]", {"a", "\n", "😀"}, {""});
  expect_regex("[\\u00e0-\\u00ff]", {"é", "ÿ"}, {"e"});
  expect_regex("[😀-😂]", {"😁"}, {"😃"});
  expect_regex("[^\\D]", {"7"}, {"a"});
}

TEST(RegexSyntax, ShorthandClassesAndDot) {
  expect_regex("\\d", {"0", "9"}, {"a", "٣"});
  expect_regex("\\D", {"a", "٣"}, {"5"});
  expect_regex("\\w", {"a", "Z", "0", "_"}, {"-", "é"});
  expect_regex("\\W", {"-", "é"}, {"a", "_"});
  expect_regex("\\s", {" ", "\t", "\n", "\v", "\f", "\r", "\u00a0", "\u2028", "\u3000", "\ufeff"},
               {"a", "\u200b"});
  expect_regex("\\S", {"a", "\u200b"}, {" ", "\u00a0"});
  expect_regex(".", {"a", "é", "😀", "\t"}, {"\n", "\r", "\u2028", "\u2029", ""});
}

TEST(RegexSyntax, CharacterEscapes) {
  expect_regex("\\t\\n\\r\\f\\v\\0", {std::string("\t\n\r\f\v") + '\0'}, {"tnrfv0"});
  expect_regex("\\x41\\u0042\\u{1F600}", {"AB😀"}, {"x41"});
  expect_regex("\\uD83D\\uDE00", {"😀"}, {"\\uD83D"});  // a surrogate pair is one code point
  expect_regex("\\cJ\\ca", {"\n\x01"}, {"cJ"});
  expect_regex("\\.\\$\\^\\/\\-\\(\\)\\[\\{\\|\\*\\+\\?\\\\", {".$^/-()[{|*+?\\"}, {"a"});
}

TEST(RegexAnchors, UnanchoredPatternsMatchAnywhere) {
  const RegexOptions any{.anchored = false};
  expect_regex("abc", {"abc", "xxabcyy", "abcabc"}, {"ab", "axbc"}, any);
  expect_regex("^abc", {"abc", "abcd"}, {"xabc"}, any);
  expect_regex("abc$", {"abc", "xabc"}, {"abcd"}, any);
  expect_regex("^abc$", {"abc"}, {"abcd", "xabc"}, any);
  expect_regex("^a|b$", {"a", "ax", "xb"}, {"xa", "bx"}, any);
  expect_regex("^[ATCG]+$|^$", {"", "GATTACA"}, {"GATXACA"}, any);
  expect_regex("", {"", "anything"}, {}, any);
  // guided_regex: the whole text must match; ^ and $ at the ends change nothing.
  expect_regex("abc", {"abc"}, {"xabc", "abcx"});
  expect_regex("^abc$", {"abc"}, {"xabc"});
}

TEST(RegexAnchors, AnchorsInsideGroupsAndMidPattern) {
  const RegexOptions any{.anchored = false};
  expect_regex("(^a|b)c", {"ac", "acx", "bc", "xbc", "xbcx"}, {"xac", "a", "c"}, any);
  expect_regex("x(a|$)", {"xa", "x", "zx", "xaz", "zxa"}, {"xz", "zxz", ""}, any);
  expect_regex("(a|^)b", {"b", "ab", "xab", "bx"}, {"xb", "a"}, any);
  expect_regex("(^[^5]*$)|7", {"", "123", "57", "7"}, {"5", "15"}, any);
  expect_regex("^$|(^(?:\\S+\\s+){0,3}\\S+$)", {"", "a", "a b c d"}, {"a b c d e", " a", "a "},
               any);
  expect_regex("(?:^|,)x(?:,|$)", {"x", "x,y", "y,x", "y,x,z"}, {"yx", "xy", "y,xz"}, any);
  expect_regex("a^b|c", {"c", "xcx"}, {"ab", "a^b"}, any);  // ^ after a character never holds
  expect_regex("^^a$$", {"a"}, {"aa", ""}, any);
  expect_regex("(a$)+", {"a", "ba"}, {"ab", ""}, any);
  expect_regex("(a$){2}|z", {"z"}, {"aa", "a"}, any);
  expect_regex("(^a)?b", {"b", "ab", "xb"}, {"a", ""}, any);
  expect_regex("^((^|x)y)*$", {"", "y", "yxy", "xy", "xyxy"}, {"yy", "zxy", "yx"}, any);
  // Whole-text mode: ^ and $ hold at the ends of the text.
  expect_regex("(^a|b)", {"a", "b"}, {"ab", "xb"});
  expect_regex("x(a|$)", {"xa", "x"}, {"xx", "xab"});
  expect_regex("x^|y", {"y"}, {"x", "x^", ""});
  expect_regex("(^a|b)$", {"a", "\\u0061", "xb"}, {"xa", "ax"},
               {.anchored = false, .json_string = true});
}

// A random pattern over a, b, ., groups, quantifiers and anchors anywhere (never quantified).
std::string random_pattern(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string out;
  const int options = 1 + (pick(3) == 0);
  for (int o = 0; o < options; ++o) {
    if (o) out += '|';
    for (int i = 0, n = 1 + pick(3); i < n; ++i) {
      const int kind = pick(depth > 0 ? 7 : 5);
      if (kind == 0 || kind == 1) {
        out += static_cast<char>("ab."[pick(3)]);
      } else if (kind == 2) {
        out += '^';
        continue;
      } else if (kind == 3) {
        out += '$';
        continue;
      } else if (kind == 4) {
        out += 'b';
      } else {
        out += '(';
        out += random_pattern(rng, depth - 1);
        out += ')';
      }
      static const char* const kQuantifiers[] = {"", "", "*", "+", "?", "{0,2}", "{2}"};
      out += kQuantifiers[pick(7)];
    }
  }
  return out;
}

TEST(RegexAnchors, RandomPatternsAgreeWithStdRegexOnAllShortStrings) {
  // std::regex (ECMAScript) is the reference: regex_search for JSON Schema's match-anywhere
  // semantics, regex_match for whole-text mode.
  std::vector<std::string> texts{""};
  for (size_t i = 0; texts[i].size() < 4; ++i) {
    texts.push_back(texts[i] + 'a');
    texts.push_back(texts[i] + 'b');
  }
  std::mt19937 rng(7);
  int compared = 0;
  for (int n = 0; n < 200; ++n) {
    const std::string pattern = random_pattern(rng, 2);
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (const bool anchored : {false, true}) {
      Grammar g;
      bool any_match = false;
      for (const auto& t : texts) {
        any_match = any_match ||
                    (anchored ? std::regex_match(t, reference) : std::regex_search(t, reference));
      }
      try {
        g = regex_grammar(pattern, {.anchored = anchored});
      } catch (const GrammarError& e) {
        // The only refusal allowed here: a pattern that matches no text at all.
        EXPECT_FALSE(any_match) << pattern << ": " << e.what();
        continue;
      }
      for (const auto& t : texts) {
        const bool want =
            anchored ? std::regex_match(t, reference) : std::regex_search(t, reference);
        ASSERT_EQ(g.matches(t), want)
            << "/" << pattern << "/ on '" << t << "', anchored " << anchored;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 6000);
}

TEST(RegexJsonString, ContentsOfAJsonStringWhoseValueMatches) {
  const RegexOptions json{.anchored = false, .json_string = true};
  // A raw '"' would end the string: only the escaped form spells the quote.
  expect_regex("^[a-z\"]+$", {"ab\\\"c", "ab\\u0022c", "\\u0061b"}, {"ab\"c", "ab\\c", ""}, json);
  expect_regex("^a/b\\nc$", {"a/b\\nc", "a\\/b\\u000Ac", "a\\/b\\u000ac"}, {"a/b\nc", "a/b\\\\nc"},
               json);
  expect_regex("^😀$", {"😀", "\\ud83d\\ude00", "\\uD83D\\uDE00"}, {"\\ud83d", "\\ude00"}, json);
  expect_regex("^[^a]$", {"\\\"", "b", "\\\\", "\\u0062"}, {"\"", "\\", "\\u0061", "a"}, json);
  expect_regex("x", {"x", "ax\\\"", "\\u0078"}, {"a", "\\\""}, json);  // unanchored: any context
  expect_regex("^.$", {"\\t", "é"}, {"\\n", "\\r", "\\u2028", "\n"}, json);
}

TEST(RegexErrors, UnsupportedAndMalformedPatternsNameTheProblemAndOffset) {
  expect_error("(a)\\1", {"backreference", "offset 3"});
  expect_error("(?<n>a)\\k<n>", {"named backreference", "offset 7"});
  expect_error("a(?=b)", {"lookahead", "offset 1"});
  expect_error("a(?!b)", {"lookahead"});
  expect_error("(?<=a)b", {"lookbehind", "offset 0"});
  expect_error("(?<!a)b", {"lookbehind"});
  expect_error("\\bword", {"word boundary", "offset 0"});
  expect_error("a\\B", {"word boundary", "offset 1"});
  expect_error("^*a", {"anchor cannot be repeated", "offset 1"});
  expect_error("a$?", {"anchor cannot be repeated"});
  expect_error("(^a){17}", {"anchor", "16", "offset 4"});
  expect_error("\\p{L}", {"property"});
  expect_error("(?i)a", {"group modifier"});
  expect_error("(ab", {"unclosed '('", "offset 0"});
  expect_error("ab)", {"unmatched ')'", "offset 2"});
  expect_error("[ab", {"unclosed '['"});
  expect_error("*a", {"nothing to repeat", "offset 0"});
  expect_error("a**", {"nothing to repeat", "offset 2"});
  expect_error("a{2}{3}", {"nothing to repeat"});
  expect_error("{2}", {"nothing to repeat"});
  expect_error("a{3,2}", {"max below min"});
  expect_error("a{99999999999}", {"repetition count"});
  expect_error("[z-a]", {"out of order", "offset 2"});
  expect_error("ab\\", {"end of the pattern"});
  expect_error("\\z", {"unknown escape \\z"});
  expect_error("\\A", {"unknown escape \\A"});
  expect_error("\\x4", {"hex digits"});
  expect_error("\\u12", {"hex digits"});
  expect_error("\\u{110000}", {"U+10FFFF"});
  expect_error("\\uD83D", {"lone high surrogate"});
  expect_error("\\uDE00", {"lone low surrogate"});
  expect_error("\\c1", {"\\c"});
  expect_error("\\01", {"octal"});
  expect_error("(?<>a)", {"empty group name"});
  expect_error(std::string(100000, '(') + std::string(100000, ')'), {"nested deeper than 256"});
  expect_error("a\xff", {"invalid UTF-8", "offset 1"});
  expect_error("\xe2\x82", {"invalid UTF-8", "offset 0"});
  expect_error("a\xe0\x80\x80", {"invalid UTF-8", "offset 1"});  // overlong
  expect_error("\xed\xa0\x80", {"invalid UTF-8"});               // a surrogate
}

}  // namespace
}  // namespace lift::structured
