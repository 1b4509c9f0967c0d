// Writes a seed corpus for fuzz_gguf (every file at most 64 KiB):
//   <model>.head    the model's header cut at its data offset, when that fits in 64 KiB;
//   <model>.small   the model rebuilt by lift's writer: same metadata (long arrays cut short),
//                   same tensor names, types and dimension counts, one block per tensor,
//                   filled with the start of the real tensor data; a complete, valid file;
//   writer-*.gguf   tiny files from lift's writer covering every value and supported type.
// Built and run by scripts/make_fuzz_seeds.sh; usage: make_fuzz_seeds OUTDIR MODELS_DIR.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace fs = std::filesystem;
using lift::GgmlType;
using lift::gguf::File;
using lift::gguf::TensorInfo;
using lift::gguf::Value;
using lift::gguf::ValueType;
using lift::gguf::Writer;

namespace {

constexpr size_t kMaxSeed = 64 * 1024;

void save(const fs::path& path, const uint8_t* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, n, f) != n || std::fclose(f) != 0) {
    throw lift::Error(path.string() + ": cannot write seed");
  }
}
void save(const fs::path& path, const std::vector<uint8_t>& b) { save(path, b.data(), b.size()); }

std::vector<uint8_t> read_prefix(const fs::path& path, size_t n) {
  std::vector<uint8_t> b(n);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw lift::Error(path.string() + ": cannot read");
  b.resize(std::fread(b.data(), 1, n, f));
  std::fclose(f);
  return b;
}

// The model rebuilt small: arrays keep at most `max_elems` elements, strings at most 256
// bytes, every tensor keeps its name, type and dimension count but holds one block.
std::vector<uint8_t> shrink(const File& f, uint64_t max_elems) {
  Writer w(static_cast<uint32_t>(f.alignment()));
  for (const auto& [key, v] : f.metadata()) {
    if (key == "general.alignment") continue;  // the writer adds it from its own alignment
    if (v.type == ValueType::ARRAY && v.elem_type == ValueType::ARRAY) continue;
    Value c = v;
    if (c.type == ValueType::STRING) c.str = c.str.substr(0, 256);
    if (c.type == ValueType::ARRAY && c.count > max_elems) {
      c.count = max_elems;
      if (c.elem_type == ValueType::STRING) c.strings.resize(max_elems);
    }
    w.copy_value(key, c);
  }
  for (const TensorInfo& t : f.tensors()) {
    const auto& info = lift::ggml_type_info(t.type);
    std::vector<uint64_t> ne(t.n_dims, 1);
    ne[0] = info.block_elems;
    const size_t n = std::min<size_t>(info.block_bytes, t.n_bytes);
    w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + n));
  }
  return w.to_bytes();
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.begin(), b.size());
  return b;
}

void writer_seeds(const fs::path& out) {
  {
    Writer w;
    save(out / "writer-empty.gguf", w.to_bytes());
  }
  {
    Writer w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 1);
    w.set_i32("i32", -7);
    w.set_u64("u64", 1ull << 40);
    w.set_f32("f32", 0.5f);
    w.set_bool("bool", true);
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b"});
    w.set_f32_array("tokenizer.ggml.scores", {0.f, 0.f, 0.f, -1.f, -2.f});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
    Value v;
    v.type = ValueType::UINT8;
    v.u = 9;
    w.copy_value("u8", v);
    v.type = ValueType::INT16;
    v.i = -300;
    w.copy_value("i16", v);
    v.type = ValueType::FLOAT64;
    v.f = 0.25;
    w.copy_value("f64", v);
    v.type = ValueType::INT64;
    v.i = -1;
    w.copy_value("i64", v);
    save(out / "writer-metadata.gguf", w.to_bytes());
  }
  {
    Writer w;
    w.set_string("general.architecture", "llama");
    const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q8_0,
                              GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,
                              GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
    for (GgmlType t : types) {
      const auto& info = lift::ggml_type_info(t);
      const std::string name = "w." + std::string(info.name);
      w.add_tensor(name, t, {info.block_elems, 2},
                   std::vector<uint8_t>(2 * info.block_bytes, 0x11));
    }
    w.add_tensor("norm", GgmlType::F32, {4}, f32_bytes({1.f, 1.f, 1.f, 1.f}));
    w.add_tensor("cube", GgmlType::F32, {2, 2, 2, 2}, std::vector<uint8_t>(64, 0));
    save(out / "writer-tensors.gguf", w.to_bytes());
  }
  {
    Writer w(64);
    w.set_string("general.architecture", "llama");
    w.add_tensor("a", GgmlType::F32, {3}, f32_bytes({1.f, 2.f, 3.f}));
    w.add_tensor("b", GgmlType::F16, {8}, std::vector<uint8_t>(16, 0x3c));
    save(out / "writer-align64.gguf", w.to_bytes());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds OUTDIR MODELS_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path models = argv[2];
  try {
    fs::create_directories(out);
    writer_seeds(out);
    size_t n_models = 0;
    std::vector<fs::path> paths;
    if (fs::exists(models)) {
      for (const auto& e : fs::recursive_directory_iterator(models)) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") paths.push_back(e.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      const File f = File::open(p.string());
      const std::string stem = p.stem().string();
      if (f.data_offset() <= kMaxSeed) {
        save(out / (stem + ".head"), read_prefix(p, static_cast<size_t>(f.data_offset())));
      }
      std::vector<uint8_t> small;
      for (uint64_t cap = 512; cap >= 1; cap /= 2) {
        small = shrink(f, cap);
        if (small.size() <= kMaxSeed) break;
      }
      if (small.size() <= kMaxSeed) {
        (void)File::parse(small, stem + ".small");  // a seed that does not parse is a bug here
        save(out / (stem + ".small.gguf"), small);
      } else {
        std::cerr << p << ": too large to shrink under 64 KiB, skipped\n";
      }
      ++n_models;
    }
    std::cout << "wrote seeds for " << n_models << " models and 4 writer files to " << out << "\n";
  } catch (const std::exception& e) {
    std::cerr << "make_fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
