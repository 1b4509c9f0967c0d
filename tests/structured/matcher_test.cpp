#include "structured/matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "structured/json_schema.h"
#include "structured/regex.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace lift::structured {
namespace {

// A JSON grammar written directly with the builder: recursion through value, rules for ws,
// strings and numbers, so masks cross rule boundaries inside tokens.
Grammar json_grammar() {
  GrammarBuilder b;
  RuleId value = b.declare("value");
  RuleId ws = b.add_rule("ws", b.repeat(b.alt({b.literal(" "), b.literal("\n")}), 0, 3));
  ByteSet plain;
  plain.set_range(0x20, 0x7E);
  ByteSet quote_or_backslash;
  quote_or_backslash.set('"');
  quote_or_backslash.set('\\');
  for (int w = 0; w < 4; ++w)
    plain.words[static_cast<size_t>(w)] &= ~quote_or_backslash.words[static_cast<size_t>(w)];
  ExprId esc = b.seq({b.literal("\\"), b.alt({b.literal("\""), b.literal("\\"), b.literal("n")})});
  RuleId string = b.add_rule(
      "string", b.seq({b.literal("\""), b.star(b.alt({b.byte_set(plain), esc})), b.literal("\"")}));
  ExprId digits = b.plus(b.byte_range('0', '9'));
  RuleId number = b.add_rule(
      "number", b.seq({b.opt(b.literal("-")),
                       b.alt({b.literal("0"),
                              b.seq({b.byte_range('1', '9'), b.star(b.byte_range('0', '9'))})}),
                       b.opt(b.seq({b.literal("."), digits}))}));
  ExprId W = b.call(ws);
  ExprId member = b.seq({b.call(string), W, b.literal(":"), W, b.call(value)});
  RuleId object = b.add_rule(
      "object", b.seq({b.literal("{"), W,
                       b.opt(b.seq({member, b.star(b.seq({W, b.literal(","), W, member}))})), W,
                       b.literal("}")}));
  RuleId array = b.add_rule(
      "array",
      b.seq({b.literal("["), W,
             b.opt(b.seq({b.call(value), b.star(b.seq({W, b.literal(","), W, b.call(value)}))})), W,
             b.literal("]")}));
  b.define(value, b.alt({b.call(object), b.call(array), b.call(string), b.call(number),
                         b.literal("true"), b.literal("false"), b.literal("null")}));
  b.set_start(value);
  return b.build();
}

// Tokens: every single character of the alphabet plus random substrings of JSON texts.
std::shared_ptr<const TokenVocab> small_vocab(uint32_t seed) {
  std::vector<std::string> toks = {""};  // id 0: a control token (no bytes)
  const std::string alphabet = "{}[]\",:. \n-0123456789abcdefnrtulsx\\";
  for (char c : alphabet) toks.emplace_back(1, c);
  const std::string texts[] = {R"({"a": [1, 2.5, -3], "b": {"c": "x\"y"}, "d": null})",
                               R"([true, false, {"key": "value\n"}, "s", 0.25])",
                               R"({"n": -10.5e, "e": []})"};
  std::mt19937 rng(seed);
  for (int i = 0; i < 400; ++i) {
    const std::string& t = texts[rng() % 3];
    size_t len = 2 + rng() % 6, pos = rng() % t.size();
    toks.push_back(t.substr(pos, len));
  }
  toks.push_back("ab");  // a duplicate spelling of a later token must work too
  toks.push_back("ab");
  return std::make_shared<const TokenVocab>(std::move(toks), std::vector<int32_t>{0});
}

bool bit(const std::vector<uint64_t>& m, int32_t t) {
  return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
}

std::vector<int32_t> allowed_tokens(const std::vector<uint64_t>& mask, const TokenVocab& v) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < v.size(); ++t)
    if (bit(mask, t)) out.push_back(t);
  return out;
}

// The mask must say exactly which tokens a copy of the matcher accepts.
void expect_mask_exact(const Matcher& m, const std::vector<uint64_t>& mask, const TokenVocab& v,
                       int step) {
  for (int32_t t = 0; t < v.size(); ++t) {
    Matcher probe = m;
    bool want = probe.accept(t);
    ASSERT_EQ(bit(mask, t), want) << "step " << step << " token " << t << " '" << v.bytes(t) << "'";
  }
}

TEST(StructuredMatcher, MasksEqualBruteForceOnRandomWalks) {
  Grammar g = json_grammar();
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto v = small_vocab(seed);
    auto cg = CompiledGrammar::compile(g, v);
    std::mt19937 rng(seed * 77);
    std::vector<uint64_t> mask(v->mask_words(), ~uint64_t{0});
    int total = 0, longest = 0;
    while (total < 300) {  // walks until 300 masks were checked
      Matcher m(cg);
      int steps = 0;
      for (; steps < 150 && !m.is_terminated(); ++steps, ++total) {
        m.fill_mask(mask);
        expect_mask_exact(m, mask, *v, steps);
        std::vector<int32_t> allowed = allowed_tokens(mask, *v);
        ASSERT_FALSE(allowed.empty()) << "a dead end at step " << steps;
        // Take the end token as soon as it is allowed after a while, so walks finish.
        if (steps < 100 && allowed.size() > 1 && allowed[0] == 0) allowed.erase(allowed.begin());
        int32_t pick = allowed[rng() % allowed.size()];
        if (steps > 100 && bit(mask, 0)) pick = 0;
        ASSERT_TRUE(m.accept(pick));
      }
      longest = std::max(longest, steps);
    }
    EXPECT_GT(longest, 20);
  }
}

TEST(StructuredMatcher, AcceptRejectsAndKeepsState) {
  Grammar g = json_grammar();
  auto v = small_vocab(5);
  auto cg = CompiledGrammar::compile(g, v);
  Matcher m(cg);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("{\"a\": [1"));
  EXPECT_FALSE(m.accept_bytes("}"));  // the array is still open
  Matcher copy = m;
  EXPECT_TRUE(m.accept_bytes("]}"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.is_done());  // nothing may follow the top-level object
  EXPECT_FALSE(copy.can_end());
  EXPECT_TRUE(copy.accept_bytes(", 2]}"));
  EXPECT_TRUE(copy.accept(0));
  EXPECT_TRUE(copy.is_terminated());
  EXPECT_FALSE(copy.accept_bytes(" "));
  std::vector<uint64_t> mask(v->mask_words(), ~uint64_t{0});
  copy.fill_mask(mask);
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
  // A number at the top level may end or go on.
  Matcher n(cg);
  EXPECT_TRUE(n.accept_bytes("12"));
  EXPECT_TRUE(n.can_end());
  EXPECT_FALSE(n.is_done());
}

TEST(StructuredMatcher, Llama3VocabMasksEqualBruteForce) {
  Tokenizer tok = Tokenizer::load(test::model_path("vocab/ggml-vocab-llama-bpe.gguf"));
  auto v = TokenVocab::from_tokenizer(tok);
  Grammar g = json_grammar();
  auto cg = CompiledGrammar::compile(g, v);
  const std::string text = R"({"name": "Ada \"L\"", "tags": ["x", "y"], "n": [-1.5, 20, {}]})";
  std::vector<int32_t> ids = tok.encode(text, false, false);
  Matcher m(cg);
  std::vector<uint64_t> mask(v->mask_words());
  // Brute force over 128k tokens is slow: check every eighth position exhaustively, and that
  // the text's own token is allowed everywhere.
  for (size_t i = 0; i < ids.size(); ++i) {
    m.fill_mask(mask);
    if (i % 8 == 0) expect_mask_exact(m, mask, *v, static_cast<int>(i));
    ASSERT_TRUE(bit(mask, ids[i])) << "token " << i << " '" << v->bytes(ids[i]) << "'";
    ASSERT_TRUE(m.accept(ids[i]));
  }
  EXPECT_TRUE(m.can_end());
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, tok.vocab().eos_id()));
  // An invalid continuation is refused: a number cannot follow an object directly.
  Matcher bad(cg);
  EXPECT_TRUE(bad.accept_bytes("{\"a\": 1"));
  EXPECT_FALSE(bad.accept_bytes("2x"));
}

// An object schema's grammar calls a rule after each key and for additional members
// (json_schema_object.cpp): masks across those calls are still exact.
TEST(StructuredMatcher, SchemaObjectMasksEqualBruteForce) {
  const Grammar g = json_schema_grammar(nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"a": {"type": "integer"}, "ab": {"type": "string"}, "b": {"type": "boolean"},
      "c": {"type": "array", "items": {"type": "integer"}}}, "required": ["b"],
      "maxProperties": 4})"));
  for (uint32_t seed : {7u, 8u}) {
    auto v = small_vocab(seed);
    auto cg = CompiledGrammar::compile(g, v);
    std::mt19937 rng(seed);
    std::vector<uint64_t> mask(v->mask_words());
    int ended = 0;
    for (int walk = 0; walk < 12; ++walk) {
      Matcher m(cg);
      for (int step = 0; step < 120 && !m.is_terminated(); ++step) {
        m.fill_mask(mask);
        expect_mask_exact(m, mask, *v, step);
        std::vector<int32_t> allowed = allowed_tokens(mask, *v);
        ASSERT_FALSE(allowed.empty()) << "a dead end at step " << step;
        const int32_t pick = step > 60 && bit(mask, 0) ? 0 : allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept(pick));
      }
      ended += m.is_terminated();
    }
    EXPECT_GT(ended, 0);
  }
}

TEST(StructuredMatcher, CacheBudgetRefusesWithAClearError) {
  auto v = small_vocab(3);
  CompileLimits tight;
  tight.max_cache_bytes = 64;
  try {
    (void)CompiledGrammar::compile(json_grammar(), v, tight);
    ADD_FAILURE() << "compiled past its cache budget";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("token-mask cache needs more than"), std::string::npos)
        << e.what();
  }
  const auto cg = CompiledGrammar::compile(json_grammar(), v);
  EXPECT_GT(cg->bytes(), cg->cache_bytes());
  EXPECT_GT(cg->cache_bytes(), 64u);
}

// States whose accepted sets are equal share one copy (a large schema's string and key states
// repeat a few sets; at 128k tokens a set is 16 KB): 300 states of [a-z] take about one set's
// bytes, not 300 (the same for the short lists, [a-c]).
TEST(StructuredMatcher, EqualAcceptedSetsAreStoredOnce) {
  std::vector<std::string> tokens{"<end>"};
  for (char a = 'a'; a <= 'z'; ++a) {
    tokens.emplace_back(1, a);
    for (char b = 'a'; b <= 'z'; ++b) tokens.push_back(std::string{a, b});
  }
  const auto v = std::make_shared<const TokenVocab>(std::move(tokens), std::vector<int32_t>{0});
  for (const char* pattern : {"[a-z]{300}", "[a-c]{300}"}) {
    GrammarBuilder b;
    b.set_start(b.add_rule("r", compile_regex(pattern, b)));
    const auto cg = CompiledGrammar::compile(b.build(), v);
    // Entries are 20 bytes a state; one [a-z] set is 88 bytes as a bitset, a [a-c] one 48 as
    // a list: with 300 copies the cache measured 35 KB and 21 KB.
    EXPECT_LT(cg->cache_bytes(), 300u * 20u + 4000u) << pattern;
    Matcher m(cg);
    EXPECT_TRUE(m.accept_bytes(std::string(299, pattern[3])));
    EXPECT_FALSE(m.can_end());
    EXPECT_TRUE(m.accept_bytes(std::string(1, pattern[1])));
    EXPECT_TRUE(m.can_end());
  }
}

}  // namespace
}  // namespace lift::structured
