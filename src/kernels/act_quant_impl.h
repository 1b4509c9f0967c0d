// Per-Isa entry points behind quantize_activation_row (internal to src/kernels).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/target.h"

namespace lift::kernels::detail {

// n is a multiple of 32; with_sum selects Q8_1 (d, s, qs) over Q8_0 (d, qs) blocks.
void quantize_q8_scalar(const float* x, size_t n, uint8_t* dst, bool with_sum);
void quantize_q8_avx2(const float* x, size_t n, uint8_t* dst, bool with_sum);
void quantize_q8_avx512(const float* x, size_t n, uint8_t* dst, bool with_sum);
// Q8_K blocks (n a multiple of 256), the same bits on every Isa.
void quantize_q8_k(const float* x, size_t n, uint8_t* dst);
void quantize_q8_k_avx512(const float* x, size_t n, uint8_t* dst);

// Shared by all versions so that the scalar steps (d, id, s) are the same code.
inline namespace LIFT_TARGET_NS {
inline float q8_inverse_scale(float amax) { return amax != 0.0f ? 127.0f / amax : 0.0f; }
}  // namespace LIFT_TARGET_NS

}  // namespace lift::kernels::detail
