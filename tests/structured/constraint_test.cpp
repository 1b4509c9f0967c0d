#include "structured/constraint.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace lift::structured {
namespace {

std::shared_ptr<const TokenVocab> bytes_vocab() {
  std::vector<std::string> tokens{"<end>"};
  for (int b = 32; b < 127; ++b) tokens.emplace_back(1, static_cast<char>(b));
  return std::make_shared<const TokenVocab>(std::move(tokens), std::vector<int32_t>{0});
}

CompilerOptions options(size_t capacity, size_t max_bytes) {
  CompilerOptions o;
  o.capacity = capacity;
  o.max_bytes = max_bytes;
  return o;
}

ConstraintSpec regex(std::string pattern) {
  ConstraintSpec s;
  s.kind = ConstraintKind::regex;
  s.text = std::move(pattern);
  return s;
}

// Distinct schemas are request input: what the cache keeps is bounded in bytes as well as in
// entries, the oldest going first, and one larger than the whole budget is served, not kept.
TEST(ConstraintCompiler, CacheIsBoundedInBytes) {
  const auto vocab = bytes_vocab();
  const size_t one = ConstraintCompiler(vocab).compile(regex("[a-z]{1,40}"))->bytes();
  ConstraintCompiler c(vocab, options(64, one * 2 + one / 2));
  const auto first = c.compile(regex("[a-z]{1,40}"));
  c.compile(regex("[a-y]{1,40}"));
  EXPECT_EQ(c.cached(), 2u);
  c.compile(regex("[a-x]{1,40}"));
  EXPECT_EQ(c.cached(), 2u);
  EXPECT_LE(c.cached_bytes(), one * 2 + one / 2);
  EXPECT_NE(c.compile(regex("[a-z]{1,40}")), first);  // evicted, compiled again

  ConstraintCompiler small(vocab, options(64, one / 2));
  EXPECT_NE(small.compile(regex("[a-z]{1,40}")), nullptr);
  EXPECT_EQ(small.cached(), 0u);
  EXPECT_EQ(small.cached_bytes(), 0u);

  ConstraintCompiler counted(vocab, options(1, size_t{1} << 30));
  const auto a = counted.compile(regex("[a-z]{1,40}"));
  EXPECT_EQ(counted.compile(regex("[a-z]{1,40}")), a);  // a hit
  counted.compile(regex("[a-y]{1,40}"));
  EXPECT_EQ(counted.cached(), 1u);
}

// Compiles run on the HTTP threads: past max_compiling at once, one more waits busy_wait for
// a slot and then gives up (a 503), so slow constraints cannot take every thread.
TEST(ConstraintCompiler, CompileSlotsAreBounded) {
  CompilerOptions o;
  o.max_compiling = 1;
  o.busy_wait = std::chrono::milliseconds(50);
  ConstraintCompiler c(bytes_vocab(), o);
  nlohmann::json big = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  for (int i = 0; i < 2000; ++i) {
    big["properties"]["p" + std::to_string(i)] = {{"type", "string"}};
    big["required"].push_back("p" + std::to_string(i));
  }
  ConstraintSpec slow;
  slow.kind = ConstraintKind::json_schema;
  slow.text = big.dump();
  std::thread first([&] { EXPECT_NE(c.compile(slow), nullptr); });
  while (c.compiling() == 0) std::this_thread::yield();
  EXPECT_THROW(c.compile(regex("[a-z]{1,40}")), CompilerBusy);
  first.join();
  EXPECT_EQ(c.compiling(), 0u);
  EXPECT_NE(c.compile(regex("[a-z]{1,40}")), nullptr);
  EXPECT_NE(c.compile(slow), nullptr);  // cached: no slot needed
}

}  // namespace
}  // namespace lift::structured
