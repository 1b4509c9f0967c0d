// Encoders of single 256-element K-quant super-blocks behind quantize_row (internal).
#pragma once

#include <cstdint>

namespace lift::kernels::detail {

// Each writes one block (84, 110, 144, 176, 210 or 136 bytes, no alignment needed) encoding
// x[0..255].
void quantize_q2_k(const float* x, uint8_t* dst);
void quantize_q3_k(const float* x, uint8_t* dst);
void quantize_q4_k(const float* x, uint8_t* dst);
void quantize_q5_k(const float* x, uint8_t* dst);
void quantize_q6_k(const float* x, uint8_t* dst);
void quantize_iq4_xs(const float* x, uint8_t* dst);

}  // namespace lift::kernels::detail
