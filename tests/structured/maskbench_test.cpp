// The MaskBench protocol: instance text exactly as Python's json.dumps writes it (expected
// strings recorded from Python 3), verdicts on tiny hand-written files, crash and timeout
// isolation, the report's numbers, and real files unpacked from the developer subset.
#include "structured/maskbench.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "structured/token_vocab.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace lift::structured::maskbench {
namespace {

TEST(MaskBenchSerializer, FloatsAsPythonRepr) {
  // repr(float) in Python 3 for each value.
  const std::pair<double, const char*> cases[] = {
      {1e-05, "1e-05"},
      {1e16, "1e+16"},
      {0.1, "0.1"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {1.5e16, "1.5e+16"},
      {1e22, "1e+22"},
      {1e-4, "0.0001"},
      {9999999999999998.0, "9999999999999998.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {123.456, "123.456"},
      {-1.25e-7, "-1.25e-07"},
      {std::numeric_limits<double>::infinity(), "Infinity"},
      {-std::numeric_limits<double>::infinity(), "-Infinity"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(python_float_repr(v), want) << want;
}

TEST(MaskBenchSerializer, DocumentsAsPythonDumps) {
  // print(json.dumps(json.loads(TEXT), ensure_ascii=False)) for each TEXT.
  EXPECT_EQ(python_dumps(R"({"b":1E2,"a" : -0,"e":0.000001,"f":12345678901234567890123})"),
            R"({"b": 100.0, "a": 0, "e": 1e-06, "f": 12345678901234567890123})");
  EXPECT_EQ(python_dumps("[123456789012345678901234567890, -123456789012345678901234567890, "
                         "18446744073709551615, -9223372036854775808, 1e16, 1.0, 0.1, -0.0]"),
            "[123456789012345678901234567890, -123456789012345678901234567890, "
            "18446744073709551615, -9223372036854775808, 1e+16, 1.0, 0.1, -0.0]");
  EXPECT_EQ(python_dumps(R"({"k\u00e9y": "caf\u00e9 日本 \ud83d\ude00", "ctl": "\u0000\u0001\u001f)"
                         R"(\u007f\b\f\n\r\t\"\\\/", "ls": "\u2028"})"),
            "{\"kéy\": \"café 日本 😀\", \"ctl\": \"\\u0000\\u0001\\u001f\x7f\\b\\f\\n\\r\\t"
            "\\\"\\\\/\", \"ls\": \"\u2028\"}");
  EXPECT_EQ(python_dumps(R"( {"nested":[{"a":[],"b":{}},[1,[2.0,null,true,false]]]} )"),
            R"({"nested": [{"a": [], "b": {}}, [1, [2.0, null, true, false]]]})");
  EXPECT_EQ(python_dumps("\"x\""), "\"x\"");
  EXPECT_THROW(python_dumps("{\"a\": }"), Error);
  EXPECT_THROW(python_dumps("{\"a\": 1, \"a\": 2}"), Error);  // Python keeps the first place
}

TEST(MaskBenchFile, ParsesInstancesInFileOrder) {
  const BenchFile f = parse_file(R"({"description": "d", "meta": {},
      "schema": {"type": "object", "properties": {"z": {}, "a": {"tests": [1]}}},
      "tests": [{"description": "one", "valid": true, "data": {"z":1.50,"a":[99999999999999999999]}},
                {"valid": false, "data": "s\n"},
                {"data": {"tests": 0}, "valid": false, "description": "three"}]})",
                                 "f.json");
  EXPECT_EQ(f.name, "f.json");
  EXPECT_EQ(f.schema["properties"]["a"]["tests"][0], 1);
  ASSERT_EQ(f.tests.size(), 3u);
  EXPECT_EQ(f.tests[0].text, R"({"z": 1.5, "a": [99999999999999999999]})");
  EXPECT_TRUE(f.tests[0].valid);
  EXPECT_EQ(f.tests[0].description, "one");
  EXPECT_EQ(f.tests[1].text, R"("s\n")");
  EXPECT_FALSE(f.tests[1].valid);
  EXPECT_EQ(f.tests[2].text, R"({"tests": 0})");
  EXPECT_EQ(f.tests[2].description, "three");
  EXPECT_TRUE(parse_file(R"({"schema": true})", "t.json").tests.empty());
}

TEST(MaskBenchFile, RefusesBrokenFilesByName) {
  const auto message = [](std::string_view text) {
    try {
      parse_file(text, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("{\"schema\": {}, \"tests\": [{\"valid\": true}]}"),
            "bad.json: test #0 has no \"data\"");
  EXPECT_EQ(message("{\"schema\": {}, \"tests\": [{\"data\": 1, \"valid\": 1}]}"),
            "bad.json: test #0 has no boolean \"valid\"");
  EXPECT_EQ(message("{\"tests\": []}"), "bad.json: no \"schema\"");
  EXPECT_EQ(message("{\"schema\": {}, \"tests\": {}}"), "bad.json: \"tests\" is not an array");
  EXPECT_EQ(
      message("{\"schema\": {}, \"tests\": [{\"valid\": true, \"data\": {\"k\": 1, \"k\": 2}}]}"),
      "bad.json: duplicate key \"k\" in a test's data");
  EXPECT_EQ(message("{\"schema\": ").rfind("bad.json: not JSON: ", 0), 0u);
}

struct Llama3 {
  Tokenizer tok = Tokenizer::load(test::model_path("vocab/ggml-vocab-llama-bpe.gguf"));
  std::shared_ptr<const TokenVocab> vocab = TokenVocab::from_tokenizer(tok);
};
const Llama3& llama3() {
  static const Llama3 v;
  return v;
}

FileResult run_text(const std::string& text) {
  return run_file(parse_file(text, "tiny.json"), llama3().tok, llama3().vocab, {});
}

// An object schema and four instances; `labels` says which the file claims valid.
std::string tiny_file(const char* labels) {
  const char* data[] = {R"({"id": 12, "tag": "b"})", R"({"id": "12"})", R"({"id": 1, "x": 2})",
                        R"({"tag": "a"})"};
  std::string tests;
  for (size_t i = 0; i < 4; ++i) {
    tests += std::string(i ? ", " : "") + "{\"valid\": " + (labels[i] == 'v' ? "true" : "false") +
             ", \"data\": " + data[i] + "}";
  }
  return R"({"schema": {"type": "object", "properties": {"id": {"type": "integer"},
      "tag": {"enum": ["a", "b"]}}, "required": ["id"], "additionalProperties": false},
      "tests": [)" +
         tests + "]}";
}

TEST(MaskBenchRun, JudgesEachInstance) {
  const FileResult ok = run_text(tiny_file("viii"));
  EXPECT_EQ(ok.verdict, Verdict::pass) << ok.reason;
  EXPECT_TRUE(ok.compiled);
  EXPECT_GT(ok.ttfm_ns, 0);
  EXPECT_EQ(ok.instances, 4u);
  EXPECT_EQ(ok.instances_right, 4u);
  EXPECT_GT(ok.tokens, 8u);
  EXPECT_EQ(ok.tbm_ns.size(), ok.tokens);
  EXPECT_EQ(ok.accept_ns.size(), ok.tokens);

  // An invalid instance the file calls valid: the engine rejects it, the file fails.
  const FileResult rejected = run_text(tiny_file("vvii"));
  EXPECT_EQ(rejected.verdict, Verdict::validation_error);
  EXPECT_EQ(rejected.instances_right, 3u);
  EXPECT_EQ(rejected.reason.rfind("test #1 (valid): token ", 0), 0u) << rejected.reason;

  // A valid instance the file calls invalid: accepted, which the bench must report as an
  // invalidation error, and that outranks the validation error of test #1.
  const FileResult accepted = run_text(tiny_file("ivii"));
  EXPECT_EQ(accepted.verdict, Verdict::invalidation_error);
  EXPECT_EQ(accepted.reason.rfind("test #0 (invalid): all ", 0), 0u) << accepted.reason;
}

TEST(MaskBenchRun, IncompleteTextIsNotAccepted) {
  // "12" is a prefix of the only valid text "123": every token is allowed, but the text is
  // not a complete value, so it counts as rejected.
  const std::string schema = R"({"schema": {"enum": [123]}, "tests": [)";
  const FileResult invalid = run_text(schema + R"({"valid": false, "data": 12}]})");
  EXPECT_EQ(invalid.verdict, Verdict::pass) << invalid.reason;
  const FileResult valid = run_text(schema + R"({"valid": true, "data": 12}]})");
  EXPECT_EQ(valid.verdict, Verdict::validation_error);
  EXPECT_NE(valid.reason.find("not complete"), std::string::npos) << valid.reason;
}

TEST(MaskBenchRun, RefusedSchemaIsACompileError) {
  // Lookbehind is not regular: regex.h refuses it with a GrammarError.
  const FileResult r = run_text(
      R"({"schema": {"type": "string", "pattern": "(?<=a)b"}, "tests": [{"valid": true, "data": "ab"}]})");
  EXPECT_EQ(r.verdict, Verdict::compile_error);
  EXPECT_FALSE(r.compiled);
  EXPECT_FALSE(r.reason.empty());
  EXPECT_TRUE(r.tbm_ns.empty());
}

// multipleOf through the tokenizer: Llama 3 writes digits three to a token, so one token walks
// several of the remainder rules (json_multiple).
TEST(MaskBenchRun, MultipleOfByTokens) {
  const std::string schema = R"({"schema": {"type": "object", "properties": {
      "n": {"type": "integer", "multipleOf": 7}, "c": {"type": "number", "multipleOf": 0.01,
      "minimum": 0}}, "required": ["n", "c"]}, "tests": [)";
  const char* cases[] = {
      R"({"valid": true, "data": {"n": 7000007, "c": 12.5}})",
      R"({"valid": true, "data": {"n": -49, "c": 0}})",
      R"({"valid": true, "data": {"n": 0, "c": 99999.99}})",
      R"({"valid": false, "data": {"n": 7000008, "c": 1}})",
      R"({"valid": false, "data": {"n": 14, "c": 1.005}})",
      R"({"valid": false, "data": {"n": 14, "c": -0.5}})",
  };
  std::string tests;
  for (const char* c : cases) tests += std::string(tests.empty() ? "" : ", ") + c;
  const FileResult r = run_text(schema + tests + "]}");
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_EQ(r.instances_right, 6u);
}

TEST(MaskBenchIsolation, CrashTimeoutAndExceptionAreOutcomes) {
  // More than a pipe buffer, so the parent must read while the child writes.
  const ChildOutcome big = run_in_child(
      [](const Note& note) {
        note("first");
        note("second");
        return std::string(300000, 'x');
      },
      20);
  EXPECT_EQ(big.kind, ChildOutcome::finished);
  EXPECT_EQ(big.output, std::string(300000, 'x'));
  EXPECT_EQ(big.last_note, "second");

  const ChildOutcome crash = run_in_child(
      [](const Note& note) -> std::string {
        note("about to abort");
        std::abort();
      },
      20);
  EXPECT_EQ(crash.kind, ChildOutcome::crashed);
  EXPECT_EQ(crash.detail.rfind("signal " + std::to_string(SIGABRT), 0), 0u) << crash.detail;
  EXPECT_EQ(crash.last_note, "about to abort");

  const ChildOutcome thrown =
      run_in_child([](const Note&) -> std::string { throw Error("boom"); }, 20);
  EXPECT_EQ(thrown.kind, ChildOutcome::crashed);
  EXPECT_EQ(thrown.detail, "exit status 3: boom");

  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome slow = run_in_child(
      [](const Note&) {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return std::string("late");
      },
      0.2);
  EXPECT_EQ(slow.kind, ChildOutcome::timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(MaskBenchReport, KeywordsPercentilesAndCounts) {
  // Messages as the JSON Schema compiler words them.
  EXPECT_EQ(error_keyword("JSON Schema: /not: keyword \"not\" is only supported for {}"), "not");
  EXPECT_EQ(error_keyword("JSON Schema: format \"country-code\" at /properties/c/format is "
                          "not supported"),
            "format country-code");
  EXPECT_EQ(error_keyword("JSON Schema: /properties/a/0/pattern: lookahead (?= is not regular"),
            "pattern");
  EXPECT_EQ(error_keyword("JSON Schema: /properties/x/dependentSchemas: not supported"),
            "dependentSchemas");
  EXPECT_EQ(error_keyword("JSON Schema: /properties/pattern: odd"), "properties");  // not a name
  EXPECT_EQ(error_keyword("JSON Schema: /allOf/1: allOf / $ref: cannot combine \"minimum\": x"),
            "allOf/$ref: minimum");
  EXPECT_EQ(error_keyword("keyword 'uniqueItems' is not supported"), "uniqueItems");
  EXPECT_EQ(error_keyword("grammar: an intersection needs more than 200000 states"), "(grammar)");
  EXPECT_EQ(error_keyword("the grammar is too large"), "(unnamed)");

  // numpy.percentile([1, 2, 3, 4, 10], p) for p = 25 ... 99.9.
  const Percentiles p = percentiles_us({10000, 2000, 1000, 4000, 3000});
  EXPECT_EQ(p.count, 5u);
  EXPECT_DOUBLE_EQ(p.p25, 2);
  EXPECT_DOUBLE_EQ(p.p50, 3);
  EXPECT_DOUBLE_EQ(p.p75, 4);
  EXPECT_DOUBLE_EQ(p.p90, 7.6);
  EXPECT_DOUBLE_EQ(p.p95, 8.8);
  EXPECT_DOUBLE_EQ(p.p99, 9.76);
  EXPECT_NEAR(p.p999, 9.976, 1e-12);
  EXPECT_DOUBLE_EQ(p.max, 10);

  std::vector<FileResult> results(3);
  results[0].name = "a.json";
  results[0].compiled = true;
  results[0].ttfm_ns = 5000;
  results[0].tbm_ns = {1000, 3000};
  results[0].instances = results[0].instances_right = 2;
  results[1].name = "b.json";
  results[1].verdict = Verdict::compile_error;
  results[1].reason = "JSON Schema: /allOf/1/not: keyword 'not' is not supported";
  results[2] = file_result_from_json(to_json(results[1]));  // the child's pipe, both ways
  results[2].name = "c.json";
  results[2].reason = "JSON Schema: /allOf/1/dependentRequired: not supported";
  const Summary s = summarize(results);
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.counts.at(Verdict::pass), 1u);
  EXPECT_EQ(s.counts.at(Verdict::compile_error), 2u);
  EXPECT_EQ(s.counts.at(Verdict::invalidation_error), 0u);
  EXPECT_EQ(s.compiled, 1u);
  EXPECT_EQ(s.tbm.count, 2u);
  EXPECT_DOUBLE_EQ(s.tbm.p50, 2);
  EXPECT_DOUBLE_EQ(s.ttfm.max, 5);
  EXPECT_EQ(s.compile_error_keywords,
            (std::map<std::string, size_t>{{"not", 1}, {"dependentRequired", 1}}));
  ASSERT_EQ(s.failures.size(), 2u);
  const nlohmann::json j = summary_json(s, 1);
  EXPECT_EQ(j["passing"], 1);
  EXPECT_EQ(j["compile_error"], 2);
  EXPECT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["file"], "b.json");
  EXPECT_DOUBLE_EQ(j["tbm_us"]["p50"].get<double>(), 2);
}

// Real files of the developer subset, unpacked by tar into a temporary folder and run as the
// bench runs them (a forked child per file).
TEST(MaskBenchReal, DevSubsetFilesPass) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("lift-maskbench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* names[] = {"Github_trivial---o63994.json"};
  std::string cmd = "tar -xJf " + std::string(LIFT_SOURCE_DIR) +
                    "/../shared/structured/maskbench-dev.tar.xz -C " + dir.string();
  for (const char* n : names) cmd += std::string(" dev/") + n;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  // print(json.dumps(json.load(f)["tests"][i]["data"], ensure_ascii=False)) for i = 0, 1, 2.
  const BenchFile f = load_file((dir / "dev" / names[0]).string());
  ASSERT_EQ(f.tests.size(), 3u);
  EXPECT_EQ(f.tests[0].text, R"(["apple", "banana", "orange"])");
  EXPECT_EQ(f.tests[1].text, R"({"pear": "grape"})");
  EXPECT_EQ(f.tests[2].text, R"({"key": "apple", "banana": "orange"})");

  for (const char* n : names) {
    const FileResult r =
        run_file_isolated((dir / "dev" / n).string(), llama3().tok, llama3().vocab, {}, 60, 0);
    EXPECT_EQ(r.verdict, Verdict::pass) << n << ": " << r.reason;
    EXPECT_EQ(r.instances_right, r.instances) << n;
    EXPECT_EQ(r.tbm_ns.size(), r.tokens) << n;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lift::structured::maskbench
