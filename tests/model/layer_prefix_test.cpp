// `lift make-draft`'s writer: a model's first layers, everything else byte for byte.
#include "model/layer_prefix.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "temp_file.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace lift {
namespace {

namespace fs = std::filesystem;

// A temporary file removed when the test ends.
class TempFile : public test::TempFile {
 public:
  explicit TempFile(const std::string& tag) : test::TempFile("lift-prefix", tag) {}
};

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::string& in, const std::string& out, int layers) {
  try {
    write_layer_prefix(in, out, layers);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LayerPrefix, ReproducesTheSharedFourLayerDraftOfStories260K) {
  // The shared models' draft was cut from stories260K by another writer: same bytes.
  TempFile out("l4");
  write_layer_prefix(test::model_path("stories260K/stories260K.gguf"), out.path(), 4);
  EXPECT_EQ(slurp(out.path()), slurp(test::model_path("stories260K/stories260K-draft-L4.gguf")));
  const auto m = LlamaModel::load(out.path());
  EXPECT_EQ(m->config().n_layers, 4);
  EXPECT_EQ(m->config().n_vocab, 512);
}

TEST(LayerPrefix, KeepsEveryTypeOfAMixedQuantFileByteForByte) {
  const std::string in = test::model_path("quantized/synth-K-Q4_K_M.gguf");
  TempFile out("k1");
  write_layer_prefix(in, out.path(), 1);
  const gguf::File src = gguf::File::open(in), dst = gguf::File::open(out.path());
  const std::string arch(*src.get_string("general.architecture"));
  EXPECT_EQ(dst.get_uint(arch + ".block_count"), 1u);
  ASSERT_GT(src.get_uint(arch + ".block_count"), 1u);
  // Same metadata (block_count aside), in the same order, same values.
  ASSERT_EQ(dst.metadata().size(), src.metadata().size());
  for (size_t i = 0; i < src.metadata().size(); ++i) {
    const auto& [key, v] = src.metadata()[i];
    EXPECT_EQ(dst.metadata()[i].first, key);
    if (key == arch + ".block_count") continue;
    EXPECT_EQ(dst.metadata()[i].second.type, v.type) << key;
    EXPECT_EQ(dst.metadata()[i].second.u, v.u) << key;
    EXPECT_EQ(dst.metadata()[i].second.str, v.str) << key;
    EXPECT_EQ(dst.metadata()[i].second.count, v.count) << key;
  }
  size_t kept = 0;
  for (const gguf::TensorInfo& t : src.tensors()) {
    const std::string name(t.name);
    const bool in_draft = name.rfind("blk.", 0) != 0 || name.rfind("blk.0.", 0) == 0;
    const gguf::TensorInfo* d = dst.find_tensor(name);
    ASSERT_EQ(d != nullptr, in_draft) << name;
    if (!d) continue;
    ++kept;
    EXPECT_EQ(d->type, t.type) << name;
    EXPECT_EQ(d->ne, t.ne) << name;
    ASSERT_EQ(d->n_bytes, t.n_bytes) << name;
    EXPECT_EQ(std::memcmp(d->data, t.data, t.n_bytes), 0) << name;
  }
  EXPECT_EQ(dst.tensors().size(), kept);
  const auto m = LlamaModel::load(out.path());
  EXPECT_EQ(m->config().n_layers, 1);
}

TEST(LayerPrefix, PerLayerArraysAreCutToTheLayersKept) {
  // stories260K (5 layers) with arrays of one entry per layer, and one of another length.
  const std::string in = test::model_path("stories260K/stories260K.gguf");
  const gguf::File src = gguf::File::open(in);
  gguf::Writer w;
  for (const auto& [key, v] : src.metadata()) w.copy_value(key, v);
  w.set_i32_array("llama.attention.sliding_window_pattern", {1, 0, 1, 1, 0});
  w.set_string_array("llama.layer_names", {"a", "b", "c", "d", "e"});
  w.set_i32_array("llama.not_per_layer", {7, 8});
  for (const gguf::TensorInfo& t : src.tensors()) {
    w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  TempFile with_arrays("arrays"), out("arrays-2");
  w.write(with_arrays.path());
  write_layer_prefix(with_arrays.path(), out.path(), 2);
  const gguf::File dst = gguf::File::open(out.path());
  EXPECT_EQ(dst.get_int_array("llama.attention.sliding_window_pattern"),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(dst.get_string_array("llama.layer_names"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(dst.get_int_array("llama.not_per_layer"), (std::vector<int64_t>{7, 8}));
}

// make-model's residual_scale: at 0 no layer changes the residual stream, so the first layer
// alone gives the whole model's logits bit for bit; at 1 (every layer's update outweighs the
// embedding) it agrees with nothing.
TEST(LayerPrefix, ADraftOfAResidualFreeModelIsThatModel) {
  SyntheticSpec spec;
  spec.dim = 64;
  spec.n_layers = 3;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ffn = 128;
  spec.context_length = 64;
  spec.vocab_from = test::model_path("stories260K/stories260K.gguf");
  ThreadPool pool(1);
  auto be = make_cpu_backend(pool);
  const auto top1 = [&](const std::string& path) {
    const auto m = LlamaModel::load(path);
    std::vector<int32_t> out;
    for (int32_t t = 3; t < 40; ++t) {
      GenerationRequest r;
      r.prompt = {1, t, t + 7};
      r.max_tokens = 1;
      r.sampling.temperature = 0;
      out.push_back(generate(*m, *be, r).tokens.at(0));
    }
    return out;
  };
  size_t agree[2] = {};
  for (const float scale : {0.0f, 1.0f}) {
    spec.residual_scale = scale;
    TempFile target("res"), draft("res-1");
    write_synthetic_model(spec, target.path());
    write_layer_prefix(target.path(), draft.path(), 1);
    const std::vector<int32_t> t = top1(target.path()), d = top1(draft.path());
    for (size_t i = 0; i < t.size(); ++i) agree[scale > 0] += t[i] == d[i];
  }
  EXPECT_EQ(agree[0], 37u);
  EXPECT_LT(agree[1], 10u);
}

TEST(LayerPrefix, RefusesALayerCountOutsideTheModelAndOverwritingTheInput) {
  const std::string in = test::model_path("stories260K/stories260K.gguf");
  TempFile out("bad");
  for (int n : {0, 6, -1}) {
    const std::string e = error_of(in, out.path(), n);
    EXPECT_NE(e.find("--layers " + std::to_string(n)), std::string::npos) << e;
    EXPECT_NE(e.find("has 5 layers"), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(out.path()));
  // Same file under another name: refused before anything is truncated.
  TempFile copy("copy");
  fs::copy_file(in, copy.path());
  const std::string alias =
      (fs::path(copy.path()).parent_path() / "." / fs::path(copy.path()).filename()).string();
  EXPECT_NE(error_of(copy.path(), alias, 2).find("is the input model"), std::string::npos);
  EXPECT_EQ(slurp(copy.path()), slurp(in));
  EXPECT_NE(error_of(test::model_path("vocab/ggml-vocab-llama-spm.gguf"), out.path(), 1)
                .find("no tensor of block 0"),
            std::string::npos);
}

}  // namespace
}  // namespace lift
