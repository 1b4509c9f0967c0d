// Packing K-quant rows into row panels (layouts in panel.h). Each super-block is unpacked to its
// integer form (kquant_codes.h) and re-laid so that one 512-bit load holds the same four
// consecutive elements of 16 rows: vpdpbusd then gives each lane the exact integer dot of a
// quad, and a sub-block's quads are contiguous, so one int32 accumulator per sub-block suffices.
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/kquant_codes.h"
#include "kernels/matmul_panel_kquant.h"
#include "kernels/panel.h"

namespace lift::kernels::detail {
namespace {

// Byte t of lane `lane` in 64-byte vector v.
inline uint8_t& at(uint8_t* base, size_t v, size_t lane, size_t t) {
  return base[v * 64 + lane * 4 + t];
}

// Streamed Q5_K: five code vectors per sub-block (matmul_panel_kquant.h).
template <class W>
constexpr bool kFiveVectors = W::kType == GgmlType::Q5_K&& W::kInline;

// Writes lane `lane` of one block in layout W (matmul_panel_kquant.h, the offsets the kernels
// read): Q4_K/Q5_K's nibbles (low: element 32k + 4v + t, high: 32k + 16 + 4v + t), Q5_K's 5th
// bits, the sub-block scales, the mins in int16-pair order, d and dmin.
template <class W, class Block>
void pack_affine(const Block& b, size_t lane, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  for (size_t k = 0; k < 8; ++k) {
    uint8_t* codes = blk + W::kCodeOff + k * W::kCodeStride;
    for (size_t t = 0; t < 4 && kFiveVectors<W>; ++t) {
      unsigned u[8];  // quad j's element t: 32k + 4j + t
      for (size_t j = 0; j < 8; ++j) u[j] = static_cast<unsigned>(c.q[32 * k + 4 * j + t]);
      const unsigned top[5] = {u[5] & 7, (u[5] >> 3) | (u[7] & 1) << 2, u[6] & 7,
                               (u[6] >> 3) | ((u[7] >> 1) & 1) << 2, u[7] >> 2};
      for (size_t i = 0; i < 5; ++i) {
        at(codes, i, lane, t) = static_cast<uint8_t>(u[i] | top[i] << 5);
      }
    }
    for (size_t v = 0; v < 4 && !kFiveVectors<W>; ++v) {
      for (size_t t = 0; t < 4; ++t) {
        const auto lo = static_cast<uint8_t>(c.q[32 * k + 4 * v + t]);
        const auto hi = static_cast<uint8_t>(c.q[32 * k + 16 + 4 * v + t]);
        at(codes, v, lane, t) = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        if constexpr (W::kHighOff != 0) {
          // Bit v: quad v's element t (low nibbles), bit v + 4: quad v + 4's (high nibbles).
          uint8_t& h = at(blk + W::kHighOff + k * W::kHighStride, 0, lane, t);
          h = static_cast<uint8_t>(h | ((lo >> 4) << v) | ((hi >> 4) << (v + 4)));
        }
      }
    }
    blk[W::kScOff + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
    // Mins in int16-pair order: pair k/2, lane, then k%2.
    blk[W::kMinOff + 32 * (k / 2) + 2 * lane + k % 2] = static_cast<uint8_t>(c.m[k]);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
  std::memcpy(scales + 32 + 2 * lane, &b.dmin, 2);
}

// Q6_K: per sub-block two nibble vectors (quads 0/1 and 2/3) and the high bit pairs (split), or
// three vectors of 4 u_j with u_3's bit pairs below them (streamed; matmul_panel_kquant.h).
template <class W>
void pack_q6_k(const BlockQ6_K& b, size_t lane, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  for (size_t k = 0; k < 16; ++k) {
    uint8_t* codes = blk + W::kCodeOff + k * W::kCodeStride;
    for (size_t t = 0; t < 4; ++t) {
      uint8_t u[4];  // the unsigned 6-bit code (q + 32) of element 16k + 4j + t, j = 0..3
      for (size_t j = 0; j < 4; ++j) u[j] = static_cast<uint8_t>(c.q[16 * k + 4 * j + t] + 32);
      if constexpr (W::kInline) {
        for (size_t i = 0; i < 3; ++i) {
          at(codes, i, lane, t) = static_cast<uint8_t>(u[i] << 2 | ((u[3] >> (2 * i)) & 3));
        }
        continue;
      }
      at(codes, 0, lane, t) = static_cast<uint8_t>((u[0] & 15) | ((u[1] & 15) << 4));
      at(codes, 1, lane, t) = static_cast<uint8_t>((u[2] & 15) | ((u[3] & 15) << 4));
      at(blk + W::kHighOff + k * W::kHighStride, 0, lane, t) = static_cast<uint8_t>(
          (u[0] >> 4) | ((u[1] >> 4) << 2) | ((u[2] >> 4) << 4) | ((u[3] >> 4) << 6));
    }
    blk[W::kScOff + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
}

// Byte t of a 2-bit code vector: bits 2j..2j+1 hold the low two bits of u = q[4j] + bias for
// j = 0..3 (q from element 16k + t of sub-block k on: the element of quad j at byte t).
inline uint8_t bit_pairs(const int8_t* q, int bias) {
  unsigned v = 0;
  for (size_t j = 0; j < 4; ++j) v |= (static_cast<unsigned>(q[4 * j] + bias) & 3u) << (2 * j);
  return static_cast<uint8_t>(v);
}

// Q3_K: per pair of sub-blocks the low two bits of each and their third bits together (split),
// or both sub-blocks' codes in three vectors (streamed; matmul_panel_kquant.h).
template <class W>
void pack_q3_k(const BlockQ3_K& b, size_t lane, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  if constexpr (W::kInline) {
    for (size_t m = 0; m < 8; ++m) {
      uint8_t* codes = blk + W::kCodeOff + m * W::kCodeStride;
      for (size_t t = 0; t < 4; ++t) {
        unsigned u0[4], u1[4];  // u = q + 4 of quad j's element t, sub-blocks 2m and 2m + 1
        for (size_t j = 0; j < 4; ++j) {
          u0[j] = static_cast<unsigned>(c.q[32 * m + 4 * j + t] + 4);
          u1[j] = static_cast<unsigned>(c.q[32 * m + 16 + 4 * j + t] + 4);
        }
        const unsigned top[3] = {u0[3] & 3, (u0[3] >> 2) | (u1[3] & 1) << 1, u1[3] >> 1};
        for (size_t i = 0; i < 3; ++i) {
          at(codes, i, lane, t) = static_cast<uint8_t>(u0[i] | u1[i] << 3 | top[i] << 6);
        }
      }
    }
    for (size_t k = 0; k < 16; ++k) blk[W::kScOff + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
    std::memcpy(scales + 2 * lane, &b.d, 2);
    return;
  }
  for (size_t k = 0; k < 16; ++k) {
    uint8_t* low = blk + W::kCodeOff + k / 2 * W::kCodeStride + k % 2 * 64;
    uint8_t* high = blk + W::kHighOff + k / 2 * W::kHighStride;
    for (size_t t = 0; t < 4; ++t) {
      at(low, 0, lane, t) = bit_pairs(c.q + 16 * k + t, 4);
      uint8_t& hi = at(high, 0, lane, t);  // the pair's other sub-block may be in already
      for (size_t j = 0; j < 4; ++j) {
        // The third bit of the 3-bit code q + 4 of element 16k + 4j + t.
        const auto u = static_cast<unsigned>(c.q[16 * k + 4 * j + t] + 4);
        hi = static_cast<uint8_t>(hi | (u >> 2) << (4 * (k % 2) + j));
      }
    }
    blk[W::kScOff + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
}

// Q2_K: each sub-block's codes in one vector; its scale and min in one byte, int16-pair order.
template <class W>
void pack_q2_k(const BlockQ2_K& b, size_t lane, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  for (size_t k = 0; k < 16; ++k) {
    uint8_t* codes = blk + W::kCodeOff + k * W::kCodeStride;
    for (size_t t = 0; t < 4; ++t) at(codes, 0, lane, t) = bit_pairs(c.q + 16 * k + t, 0);
    blk[W::kScOff + 32 * (k / 2) + 2 * lane + k % 2] = static_cast<uint8_t>(c.sc[k] | c.m[k] << 4);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
  std::memcpy(scales + 32 + 2 * lane, &b.dmin, 2);
}

// IQ4_XS: the level indexes in Q4_K's nibble order (low: element 32k + 4v + t, high: 32k + 16 +
// 4v + t), the signed sub-block scales, d.
template <class W>
void pack_iq4_xs(const BlockIQ4_XS& b, size_t lane, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  for (size_t k = 0; k < 8; ++k) {
    uint8_t* codes = blk + W::kCodeOff + k * W::kCodeStride;
    for (size_t v = 0; v < 4; ++v) {
      for (size_t t = 0; t < 4; ++t) {
        at(codes, v, lane, t) = static_cast<uint8_t>(iq4_xs_index(b, 32 * k + 4 * v + t) |
                                                     iq4_xs_index(b, 32 * k + 16 + 4 * v + t) << 4);
      }
    }
    blk[W::kScOff + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
}

// One stored row into lane `lane` of a panel in layout W.
template <class W, class Block>
void pack_row_as(const uint8_t* src, size_t nb, size_t lane, uint8_t* panel) {
  for (size_t b = 0; b < nb; ++b) {
    uint8_t* blk = panel + b * W::kBlockBytes;
    uint8_t* scales = W::kInline ? blk : panel + nb * W::kBlockBytes + b * W::kScaleBytes;
    Block x;
    std::memcpy(&x, src + b * sizeof x, sizeof x);
    if constexpr (W::kType == GgmlType::Q2_K) {
      pack_q2_k<W>(x, lane, blk, scales);
    } else if constexpr (W::kType == GgmlType::IQ4_XS) {
      pack_iq4_xs<W>(x, lane, blk, scales);
    } else if constexpr (W::kHasMin) {
      pack_affine<W>(x, lane, blk, scales);
    } else if constexpr (W::kType == GgmlType::Q3_K) {
      pack_q3_k<W>(x, lane, blk, scales);
    } else {
      pack_q6_k<W>(x, lane, blk, scales);
    }
  }
}

template <class Block>
float k_panel_dot_blocks(const uint8_t* w, const uint8_t* x, size_t nb) {
  float acc = 0.0f;
  for (size_t b = 0; b < nb; ++b) {
    Block blk;
    std::memcpy(&blk, w + b * sizeof blk, sizeof blk);
    BlockQ8_K xb;
    std::memcpy(&xb, x + b * sizeof xb, sizeof xb);
    KCodes c;
    k_codes(blk, c);
    int32_t sumi, summ;
    k_int_dot<Block>(c, xb, sumi, summ);
    if constexpr (KTraits<Block>::kHasMin) {
      acc = std::fma(-static_cast<float>(summ), c.dmin * xb.d, acc);
    }
    acc = std::fma(static_cast<float>(sumi), c.d * xb.d, acc);
  }
  return acc;
}

}  // namespace

void pack_k_row(GgmlType t, bool stream, const uint8_t* src, size_t n_in, size_t lane,
                uint8_t* panel) {
  const size_t nb = n_in / kKBlock;
  switch (t) {
    case GgmlType::Q2_K:
      return stream ? pack_row_as<KPanelQ2KStream, BlockQ2_K>(src, nb, lane, panel)
                    : pack_row_as<KPanelQ2K, BlockQ2_K>(src, nb, lane, panel);
    case GgmlType::Q3_K:
      return stream ? pack_row_as<KPanelQ3KStream, BlockQ3_K>(src, nb, lane, panel)
                    : pack_row_as<KPanelQ3K, BlockQ3_K>(src, nb, lane, panel);
    case GgmlType::Q4_K:
      return stream ? pack_row_as<KPanelQ4KStream, BlockQ4_K>(src, nb, lane, panel)
                    : pack_row_as<KPanelQ4K, BlockQ4_K>(src, nb, lane, panel);
    case GgmlType::Q5_K:
      return stream ? pack_row_as<KPanelQ5KStream, BlockQ5_K>(src, nb, lane, panel)
                    : pack_row_as<KPanelQ5K, BlockQ5_K>(src, nb, lane, panel);
    case GgmlType::Q6_K:
      return stream ? pack_row_as<KPanelQ6KStream, BlockQ6_K>(src, nb, lane, panel)
                    : pack_row_as<KPanelQ6K, BlockQ6_K>(src, nb, lane, panel);
    case GgmlType::IQ4_XS:
      return stream ? pack_row_as<KPanelIQ4XSStream, BlockIQ4_XS>(src, nb, lane, panel)
                    : pack_row_as<KPanelIQ4XS, BlockIQ4_XS>(src, nb, lane, panel);
    default:
      throw std::invalid_argument("pack_panels: no K panel layout for this type");
  }
}

}  // namespace lift::kernels::detail

namespace lift::kernels {

float k_panel_dot(GgmlType t, const void* row, const void* q8_k_row, size_t n_in) {
  const auto* w = static_cast<const uint8_t*>(row);
  const auto* x = static_cast<const uint8_t*>(q8_k_row);
  const size_t nb = n_in / kKBlock;
  if (t == GgmlType::Q2_K) return detail::k_panel_dot_blocks<BlockQ2_K>(w, x, nb);
  if (t == GgmlType::Q3_K) return detail::k_panel_dot_blocks<BlockQ3_K>(w, x, nb);
  if (t == GgmlType::Q4_K) return detail::k_panel_dot_blocks<BlockQ4_K>(w, x, nb);
  if (t == GgmlType::Q5_K) return detail::k_panel_dot_blocks<BlockQ5_K>(w, x, nb);
  if (t == GgmlType::Q6_K) return detail::k_panel_dot_blocks<BlockQ6_K>(w, x, nb);
  if (t == GgmlType::IQ4_XS) return detail::k_panel_dot_blocks<BlockIQ4_XS>(w, x, nb);
  throw std::invalid_argument("k_panel_dot: no K panel layout for this type");
}

}  // namespace lift::kernels
