// llama.cpp's tokenizer test vectors (../shared/models/vocab/X.gguf.inp and .out, see the
// README there): every vocabulary whose GGUF is present reproduces every line exactly, as
// llama.cpp's test-tokenizer-0 checks (no BOS, parse_special false), and decodes back to the
// input. Vectors whose GGUF is not shipped are skipped with a message; WordPiece (bert) is
// refused with a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/vocab_cache.h"
#include "util/error.h"

namespace lift {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream ss(line);
  int32_t id;
  while (ss >> id) ids.push_back(id);
  return ids;
}

// Every vocabulary with test vectors in the shared set (KnowsEveryVectorFile checks the list).
const char* const kVectorSets[] = {
    "llama-spm",    "phi-3",          "gemma3", "llama-bpe", "qwen2",  "gpt-2",
    "deepseek-llm", "deepseek-coder", "falcon", "starcoder", "refact", "mpt",
    "command-r",    "gemma-4",        "qwen35", "bert-bge",
};

class TokenizerVectors : public testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectors, ReproducesLlamaCpp) {
  const std::string name = GetParam();
  const std::filesystem::path gguf = test::model_path("vocab/ggml-vocab-" + name + ".gguf");
  if (!std::filesystem::exists(gguf)) {
    GTEST_SKIP() << gguf.filename().string()
                 << " is not in ../shared/models/vocab (only its test vectors are)";
  }
  if (name == "bert-bge") {
    try {
      Tokenizer::load(gguf.string());
      ADD_FAILURE() << "WordPiece vocabulary loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tokenizer model 'bert' is not supported yet"),
                std::string::npos)
          << e.what();
    }
    return;
  }
  const Tokenizer& tok = test::vocab_tokenizer(name);
  // The .inp file ends with the separator and the .out file with '\n': both split into the
  // same number of parts, the last one empty (the empty string encodes to nothing).
  const std::vector<std::string> cases =
      split(read_file(gguf.string() + ".inp"), "\n__ggml_vocab_test__\n");
  const std::vector<std::string> lines = split(read_file(gguf.string() + ".out"), "\n");
  ASSERT_EQ(cases.size(), lines.size());
  ASSERT_GE(cases.size(), 47u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i], /*add_bos=*/false,
                                                /*parse_special=*/false);
    EXPECT_EQ(got, parse_ids(lines[i])) << "case " << i << ": " << testing::PrintToString(cases[i]);
    // Both models are lossless on these (valid UTF-8) texts.
    EXPECT_EQ(tok.decode(got), cases[i]) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, TokenizerVectors, testing::ValuesIn(kVectorSets),
                         [](const testing::TestParamInfo<const char*>& p) {
                           std::string s = p.param;
                           for (char& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

TEST(TokenizerVectorsList, KnowsEveryVectorFile) {
  const std::set<std::string> known(std::begin(kVectorSets), std::end(kVectorSets));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::model_path("vocab"))) {
    const std::string f = entry.path().filename().string();
    const std::string prefix = "ggml-vocab-";
    const std::string suffix = ".gguf.inp";
    if (!f.starts_with(prefix) || !f.ends_with(suffix)) continue;
    ++files;
    EXPECT_TRUE(known.contains(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size())))
        << f << " has test vectors that no test checks";
  }
  EXPECT_GE(files, 16);
}

}  // namespace
}  // namespace lift
