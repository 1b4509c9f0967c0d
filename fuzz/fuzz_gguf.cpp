// libFuzzer target for the GGUF reader: any byte string must either parse or be rejected with
// lift::Error. On success every metadata value and the first and last byte of every tensor are
// read, so that AddressSanitizer catches a view that points outside the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace {

volatile uint64_t g_sink = 0;  // keeps the reads from being optimised away

uint64_t touch(std::string_view s) {
  uint64_t h = s.size();
  if (!s.empty()) h += static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
  return h;
}

uint64_t touch_value(const lift::gguf::File& f, std::string_view key, const lift::gguf::Value& v) {
  using lift::gguf::ValueType;
  uint64_t h = touch(key) + static_cast<uint64_t>(v.type);
  try {
    switch (v.type) {
      case ValueType::STRING:
        h += touch(*f.get_string(key));
        break;
      case ValueType::BOOL:
        h += *f.get_bool(key) ? 1 : 0;
        break;
      case ValueType::FLOAT32:
      case ValueType::FLOAT64:
        h += static_cast<uint64_t>(*f.get_float(key) != 0.0);
        break;
      case ValueType::ARRAY:
        h += v.count;
        if (v.elem_type == ValueType::STRING) {
          const auto strings = f.get_string_array(key);
          for (std::string_view s : *strings) h += touch(s);
        } else if (v.elem_type == ValueType::FLOAT32 || v.elem_type == ValueType::FLOAT64) {
          const auto floats = f.get_float_array(key);
          for (float x : *floats) h += static_cast<uint64_t>(x > 0.0f);
        } else if (v.elem_type != ValueType::ARRAY && v.elem_type != ValueType::BOOL) {
          const auto ints = f.get_int_array(key);
          for (int64_t x : *ints) h += static_cast<uint64_t>(x);
          const auto floats = f.get_float_array(key);
          for (float x : *floats) h += static_cast<uint64_t>(x > 0.0f);
        }
        break;
      default:  // integers
        h += static_cast<uint64_t>(*f.get_int(key));
        break;
    }
  } catch (const lift::Error&) {
    // get_int on a u64 above INT64_MAX is reported, not wrapped: an expected outcome.
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const lift::gguf::File f = lift::gguf::File::parse(std::span<const uint8_t>(data, size));
    uint64_t h = f.version() + f.alignment() + f.data_offset();
    if (f.data_offset() > f.file_size()) __builtin_trap();
    for (const auto& [key, value] : f.metadata()) {
      h += touch_value(f, key, value);
      if (f.find(key) != &value) __builtin_trap();  // the index must agree with the list
    }
    for (const lift::gguf::TensorInfo& t : f.tensors()) {
      if (t.n_bytes == 0 || t.data == nullptr) __builtin_trap();
      h += touch(t.name) + t.data[0] + t.data[t.n_bytes - 1];
      if (f.find_tensor(t.name) != &t) __builtin_trap();
    }
    g_sink = g_sink + h;
  } catch (const lift::Error&) {
    // Rejected input: the expected outcome for almost everything the fuzzer produces.
  }
  return 0;
}
