// Writes GGUF v3 files: used by the synthetic-model tool and by tests that need small or
// deliberately broken files. Tensor data is produced one tensor at a time while writing, so
// a multi-gigabyte model never has to fit in memory at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"

namespace lift::gguf {

class Writer {
 public:
  explicit Writer(uint32_t alignment = 32) : alignment_(alignment) {}

  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_f32(std::string_view key, float v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, const std::vector<std::string_view>& v);
  void set_f32_array(std::string_view key, const std::vector<float>& v);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v);
  // Copies a metadata value (any type, arrays included) from another file.
  void copy_value(std::string_view key, const Value& v);

  using Fill = std::function<void(uint8_t* dst, size_t n_bytes)>;
  // ne[0] is the contiguous dimension, as in ggml.
  void add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne, Fill fill);
  void add_tensor(std::string_view name, GgmlType type, std::vector<uint64_t> ne,
                  std::vector<uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws lift::Error on I/O failure

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t n_bytes;
    Fill fill;
  };
  void put_key(std::string_view key, ValueType t);
  void emit(const std::function<void(const uint8_t*, size_t)>& sink) const;

  uint32_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_bytes_;
  std::vector<Tensor> tensors_;
};

}  // namespace lift::gguf
