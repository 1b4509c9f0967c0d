// `lift generate` through the serving engine: the golden greedy ids with and without
// speculative decoding (both proposers), stop strings, min_tokens, the --stats and --json
// reports, clear errors for the speculative-decoding flags; bench throughput's spec counters.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace lift {
namespace {

struct GenRun {
  int status = 0;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `lift generate ARGS` with stdin empty; stdout and stderr apart (text vs reports).
GenRun generate(const std::string& args) {
  static int calls = 0;
  const std::string err_file = ::testing::TempDir() + "lift-gen-err-" + std::to_string(::getpid()) +
                               "-" + std::to_string(++calls) + ".txt";
  const std::string cmd = test::lift_binary() + " generate -m " +
                          test::model_path("stories260K/stories260K.gguf") + " " + args +
                          " < /dev/null 2> " + err_file;
  GenRun r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  FILE* e = std::fopen(err_file.c_str(), "r");
  while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
  if (e) std::fclose(e);
  std::remove(err_file.c_str());
  return r;
}

std::string golden_ids(size_t n) {
  const auto& r = test::stories260k_run("prompt_once_upon_a_time_greedy_60");
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += std::to_string(r["generated_ids"][i].get<int>());
  }
  s += '\n';
  return s;
}

const std::string kGreedy = "-p \"Once upon a time\" -n 56 --temp 0";

// The last line of stderr that parses as a JSON object.
nlohmann::json json_report(const std::string& err) {
  std::istringstream in(err);
  nlohmann::json last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) last = j;
  }
  return last;
}

TEST(E2EGenerate, GreedyIdsAreGoldenWithEveryProposer) {
  const std::string draft = test::model_path("stories260K/stories260K-draft-L4.gguf");
  for (const std::string& extra : std::vector<std::string>{
           "", " --spec ngram --spec-tokens 3 --spec-fixed", " --spec ngram --spec-tokens 8",
           " --draft-model " + draft + " --spec-tokens 3 --spec-fixed"}) {
    SCOPED_TRACE(extra);
    const GenRun r = generate(kGreedy + " --ids" + extra);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, golden_ids(56)) << r.err;
  }
}

TEST(E2EGenerate, StopStringEndsTheTextWithoutShowingIt) {
  // The golden continuation: "..., there was a little girl named Lily. She loved ...".
  const GenRun r = generate(kGreedy + " --stop \" Lily.\" --stop \"never seen\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named\n") << r.err;
  // Through speculation: the same cut, even when a draft runs past the stop string.
  const GenRun s = generate(kGreedy + " --stop \" Lily.\" --spec ngram --spec-fixed");
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out, r.out) << s.err;
}

TEST(E2EGenerate, MinTokensHoldsBackStopIdsAndStrings) {
  const auto& golden = test::stories260k_run("prompt_once_upon_a_time_greedy_60")["generated_ids"];
  const std::string first = std::to_string(golden[0].get<int>());
  // The first greedy token as a stop id: nothing comes out...
  GenRun r = generate(kGreedy + " --ids --stop-token-ids " + first);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "\n") << r.err;
  // ...unless min_tokens masks it: then exactly -n tokens or a later stop, at least 4.
  r = generate(kGreedy + " --ids --stop-token-ids " + first + " --min-tokens 4");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream ids(r.out);
  int n = 0;
  for (int id; ids >> id;) {
    EXPECT_NE(std::to_string(id), first);
    ++n;
  }
  EXPECT_GE(n, 4) << r.out;
  // A stop string is matched only from the min_tokens-th token on: " Lily." ends at token 11.
  r = generate("-p \"Once upon a time\" -n 20 --temp 0 --stop \" Lily.\" --min-tokens 16");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("named Lily. She"), std::string::npos) << r.out;
}

TEST(E2EGenerate, StatsAndJsonReport) {
  GenRun r = generate(kGreedy + " --stats --json");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* field : {"prompt 5 tokens", "prefill", "decode", "time to first token", "load ",
                            "finish length", "56 output tokens", "speculative decoding off"}) {
    EXPECT_NE(r.err.find(field), std::string::npos) << field << " in " << r.err;
  }
  nlohmann::json j = json_report(r.err);
  ASSERT_TRUE(j.is_object()) << r.err;
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["output_tokens"], 56);
  EXPECT_EQ(j["finish"], "length");
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["ttft_s"].get<double>(), 0);
  EXPECT_TRUE(j["spec"].is_null());

  // With speculation: the proposer's counters, consistent with each other.
  r = generate(kGreedy + " --stats --json --spec ngram --spec-fixed --spec-tokens 4");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* field : {"speculative decoding ngram:", "drafts", "draft tokens", "accepted (",
                            "mean accepted length"}) {
    EXPECT_NE(r.err.find(field), std::string::npos) << field << " in " << r.err;
  }
  j = json_report(r.err);
  ASSERT_TRUE(j["spec"].is_object()) << r.err;
  const auto& s = j["spec"];
  EXPECT_EQ(s["proposer"], "ngram");
  const auto drafts = s["drafts"].get<uint64_t>();
  const auto proposed = s["draft_tokens"].get<uint64_t>();
  const auto accepted = s["accepted_tokens"].get<uint64_t>();
  EXPECT_GT(drafts, 0u);
  EXPECT_LE(proposed, 4 * drafts);
  EXPECT_LE(accepted, proposed);
  EXPECT_DOUBLE_EQ(s["mean_accepted_length"].get<double>(),
                   1.0 + static_cast<double>(accepted) / static_cast<double>(drafts));
  // Every step after the prefill yields one token plus the accepted drafts.
  EXPECT_LE(j["steps"].get<uint64_t>(), 56u);
}

TEST(E2EBench, ThroughputReportsSpecCounters) {
  const std::string cmd = test::lift_binary() + " bench throughput -m " +
                          test::model_path("stories260K/stories260K.gguf") +
                          " --num-prompts 2 --input-len 16 --output-len 24 --scheduler continuous"
                          " --spec ngram --spec-fixed --spec-tokens 3 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("speculative decoding ngram:"), std::string::npos) << out;
  const nlohmann::json j = json_report(out);
  ASSERT_TRUE(j.is_object()) << out;
  const auto& s = j["runs"][0]["spec"];
  ASSERT_TRUE(s.is_object()) << out;
  EXPECT_EQ(s["proposer"], "ngram");
  EXPECT_GT(s["drafts"].get<uint64_t>(), 0u);
  EXPECT_LE(s["draft_tokens"].get<uint64_t>(), 3 * s["drafts"].get<uint64_t>());
  // No draft is longer than --spec-tokens: positions past it stay 0.
  const auto& per_pos = s["accepted_per_pos"];
  ASSERT_GE(per_pos.size(), 3u) << out;
  for (size_t i = 3; i < per_pos.size(); ++i) EXPECT_EQ(per_pos[i], 0) << i;
}

TEST(E2EGenerate, SpecFlagErrorsNameTheFlag) {
  GenRun r = generate("-p hi --spec-tokens 17");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--spec-tokens"), std::string::npos) << r.err;
  r = generate("-p hi --spec draft");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--draft-model PATH"), std::string::npos) << r.err;
  r = generate("-p hi --spec ngram --draft-model " +
               test::model_path("stories260K/stories260K-draft-L4.gguf"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--draft-model is only used with --spec draft"), std::string::npos) << r.err;
  r = generate("-p hi --draft-model /nonexistent/draft.gguf");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent/draft.gguf"), std::string::npos) << r.err;
  r = generate("-p hi --spec lookahead");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--spec"), std::string::npos) << r.err;
  r = generate("-p hi --no-kv-cache --stop x");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("drop --no-kv-cache"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lift
