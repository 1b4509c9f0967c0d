// Float32 -> weight formats: the inverse of dequantize_row, used to write GGUF files (synthetic
// models, tests). Not on the inference path, so it favours clarity over speed, though a row of a
// billion-parameter model still quantizes in well under a second.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.h"

namespace lift::kernels {

// Encodes n float32 values (a multiple of 32 for block types, of 256 for K types) into
// ggml_row_bytes(t, n) bytes at dst, in the GGUF layout of t. Supports F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K to Q6_K and IQ4_XS (quantize_kquant.cpp describes the K
// ones); throws std::invalid_argument naming the type otherwise, or when n is not a whole number of
// blocks. Per 32-element block:
//   Q8_0       d = max|x| / 127, q = round(x / d) in -127..127;
//   Q4_0/Q5_0  d = m / -8 (resp. -16) where m is the element of largest magnitude, sign kept,
//              q = round(x / d) + 8 (resp. 16) clamped to 0..15 (0..31), so m itself is exact;
//   Q4_1/Q5_1  m = min, d = (max - min) / 15 (resp. 31), q = round((x - m) / d);
//   IQ4_NL     d = m / -127 (m as for Q4_0), q the index of the level nearest x / d;
// with scales stored as f16 and all-zero (or constant) blocks encoded with d = 0.
// x must be finite.
void quantize_row(GgmlType t, const float* x, void* dst, size_t n);

}  // namespace lift::kernels
