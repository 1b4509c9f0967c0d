// What the K-quant panel kernels (matmul_panel_kquant_avx2.cpp, _avx512.cpp) share: their
// arguments, where things sit in a panel block (layouts in panel.h) and in a Q8_K row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/panel.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {

struct KArgs {
  const PanelView& w;
  const uint8_t* act;
  size_t act_stride;
  size_t nb;  // super-blocks per row
  float* y;
  size_t ldy;
  size_t o_end;
};

// Offsets within one panel block: the codes' high bits (0: none), the sub-block scales,
// Q4_K/Q5_K's mins in int16-pair order (0: no min term), the codes; sub-block k's codes at
// kCodeOff + k * kCodeStride, its high bits at kHighOff + k * kHighStride. Inline: the block
// starts with its f16 d (and dmin), which split layouts keep in a stream after all blocks.
template <GgmlType T, size_t Subs, size_t HighOff, size_t ScOff, size_t MinOff, size_t CodeOff = 0,
          bool Inline = false, size_t CodeStride = 2048 / Subs, size_t HighStride = 64>
struct KPanelLayout {
  static constexpr GgmlType kType = T;
  static constexpr size_t kSubs = Subs, kHighOff = HighOff, kScOff = ScOff, kMinOff = MinOff;
  static constexpr size_t kCodeOff = CodeOff, kCodeStride = CodeStride, kHighStride = HighStride;
  static constexpr bool kInline = Inline;
  static constexpr size_t kBlockBytes = k_panel_block_bytes(T, Inline);
  static constexpr size_t kScaleBytes = k_panel_scale_bytes(T);
  // From one block's d (and dmin) to the next one's.
  static constexpr size_t kScaleStride = Inline ? kBlockBytes : kScaleBytes;
  static constexpr bool kHasMin = MinOff != 0;
};
using KPanelQ4K = KPanelLayout<GgmlType::Q4_K, 8, 0, 2048, 2176>;
using KPanelQ5K = KPanelLayout<GgmlType::Q5_K, 8, 2048, 2560, 2688>;
using KPanelQ6K = KPanelLayout<GgmlType::Q6_K, 16, 2048, 3072, 0>;
// Q3_K: sub-block k's low bits at kCodeOff + (k / 2) * kCodeStride + (k % 2) * 64, the pair's
// third bits at kHighOff + (k / 2) * kHighStride.
// Q2_K: sub-block k's codes at kCodeOff + k * 64; its scale and min as in the stored block, one
// byte (scale in the low nibble), in int16-pair order (kScOff = kMinOff).
using KPanelQ2K = KPanelLayout<GgmlType::Q2_K, 16, 0, 1024, 1024, 0, false, 64>;
using KPanelQ3K = KPanelLayout<GgmlType::Q3_K, 16, 384, 0, 0, 256, false, 192, 192>;
// The streamed layouts (PanelMatrix::streamed). Q4_K: d, dmin, scales, mins, then the codes.
// Q5_K: the same, with each sub-block's codes as five vectors (kHighOff 0): byte t of vector
// i < 5 holds quad i's code u (0..31) in bits 0-4 and three bits of quads 5-7's in bits 5-7:
// quad 5's bits 0-2 in vector 0, 3-4 in vector 1 (bits 5-6); quad 6's likewise in vectors 2
// and 3; quad 7's bit 0 in bit 7 of vector 1, bit 1 in bit 7 of vector 3, bits 2-4 in vector 4.
// Q6_K: d, 32 bytes of padding, scales, then per sub-block three code vectors (kHighOff 0):
// byte t of vector i holds 4 u_i (u = q + 32 of quad i's element t) in bits 2..7 and two bits of
// u_3 in bits 0..1 (bits 2i..2i+1 of u_3), so quads 0-2 are one mask each and quad 3 three
// shifts and two bit selects (split: two nibble vectors and a plane of high bit pairs).
using KPanelQ4KStream = KPanelLayout<GgmlType::Q4_K, 8, 0, 64, 192, 320, true>;
using KPanelQ5KStream = KPanelLayout<GgmlType::Q5_K, 8, 0, 64, 192, 320, true, 320>;
using KPanelQ6KStream = KPanelLayout<GgmlType::Q6_K, 16, 0, 64, 0, 320, true, 192>;
// Q3_K: d, 32 bytes of padding, scales, then per pair of sub-blocks (2m, 2m + 1) three code
// vectors (kHighOff 0): byte t of vector i < 3 holds quad i's u = q + 4 of sub-block 2m in bits
// 0-2 and of 2m + 1 in bits 3-5; quad 3's u of 2m in bits 6-7 of vector 0 (bits 0-1) and bit 6
// of vector 1 (bit 2), of 2m + 1 in bit 7 of vector 1 (bit 0) and bits 6-7 of vector 2.
using KPanelQ2KStream = KPanelLayout<GgmlType::Q2_K, 16, 0, 64, 64, 320, true, 64>;
// IQ4_XS: Q4_K's nibble order (each byte a level index of element 32k + 4v + t and, above it, of
// 32k + 16 + 4v + t), signed scales ls - 32; streamed: d, 32 bytes of padding, scales, codes.
using KPanelIQ4XS = KPanelLayout<GgmlType::IQ4_XS, 8, 0, 2048, 0>;
using KPanelIQ4XSStream = KPanelLayout<GgmlType::IQ4_XS, 8, 0, 64, 0, 192, true>;
using KPanelQ3KStream = KPanelLayout<GgmlType::Q3_K, 16, 0, 64, 0, 320, true, 192>;

inline constexpr size_t kQ8KQsOff = offsetof(BlockQ8_K, qs);
inline constexpr size_t kQ8KBsumsOff = offsetof(BlockQ8_K, bsums);

inline namespace LIFT_TARGET_NS {
// Calls fn.template operator()<W>() with the layout W that w's panels were packed in.
template <class Fn>
inline void with_k_layout(const PanelView& w, Fn&& fn) {
  auto as = [&]<class Split, class Stream>() {
    if (w.streamed) return fn.template operator()<Stream>();
    fn.template operator()<Split>();
  };
  switch (w.type) {
    case GgmlType::Q2_K:
      return as.template operator()<KPanelQ2K, KPanelQ2KStream>();
    case GgmlType::Q3_K:
      return as.template operator()<KPanelQ3K, KPanelQ3KStream>();
    case GgmlType::Q4_K:
      return as.template operator()<KPanelQ4K, KPanelQ4KStream>();
    case GgmlType::Q5_K:
      return as.template operator()<KPanelQ5K, KPanelQ5KStream>();
    case GgmlType::Q6_K:
      return as.template operator()<KPanelQ6K, KPanelQ6KStream>();
    case GgmlType::IQ4_XS:
      return as.template operator()<KPanelIQ4XS, KPanelIQ4XSStream>();
    default:
      return;
  }
}

// A panel's first d (and dmin) in layout W, its nb blocks from pw on.
template <class W>
inline const uint8_t* k_scales(const uint8_t* pw, size_t nb) {
  return W::kInline ? pw : pw + nb * W::kBlockBytes;
}
// A Q8_K row's 16-element sum j and scale.
inline int16_t q8k_bsum(const uint8_t* blk, size_t j) {
  int16_t v;
  std::memcpy(&v, blk + kQ8KBsumsOff + 2 * j, 2);
  return v;
}
inline float q8k_d(const uint8_t* blk) {
  float v;
  std::memcpy(&v, blk, 4);
  return v;
}

#if defined(__AVX2__)
// A Q8_K block's sub-block sums in pairs, each pair's two as the int16 halves of one int32 (the
// vpmaddwd operand of the min term; every sum fits: at most 32 x 128). Q2_K's 16-element
// sub-blocks are Q8_K's own sums, already stored in that order; Q4_K/Q5_K's 32-element ones are
// sums of two of them, added and packed by vector (in place of 16 scalar loads and adds and a
// move to a vector register per pair, per row of every tile: Q4_K prefill 2-4% faster on AVX-512).
template <size_t Subs>
inline void sub_block_sum_pairs(const uint8_t* xb, int32_t (&pairs)[Subs / 2]) {
  if constexpr (Subs == 16) {
    std::memcpy(pairs, xb + kQ8KBsumsOff, sizeof(pairs));
  } else {
    static_assert(Subs == 8);
    const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kQ8KBsumsOff));
    const __m256i sums32 = _mm256_madd_epi16(sums16, _mm256_set1_epi16(1));
    // Per 128-bit lane the lane's four sums as int16, twice: pairs (0, 1), (2, 3) | (4, 5), (6, 7)
    // are int32 elements 0, 1 and 4, 5.
    alignas(32) int32_t packed[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(packed), _mm256_packs_epi32(sums32, sums32));
    pairs[0] = packed[0];
    pairs[1] = packed[1];
    pairs[2] = packed[4];
    pairs[3] = packed[5];
  }
}
#endif
}  // namespace LIFT_TARGET_NS

}  // namespace lift::kernels::detail
