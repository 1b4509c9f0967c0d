// Row decoding of weight formats to float32, bit-exact with ggml's reference to_float.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.h"

namespace lift::kernels {

// Decodes n elements (a multiple of 32 for block types) starting at src into dst.
// Supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; throws std::invalid_argument naming
// the type otherwise, or when n is not a whole number of blocks.
void dequantize_row(GgmlType t, const void* src, float* dst, size_t n);

}  // namespace lift::kernels
