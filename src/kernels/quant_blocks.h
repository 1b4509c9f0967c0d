// Byte layouts of the block formats (see shared/models/quantized/FORMATS.md): the 32-element
// ones, the 256-element K-quant super-blocks and the Q8_K activation blocks.
// Scales are kept as raw f16 bits and the 5th-bit masks as bytes: the structs then have no
// padding and alignment 2, so a row of blocks can be overlaid on mmapped file data.
// Multi-byte fields are little-endian, which is what x86 reads natively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/target.h"

namespace lift::kernels {

inline constexpr size_t kQBlock = 32;   // elements per block of the 32-element formats
inline constexpr size_t kKBlock = 256;  // elements per K-quant super-block

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in its high nibble
};

struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;  // f16 offset
  uint8_t qs[16];
};

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // little-endian u32: bit e is the 5th bit of element e
  uint8_t qs[16];
};

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};

// IQ4_NL: Q4_0's layout, but the nibble indexes a fixed non-linear table of int8 levels.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// The levels plus 128 (1..241) as the unsigned bytes vpdpbusd takes: a byte-shuffle table for
// the IQ4_NL and IQ4_XS panels.
struct Iq4NlShifted {
  alignas(16) uint8_t v[16];
};
inline constexpr Iq4NlShifted kIq4NlShifted = [] {
  Iq4NlShifted t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(kIq4NlLevels[i] + 128);
  return t;
}();

// Q2_K: 16 sub-blocks of 16; scales[k] = 4-bit scale (low) | 4-bit min (high); 2-bit codes.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};

// Q3_K: 16 sub-blocks of 16 with 6-bit scales (stored s + 32); 2 low bits in qs, 3rd bit in
// hmask (clear means subtract 4).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};

// Q4_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in scales[12].
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};

// Q5_K: Q4_K plus a 5th bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};

// Q6_K: 16 sub-blocks of 16 with int8 scales; 6-bit codes offset by 32 (4 low bits in ql, 2
// high bits in qh).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// IQ4_XS: 8 sub-blocks of 32 whose nibbles index IQ4_NL's levels (low nibbles of qs[16k..16k+15]
// are elements 0-15 of sub-block k, high nibbles 16-31); sub-block k's scale is d * (ls - 32),
// ls's low 4 bits nibble k % 2 of scales_l[k / 2] and its high 2 bits bits 2k..2k+1 of scales_h.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

// Activation format of K-quant matmuls (llama.cpp's Q8_K): f32 scale, 256 codes and the sums
// of each 16 codes.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

// Activation format of Q4_1/Q5_1 matmuls: s = d * sum(qs) carries the m-term of the weight.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};

// Sizes must equal the ggml type table (tests also compare against ggml_type_info()).
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

inline namespace LIFT_TARGET_NS {
inline uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}
}  // namespace LIFT_TARGET_NS

}  // namespace lift::kernels
