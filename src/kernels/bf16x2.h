// Activations as the sum of two bf16 values, the operand format of the AMX prompt-row products
// for F16/BF16 weights (kernels/panel_amx.h). x = hi + lo with hi = x rounded to bf16 (nearest,
// ties to even) and lo = x - hi rounded the same way: 16 significant bits, against llama.cpp's 11
// (it rounds these activations to f16). Subnormal inputs of either step become signed zero, as
// the tile multiplier reads them, so a value means the same to every path.
#pragma once

#include <cstdint>

#include "kernels/target.h"

namespace lift::kernels {
inline namespace LIFT_TARGET_NS {

// f32 bits rounded to the 16 bits of a bf16; subnormals flushed to signed zero. x finite.
inline uint16_t bf16_round(uint32_t bits) {
  if ((bits & 0x7F800000u) == 0) return static_cast<uint16_t>((bits & 0x80000000u) >> 16);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

inline float bf16_value(uint16_t h) { return bits_as<float>(static_cast<uint32_t>(h) << 16); }

// The exact difference x - hi (|x - hi| <= half a bf16 step of x, so f32 holds it) is what lo
// rounds.
inline void split_bf16x2(float x, uint16_t& hi, uint16_t& lo) {
  hi = bf16_round(bits_as<uint32_t>(x));
  lo = bf16_round(bits_as<uint32_t>(x - bf16_value(hi)));
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
