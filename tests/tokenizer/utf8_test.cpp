#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace lift {
namespace {

const std::string R(kUtf8Replacement);

size_t count_replacements(std::string_view s) {
  size_t n = 0;
  for (size_t p = s.find(kUtf8Replacement); p != std::string_view::npos;
       p = s.find(kUtf8Replacement, p + 1)) {
    ++n;
  }
  return n;
}

TEST(Utf8, AcceptsWellFormedBoundaries) {
  for (const char* s :
       {"", "abc", "\x7F", "\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xE1\x80\x80", "\xEC\xBF\xBF",
        "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF1\x80\x80\x80",
        "\xF3\xBF\xBF\xBF", "\xF4\x8F\xBF\xBF", "h\xC3\xA9llo \xF0\x9F\x98\x80"}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(sanitize_utf8(s), s);
  }
  EXPECT_TRUE(is_valid_utf8(std::string_view("a\0b", 3)));
}

TEST(Utf8, RejectsIllFormed) {
  for (const char* s : {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80",
                        "\xED\xBF\xBF", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
                        "\xFE", "\xFF", "\xC2", "\xE1\x80", "\xF0\x9F\x98", "\xC2\x41"}) {
    EXPECT_FALSE(is_valid_utf8(s)) << s;
    EXPECT_TRUE(is_valid_utf8(sanitize_utf8(s)));
  }
}

TEST(Utf8, DecodesCodePoints) {
  const std::string s = "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  const uint32_t expect[] = {0x41, 0xE9, 0x20AC, 0x1F600};
  size_t pos = 0;
  for (const uint32_t cp : expect) {
    const Utf8Sequence seq = next_utf8(s, pos);
    ASSERT_EQ(seq.status, Utf8Status::kValid);
    EXPECT_EQ(seq.code_point, cp);
    pos += seq.length;
  }
  EXPECT_EQ(pos, s.size());
}

TEST(Utf8, MaximalSubparts) {
  struct Case {
    std::string in;
    std::string out;
  };
  const Case cases[] = {
      {"\x80", R},
      {"\x80\x80", R + R},
      {"a\xBF"
       "b",
       "a" + R + "b"},
      {"\xC0\x80", R + R},          // overlong lead C0
      {"\xC1\xBF", R + R},          // overlong lead C1
      {"\xE0\x80\x80", R + R + R},  // E0 needs A0..BF
      {"\xE0\x9F\xBF", R + R + R},
      {"\xED\xA0\x80", R + R + R},          // surrogate D800
      {"\xED\xBF\xBF", R + R + R},          // surrogate DFFF
      {"\xF0\x80\x80\x80", R + R + R + R},  // F0 needs 90..BF
      {"\xF4\x90\x80\x80", R + R + R + R},  // > U+10FFFF
      {"\xF5\x80\x80\x80", R + R + R + R},  // F5 never appears
      {"\xFF", R},
      {"\xF0\x9F\x98", R},  // truncated at end: one maximal subpart
      {"\xF0\x9F\x98"
       "A",
       R + "A"},
      {"\xE2\x82"
       "A",
       R + "A"},
      {"\xC2"
       "A",
       R + "A"},
      {"\xF0\x9F\xF0\x9F\x98\x80", R + "\xF0\x9F\x98\x80"},
      {"\xE0\xA0\xC0", R + R},
      // Unicode Standard, Table 3-8 (U+FFFD for maximal subparts).
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + R + R + R + "b" + R + "c" + R + R + "d"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(sanitize_utf8(c.in), c.out) << testing::PrintToString(c.in);
  }
  EXPECT_EQ(count_replacements(sanitize_utf8("\xED\xA0\x80\xED\xB0\x80")), 6u);
}

TEST(Utf8, StreamingHoldsBackOnlyIncompleteTails) {
  std::string out;
  EXPECT_EQ(append_sanitized_utf8(out, "ab\xF0\x9F\x98", false), 3u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_sanitized_utf8(out, "\xE2\x82", false), 2u);
  EXPECT_EQ(out, "");
  EXPECT_EQ(append_sanitized_utf8(out, "\xC2", false), 1u);
  EXPECT_EQ(append_sanitized_utf8(out, "\xF0\x80", false), 0u);  // already ill-formed
  EXPECT_EQ(out, R + R);
  out.clear();
  EXPECT_EQ(append_sanitized_utf8(out, "x\xF0\x9F\x98", true), 0u);
  EXPECT_EQ(out, "x" + R);
}

// Splitting the input anywhere and carrying held-back bytes over gives the same text as
// sanitizing all of it at once.
TEST(Utf8, StreamingMatchesWholeOnRandomBytes) {
  std::mt19937 rng(1234);
  const uint8_t interesting[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                                 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string in;
    const size_t n = rng() % 24;
    for (size_t i = 0; i < n; ++i) {
      in.push_back(static_cast<char>(rng() % 2 ? interesting[rng() % std::size(interesting)]
                                               : static_cast<uint8_t>(rng())));
    }
    const std::string whole = sanitize_utf8(in);
    ASSERT_TRUE(is_valid_utf8(whole));
    std::string out;
    std::string carry;
    size_t pos = 0;
    while (pos < in.size()) {
      const size_t len = std::min<size_t>(in.size() - pos, 1 + rng() % 4);
      const std::string chunk = carry + in.substr(pos, len);
      pos += len;
      const size_t held = append_sanitized_utf8(out, chunk, false);
      ASSERT_LE(held, 3u);
      carry = chunk.substr(chunk.size() - held);
    }
    append_sanitized_utf8(out, carry, true);
    ASSERT_EQ(out, whole) << testing::PrintToString(in);
  }
}

TEST(Utf8, EncodesCodePoints) {
  for (const uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu,
                            0x10000u, 0x1F600u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    const Utf8Sequence seq = next_utf8(s, 0);
    ASSERT_EQ(seq.status, Utf8Status::kValid) << cp;
    EXPECT_EQ(seq.code_point, cp);
    EXPECT_EQ(seq.length, s.size());
  }
  for (const uint32_t cp : {0xD800u, 0xDFFFu, 0x110000u}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_EQ(s, R);
  }
}

}  // namespace
}  // namespace lift
