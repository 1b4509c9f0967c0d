#include "model/layer_prefix.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace lift {

namespace {

// The block index of a tensor named "blk.<i>.*", or -1 for the tensors outside the blocks.
long block_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  name.remove_prefix(kPrefix.size());
  long i = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), i);
  if (ec != std::errc() || end == name.data() + name.size() || *end != '.') return -1;
  return i;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

}  // namespace

void write_layer_prefix(const std::string& in, const std::string& out, int n_layers) {
  // Writing over the mapped input would cut the mapping from under the copy.
  if (same_file(in, out)) throw Error(out + ": is the input model; choose another output path");
  const gguf::File f = gguf::File::open(in);
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(in + ": metadata key general.architecture is missing");
  const std::string count_key = std::string(*arch) + ".block_count";
  const auto blocks = f.get_uint(count_key);
  if (!blocks) throw Error(in + ": metadata key " + count_key + " is missing");
  if (n_layers < 1 || static_cast<uint64_t>(n_layers) > *blocks) {
    throw Error("--layers " + std::to_string(n_layers) + ": " + in + " has " +
                std::to_string(*blocks) + " layers; keep 1 to " + std::to_string(*blocks));
  }
  const auto kept = static_cast<uint64_t>(n_layers);

  gguf::Writer w(static_cast<uint32_t>(f.alignment()));
  const std::string arch_prefix = std::string(*arch) + ".";
  for (const auto& [key, value] : f.metadata()) {
    if (key == "general.alignment") continue;  // the writer adds it for its own alignment
    gguf::Value v = value;
    if (key == count_key) {
      v.u = kept;  // same value type as the input's
      v.i = static_cast<int64_t>(kept);
    } else if (v.type == gguf::ValueType::ARRAY && v.count == *blocks &&
               key.substr(0, arch_prefix.size()) == arch_prefix) {
      // One entry per block (e.g. attention.sliding_window_pattern's flags).
      v.count = kept;
      if (v.elem_type == gguf::ValueType::STRING) v.strings.resize(kept);
    }
    w.copy_value(key, v);
  }
  std::vector<bool> has_tensors(kept, false);
  for (const gguf::TensorInfo& t : f.tensors()) {
    const long b = block_of(t.name);
    if (b >= n_layers) continue;
    if (b >= 0) has_tensors[static_cast<size_t>(b)] = true;
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    const uint8_t* src = t.data;
    w.add_tensor(t.name, t.type, std::move(ne),
                 [src](uint8_t* dst, size_t n) { std::memcpy(dst, src, n); });
  }
  for (size_t b = 0; b < kept; ++b) {
    if (!has_tensors[b]) {
      throw Error(in + ": no tensor of block " + std::to_string(b) + " (blk." + std::to_string(b) +
                  ".*): not a model with weights");
    }
  }
  w.write(out);
}

}  // namespace lift
