// The K-quant super-blocks (Q2_K .. Q6_K, IQ4_XS) in one integer form: every value of each is
//   y[e] = (d * sc[k]) * q[e] - (dmin * m[k]),   k = e / sub_len,
// with q, sc and m small integers (Q3_K and Q6_K have no min term). The decoders below and the
// integer dot products against Q8_K activations all start from this form, so a K type's bit
// layout is spelled out once, here (FORMATS.md has the layouts and known-answer blocks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {

// Per-type facts of the integer form (kIsK is false for every other block type).
template <class Block>
struct KTraits {
  static constexpr bool kIsK = false;
};
template <>
struct KTraits<BlockQ2_K> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 16;
  static constexpr bool kHasMin = true;
};
template <>
struct KTraits<BlockQ3_K> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 16;
  static constexpr bool kHasMin = false;
};
template <>
struct KTraits<BlockQ4_K> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 32;
  static constexpr bool kHasMin = true;
};
template <>
struct KTraits<BlockQ5_K> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 32;
  static constexpr bool kHasMin = true;
};
template <>
struct KTraits<BlockQ6_K> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 16;
  static constexpr bool kHasMin = false;
};

template <>
struct KTraits<BlockIQ4_XS> {
  static constexpr bool kIsK = true;
  static constexpr size_t kSubLen = 32;
  static constexpr bool kHasMin = false;
};

struct KCodes {
  float d = 0.0f;
  float dmin = 0.0f;  // 0 for types without a min term
  int8_t q[kKBlock];
  int32_t sc[16];  // kKBlock / kSubLen entries used
  int32_t m[16];
};

inline namespace LIFT_TARGET_NS {

// Q4_K/Q5_K: 6-bit scale and min of sub-block k (0..7) from the 12 packed bytes.
inline void k_scale_min(const uint8_t s[12], int k, int32_t& sc, int32_t& m) {
  if (k < 4) {
    sc = s[k] & 63;
    m = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 0x0F) | ((s[k - 4] >> 6) << 4);
    m = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

inline void k_codes(const BlockQ2_K& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  c.dmin = f16_to_f32(b.dmin);
  for (int k = 0; k < 16; ++k) {
    c.sc[k] = b.scales[k] & 0x0F;
    c.m[k] = b.scales[k] >> 4;
  }
  // Element e: half e/128, bit pair (e%128)/32 of qs[32 * half + e%32].
  for (int e = 0; e < 256; ++e) {
    const int shift = 2 * ((e % 128) / 32);
    c.q[e] = static_cast<int8_t>((b.qs[32 * (e / 128) + e % 32] >> shift) & 3);
  }
}

inline void k_codes(const BlockQ3_K& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  for (int k = 0; k < 16; ++k) {
    const int low = k < 8 ? b.scales[k % 8] & 0x0F : b.scales[k % 8] >> 4;
    const int high = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    c.sc[k] = (low | (high << 4)) - 32;
  }
  // Low two bits as in Q2_K; a clear bit e/32 of hmask[e%32] subtracts 4.
  for (int e = 0; e < 256; ++e) {
    const int shift = 2 * ((e % 128) / 32);
    const int low = (b.qs[32 * (e / 128) + e % 32] >> shift) & 3;
    const bool high = ((b.hmask[e % 32] >> (e / 32)) & 1) != 0;
    c.q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
}

// Q4_K/Q5_K low bits: chunk e/64 uses qs[32 * chunk ..]; the low nibble holds the chunk's first
// 32 elements, the high nibble the next 32.
inline int k_nibble(const uint8_t qs[128], int e) {
  const uint8_t byte = qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? byte & 0x0F : byte >> 4;
}

inline void k_codes(const BlockQ4_K& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  c.dmin = f16_to_f32(b.dmin);
  for (int k = 0; k < 8; ++k) k_scale_min(b.scales, k, c.sc[k], c.m[k]);
  for (int e = 0; e < 256; ++e) c.q[e] = static_cast<int8_t>(k_nibble(b.qs, e));
}

inline void k_codes(const BlockQ5_K& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  c.dmin = f16_to_f32(b.dmin);
  for (int k = 0; k < 8; ++k) k_scale_min(b.scales, k, c.sc[k], c.m[k]);
  // Bit 4 of element e is bit e/32 of qh[e%32].
  for (int e = 0; e < 256; ++e) {
    const int high = (b.qh[e % 32] >> (e / 32)) & 1;
    c.q[e] = static_cast<int8_t>(k_nibble(b.qs, e) | (high << 4));
  }
}

inline void k_codes(const BlockQ6_K& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  for (int k = 0; k < 16; ++k) c.sc[k] = b.scales[k];
  // Half n = e/128; quarter s = (e%128)/32 and l = e%32: low 4 bits from ql[64n + 32(s%2) + l]
  // (low nibble for s < 2), high 2 bits from bits 2s..2s+1 of qh[32n + l].
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, s = (e % 128) / 32, l = e % 32;
    const uint8_t lo = b.ql[64 * n + 32 * (s % 2) + l];
    const int low = s < 2 ? lo & 0x0F : lo >> 4;
    const int high = (b.qh[32 * n + l] >> (2 * s)) & 3;
    c.q[e] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// IQ4_XS: element e's level index, nibble (e % 32) / 16 of qs[16 (e / 32) + e % 16].
inline int iq4_xs_index(const BlockIQ4_XS& b, size_t e) {
  const uint8_t byte = b.qs[16 * (e / 32) + e % 16];
  return e % 32 < 16 ? byte & 0x0F : byte >> 4;
}

inline void k_codes(const BlockIQ4_XS& b, KCodes& c) {
  c.d = f16_to_f32(b.d);
  for (int k = 0; k < 8; ++k) {
    const int low = (b.scales_l[k / 2] >> (4 * (k % 2))) & 0x0F;
    const int high = (b.scales_h >> (2 * k)) & 3;
    c.sc[k] = (low | (high << 4)) - 32;
  }
  for (size_t e = 0; e < 256; ++e) c.q[e] = kIq4NlLevels[iq4_xs_index(b, e)];
}

// ggml's to_float: the sub-block scale d * sc (and min dmin * m) rounded to float once, then one
// multiply and one subtract per element (no FMA).
template <class Block>
inline void k_decode(const Block& b, float* y) {
  KCodes c;
  k_codes(b, c);
  constexpr size_t kSub = KTraits<Block>::kSubLen;
  for (size_t k = 0; k < kKBlock / kSub; ++k) {
    const float dl = c.d * static_cast<float>(c.sc[k]);
    if constexpr (KTraits<Block>::kHasMin) {
      const float ml = c.dmin * static_cast<float>(c.m[k]);
      for (size_t i = k * kSub; i < (k + 1) * kSub; ++i) {
        const float v = dl * static_cast<float>(c.q[i]);
        y[i] = v - ml;
      }
    } else {
      for (size_t i = k * kSub; i < (k + 1) * kSub; ++i) y[i] = dl * static_cast<float>(c.q[i]);
    }
  }
}

// The exact integer parts of one super-block's dot with a Q8_K block:
//   sumi = sum_k sc[k] * sum_{e in k} q[e] * x[e],   summ = sum_k m[k] * sum_{e in k} x[e]
// (sub-block sums of x from bsums). The float result is d_x * (d * sumi - dmin * summ).
template <class Block>
inline void k_int_dot(const KCodes& c, const BlockQ8_K& x, int32_t& sumi, int32_t& summ) {
  constexpr size_t kSub = KTraits<Block>::kSubLen;
  sumi = 0;
  summ = 0;
  for (size_t k = 0; k < kKBlock / kSub; ++k) {
    int32_t is = 0;
    for (size_t i = k * kSub; i < (k + 1) * kSub; ++i) is += c.q[i] * x.qs[i];
    sumi += c.sc[k] * is;
    if constexpr (KTraits<Block>::kHasMin) {
      int32_t xs = 0;
      for (size_t j = k * kSub / 16; j < (k + 1) * kSub / 16; ++j) xs += x.bsums[j];
      summ += c.m[k] * xs;
    }
  }
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
