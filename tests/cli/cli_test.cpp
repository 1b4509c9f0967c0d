// The lift command line as a user runs it: golden generation, the KV-cache comparison,
// a scripted two-turn chat, and clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"

namespace lift {
namespace {

struct CliRun {
  int status;
  std::string out;  // stdout and stderr together
};

CliRun run(const std::string& args, const std::string& input = "") {
  // One input file per process and call: ctest runs these tests in parallel processes.
  static int calls = 0;
  const std::string in_file = ::testing::TempDir() + "lift-cli-input-" +
                              std::to_string(::getpid()) + "-" + std::to_string(++calls) + ".txt";
  std::ofstream(in_file) << input;
  const std::string cmd = test::lift_binary() + " " + args + " < " + in_file + " 2>&1";
  CliRun r{0, {}};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  return r;
}

std::string ids_of(const std::string& record, size_t n) {
  const auto& r = test::stories260k_run(record);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += std::to_string(r["generated_ids"][i].get<int>());
  }
  return s;
}

const std::string kModel = "-m " + test::model_path("stories260K/stories260K.gguf");

TEST(E2ECli, GenerateGoldenIdsWithAndWithoutKvCache) {
  const std::string want = ids_of("prompt_once_upon_a_time_greedy_60", 56);
  for (const char* extra : {"", " --no-kv-cache"}) {
    const CliRun r =
        run("generate " + kModel + " -p \"Once upon a time\" -n 56 --temp 0 --ids" + extra);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  const std::string want256 = ids_of("doc_greedy_no_prompt", 256);
  const CliRun r = run("generate " + kModel + " -p \"\" -n 256 --temp 0 --ids");
  EXPECT_NE(r.out.find(want256), std::string::npos) << r.out;
}

TEST(E2ECli, StatsShowWhatTheKvCacheSaves) {
  const CliRun r =
      run("generate " + kModel + " -p \"Once upon a time\" -n 20 --temp 0 --stats --no-kv-cache");
  ASSERT_EQ(r.status, 0) << r.out;
  // 5 prompt tokens, 20 steps: without a cache 5+6+...+24 = 290 positions, with one 24.
  EXPECT_NE(r.out.find("token positions processed: 290"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a run with one 24"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefill"), std::string::npos);
  EXPECT_NE(r.out.find("time to first token"), std::string::npos);
}

TEST(E2ECli, ScriptedTwoTurnChatReusesThePrefix) {
  const CliRun r = run("chat " + kModel + " --temp 0 -n 24 --kv-cache-memory 8MiB",
                       "Hello there\nTell me a story\n/exit\n");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("turn 1: prompt"), std::string::npos) << r.out;
  const size_t t2 = r.out.find("turn 2: prompt");
  ASSERT_NE(t2, std::string::npos) << r.out;
  // The second turn's prompt starts with the first turn's: whole blocks come from the cache.
  std::istringstream line(r.out.substr(t2));
  std::string w;
  int prompt = 0, cached = 0;
  line >> w >> w >> w >> prompt >> w >> cached;
  EXPECT_GT(prompt, 0);
  EXPECT_GE(cached, 32) << r.out;
}

TEST(E2ECli, BadInputGivesClearErrors) {
  CliRun r = run("generate -m /nonexistent.gguf -p hi");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("cannot open model file"), std::string::npos) << r.out;
  r = run("generate -m " + test::model_path("stories260K/tok512.bin") + " -p hi");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("bad magic"), std::string::npos) << r.out;
  r = run("generate " + kModel + " -p hi --top-p 7");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("top_p"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lift
