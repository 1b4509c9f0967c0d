// Per-block scalar decoders shared by dequantize_row, the scalar matmul and the reference matmul.
// They spell out ggml's arithmetic exactly: an int code converted to float, one float multiply by
// the scale, and for the _1 types a separate float add of m (no FMA), so every path that decodes a
// weight gets the very same float.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {
inline namespace LIFT_TARGET_NS {

// Blocks are read through memcpy: the source is raw file/buffer bytes with no alignment promise.
template <class Block>
inline Block load_block(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

// Integer codes of one block, as the integer dot product sees them: signed (q - offset) for the
// _0 types, unsigned q for the _1 types (whose offset lives in m).
inline void block_codes(const BlockQ8_0& b, int32_t q[32]) {
  for (int i = 0; i < 32; ++i) q[i] = b.qs[i];
}
inline void block_codes(const BlockQ4_0& b, int32_t q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 0x0F) - 8;
    q[j + 16] = (b.qs[j] >> 4) - 8;
  }
}
inline void block_codes(const BlockQ4_1& b, int32_t q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
}
inline void block_codes(const BlockQ5_0& b, int32_t q[32]) {
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int32_t>((b.qs[j] & 0x0Fu) | (((qh >> j) & 1u) << 4)) - 16;
    q[j + 16] = static_cast<int32_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
  }
}
inline void block_codes(const BlockQ5_1& b, int32_t q[32]) {
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int32_t>((b.qs[j] & 0x0Fu) | (((qh >> j) & 1u) << 4));
    q[j + 16] = static_cast<int32_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

// IQ4_NL: the nibbles (in Q4_0's order) index ggml's fixed table of levels.
inline void block_codes(const BlockIQ4_NL& b, int32_t q[32]) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kIq4NlLevels[b.qs[j] & 0x0F];
    q[j + 16] = kIq4NlLevels[b.qs[j] >> 4];
  }
}

// Decoded values: d * q for the _0 types (and IQ4_NL), d * q + m for the _1 types.
template <class Block>
inline void dequant_block(const Block& b, float y[32]) {
  int32_t q[32];
  block_codes(b, q);
  const float d = f16_to_f32(b.d);
  if constexpr (requires { b.m; }) {
    const float m = f16_to_f32(b.m);
    for (int i = 0; i < 32; ++i) {
      const float dq = d * static_cast<float>(q[i]);
      y[i] = dq + m;
    }
  } else {
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q[i]);
  }
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
