#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/reference_encoder.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_cache.h"
#include "util/error.h"

namespace lift {
namespace {

using Ids = std::vector<int32_t>;

const Tokenizer& cached(const std::string& rel) { return test::cached_tokenizer(rel); }
const Tokenizer& spm() { return cached("vocab/ggml-vocab-llama-spm.gguf"); }
const Tokenizer& stories() { return cached("stories260K/stories260K.gguf"); }
const Tokenizer& phi3() { return cached("vocab/ggml-vocab-phi-3.gguf"); }

TEST(TokenizerSpm, KnownEncodings) {
  const Tokenizer& t = spm();
  EXPECT_EQ(t.encode("Hello world", true, false), (Ids{1, 15043, 3186}));
  EXPECT_EQ(t.encode("Hello world", true, false, true), (Ids{1, 15043, 3186, 2}));
  EXPECT_EQ(t.encode("", true, false), (Ids{1}));
  EXPECT_EQ(t.encode("", false, false), (Ids{}));
  EXPECT_EQ(t.encode(" ", false, false), (Ids{259}));
  EXPECT_EQ(t.encode("\t", false, false), (Ids{29871, 12}));  // "▁" then <0x09>
}

TEST(TokenizerSpm, Stories260K) {
  const Tokenizer& t = stories();
  EXPECT_EQ(t.encode("Once upon a time", true, false), (Ids{1, 403, 407, 261, 378}));
  int checked = 0;
  for (const auto& run : test::stories260k_runs()) {
    SCOPED_TRACE(run.at("name").get<std::string>());
    Ids ids = run.at("prompt_ids").get<Ids>();
    const std::string prompt = run.at("prompt").get<std::string>();
    if (!prompt.empty()) {
      EXPECT_EQ(t.encode(prompt, true, false), ids);
    }
    for (const int32_t id : run.at("generated_ids").get<Ids>()) ids.push_back(id);
    if (!run.contains("text")) continue;
    EXPECT_EQ(t.decode(ids), run.at("text").get<std::string>());
    // Streaming gives the same text.
    StreamDecoder d(t);
    std::string streamed;
    for (const int32_t id : ids) streamed += d.push(id);
    streamed += d.flush();
    EXPECT_EQ(streamed, run.at("text").get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(TokenizerSpm, Baichuan) {
  const Tokenizer& t = cached("vocab/ggml-vocab-baichuan.gguf");
  for (const std::string s : {"Hello world", " leading", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96",
                              "emoji \xF0\x9F\xA6\x99 and \x01 bytes"}) {
    const Ids ids = t.encode(s, false, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(t.decode(ids), s);
  }
  EXPECT_EQ(t.encode("\x01", false, false).back(), 393 + 1);  // byte fallback
}

std::string random_text(std::mt19937& rng, size_t n_chars) {
  static const std::vector<std::string> alphabet = {"a",
                                                    "b",
                                                    "e",
                                                    "t",
                                                    "h",
                                                    "o",
                                                    "n",
                                                    "s",
                                                    " ",
                                                    " ",
                                                    "  ",
                                                    "\n",
                                                    "\t",
                                                    ".",
                                                    ",",
                                                    "'",
                                                    "0",
                                                    "3",
                                                    "A",
                                                    "T",
                                                    "\xC3\xA9",
                                                    "\xC3\xBC",
                                                    "\xE2\x80\x99",
                                                    "\xE4\xBD\xA0",
                                                    "\xE5\xA5\xBD",
                                                    "\xF0\x9F\x98\x80",
                                                    "\xF0\x9F\xA6\x99",
                                                    "\xD0\xBF",
                                                    "\xD1\x80",
                                                    "\xE1\x9E\x80",
                                                    "\x01",
                                                    "<",
                                                    ">",
                                                    "/",
                                                    "s",
                                                    "<s>",
                                                    "</s>",
                                                    "the",
                                                    "ing"};
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

TEST(TokenizerSpm, MatchesSimpleReferenceEncoder) {
  std::mt19937 rng(42);
  for (const Tokenizer* t : {&spm(), &stories(), &phi3()}) {
    const test::ReferenceEncoder ref(*t);
    for (int iter = 0; iter < 300; ++iter) {
      // phi-3's user-defined "</s>" is atomic even without parse_special; with it, "<s>" and
      // the control tokens are too.
      const std::string s = random_text(rng, rng() % 40);
      const bool special = iter % 2 == 1;
      ASSERT_EQ(t->encode(s, false, special), ref.encode(s, false, special))
          << testing::PrintToString(s) << " parse_special " << special;
    }
  }
}

TEST(TokenizerSpm, RoundTrip) {
  const Tokenizer& t = spm();
  const std::vector<std::string> fixed = {
      "",
      " ",
      "  two leading spaces",
      "trailing spaces  ",
      "Hello, world!",
      "\n\nnewlines\r\n and tabs\t.",
      "caf\xC3\xA9 na\xC3\xAFve \xC3\x9C"
      "ber",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",  // CJK (byte fallback)
      "\xF0\x9F\x98\x80\xF0\x9F\xA6\x99\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",  // emoji
      "\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93",                                          // Khmer
      "control \x01\x02\x7F bytes",
      "U+10FFFF \xF4\x8F\xBF\xBF and U+FFFD \xEF\xBF\xBD",
      "<s> and </s> as plain text, <unk> too",
      std::string("nul \0 inside", 12),
  };
  for (const std::string& s : fixed) {
    const Ids ids = t.encode(s, false, false);
    EXPECT_EQ(t.decode(ids), s) << testing::PrintToString(s);
    const Ids with_bos = t.encode(s, true, false);
    EXPECT_EQ(t.decode(with_bos), s) << testing::PrintToString(s);
  }
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    const std::string s = random_text(rng, rng() % 60);
    ASSERT_EQ(t.decode(t.encode(s, true, false)), s) << testing::PrintToString(s);
  }
}

TEST(TokenizerSpm, SpecialTokens) {
  const Tokenizer& t = spm();
  // Atomic with parse_special; the text after a special token gets the space prefix.
  EXPECT_EQ(t.encode("<s>Hello</s>", false, true), (Ids{1, 15043, 2}));
  EXPECT_EQ(t.encode("Hello<s>world", false, true), (Ids{15043, 1, 3186}));
  const Ids a = t.encode("Hello <s> world", false, true);
  Ids expect = t.encode("Hello ", false, false);
  expect.push_back(1);
  const Ids tail = t.encode(" world", false, false);
  expect.insert(expect.end(), tail.begin(), tail.end());
  EXPECT_EQ(a, expect);
  EXPECT_EQ(t.encode("<unk></s>", false, true), (Ids{0, 2}));
  // Without parse_special "<s>" is just text.
  const Ids plain = t.encode("<s>Hello</s>", false, false);
  for (const int32_t id : plain) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  EXPECT_EQ(t.decode(plain), "<s>Hello</s>");
  EXPECT_EQ(t.decode(t.encode("<s>Hello</s>", false, true)), "Hello");
  EXPECT_EQ(t.decode(t.encode("<s>Hello</s>", false, true), /*special=*/true), "<s>Hello</s>");

  // phi-3: "<|user|>" is a control token (atomic only with parse_special); "</s>" is
  // user-defined there, hence atomic even without parse_special (as llama.cpp and HF do).
  const Tokenizer& p = phi3();
  EXPECT_EQ(p.encode("<|user|>\nHi<|end|>", false, true), (Ids{32010, 29871, 13, 18567, 32007}));
  const Ids no_special = p.encode("<|user|>", false, false);
  EXPECT_EQ(std::count(no_special.begin(), no_special.end(), 32010), 0);
  EXPECT_EQ(p.encode("a</s>b", false, false), (Ids{263, 2, 289}));
}

TEST(TokenizerSpm, IllFormedInputUsesByteFallback) {
  const Tokenizer& t = spm();
  const std::string bad = "a\xFF\xC0\x80 \xED\xA0\x80z\xF0\x9F\x98";
  const Ids ids = t.encode(bad, false, false);
  for (const char c : std::string("\xFF\xC0\x80\xED\xA0\x80\xF0\x9F\x98")) {
    const int32_t bt = 3 + static_cast<uint8_t>(c);
    EXPECT_NE(std::find(ids.begin(), ids.end(), bt), ids.end()) << int(static_cast<uint8_t>(c));
  }
  EXPECT_EQ(t.decode(ids), sanitize_utf8(bad));
  std::mt19937 rng(99);
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const size_t n = rng() % 30;
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng()));
    const Ids r = t.encode(s, true, true);
    const std::string d = t.decode(r);
    ASSERT_TRUE(is_valid_utf8(d));
    ASSERT_EQ(d, sanitize_utf8(s)) << testing::PrintToString(s);
  }
}

TEST(TokenizerSpm, TokenToPiece) {
  const Tokenizer& t = spm();
  EXPECT_EQ(t.token_to_piece(15043), " Hello");
  EXPECT_EQ(t.token_to_piece(29871), " ");
  EXPECT_EQ(t.token_to_piece(3 + 0x41), "A");
  EXPECT_EQ(t.token_to_piece(3 + 0xF0), "\xF0");
  EXPECT_EQ(t.token_to_piece(1), "");
  EXPECT_EQ(t.token_to_piece(1, true), "<s>");
  EXPECT_EQ(t.token_to_piece(0), " \xE2\x81\x87 ");
  EXPECT_EQ(t.token_to_piece(0, true), "<unk>");
  EXPECT_THROW(t.token_to_piece(32000), Error);
  EXPECT_THROW(t.token_to_piece(-1), Error);
  // The views point into the tokenizer's own storage.
  EXPECT_EQ(t.token_to_piece(15043).data(), t.token_to_piece(15043).data());
}

TEST(TokenizerSpm, LongInputIsFast) {
  const Tokenizer& t = spm();
  std::string text;
  std::mt19937 rng(3);
  while (text.size() < 200000) text += random_text(rng, 50);
  std::string same(150000, 'a');  // one long run: many equal-score candidate pairs
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = t.encode(text, true, false);
  const Ids ids2 = t.encode(same, false, false);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_EQ(t.decode(ids2), same);
  EXPECT_LT(secs, 5.0);  // O(n log n): ~0.1 s; an O(n^2) rescan would take minutes
}

}  // namespace
}  // namespace lift
