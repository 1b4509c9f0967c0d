// Exact scalar conversions between float32 and the two 16-bit float formats found in GGUF files.
// Weights and block scales are stored as f16/bf16; every kernel widens them with these (or with
// a SIMD conversion that must agree bit for bit), so they are the ground truth for rounding.
#pragma once

#include <cstdint>

#include "kernels/target.h"

namespace lift::kernels {
inline namespace LIFT_TARGET_NS {

// IEEE binary16 -> float32. Every half is exactly representable, so this never rounds.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    // Subnormal or zero: mant * 2^-24 is exact in float32.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return bits_as<float>(bits_as<uint32_t>(mag) | sign);
  }
  if (exp == 31) {
    // Inf keeps its sign; NaN is made quiet, as the F16C instruction does.
    const uint32_t quiet = mant != 0 ? 0x400000u : 0u;
    return bits_as<float>(sign | 0x7F800000u | quiet | (mant << 13));
  }
  return bits_as<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float32 -> binary16 with round-to-nearest-even, as F16C's vcvtps2ph with imm 0 does:
// overflow goes to inf, tiny values to subnormals or signed zero, NaN stays a quiet NaN.
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = bits_as<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  uint32_t h;
  if (ax >= 0x7F800000u) {
    h = ax == 0x7F800000u ? 0x7C00u : 0x7E00u | ((ax >> 13) & 0x3FFu);
  } else if (ax >= 0x477FF000u) {
    h = 0x7C00u;  // >= 65520 is at or past the midpoint to 2^16, which rounds (even) to inf
  } else if (ax >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) and round off 13 mantissa bits.
    h = (ax - 0x38000000u) >> 13;
    const uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  } else if (ax > 0x33000000u) {
    // Subnormal half: value / 2^-24 rounded to an integer. (2^-25 itself ties down to zero.)
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;
  } else {
    h = 0;
  }
  return static_cast<uint16_t>(sign | h);
}

// bfloat16 is the top half of a float32, so widening is a shift.
inline float bf16_to_f32(uint16_t b) { return bits_as<float>(static_cast<uint32_t>(b) << 16); }

// float32 -> bfloat16, round-to-nearest-even; NaN is kept quiet (bit 6 of the result set) so that
// rounding can never turn it into inf.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = bits_as<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
