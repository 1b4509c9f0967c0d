#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace lift {
namespace {

using Ids = std::vector<int32_t>;
const std::string R(kUtf8Replacement);

const Tokenizer& spm() {
  static const Tokenizer t = Tokenizer::load(test::model_path("vocab/ggml-vocab-llama-spm.gguf"));
  return t;
}
int32_t byte_tok(uint8_t b) { return spm().vocab().byte_token(b); }

// Streams the bytes as byte tokens; returns what push() gave per token plus flush().
std::vector<std::string> stream_bytes(const std::string& bytes) {
  StreamDecoder d(spm(), /*at_start=*/false);
  std::vector<std::string> out;
  for (const char c : bytes) {
    out.push_back(d.push(byte_tok(static_cast<uint8_t>(c))));
    EXPECT_LE(d.pending_bytes(), 3u);
  }
  out.push_back(d.flush());
  EXPECT_EQ(d.pending_bytes(), 0u);
  return out;
}
std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

TEST(TokenizerStream, EmojiComesOutWholeWhenComplete) {
  const auto parts = stream_bytes("\xF0\x9F\x98\x80");
  ASSERT_EQ(parts.size(), 5u);
  EXPECT_EQ(parts[0], "");
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(parts[2], "");
  EXPECT_EQ(parts[3], "\xF0\x9F\x98\x80");
  EXPECT_EQ(parts[4], "");
  // Mixed with normal tokens: "▁Hello" then the emoji bytes then "▁world".
  StreamDecoder d(spm());
  EXPECT_EQ(d.push(15043), "Hello");  // leading space stripped at the start
  EXPECT_EQ(d.push(byte_tok(0xF0)), "");
  EXPECT_EQ(d.push(byte_tok(0x9F)), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.push(byte_tok(0xA6)), "");
  EXPECT_EQ(d.push(byte_tok(0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.push(3186), " world");
  EXPECT_EQ(d.flush(), "");
}

TEST(TokenizerStream, IllFormedSequencesGiveOneReplacementPerMaximalSubpart) {
  struct Case {
    std::string bytes;
    std::string text;
  };
  const Case cases[] = {
      {"\x80", R},  // lone continuation
      {"\xBF\x80", R + R},
      {"\xC0\x80", R + R},  // overlong
      {"\xC1\xBF", R + R},
      {"\xE0\x80\x80", R + R + R},          // overlong 3-byte
      {"\xED\xA0\x80", R + R + R},          // surrogate U+D800
      {"\xF4\x90\x80\x80", R + R + R + R},  // U+110000
      {"\xF0\x9F\x98", R},                  // truncated, only at flush
      {"\xE2\x82", R},
      {"\xF0\x9F\x98"
       "A",
       R + "A"},
      {"\xFF\xFE", R + R},
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",  // Unicode Table 3-8
       "a" + R + R + R + "b" + R + "c" + R + R + "d"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(joined(stream_bytes(c.bytes)), c.text) << testing::PrintToString(c.bytes);
  }
  // The truncated emoji is held back, not replaced, until flush().
  const auto parts = stream_bytes("\xF0\x9F\x98");
  EXPECT_EQ(parts[0] + parts[1] + parts[2], "");
  EXPECT_EQ(parts[3], R);
  // An overlong lead is replaced as soon as it is seen.
  EXPECT_EQ(stream_bytes("\xC0")[0], R);
}

TEST(TokenizerStream, LeadingSpaceRules) {
  const Tokenizer& t = spm();
  const Ids ids = t.encode("Hello world", true, false);  // [1, ▁Hello, ▁world]
  StreamDecoder d(t);
  std::string s;
  for (const int32_t id : ids) s += d.push(id);
  EXPECT_EQ(s + d.flush(), "Hello world");
  // A continuation keeps its space.
  StreamDecoder cont(t, /*at_start=*/false);
  EXPECT_EQ(cont.push(3186), " world");
  // BOS starts a new sequence even mid-stream.
  EXPECT_EQ(cont.push(1), "");
  EXPECT_EQ(cont.push(15043), "Hello");
  // Control tokens produce nothing and do not use up the strip; with special they show.
  StreamDecoder sp(t, true, /*special=*/true);
  EXPECT_EQ(sp.push(1), "<s>");
  EXPECT_EQ(sp.push(15043), "Hello");
  EXPECT_EQ(sp.push(2), "</s>");
  // A byte token's space is real.
  StreamDecoder b(t);
  EXPECT_EQ(b.push(byte_tok(' ')), " ");
  // reset() drops held-back bytes.
  StreamDecoder r(t, false);
  EXPECT_EQ(r.push(byte_tok(0xE2)), "");
  r.reset(false);
  EXPECT_EQ(r.pending_bytes(), 0u);
  EXPECT_EQ(r.flush(), "");
}

// Random streams of byte and normal tokens: output is valid UTF-8, at most 3 bytes are ever
// held back, and the result equals sanitizing the concatenated pieces in one go.
TEST(TokenizerStream, RandomTokenStreamsAlwaysValid) {
  const Tokenizer& t = spm();
  std::mt19937 rng(2024);
  const uint8_t interesting[] = {0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF,
                                 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 2000; ++iter) {
    StreamDecoder d(t, /*at_start=*/false);
    std::string raw;
    std::string out;
    const size_t n = rng() % 30;
    for (size_t i = 0; i < n; ++i) {
      int32_t id;
      const unsigned kind = rng() % 4;
      if (kind == 0) {
        id = static_cast<int32_t>(259 + rng() % (32000 - 259));  // normal token
      } else if (kind == 1) {
        id = byte_tok(static_cast<uint8_t>(rng()));
      } else {
        id = byte_tok(interesting[rng() % std::size(interesting)]);
      }
      raw += t.token_to_piece(id);
      const std::string part = d.push(id);
      ASSERT_TRUE(is_valid_utf8(part));
      ASSERT_LE(d.pending_bytes(), 3u);
      out += part;
    }
    const std::string tail = d.flush();
    ASSERT_TRUE(is_valid_utf8(tail));
    out += tail;
    ASSERT_EQ(out, sanitize_utf8(raw)) << testing::PrintToString(raw);
  }
}

}  // namespace
}  // namespace lift
