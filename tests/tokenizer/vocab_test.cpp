#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift {
namespace {

TEST(TokenizerVocab, LoadsLlamaSpm) {
  const Vocab v = Vocab::load(test::model_path("vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(v.model(), "llama");
  EXPECT_EQ(v.size(), 32000);
  EXPECT_EQ(v.bos_id(), 1);
  EXPECT_EQ(v.eos_id(), 2);
  EXPECT_EQ(v.unk_id(), 0);
  EXPECT_EQ(v.pad_id(), -1);
  EXPECT_TRUE(v.add_bos());
  EXPECT_FALSE(v.add_eos());
  EXPECT_TRUE(v.add_space_prefix());
  EXPECT_EQ(v.type(0), TokenType::kUnknown);
  EXPECT_EQ(v.type(1), TokenType::kControl);
  EXPECT_EQ(v.text(1), "<s>");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(v.byte_token(static_cast<uint8_t>(b)), 3 + b);
    EXPECT_EQ(v.byte_value(3 + b), b);
  }
  EXPECT_EQ(v.byte_value(100000), -1);
  EXPECT_EQ(v.byte_value(1), -1);
  EXPECT_EQ(v.find_mergeable("\xE2\x96\x81Hello"), 15043);
  EXPECT_EQ(v.find_mergeable("<s>"), -1);     // control tokens are not merge results
  EXPECT_EQ(v.find_mergeable("<0x41>"), -1);  // neither are byte tokens
}

TEST(TokenizerVocab, UnsetIdsAndDefaults) {
  // stories260K stores padding/separator as 0xFFFFFFFF ("unset").
  const Vocab s = Vocab::load(test::model_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(s.size(), 512);
  EXPECT_EQ(s.pad_id(), -1);
  EXPECT_EQ(s.bos_id(), 1);
  // baichuan has no unknown_token_id key: SentencePiece default 0; byte tokens at 393.. .
  const Vocab b = Vocab::load(test::model_path("vocab/ggml-vocab-baichuan.gguf"));
  EXPECT_EQ(b.size(), 64000);
  EXPECT_EQ(b.unk_id(), 0);
  EXPECT_EQ(b.pad_id(), 0);
  EXPECT_EQ(b.byte_token(0), 393);
  EXPECT_EQ(b.byte_token(0xFF), 393 + 255);
  // phi-3: eos/pad are <|endoftext|> (32000).
  const Vocab p = Vocab::load(test::model_path("vocab/ggml-vocab-phi-3.gguf"));
  EXPECT_EQ(p.eos_id(), 32000);
  EXPECT_EQ(p.pad_id(), 32000);
  EXPECT_EQ(p.type(2), TokenType::kUserDefined);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no lift::Error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

TEST(TokenizerVocab, RejectsUnsupportedModels) {
  const std::string path = test::model_path("vocab/ggml-vocab-bert-bge.gguf");
  expect_error([&] { Vocab::load(path); }, "tokenizer model 'bert' is not supported yet");
  expect_error([&] { Tokenizer::load(path); }, "tokenizer model 'bert' is not supported yet");
}

TEST(TokenizerVocab, LoadsByteLevelVocabularies) {
  {
    const Vocab v = Vocab::load(test::model_path("vocab/ggml-vocab-gpt-2.gguf"));
    EXPECT_EQ(v.model(), "gpt2");
    EXPECT_EQ(v.pre(), "gpt-2");
    EXPECT_EQ(v.size(), 50257);
    EXPECT_EQ(v.merges().size(), 50000u);
    EXPECT_EQ(v.merges()[0], "\xC4\xA0 t");  // "Ġ t"
    EXPECT_EQ(v.bos_id(), 50256);
    EXPECT_EQ(v.eos_id(), 50256);
    EXPECT_EQ(v.unk_id(), -1);  // byte-level vocabularies need none
    EXPECT_FALSE(v.add_bos());  // no key: llama.cpp's default for pre 'gpt-2'
    EXPECT_FALSE(v.add_space_prefix());
    EXPECT_TRUE(v.warning().empty());
  }
  {
    const Vocab v = Vocab::load(test::model_path("vocab/ggml-vocab-falcon.gguf"));
    EXPECT_EQ(v.bos_id(), 11);  // stored; also llama.cpp's default for gpt2 vocabularies
    EXPECT_FALSE(v.add_bos());
  }
  {
    const Vocab v = Vocab::load(test::model_path("vocab/ggml-vocab-llama-bpe.gguf"));
    EXPECT_EQ(v.pre(), "llama-bpe");
    EXPECT_TRUE(v.add_bos());
    EXPECT_EQ(v.bos_id(), 128000);
  }
  {
    // No tokenizer.ggml.pre: llama.cpp's "default" split, with a warning.
    const Vocab v = Vocab::load(test::model_path("vocab/ggml-vocab-gpt-neox.gguf"));
    EXPECT_EQ(v.pre(), "default");
    EXPECT_NE(v.warning().find("tokenizer.ggml.pre is missing"), std::string::npos);
    EXPECT_FALSE(v.add_bos());
  }
}

// A small well-formed vocabulary; each test breaks one thing.
struct Meta {
  std::string model = "llama";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0x41>", "a", "b", "ab"};
  std::vector<float> scores = {0, 0, 0, 0, -1, -2, -0.5f};
  std::vector<int32_t> types = {2, 3, 3, 6, 1, 1, 1};
  std::optional<int64_t> bos = 1, eos = 2, unk = 0, pad;
  std::optional<std::string> pre;
  std::optional<std::vector<std::string>> merges;
  bool write_tokens = true;
  bool write_model = true;
};

Vocab build(const Meta& m, std::vector<uint8_t>& storage) {
  gguf::Writer w;
  if (m.write_model) w.set_string("tokenizer.ggml.model", m.model);
  std::vector<std::string_view> views(m.tokens.begin(), m.tokens.end());
  if (m.write_tokens) w.set_string_array("tokenizer.ggml.tokens", views);
  if (m.pre) w.set_string("tokenizer.ggml.pre", *m.pre);
  std::vector<std::string_view> merge_views;
  if (m.merges) merge_views.assign(m.merges->begin(), m.merges->end());
  if (m.merges) w.set_string_array("tokenizer.ggml.merges", merge_views);
  w.set_f32_array("tokenizer.ggml.scores", m.scores);
  w.set_i32_array("tokenizer.ggml.token_type", m.types);
  if (m.bos) w.set_i32("tokenizer.ggml.bos_token_id", static_cast<int32_t>(*m.bos));
  if (m.eos) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*m.eos));
  if (m.unk) w.set_i32("tokenizer.ggml.unknown_token_id", static_cast<int32_t>(*m.unk));
  if (m.pad) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*m.pad));
  storage = w.to_bytes();
  const gguf::File f = gguf::File::parse(storage, "test.gguf");
  return Vocab::from_gguf(f);
}

TEST(TokenizerVocab, SmallVocabLoads) {
  std::vector<uint8_t> bytes;
  Meta m;
  m.pad = 0xFFFFFFFFu;
  const Vocab v = build(m, bytes);
  bytes.clear();  // the vocabulary owns its texts
  EXPECT_EQ(v.size(), 7);
  EXPECT_EQ(v.pad_id(), -1);
  EXPECT_EQ(v.find_mergeable("ab"), 6);
  EXPECT_EQ(v.byte_token(0x41), 3);
  EXPECT_EQ(v.byte_token(0x42), -1);
  const Tokenizer tok(build(m, bytes));
  // "ab" -> "▁ab": no "▁" token and no <0xE2> byte token, so the prefix becomes <unk>.
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{0, 6}));
  EXPECT_EQ(tok.encode(" ab", false, false, true), (std::vector<int32_t>{0, 0, 6, 2}));
}

TEST(TokenizerVocab, RejectsCorruptMetadata) {
  std::vector<uint8_t> bytes;
  {
    Meta m;
    m.scores.pop_back();
    expect_error([&] { build(m, bytes); },
                 "tokenizer.ggml.scores has 6 entries but tokenizer.ggml.tokens has 7");
  }
  {
    Meta m;
    m.types.push_back(1);
    expect_error([&] { build(m, bytes); },
                 "tokenizer.ggml.token_type has 8 entries but tokenizer.ggml.tokens has 7");
  }
  {
    Meta m;
    m.bos = 7;
    expect_error([&] { build(m, bytes); },
                 "tokenizer.ggml.bos_token_id = 7 is out of range for a vocabulary of 7 tokens");
  }
  {
    Meta m;
    m.eos = 1000;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.eos_token_id = 1000 is out of range");
  }
  {
    Meta m;
    m.unk = -5;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.unknown_token_id = -5");
  }
  {
    Meta m;
    m.pad = 7;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.padding_token_id = 7");
  }
  {
    Meta m;
    m.types[4] = 9;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.token_type[4] = 9");
  }
  {
    Meta m;
    m.types[4] = 6;  // "a" claimed to be a byte token
    expect_error([&] { build(m, bytes); }, "has type byte but its text 'a'");
  }
  {
    Meta m;
    m.scores[5] = std::nanf("");
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.scores[5] is NaN");
  }
  {
    Meta m;
    m.tokens.clear();
    m.scores.clear();
    m.types.clear();
    m.bos = m.eos = m.unk = std::nullopt;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.tokens is empty");
  }
  {
    Meta m;
    m.write_tokens = false;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.tokens is missing");
  }
  {
    Meta m;
    m.write_model = false;
    expect_error([&] { build(m, bytes); }, "tokenizer.ggml.model is missing");
  }
  {
    Meta m;
    m.model = "bert";
    expect_error([&] { build(m, bytes); }, "tokenizer model 'bert' is not supported yet");
  }
  const auto gpt2 = [] {
    Meta m;
    m.model = "gpt2";
    m.tokens = {"a", "b", "ab", "<|end|>"};
    m.scores.clear();
    m.types = {1, 1, 1, 3};
    m.bos = m.eos = 3;
    m.unk = std::nullopt;
    m.pre = "gpt-2";
    m.merges = std::vector<std::string>{"a b"};
    return m;
  };
  EXPECT_EQ(Tokenizer(build(gpt2(), bytes)).encode("abba", false, false),
            (std::vector<int32_t>{2, 1, 0}));
  {
    Meta m = gpt2();
    m.pre = "no-such-split";
    expect_error([&] { build(m, bytes); },
                 "tokenizer.ggml.pre 'no-such-split' is not supported (known: default, ");
  }
  {
    Meta m = gpt2();
    m.merges = std::nullopt;
    expect_error([&] { build(m, bytes); }, "metadata key tokenizer.ggml.merges is missing");
  }
  {
    Meta m = gpt2();
    m.merges = std::vector<std::string>{"a b", "ab"};
    expect_error([&] { Tokenizer t(build(m, bytes)); },
                 "tokenizer.ggml.merges[1] = 'ab' is not two tokens separated by a space");
  }
  {
    Meta m = gpt2();
    m.merges = std::vector<std::string>{"b a"};
    expect_error([&] { Tokenizer t(build(m, bytes)); },
                 "tokenizer.ggml.merges[0] = 'b a': 'ba' is not a token of the vocabulary");
  }
  {
    // Direct construction needs merges too.
    VocabData d;
    d.model = "gpt2";
    d.tokens = {"a"};
    expect_error([&] { Vocab v(std::move(d), "direct"); },
                 "direct: tokenizer.ggml.merges is missing or empty");
  }
  {
    // Direct construction validates the same way.
    VocabData d;
    d.tokens = {"a", "b"};
    d.scores = {0.0f};
    expect_error([&] { Vocab v(std::move(d), "direct"); }, "direct: tokenizer.ggml.scores has 1");
  }
}

}  // namespace
}  // namespace lift
