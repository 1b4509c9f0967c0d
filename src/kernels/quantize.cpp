#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_impl.h"

namespace lift::kernels {
namespace {

// Round half away from zero, then clamp to [lo, hi]. Used for every code below.
inline int code(float v, int lo, int hi) {
  const int q = static_cast<int>(std::round(v));
  return std::clamp(q, lo, hi);
}

// The element of largest magnitude, with its sign (the first one on ties).
inline float signed_absmax(const float* x) {
  float amax = 0.0f;
  float m = 0.0f;
  for (size_t e = 0; e < kQBlock; ++e) {
    if (std::fabs(x[e]) > amax) {
      amax = std::fabs(x[e]);
      m = x[e];
    }
  }
  return m;
}

void q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (size_t e = 0; e < kQBlock; ++e) amax = std::max(amax, std::fabs(x[e]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (size_t e = 0; e < kQBlock; ++e) b.qs[e] = static_cast<int8_t>(code(x[e] * id, -127, 127));
}

// Symmetric 4/5-bit codes (Q4_0: bias 8, Q5_0: bias 16) into q[0..31].
float symmetric_codes(const float* x, int bias, uint8_t q[kQBlock]) {
  const float d = signed_absmax(x) / static_cast<float>(-bias);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (size_t e = 0; e < kQBlock; ++e) {
    q[e] = static_cast<uint8_t>(code(x[e] * id + static_cast<float>(bias), 0, 2 * bias - 1));
  }
  return d;
}

// Asymmetric codes (levels = 15 for Q4_1, 31 for Q5_1); returns d and the minimum in m.
float affine_codes(const float* x, int levels, uint8_t q[kQBlock], float& m) {
  float lo = x[0];
  float hi = x[0];
  for (size_t e = 1; e < kQBlock; ++e) {
    lo = std::min(lo, x[e]);
    hi = std::max(hi, x[e]);
  }
  const float d = (hi - lo) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (size_t e = 0; e < kQBlock; ++e) {
    q[e] = static_cast<uint8_t>(code((x[e] - lo) * id, 0, levels));
  }
  m = lo;
  return d;
}

// Low nibbles: element j in qs[j] bits 0..3, element j+16 in bits 4..7.
void pack_nibbles(const uint8_t q[kQBlock], uint8_t qs[16]) {
  for (size_t j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
  }
}
// Fifth bits: bit e of a little-endian u32.
void pack_high_bits(const uint8_t q[kQBlock], uint8_t qh[4]) {
  uint32_t h = 0;
  for (size_t e = 0; e < kQBlock; ++e) h |= static_cast<uint32_t>((q[e] >> 4) & 1u) << e;
  std::memcpy(qh, &h, 4);
}

void q4_0(const float* x, BlockQ4_0& b) {
  uint8_t q[kQBlock];
  b.d = f32_to_f16(symmetric_codes(x, 8, q));
  pack_nibbles(q, b.qs);
}
void q5_0(const float* x, BlockQ5_0& b) {
  uint8_t q[kQBlock];
  b.d = f32_to_f16(symmetric_codes(x, 16, q));
  pack_high_bits(q, b.qh);
  pack_nibbles(q, b.qs);
}
void q4_1(const float* x, BlockQ4_1& b) {
  uint8_t q[kQBlock];
  float m = 0.0f;
  b.d = f32_to_f16(affine_codes(x, 15, q, m));
  b.m = f32_to_f16(m);
  pack_nibbles(q, b.qs);
}
void q5_1(const float* x, BlockQ5_1& b) {
  uint8_t q[kQBlock];
  float m = 0.0f;
  b.d = f32_to_f16(affine_codes(x, 31, q, m));
  b.m = f32_to_f16(m);
  pack_high_bits(q, b.qh);
  pack_nibbles(q, b.qs);
}

// IQ4_NL: d = m / -127 (m the element of largest magnitude, which lands on the lowest level),
// each element the nearest of the 16 levels to x / d (the first on ties).
void iq4_nl(const float* x, BlockIQ4_NL& b) {
  b.d = f32_to_f16(signed_absmax(x) / -127.0f);
  const float d = f16_to_f32(b.d);
  uint8_t q[kQBlock];
  for (size_t e = 0; e < kQBlock; ++e) {
    const float v = d != 0.0f ? x[e] / d : 0.0f;
    uint8_t best = 0;
    for (uint8_t i = 1; i < 16; ++i) {
      if (std::fabs(v - kIq4NlLevels[i]) < std::fabs(v - kIq4NlLevels[best])) best = i;
    }
    q[e] = best;
  }
  pack_nibbles(q, b.qs);
}

template <typename Block, void (*Encode)(const float*, Block&)>
void blocks(const float* x, void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n / kQBlock; ++i) {
    Block b;  // built on the stack, then copied: dst need not be aligned
    Encode(x + i * kQBlock, b);
    std::memcpy(out + i * sizeof(Block), &b, sizeof(Block));
  }
}

template <void (*Encode)(const float*, uint8_t*), size_t kBytes>
void super_blocks(const float* x, void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n / kKBlock; ++i) Encode(x + i * kKBlock, out + i * kBytes);
}

}  // namespace

void quantize_row(GgmlType t, const float* x, void* dst, size_t n) {
  const bool block_type = t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 ||
                          t == GgmlType::Q5_0 || t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL;
  if (block_type && n % kQBlock != 0) {
    throw std::invalid_argument("quantize_row: " + std::to_string(n) +
                                " elements is not a whole number of " +
                                std::string(ggml_type_name(t)) + " blocks of 32");
  }
  const bool k_type = t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K ||
                      t == GgmlType::Q5_K || t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
  if (k_type && n % kKBlock != 0) {
    throw std::invalid_argument("quantize_row: " + std::to_string(n) +
                                " elements is not a whole number of " +
                                std::string(ggml_type_name(t)) + " super-blocks of 256");
  }
  switch (t) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, x, n * sizeof(float));
      return;
    case GgmlType::F16:
    case GgmlType::BF16: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t e = 0; e < n; ++e) {
        const uint16_t h = t == GgmlType::F16 ? f32_to_f16(x[e]) : f32_to_bf16(x[e]);
        std::memcpy(out + 2 * e, &h, 2);
      }
      return;
    }
    case GgmlType::Q8_0:
      return blocks<BlockQ8_0, q8_0>(x, dst, n);
    case GgmlType::Q4_0:
      return blocks<BlockQ4_0, q4_0>(x, dst, n);
    case GgmlType::Q4_1:
      return blocks<BlockQ4_1, q4_1>(x, dst, n);
    case GgmlType::Q5_0:
      return blocks<BlockQ5_0, q5_0>(x, dst, n);
    case GgmlType::Q5_1:
      return blocks<BlockQ5_1, q5_1>(x, dst, n);
    case GgmlType::IQ4_NL:
      return blocks<BlockIQ4_NL, iq4_nl>(x, dst, n);
    case GgmlType::Q2_K:
      return super_blocks<detail::quantize_q2_k, sizeof(BlockQ2_K)>(x, dst, n);
    case GgmlType::Q3_K:
      return super_blocks<detail::quantize_q3_k, sizeof(BlockQ3_K)>(x, dst, n);
    case GgmlType::Q4_K:
      return super_blocks<detail::quantize_q4_k, sizeof(BlockQ4_K)>(x, dst, n);
    case GgmlType::Q5_K:
      return super_blocks<detail::quantize_q5_k, sizeof(BlockQ5_K)>(x, dst, n);
    case GgmlType::Q6_K:
      return super_blocks<detail::quantize_q6_k, sizeof(BlockQ6_K)>(x, dst, n);
    case GgmlType::IQ4_XS:
      return super_blocks<detail::quantize_iq4_xs, sizeof(BlockIQ4_XS)>(x, dst, n);
    default:
      throw std::invalid_argument(
          "quantize_row: cannot quantize to " + std::string(ggml_type_name(t)) +
          " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, "
          "Q4_K, Q5_K, Q6_K, IQ4_XS)");
  }
}

}  // namespace lift::kernels
