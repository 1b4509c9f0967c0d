// Reader for GGUF v2/v3 model files: the file is memory-mapped and every tensor is a
// zero-copy view into the mapping. Parsing validates everything it reads, so a corrupt or
// hostile file is rejected with a lift::Error naming the problem, never a crash, an
// out-of-bounds read or an allocation sized by an untrusted count.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/ggml_type.h"

namespace lift::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);
// Bytes of one scalar of this type; 0 for STRING and ARRAY.
size_t value_type_size(ValueType t);

// A metadata value. Strings and arrays are views into the mapped file.
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string_view str;
  // Arrays: element type and count; numeric elements stay packed little-endian at `raw`,
  // string elements are listed in `strings`. Nested arrays keep only their count.
  ValueType elem_type = ValueType::UINT8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;
  std::vector<std::string_view> strings;
};

struct TensorInfo {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;                     // from the start of the data section
  uint64_t n_elems = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;
};

class File {
 public:
  // Maps and parses the file; throws lift::Error with the path and the problem.
  static File open(const std::string& path);
  // Parses a buffer the caller keeps alive (fuzzing, tests). No copy is made.
  static File parse(std::span<const uint8_t> bytes, std::string label = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Start of the tensor data section; never past file_size() (a file without tensors may
  // end before the aligned offset, and then this is file_size()).
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return bytes_.size(); }
  const std::string& path() const { return label_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent; lift::Error when present with a type
  // that cannot represent the request (e.g. a string where a number is expected).
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;    // any integer type
  std::optional<uint64_t> get_uint(std::string_view key) const;  // non-negative integer
  std::optional<double> get_float(std::string_view key) const;   // any float or integer
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Tells the OS it may drop the mapped pages inside [p, p + n) (whole pages only): for data
  // the caller has copied elsewhere. The bytes stay readable (they are read back from the file
  // if touched again). No-op for parsed buffers.
  void release(const void* p, size_t n) const;
  const TensorInfo* find_tensor(std::string_view name) const;
  // Throws lift::Error naming the tensor when it is absent.
  const TensorInfo& tensor(std::string_view name) const;

 private:
  File() = default;
  void parse_all();

  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::span<const uint8_t> bytes_;
  std::string label_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, Value>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace lift::gguf
