// The lift command line as a user runs it: golden generation, the KV-cache comparison,
// a scripted two-turn chat, and clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temp_file.h"
#include "test_paths.h"

namespace lift {
namespace {

struct CliRun {
  int status;
  std::string out;  // stdout and stderr together
};

// Runs `lift ARGS` (or, with raw, the command line ARGS itself) with `input` on stdin.
CliRun run(const std::string& args, const std::string& input = "", bool raw = false) {
  // One input file per process and call: ctest runs these tests in parallel processes.
  static int calls = 0;
  const std::string in_file = ::testing::TempDir() + "lift-cli-input-" +
                              std::to_string(::getpid()) + "-" + std::to_string(++calls) + ".txt";
  std::ofstream(in_file) << input;
  const std::string cmd =
      (raw ? args : test::lift_binary() + " " + args) + " < " + in_file + " 2>&1";
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

// A small model whose context (512) is shorter than bench hol's default 2000-token prompt,
// written once per process by `lift make-model` (which must accept --heads without
// --kv-heads).
const std::string& short_context_model() {
  static const std::string path = [] {
    const std::string p =
        ::testing::TempDir() + "lift-cli-ctx512-" + std::to_string(::getpid()) + ".gguf";
    const CliRun r = run("make-model -o " + p +
                         " --dim 64 --layers 1 --heads 4 --ffn 64 --type F32 --context 512"
                         " --vocab-from " +
                         test::model_path("stories260K/stories260K.gguf"));
    EXPECT_EQ(r.status, 0) << r.out;
    test::remove_at_exit(p);
    return p;
  }();
  return path;
}

// A failure a user can act on: a non-zero exit and lift's own message, never the runtime's
// "terminate called ..." (an exception escaping a thread, or a joinable thread destroyed
// while an exception unwinds).
void expect_clean_failure(const CliRun& r, const std::string& needle) {
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("lift: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fatal error"), std::string::npos) << r.out;
}

TEST(E2ECli, BenchHolOnAShortContextModelSaysWhatToChange) {
  const CliRun r = run("bench hol -m " + short_context_model());
  expect_clean_failure(r, "--long-len 2000 does not fit max-model-len 512");
  EXPECT_NE(r.out.find("--long-len 511 or less"), std::string::npos) << r.out;
  const CliRun t = run("bench throughput -m " + short_context_model() +
                       " --input-len 500 --output-len 100 --num-prompts 1");
  expect_clean_failure(t, "max-model-len 512");
  const CliRun m = run("bench model -m " + short_context_model() + " -p 600 -n 4 -r 1 --no-probes");
  expect_clean_failure(m, "-p 600 needs 600 positions");
  const CliRun d =
      run("bench model -m " + short_context_model() + " -d 500 -p 8 -n 16 -r 1 --no-probes");
  expect_clean_failure(d, "-n 16 after -d 500 needs 516 positions");
}

// -d puts that many tokens in the cache first: pp and tg run at positions after them, and the
// decode bound counts their K/V.
TEST(E2ECli, BenchModelDepthRunsAfterTheContext) {
  const CliRun r = run("bench model " + kModel + " -d 300 -p 8 -n 8 -r 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("pp8    @ d300"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg8    @ d300"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at mean context 304"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"depth\":300"), std::string::npos) << r.out;
  // Both measurements ran at the positions after the context.
  EXPECT_NE(r.out.find("\"pp\":{\"first_position\":300"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tg\":{\"first_position\":300"), std::string::npos) << r.out;
}

TEST(E2ECli, BenchHolOnASmallKvPoolSaysWhatToChange) {
  // 1 MiB holds 816 tokens of stories260K's f32 K/V: the default max-model-len shrinks to it,
  // and the benchmark refuses its 2040-token prompt before any stream starts. (A request that
  // fits max-model-len always fits the pool now, so nothing can fail once streams run.)
  const CliRun r =
      run("bench hol " + kModel + " --decoders 1 --long-len 2040 --kv-cache-memory 1MiB");
  expect_clean_failure(r, "--long-len 2040 does not fit max-model-len 816");
  EXPECT_NE(r.out.find("max-model-len 816 tokens (the default 2048 did not fit"), std::string::npos)
      << r.out;
}

TEST(E2ECli, MaxModelLenAndKvBudgetErrorsNameTheNumbersAndFlags) {
  CliRun r = run("chat " + kModel + " -c 4096", "/exit\n");
  expect_clean_failure(r, "--max-model-len 4096 is longer than the model's context of 2048 tokens");
  r = run("chat " + kModel + " -c 2048 --kv-cache-memory 1MiB", "/exit\n");
  expect_clean_failure(r, "holds 816 tokens of f32 K/V, but one sequence of --max-model-len 2048");
  for (const char* flag : {"raise --kv-cache-memory", "lower --max-model-len", "--kv-type f16"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << " in " << r.out;
  }
  r = run("generate " + kModel + " -p hi -c 99999");
  expect_clean_failure(r, "longer than the model's context of 2048");
}

TEST(E2ECli, MemoryPlanIsPrintedAndMaxModelLenBoundsGenerate) {
  CliRun r = run("chat " + kModel + " -c 300", "/exit\n");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("max-model-len 300 tokens (--max-model-len"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV cache f32 (auto"), std::string::npos) << r.out;
  // Prompt (5 tokens) + generated ones stop at -c: the first 5 golden ids.
  r = run("generate " + kModel + " -p \"Once upon a time\" -n 56 --temp 0 --ids -c 10");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string five = ids_of("prompt_once_upon_a_time_greedy_60", 5);
  EXPECT_NE(r.out.find(five + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(ids_of("prompt_once_upon_a_time_greedy_60", 6)), std::string::npos) << r.out;
}

TEST(E2ECli, MissingModelFileEveryCommand) {
  const std::string missing = " -m /nonexistent/model.gguf";
  for (const std::string cmd :
       {"generate -p hi", "chat", "bench hol", "bench throughput --num-prompts 1",
        "bench model -r 1 --no-probes", "serve --port 0"}) {
    SCOPED_TRACE(cmd);
    expect_clean_failure(run("timeout 120 " + test::lift_binary() + " " + cmd + missing, "", true),
                         "cannot open model file");
  }
}

TEST(E2ECli, CorruptModelFile) {
  const std::string dir = ::testing::TempDir();
  const std::string truncated = dir + "lift-cli-truncated-" + std::to_string(::getpid()) + ".gguf";
  const std::string garbage = dir + "lift-cli-garbage-" + std::to_string(::getpid()) + ".gguf";
  {
    std::ifstream in(test::model_path("stories260K/stories260K.gguf"), std::ios::binary);
    std::string bytes(20000, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::ofstream(truncated, std::ios::binary) << bytes;  // the header, then part of the data
    std::string junk = "GGUF";
    for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 7919 + 13) & 0xFF);
    std::ofstream(garbage, std::ios::binary) << junk;
  }
  for (const std::string& path : {truncated, garbage}) {
    for (const std::string cmd : {"generate -p hi", "bench hol", "chat"}) {
      SCOPED_TRACE(cmd + " on " + path);
      const CliRun r = run(cmd + " -m " + path);
      expect_clean_failure(r, path);
    }
  }
  std::filesystem::remove(truncated);
  std::filesystem::remove(garbage);
}

// generate encodes a prompt as the server does: BOS only where the vocabulary asks for it
// (Qwen2's says add_bos_token = false; Llama 3's BPE vocabulary wants <|begin_of_text|>).
TEST(E2ECli, GenerateAddsBosOnlyWhereTheVocabularyAsks) {
  const std::pair<const char*, const char*> cases[] = {
      {"ggml-vocab-qwen2.gguf", "prompt 4 tokens"},
      {"ggml-vocab-llama-bpe.gguf", "prompt 5 tokens"},
  };
  for (const auto& [vocab, want] : cases) {
    const std::string model =
        ::testing::TempDir() + "lift-cli-bos-" + std::to_string(::getpid()) + "-" + vocab;
    test::remove_at_exit(model);
    const CliRun made = run("make-model -o " + model +
                            " --dim 64 --layers 1 --heads 4 --ffn 64 --type F32 --vocab-from " +
                            test::model_path(std::string("vocab/") + vocab));
    ASSERT_EQ(made.status, 0) << made.out;
    for (const char* engine : {"", " --no-kv-cache"}) {
      const CliRun r =
          run("generate -m " + model + " -p \"Once upon a time\" -n 1 --temp 0 --stats" + engine);
      ASSERT_EQ(r.status, 0) << r.out;
      EXPECT_NE(r.out.find(want), std::string::npos) << vocab << engine << "\n" << r.out;
    }
  }
}

}  // namespace
}  // namespace lift
