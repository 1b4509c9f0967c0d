// Row decoding of weight formats to float32, bit-exact with ggml's reference to_float.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.h"

namespace lift::kernels {

// Decodes n elements (a whole number of blocks: 32 or 256 elements) starting at src into dst.
// Supports every type of the codec table (codec.h); throws std::invalid_argument naming the
// type otherwise, or when n is not a whole number of blocks.
void dequantize_row(GgmlType t, const void* src, float* dst, size_t n);

}  // namespace lift::kernels
