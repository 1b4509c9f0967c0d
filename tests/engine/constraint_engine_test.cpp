// Structured output through the engine on stories260K: every sampled token is one the
// constraint allows at that step (replayed on a fresh matcher), and the texts clients get
// are checked by independent means (nlohmann parsing and hand-written schema checks,
// std::regex, set membership), greedy and sampled, n = 2, under preemption, with min_tokens,
// and a failing constraint ends only its own request.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "structured/constraint.h"
#include "structured/token_vocab.h"

namespace lift {
namespace {

using structured::ConstraintKind;
using structured::ConstraintSpec;

test::LoadedModel& fx() {
  static test::LoadedModel f("stories260K/stories260K.gguf");
  return f;
}

const std::shared_ptr<const structured::TokenVocab>& vocab() {
  static const auto v = structured::TokenVocab::from_tokenizer(fx().tok);
  return v;
}

std::shared_ptr<const structured::CompiledGrammar> compile(const ConstraintSpec& spec) {
  static structured::ConstraintCompiler compiler(vocab());
  return compiler.compile(spec);
}

ConstraintSpec spec(ConstraintKind kind, std::string text, uint32_t max_ws = 0) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  s.json.max_whitespace = max_ws;
  return s;
}

// Every sentence of this schema is short (bounded strings and integers, no whitespace), so a
// sample always completes it within max_tokens.
constexpr const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 6},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pet": {"enum": ["cat", "dog", null]}
  },
  "required": ["name", "age", "pet"],
  "additionalProperties": false
})";

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// kPersonSchema checked by hand on the parsed text (not by the grammar under test).
void expect_person(const std::string& text) {
  SCOPED_TRACE(text);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(text));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 3u);
  ASSERT_TRUE(j.contains("name") && j["name"].is_string());
  const size_t len = code_points(j["name"].get<std::string>());
  EXPECT_GE(len, 1u);
  EXPECT_LE(len, 6u);
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer());
  EXPECT_GE(j["age"].get<int64_t>(), 0);
  EXPECT_LE(j["age"].get<int64_t>(), 120);
  ASSERT_TRUE(j.contains("pet"));
  EXPECT_TRUE(j["pet"].is_null() || j["pet"] == "cat" || j["pet"] == "dog");
}

struct Sample {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::none;
  std::string error;
};

std::map<int, Sample> drain(OutputStream& s) {
  std::map<int, Sample> out;
  while (auto o = s.pop(std::chrono::milliseconds(0))) {
    Sample& x = out[o->index];
    x.tokens.insert(x.tokens.end(), o->token_ids.begin(), o->token_ids.end());
    x.text += o->text;
    x.logprobs.insert(x.logprobs.end(), o->logprobs.begin(), o->logprobs.end());
    if (o->finish != FinishReason::none) {
      x.finish = o->finish;
      x.error = o->error;
    }
  }
  return out;
}

// Replays `tokens` on a fresh matcher: each must be in the mask at its step. Also checks that
// every top logprob is an allowed token with a finite logprob (the masked distribution).
void expect_allowed(const std::shared_ptr<const structured::CompiledGrammar>& g, const Sample& s) {
  structured::Matcher m(g);
  std::vector<uint64_t> mask(g->vocab().mask_words());
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    m.fill_mask(mask);
    auto allowed = [&](int32_t t) { return (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1; };
    const int32_t t = s.tokens[i];
    ASSERT_TRUE(allowed(t)) << "token " << t << " at step " << i << " is outside the mask";
    if (i < s.logprobs.size()) {
      for (const TokenLogprob& alt : s.logprobs[i].top) {
        EXPECT_TRUE(std::isfinite(alt.logprob)) << "step " << i << ": a ruled-out alternative";
        EXPECT_TRUE(allowed(alt.token)) << "step " << i;
      }
    }
    ASSERT_TRUE(m.accept(t));
  }
}

RequestParams params(std::shared_ptr<const structured::CompiledGrammar> g, int max_tokens,
                     float temperature, uint64_t seed) {
  RequestParams p;
  p.max_tokens = max_tokens;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.constraint = std::move(g);
  return p;
}

const char* kPrompt = "Once upon a time, there was a little girl";

TEST(ConstraintEngine, JsonSchemaGreedyAndSampledCompleteAndValidate) {
  const auto g = compile(spec(ConstraintKind::json_schema, kPersonSchema));
  Engine e(*fx().model, fx().tok, test::small_engine_config(128));
  std::vector<Submitted> subs;
  for (int i = 0; i < 6; ++i) {
    RequestParams p = params(g, 120, i == 0 ? 0.0f : 1.0f, 100 + static_cast<uint64_t>(i));
    p.logprobs = true;
    p.sampling.n_logprobs = 5;
    subs.push_back(e.add_request(kPrompt, p));
  }
  e.run_until_idle();
  for (auto& sub : subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_EQ(s.finish, FinishReason::stop) << s.text;  // complete: the matcher was done
    expect_person(s.text);
    expect_allowed(g, s);
  }
}

TEST(ConstraintEngine, RegexAndChoiceOutputsMatch) {
  const auto re = compile(spec(ConstraintKind::regex, "[a-z]{2,5}-[0-9]{1,3}"));
  ConstraintSpec choice;
  choice.kind = ConstraintKind::choice;
  choice.choices = {"yes", "no", "maybe not"};
  const auto ch = compile(choice);
  Engine e(*fx().model, fx().tok, test::small_engine_config(128));
  std::vector<Submitted> regex_subs, choice_subs;
  for (int i = 0; i < 4; ++i) {
    const float temp = i % 2 ? 1.2f : 0.0f;
    regex_subs.push_back(
        e.add_request(kPrompt, params(re, 40, temp, 7 + static_cast<uint64_t>(i))));
    RequestParams cp = params(ch, 40, temp, 9 + static_cast<uint64_t>(i));
    cp.logprobs = true;  // fewer tokens are allowed than alternatives asked for
    cp.sampling.n_logprobs = 8;
    choice_subs.push_back(e.add_request(kPrompt, cp));
  }
  e.run_until_idle();
  const std::regex full("[a-z]{2,5}-[0-9]{1,3}");
  for (auto& sub : regex_subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_TRUE(std::regex_match(s.text, full)) << s.text;
    EXPECT_EQ(s.finish, FinishReason::stop);
    expect_allowed(re, s);
  }
  const auto gbnf = compile(spec(ConstraintKind::grammar, "root ::= \"say \" (\"yes\" | \"no\")"));
  std::vector<Submitted> gbnf_subs;
  for (int i = 0; i < 2; ++i)
    gbnf_subs.push_back(
        e.add_request(kPrompt, params(gbnf, 40, 1.0f, 3 + static_cast<uint64_t>(i))));
  e.run_until_idle();
  for (auto& sub : gbnf_subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_TRUE(s.text == "say yes" || s.text == "say no") << s.text;
    EXPECT_EQ(s.finish, FinishReason::stop);
  }
  const std::set<std::string> allowed(choice.choices.begin(), choice.choices.end());
  for (auto& sub : choice_subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_TRUE(allowed.count(s.text)) << s.text;
    EXPECT_EQ(s.finish, FinishReason::stop);
    expect_allowed(ch, s);
  }
}

TEST(ConstraintEngine, EverySampleOfNHasItsOwnMatcher) {
  const auto g = compile(spec(ConstraintKind::json_schema, kPersonSchema));
  Engine e(*fx().model, fx().tok, test::small_engine_config(128));
  RequestParams p = params(g, 120, 1.0f, 5);
  p.n = 2;
  auto sub = e.add_request(kPrompt, p);
  e.run_until_idle();
  const auto samples = drain(*sub.stream);
  ASSERT_EQ(samples.size(), 2u);
  for (const auto& [i, s] : samples) {
    EXPECT_EQ(s.finish, FinishReason::stop);
    expect_person(s.text);
    expect_allowed(g, s);
  }
  EXPECT_NE(samples.at(0).tokens, samples.at(1).tokens);  // seeded per sample, so they differ
}

// Preemption recomputes K/V from the tokens; the matcher must neither advance again nor be
// reset, so outputs are those of each request alone.
TEST(ConstraintEngine, PreemptionDoesNotAdvanceTheMatcherTwice) {
  const auto g = compile(spec(ConstraintKind::json_schema, kPersonSchema));
  std::vector<std::string> alone;
  {
    Engine e(*fx().model, fx().tok, test::small_engine_config(128));
    for (int i = 0; i < 6; ++i) {
      auto sub = e.add_request(kPrompt, params(g, 100, 1.0f, 40 + static_cast<uint64_t>(i)));
      e.run_until_idle();
      alone.push_back(drain(*sub.stream).at(0).text);
    }
  }
  Engine e(*fx().model, fx().tok, test::small_engine_config(8));  // too few blocks for all six
  std::vector<Submitted> subs;
  for (int i = 0; i < 6; ++i)
    subs.push_back(e.add_request(kPrompt, params(g, 100, 1.0f, 40 + static_cast<uint64_t>(i))));
  e.run_until_idle();
  EXPECT_GT(e.metrics().preemptions, 0u);
  for (size_t i = 0; i < subs.size(); ++i) {
    const Sample s = drain(*subs[i].stream).at(0);
    EXPECT_EQ(s.text, alone[i]);
    expect_person(s.text);
  }
}

TEST(ConstraintEngine, MinTokensHoldsTheEndBackUnlessNothingElseFits) {
  // EOS is favoured by far, and "[a-z ]{1,40}" may end after one letter: only min_tokens
  // keeps it off, until exactly 8 tokens.
  const int32_t eos = fx().tok.vocab().eos_id();
  const auto letters = compile(spec(ConstraintKind::regex, "[a-z ]{1,40}"));
  ConstraintSpec one;
  one.kind = ConstraintKind::choice;
  one.choices = {"hello"};
  const auto hello = compile(one);
  Engine e(*fx().model, fx().tok, test::small_engine_config(128));
  std::vector<Submitted> subs;
  for (int i = 0; i < 4; ++i) {
    RequestParams p = params(letters, 60, 1.0f, 70 + static_cast<uint64_t>(i));
    p.min_tokens = 8;
    p.sampling.logit_bias.push_back({eos, 100.0f});
    subs.push_back(e.add_request(kPrompt, p));
  }
  RequestParams p = params(hello, 60, 0.0f, 1);
  p.min_tokens = 30;  // the constraint is done after "hello": it wins
  p.sampling.logit_bias.push_back({eos, 100.0f});
  auto done = e.add_request(kPrompt, p);
  e.run_until_idle();
  for (auto& sub : subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_TRUE(s.tokens.size() == 8 || s.text.size() == 40) << s.tokens.size() << " " << s.text;
    EXPECT_TRUE(std::regex_match(s.text, std::regex("[a-z ]{1,40}"))) << s.text;
    EXPECT_EQ(s.finish, FinishReason::stop);
  }
  const Sample h = drain(*done.stream).at(0);
  EXPECT_EQ(h.text, "hello");
  EXPECT_EQ(h.finish, FinishReason::stop);
}

// EOS and stop ids are the constraint's end tokens, whatever they spell: favoured stop ids
// that are letters the regex allows are still never chosen before three letters stand.
TEST(ConstraintEngine, StopTokenIdsEndOnlyCompleteText) {
  const auto g = compile(spec(ConstraintKind::regex, "[a-z]{3,30}"));
  std::vector<int32_t> stops;
  for (int32_t t = 0; t < fx().tok.vocab().size(); ++t) {
    const std::string_view piece = fx().tok.token_to_piece(t);
    if (piece.size() == 1 && piece[0] >= 'a' && piece[0] <= 'm') stops.push_back(t);
  }
  ASSERT_FALSE(stops.empty());
  Engine e(*fx().model, fx().tok, test::small_engine_config(128));
  std::vector<Submitted> subs;
  for (int i = 0; i < 4; ++i) {
    RequestParams p = params(g, 50, 1.0f, 90 + static_cast<uint64_t>(i));
    p.stop_token_ids = stops;
    for (int32_t t : stops) p.sampling.logit_bias.push_back({t, 30.0f});
    subs.push_back(e.add_request(kPrompt, p));
  }
  e.run_until_idle();
  for (auto& sub : subs) {
    const Sample s = drain(*sub.stream).at(0);
    EXPECT_TRUE(std::regex_match(s.text, std::regex("[a-z]{3,30}"))) << s.text;
    EXPECT_EQ(s.finish, FinishReason::stop);
  }
}

// A vocabulary in which no token spells 'Q': the constraint "Q" can never continue, which
// fails that request alone with a message; the other request finishes normally.
TEST(ConstraintEngine, AFailingConstraintEndsOnlyItsRequest) {
  std::vector<std::string> bytes;
  for (int32_t t = 0; t < fx().tok.vocab().size(); ++t) {
    std::string b(fx().tok.token_to_piece(t));
    if (b.find('Q') != std::string::npos) b.clear();
    bytes.push_back(std::move(b));
  }
  auto v = std::make_shared<const structured::TokenVocab>(
      std::move(bytes), std::vector<int32_t>{fx().tok.vocab().eos_id()});
  const auto g = structured::CompiledGrammar::compile(
      structured::build_grammar(spec(ConstraintKind::regex, "Q")), v);
  Engine e(*fx().model, fx().tok, test::small_engine_config(64));
  auto bad = e.add_request(kPrompt, params(g, 20, 0.0f, 1));
  RequestParams plain;
  plain.max_tokens = 20;
  plain.ignore_eos = true;
  auto good = e.add_request(kPrompt, plain);
  e.run_until_idle();
  const Sample b = drain(*bad.stream).at(0);
  EXPECT_EQ(b.finish, FinishReason::error);
  EXPECT_NE(b.error.find("no token"), std::string::npos) << b.error;
  EXPECT_TRUE(b.text.empty());
  const Sample ok = drain(*good.stream).at(0);
  EXPECT_EQ(ok.finish, FinishReason::length);
  EXPECT_EQ(ok.tokens.size(), 20u);
  EXPECT_EQ(e.metrics().requests_failed, 1u);
}

// Constrained requests never draft: with n-gram speculation on they decode exactly as without.
TEST(ConstraintEngine, SpeculationIsOffForConstrainedRequests) {
  const auto g = compile(spec(ConstraintKind::json_schema, kPersonSchema));
  auto run = [&](SpecMethod m) {
    EngineConfig c = test::small_engine_config(128);
    c.spec.method = m;
    Engine e(*fx().model, fx().tok, c);
    auto sub = e.add_request(kPrompt, params(g, 100, 0.0f, 3));
    e.run_until_idle();
    EXPECT_EQ(e.metrics().spec.drafts, 0u);
    return drain(*sub.stream).at(0).text;
  };
  EXPECT_EQ(run(SpecMethod::ngram), run(SpecMethod::off));
}

TEST(ConstraintEngine, ConstraintForAnotherVocabularyIsRefused) {
  auto v = std::make_shared<const structured::TokenVocab>(std::vector<std::string>{"a", "b"},
                                                          std::vector<int32_t>{});
  const auto g = structured::CompiledGrammar::compile(
      structured::build_grammar(spec(ConstraintKind::regex, "a+")), v);
  Engine e(*fx().model, fx().tok, test::small_engine_config(64));
  try {
    e.add_request(kPrompt, params(g, 10, 0.0f, 1));
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("vocabulary of 2 tokens"), std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace lift
