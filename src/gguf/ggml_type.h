// The ggml tensor type table: every type id GGUF files may carry, with its block geometry.
// The reader uses it to size tensors even for types lift cannot compute with, so that an
// unsupported type is reported by name instead of being misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lift {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  std::string_view name;  // empty for ids that were never used or were removed
  uint32_t block_elems;   // elements per block (1 for plain scalar types)
  uint32_t block_bytes;   // bytes per block; 0 for ids that are not valid
  bool removed;           // id existed once (e.g. Q4_2, Q4_0_4_4) and is no longer valid
};

// Information for a raw type id; ids out of range give an invalid entry (block_bytes == 0).
const GgmlTypeInfo& ggml_type_info(uint32_t id);
inline const GgmlTypeInfo& ggml_type_info(GgmlType t) {
  return ggml_type_info(static_cast<uint32_t>(t));
}
std::string_view ggml_type_name(GgmlType t);

// Bytes of a row of `elems` elements; elems must be a multiple of the block size.
inline size_t ggml_row_bytes(GgmlType t, size_t elems) {
  const auto& info = ggml_type_info(t);
  return elems / info.block_elems * info.block_bytes;
}

// Types the compute kernels support (dequantize and dot product): the codec table's types
// (kernels/codec.h; a kernels test checks the two agree).
bool ggml_type_supported(GgmlType t);

}  // namespace lift
