#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_paths.h"

namespace lift::gguf {
namespace {

TEST(GgufFile, ReadsStories260KHeader) {
  const File f = File::open(test::model_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.type, GgmlType::F32);
  EXPECT_EQ(emb.ne[0], 64u);
  EXPECT_EQ(emb.ne[1], 512u);
}

// Released pages come back from the file: the bytes read the same afterwards.
TEST(GgufFile, ReleasedTensorBytesStayReadable) {
  const File f = File::open(test::model_path("stories260K/stories260K.gguf"));
  const TensorInfo& emb = f.tensor("token_embd.weight");
  const std::vector<uint8_t> before(emb.data, emb.data + emb.n_bytes);
  f.release(emb.data, emb.n_bytes);
  EXPECT_EQ(std::memcmp(before.data(), emb.data, emb.n_bytes), 0);
  // A parsed buffer has no mapping: nothing to drop, nothing changes.
  std::ifstream in(test::model_path("stories260K/stories260K.gguf"), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  const File p = File::parse(bytes);
  const TensorInfo& e2 = p.tensor("token_embd.weight");
  p.release(e2.data, e2.n_bytes);
  EXPECT_EQ(std::memcmp(before.data(), e2.data, e2.n_bytes), 0);
}

}  // namespace
}  // namespace lift::gguf
