// Byte layouts of the 32-element block formats (see shared/models/quantized/FORMATS.md).
// Scales are kept as raw f16 bits and the 5th-bit masks as bytes: the structs then have no
// padding and alignment 2, so a row of blocks can be overlaid on mmapped file data.
// Multi-byte fields are little-endian, which is what x86 reads natively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/target.h"

namespace lift::kernels {

inline constexpr size_t kQBlock = 32;  // elements per block of every format here

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

inline namespace LIFT_TARGET_NS {
inline uint32_t load_qh(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}
}  // namespace LIFT_TARGET_NS

}  // namespace lift::kernels
