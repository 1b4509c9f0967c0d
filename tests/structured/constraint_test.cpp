#include "structured/constraint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lift::structured {
namespace {

std::shared_ptr<const TokenVocab> bytes_vocab() {
  std::vector<std::string> tokens{"<end>"};
  for (int b = 32; b < 127; ++b) tokens.emplace_back(1, static_cast<char>(b));
  return std::make_shared<const TokenVocab>(std::move(tokens), std::vector<int32_t>{0});
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
  ConstraintCompiler c(vocab, 64, one * 2 + one / 2);
  const auto first = c.compile(regex("[a-z]{1,40}"));
  c.compile(regex("[a-y]{1,40}"));
  EXPECT_EQ(c.cached(), 2u);
  c.compile(regex("[a-x]{1,40}"));
  EXPECT_EQ(c.cached(), 2u);
  EXPECT_LE(c.cached_bytes(), one * 2 + one / 2);
  EXPECT_NE(c.compile(regex("[a-z]{1,40}")), first);  // evicted, compiled again

  ConstraintCompiler small(vocab, 64, one / 2);
  EXPECT_NE(small.compile(regex("[a-z]{1,40}")), nullptr);
  EXPECT_EQ(small.cached(), 0u);
  EXPECT_EQ(small.cached_bytes(), 0u);

  ConstraintCompiler counted(vocab, 1);
  const auto a = counted.compile(regex("[a-z]{1,40}"));
  EXPECT_EQ(counted.compile(regex("[a-z]{1,40}")), a);  // a hit
  counted.compile(regex("[a-y]{1,40}"));
  EXPECT_EQ(counted.cached(), 1u);
}

}  // namespace
}  // namespace lift::structured
