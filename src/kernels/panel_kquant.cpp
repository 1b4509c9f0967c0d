// Packing K-quant rows into row panels (layouts in panel.h). Each super-block is unpacked to its
// integer form (kquant_codes.h) and re-laid so that one 512-bit load holds the same four
// consecutive elements of 16 rows: vpdpbusd then gives each lane the exact integer dot of a
// quad, and a sub-block's quads are contiguous, so one int32 accumulator per sub-block suffices.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "kernels/kquant_codes.h"
#include "kernels/panel.h"

namespace lift::kernels::detail {
namespace {

// Byte t of lane `lane` in 64-byte vector v.
inline uint8_t& at(uint8_t* base, size_t v, size_t lane, size_t t) {
  return base[v * 64 + lane * 4 + t];
}

// Q4_K and Q5_K share the nibble, scale and min layout; Q5_K adds a plane of 5th bits before
// the scales (so scales sit at 2048 + high_bytes). The streamed layouts put scales and mins at
// 64 and the codes from 320 on, Q5_K's 5th bits of a sub-block right after its codes.
void pack_affine_k(const KCodes& c, size_t lane, bool high, bool stream, uint8_t* blk) {
  const size_t sc_off = stream ? 64 : high ? 2560 : 2048;
  const size_t code_stride = stream && high ? 320 : 256;
  for (size_t k = 0; k < 8; ++k) {
    uint8_t* codes = blk + (stream ? 320 : 0) + k * code_stride;
    uint8_t* fifth = stream ? codes + 256 : blk + 2048 + 64 * k;
    for (size_t v = 0; v < 4; ++v) {
      for (size_t t = 0; t < 4; ++t) {
        const auto lo = static_cast<uint8_t>(c.q[32 * k + 4 * v + t]);
        const auto hi = static_cast<uint8_t>(c.q[32 * k + 16 + 4 * v + t]);
        at(codes, v, lane, t) = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        if (high) {
          // Bit v: quad v's element t (low nibbles), bit v + 4: quad v + 4's (high nibbles).
          uint8_t& h = at(fifth, 0, lane, t);
          h = static_cast<uint8_t>(h | ((lo >> 4) << v) | ((hi >> 4) << (v + 4)));
        }
      }
    }
    blk[sc_off + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
    // Mins in int16-pair order: pair k/2, lane, then k%2.
    blk[sc_off + 128 + 32 * (k / 2) + 2 * lane + k % 2] = static_cast<uint8_t>(c.m[k]);
  }
}

template <class Block>
void pack_affine(const Block& b, size_t lane, bool stream, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  pack_affine_k(c, lane, std::is_same_v<Block, BlockQ5_K>, stream, blk);
  std::memcpy(scales + 2 * lane, &b.d, 2);
  std::memcpy(scales + 32 + 2 * lane, &b.dmin, 2);
}

// Split: nibbles [16][2 vectors], high bits [16], scales at 3072. Streamed: scales at 64, then
// per sub-block its 2 nibble vectors and its high bits (192 bytes from 320 on).
void pack_q6_k(const BlockQ6_K& b, size_t lane, bool stream, uint8_t* blk, uint8_t* scales) {
  KCodes c;
  k_codes(b, c);
  for (size_t k = 0; k < 16; ++k) {
    uint8_t* nib = stream ? blk + 320 + 192 * k : blk + 128 * k;
    uint8_t* high = stream ? blk + 320 + 192 * k + 128 : blk + 2048 + 64 * k;
    for (size_t t = 0; t < 4; ++t) {
      uint8_t u[4];  // the unsigned 6-bit code (q + 32) of element 16k + 4j + t, j = 0..3
      for (size_t j = 0; j < 4; ++j) u[j] = static_cast<uint8_t>(c.q[16 * k + 4 * j + t] + 32);
      at(nib, 0, lane, t) = static_cast<uint8_t>((u[0] & 15) | ((u[1] & 15) << 4));
      at(nib, 1, lane, t) = static_cast<uint8_t>((u[2] & 15) | ((u[3] & 15) << 4));
      at(high, 0, lane, t) = static_cast<uint8_t>((u[0] >> 4) | ((u[1] >> 4) << 2) |
                                                  ((u[2] >> 4) << 4) | ((u[3] >> 4) << 6));
    }
    blk[(stream ? 64 : 3072) + 16 * k + lane] = static_cast<uint8_t>(c.sc[k]);
  }
  std::memcpy(scales + 2 * lane, &b.d, 2);
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
  const size_t blk_bytes = k_panel_block_bytes(t, stream), scale_bytes = k_panel_scale_bytes(t);
  for (size_t b = 0; b < nb; ++b) {
    uint8_t* blk = panel + b * blk_bytes;
    uint8_t* scales = stream ? blk : panel + nb * blk_bytes + b * scale_bytes;
    if (t == GgmlType::Q4_K) {
      BlockQ4_K x;
      std::memcpy(&x, src + b * sizeof x, sizeof x);
      pack_affine(x, lane, stream, blk, scales);
    } else if (t == GgmlType::Q5_K) {
      BlockQ5_K x;
      std::memcpy(&x, src + b * sizeof x, sizeof x);
      pack_affine(x, lane, stream, blk, scales);
    } else if (t == GgmlType::Q6_K) {
      BlockQ6_K x;
      std::memcpy(&x, src + b * sizeof x, sizeof x);
      pack_q6_k(x, lane, stream, blk, scales);
    } else {
      throw std::invalid_argument("pack_panels: no K panel layout for this type");
    }
  }
}

}  // namespace lift::kernels::detail

namespace lift::kernels {

float k_panel_dot(GgmlType t, const void* row, const void* q8_k_row, size_t n_in) {
  const auto* w = static_cast<const uint8_t*>(row);
  const auto* x = static_cast<const uint8_t*>(q8_k_row);
  const size_t nb = n_in / kKBlock;
  if (t == GgmlType::Q4_K) return detail::k_panel_dot_blocks<BlockQ4_K>(w, x, nb);
  if (t == GgmlType::Q5_K) return detail::k_panel_dot_blocks<BlockQ5_K>(w, x, nb);
  if (t == GgmlType::Q6_K) return detail::k_panel_dot_blocks<BlockQ6_K>(w, x, nb);
  throw std::invalid_argument("k_panel_dot: no K panel layout for this type");
}

}  // namespace lift::kernels
