#include <gtest/gtest.h>

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

}  // namespace
}  // namespace lift::gguf
