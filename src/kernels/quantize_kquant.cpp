// Float32 -> Q2_K to Q6_K and IQ4_XS super-blocks (the types of the K-quant files), for
// synthetic models and tests. Scales are picked per sub-block from its range, then the
// sub-block scales are themselves quantized against the super-block's f16 d (and dmin); codes
// are rounded against the scales as they will decode, so the round trip error stays within
// half a code step plus the scale rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_impl.h"

namespace lift::kernels::detail {
namespace {

int nearest(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

// Affine K types: per sub-block of kKBlock / n_sub elements a range [lo, hi] with lo <= 0 (as
// ggml's mins are subtracted) and codes 0..levels; the sub-block steps and offsets quantized to
// 0..scale_max against the super-block's f16 d and dmin. Writes d, dmin, sc, m and q[256].
void affine_k(const float* x, size_t n_sub, int levels, int scale_max, uint16_t& d_out,
              uint16_t& dmin_out, int sc[16], int m[16], uint8_t q[kKBlock]) {
  const size_t len = kKBlock / n_sub;
  float step[16], mn[16];
  float max_step = 0.0f, max_mn = 0.0f;
  for (size_t k = 0; k < n_sub; ++k) {
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = len * k; i < len * k + len; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    step[k] = (hi - lo) / static_cast<float>(levels);
    mn[k] = -lo;
    max_step = std::max(max_step, step[k]);
    max_mn = std::max(max_mn, mn[k]);
  }
  d_out = f32_to_f16(max_step / static_cast<float>(scale_max));
  dmin_out = f32_to_f16(max_mn / static_cast<float>(scale_max));
  const float d = f16_to_f32(d_out), dmin = f16_to_f32(dmin_out);
  for (size_t k = 0; k < n_sub; ++k) {
    sc[k] = d > 0.0f ? nearest(step[k] / d, 0, scale_max) : 0;
    m[k] = dmin > 0.0f ? nearest(mn[k] / dmin, 0, scale_max) : 0;
    const float dl = d * static_cast<float>(sc[k]), ml = dmin * static_cast<float>(m[k]);
    for (size_t i = len * k; i < len * k + len; ++i) {
      q[i] = static_cast<uint8_t>(dl > 0.0f ? nearest((x[i] + ml) / dl, 0, levels) : 0);
    }
  }
}

// Q4_K/Q5_K: 8 sub-blocks of 32, 6-bit scales and mins. The 6-bit packing: bytes 0..3 scales
// 0..3, 4..7 mins 0..3, their top two bits the high bits of sub-blocks 4..7, whose low four
// bits fill bytes 8..11 (scale low, min high).
void affine_k6(const float* x, int levels, uint16_t& d, uint16_t& dmin, uint8_t sc6[12],
               uint8_t q[kKBlock]) {
  int sc[16], m[16];
  affine_k(x, 8, levels, 63, d, dmin, sc, m, q);
  for (size_t k = 0; k < 4; ++k) {
    sc6[k] = static_cast<uint8_t>((sc[k] & 63) | ((sc[k + 4] >> 4) << 6));
    sc6[k + 4] = static_cast<uint8_t>((m[k] & 63) | ((m[k + 4] >> 4) << 6));
    sc6[k + 8] = static_cast<uint8_t>((sc[k + 4] & 15) | ((m[k + 4] & 15) << 4));
  }
}

// Q2_K/Q3_K's 2-bit fields: element e in bits 2 ((e % 128) / 32) of qs[32 (e / 128) + e % 32].
void pack_bit_pairs(const uint8_t q[kKBlock], uint8_t qs[64]) {
  std::memset(qs, 0, 64);
  for (size_t e = 0; e < kKBlock; ++e) {
    uint8_t& byte = qs[32 * (e / 128) + e % 32];
    byte = static_cast<uint8_t>(byte | ((q[e] & 3) << (2 * ((e % 128) / 32))));
  }
}

// Low nibbles in the Q4_K order: chunk e/64, low nibble for its first 32 elements.
void pack_k_nibbles(const uint8_t q[kKBlock], uint8_t qs[128]) {
  std::memset(qs, 0, 128);
  for (size_t e = 0; e < kKBlock; ++e) {
    const size_t byte = 32 * (e / 64) + e % 32;
    qs[byte] = static_cast<uint8_t>(qs[byte] | ((q[e] & 15) << ((e % 64) < 32 ? 0 : 4)));
  }
}

}  // namespace

void quantize_q4_k(const float* x, uint8_t* dst) {
  BlockQ4_K b;
  uint8_t q[kKBlock];
  affine_k6(x, 15, b.d, b.dmin, b.scales, q);
  pack_k_nibbles(q, b.qs);
  std::memcpy(dst, &b, sizeof b);
}

void quantize_q5_k(const float* x, uint8_t* dst) {
  BlockQ5_K b;
  uint8_t q[kKBlock];
  affine_k6(x, 31, b.d, b.dmin, b.scales, q);
  pack_k_nibbles(q, b.qs);
  std::memset(b.qh, 0, sizeof b.qh);
  for (size_t e = 0; e < kKBlock; ++e) {
    b.qh[e % 32] = static_cast<uint8_t>(b.qh[e % 32] | (((q[e] >> 4) & 1) << (e / 32)));
  }
  std::memcpy(dst, &b, sizeof b);
}

// Q2_K: 16 sub-blocks of 16, codes 0..3, 4-bit scales and mins (scale low nibble, min high).
void quantize_q2_k(const float* x, uint8_t* dst) {
  BlockQ2_K b;
  uint8_t q[kKBlock];
  int sc[16], m[16];
  affine_k(x, 16, 3, 15, b.d, b.dmin, sc, m, q);
  for (size_t k = 0; k < 16; ++k) b.scales[k] = static_cast<uint8_t>(sc[k] | m[k] << 4);
  pack_bit_pairs(q, b.qs);
  std::memcpy(dst, &b, sizeof b);
}

// Signed 6-bit sub-block scales (Q3_K, IQ4_XS): per sub-block of kKBlock / n_sub elements a
// step m / lowest (m its element of largest magnitude, sign kept, which then lands on the
// lowest code), the steps quantized against d = max |step| / 31. Writes sc[0..n_sub) in
// -32..31 and returns d as f16.
uint16_t signed_k_scales(const float* x, size_t n_sub, float lowest, int* sc) {
  const size_t len = kKBlock / n_sub;
  float step[16], max_step = 0.0f;
  for (size_t k = 0; k < n_sub; ++k) {
    float m = 0.0f;
    for (size_t i = len * k; i < len * k + len; ++i) {
      if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    }
    step[k] = m / lowest;
    max_step = std::max(max_step, std::fabs(step[k]));
  }
  const uint16_t d_half = f32_to_f16(max_step / 31.0f);
  const float d = f16_to_f32(d_half);
  for (size_t k = 0; k < n_sub; ++k) sc[k] = d > 0.0f ? nearest(step[k] / d, -32, 31) : 0;
  return d_half;
}

// Q3_K: per 16-element sub-block a signed step m / -4, m its element of largest magnitude (which
// then lands exactly on code -4, as Q4_0 does it), the steps quantized to signed 6-bit scales
// against d = max |step| / 31; codes -4..3 as u = q + 4, the low two bits in qs, the third in
// hmask (bit e / 32 of hmask[e % 32]).
void quantize_q3_k(const float* x, uint8_t* dst) {
  BlockQ3_K b;
  std::memset(&b, 0, sizeof b);
  int scales[16];
  b.d = signed_k_scales(x, 16, -4.0f, scales);
  const float d = f16_to_f32(b.d);
  uint8_t u[kKBlock];
  for (size_t k = 0; k < 16; ++k) {
    const int sc = scales[k];
    const auto s6 = static_cast<unsigned>(sc + 32);
    b.scales[k % 8] = static_cast<uint8_t>(b.scales[k % 8] | (s6 & 15) << (k < 8 ? 0 : 4));
    b.scales[8 + k % 4] = static_cast<uint8_t>(b.scales[8 + k % 4] | (s6 >> 4) << (2 * (k / 4)));
    const float dl = d * static_cast<float>(sc);
    for (size_t i = 16 * k; i < 16 * k + 16; ++i) {
      u[i] = static_cast<uint8_t>((dl != 0.0f ? nearest(x[i] / dl, -4, 3) : 0) + 4);
    }
  }
  pack_bit_pairs(u, b.qs);
  for (size_t e = 0; e < kKBlock; ++e) {
    b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (u[e] >> 2) << (e / 32));
  }
  std::memcpy(dst, &b, sizeof b);
}

// Q6_K: per 16-element sub-block a symmetric step amax/31 (codes -32..31 around 0), the steps
// quantized to int8 scales against d = max step / 127.
void quantize_q6_k(const float* x, uint8_t* dst) {
  BlockQ6_K b;
  float step[16], max_step = 0.0f;
  for (size_t k = 0; k < 16; ++k) {
    float amax = 0.0f;
    for (size_t i = 16 * k; i < 16 * k + 16; ++i) amax = std::max(amax, std::fabs(x[i]));
    step[k] = amax / 31.0f;
    max_step = std::max(max_step, step[k]);
  }
  b.d = f32_to_f16(max_step / 127.0f);
  const float d = f16_to_f32(b.d);
  uint8_t u[kKBlock];  // q + 32
  for (size_t k = 0; k < 16; ++k) {
    const int sc = d > 0.0f ? nearest(step[k] / d, 0, 127) : 0;
    b.scales[k] = static_cast<int8_t>(sc);
    const float dl = d * static_cast<float>(sc);
    for (size_t i = 16 * k; i < 16 * k + 16; ++i) {
      u[i] = static_cast<uint8_t>((dl > 0.0f ? nearest(x[i] / dl, -32, 31) : 0) + 32);
    }
  }
  // Half n, quarter s, position l: low 4 bits into ql[64n + 32(s%2) + l] (high nibble when
  // s >= 2), high 2 bits into bits 2s of qh[32n + l].
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (size_t e = 0; e < kKBlock; ++e) {
    const size_t n = e / 128, s = (e % 128) / 32, l = e % 32;
    uint8_t& lo = b.ql[64 * n + 32 * (s % 2) + l];
    lo = static_cast<uint8_t>(lo | ((u[e] & 15) << (s < 2 ? 0 : 4)));
    uint8_t& hi = b.qh[32 * n + l];
    hi = static_cast<uint8_t>(hi | ((u[e] >> 4) << (2 * s)));
  }
  std::memcpy(dst, &b, sizeof b);
}

// IQ4_XS: per 32-element sub-block a signed step m / -127 (m its element of largest magnitude,
// which then lands on the lowest level, as IQ4_NL's quantizer does it), the steps quantized to
// signed 6-bit scales against d = max |step| / 31; each element the nearest level to x / (d sc)
// (the first on ties).
void quantize_iq4_xs(const float* x, uint8_t* dst) {
  BlockIQ4_XS b;
  std::memset(&b, 0, sizeof b);
  int scales[8];
  b.d = signed_k_scales(x, 8, -127.0f, scales);
  const float d = f16_to_f32(b.d);
  for (size_t k = 0; k < 8; ++k) {
    const int sc = scales[k];
    const auto ls = static_cast<unsigned>(sc + 32);
    b.scales_l[k / 2] = static_cast<uint8_t>(b.scales_l[k / 2] | (ls & 15) << (4 * (k % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | (ls >> 4) << (2 * k));
    const float dl = d * static_cast<float>(sc);
    for (size_t i = 0; i < 32; ++i) {
      const float v = dl != 0.0f ? x[32 * k + i] / dl : 0.0f;
      int best = 0;
      for (int l = 1; l < 16; ++l) {
        if (std::fabs(v - kIq4NlLevels[l]) < std::fabs(v - kIq4NlLevels[best])) best = l;
      }
      uint8_t& byte = b.qs[16 * k + i % 16];
      byte = static_cast<uint8_t>(byte | best << (i < 16 ? 0 : 4));
    }
  }
  std::memcpy(dst, &b, sizeof b);
}

}  // namespace lift::kernels::detail
