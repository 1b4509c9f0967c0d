// AVX-512 matmul. Integer paths use VNNI (vpdpbusd); float paths use FMA over 16 lanes.
//
// Per-output operation order (fixed, whatever the tile):
//  * quantized activations: blocks are taken in pairs, one 512-bit register per pair (lanes 0-7
//    block 2k, lanes 8-15 block 2k+1; an odd last block is paired with zeros). Each int32 lane is
//    the exact dot of 4 codes; acc = fma(float(lane), d_w * d_x, acc), and for Q4_1/Q5_1 a second
//    fma adds m_w * s_x into lane 0 / lane 8. The 16 lanes are summed by hsum() at the end.
//  * f32 activations: lane l accumulates fma(w_i, x_i) for i = l mod 16 in order of i, with a
//    zero-filled final partial chunk, then hsum().
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/lane_tree.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiling.h"

namespace lift::kernels::detail {
namespace {

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float hsum(__m512 v) { return hsum16(v); }

// A tile's sums, hsum(acc[r][c]) into y[r * ldy + c]: folded many vectors at once where the
// tile is full (lane_tree.h: the same bits, a third of the instructions).
template <int C, int R>
inline void store_sums(const __m512 (&acc)[R][C], float* y, size_t ldy) {
  if constexpr (C == 4 && R == 4) {
    const __m512 s = hsum16_x16(&acc[0][0]);
    _mm_storeu_ps(y, _mm512_extractf32x4_ps(s, 0));
    _mm_storeu_ps(y + ldy, _mm512_extractf32x4_ps(s, 1));
    _mm_storeu_ps(y + 2 * ldy, _mm512_extractf32x4_ps(s, 2));
    _mm_storeu_ps(y + 3 * ldy, _mm512_extractf32x4_ps(s, 3));
  } else if constexpr (C == 4 && R == 1) {
    _mm_storeu_ps(y, hsum16_x4(acc[0]));
  } else if constexpr (C == 1 && R == 4) {
    const __m512 v[4] = {acc[0][0], acc[1][0], acc[2][0], acc[3][0]};
    alignas(16) float s[4];
    _mm_store_ps(s, hsum16_x4(v));
    for (int r = 0; r < R; ++r) y[r * ldy] = s[r];
  } else {
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) y[r * ldy + c] = hsum(acc[r][c]);
    }
  }
}

// f16 scales a, b -> [a x8, b x8] (broadcast, masked broadcast, convert).
inline __m512 scale_pair(uint16_t a, uint16_t b) {
  const __m256i h = _mm256_set1_epi16(static_cast<short>(a));
  return _mm512_cvtph_ps(_mm256_mask_set1_epi16(h, 0xFF00, static_cast<short>(b)));
}
// f16 values a, b -> [a, 0 x7, b, 0 x7]: one term per block once the lanes are summed.
inline __m512 lane0_pair(uint16_t a, uint16_t b) {
  const __m256i h = _mm256_maskz_set1_epi16(0x0001, static_cast<short>(a));
  return _mm512_cvtph_ps(_mm256_mask_set1_epi16(h, 0x0100, static_cast<short>(b)));
}
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// 16 nibble bytes of each of two blocks -> 64 code bytes in element order
// [lo(a), hi(a), lo(b), hi(b)] (element j in the low nibble, j+16 in the high one): broadcast
// each block to two 128-bit lanes, shift the odd lanes by 4, mask. b == nullptr: zeros instead.
inline __m512i nibbles_pair(const uint8_t* a, const uint8_t* b) {
  const __m512i aa = _mm512_broadcast_i32x4(load128(a));
  const __m512i z = b != nullptr ? _mm512_mask_broadcast_i32x4(aa, 0xFF00, load128(b))
                                 : _mm512_maskz_mov_epi32(0x00FF, aa);
  const __m512i shifted = _mm512_mask_srli_epi16(z, 0xFF00FF00u, z, 4);
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
}

// ---- integer (quantized activation) path -------------------------------------------------------
// Weight codes go to vpdpbusd's unsigned operand as q + offset (>= 0); the offset's contribution
// offset * sum(x) is subtracted lane by lane, so every lane is the exact signed dot.
struct QW8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kHasM = false;
  template <bool kTwo>
  static __m512i codes(const uint8_t* p) {
    const __m256i b = kTwo ? load256(p + kBytes + 2) : _mm256_setzero_si256();
    return _mm512_xor_si512(join(load256(p + 2), b), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};
struct QW4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kHasM = false;
  template <bool kTwo>
  static __m512i codes(const uint8_t* p) {
    return nibbles_pair(p + 2, kTwo ? p + kBytes + 2 : nullptr);
  }
};
struct QW4_1 {
  static constexpr size_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kHasM = true;
  template <bool kTwo>
  static __m512i codes(const uint8_t* p) {
    return nibbles_pair(p + 4, kTwo ? p + kBytes + 4 : nullptr);
  }
};
// Q5 codes: nibbles plus 16 where the element's bit in qh is set (bit e of a block's u32 is
// element e, so the two u32s form the 64-bit byte mask directly).
template <size_t kQh, size_t kQs, size_t kSize, bool kTwo>
inline __m512i codes5(const uint8_t* p) {
  const __m512i low = nibbles_pair(p + kQs, kTwo ? p + kSize + kQs : nullptr);
  uint64_t qh = ld32(p + kQh);
  if constexpr (kTwo) qh |= static_cast<uint64_t>(ld32(p + kSize + kQh)) << 32;
  return _mm512_mask_add_epi8(low, static_cast<__mmask64>(qh), low, _mm512_set1_epi8(16));
}
struct QW5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kHasM = false;
  template <bool kTwo>
  static __m512i codes(const uint8_t* p) {
    return codes5<2, 6, kBytes, kTwo>(p);
  }
};
struct QW5_1 {
  static constexpr size_t kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kHasM = true;
  template <bool kTwo>
  static __m512i codes(const uint8_t* p) {
    return codes5<4, 8, kBytes, kTwo>(p);
  }
};

template <class W>
struct QKernel {
  // Q8_0 activations go with the _0 weights, Q8_1 (with s) with the _1 weights.
  static constexpr size_t kXBytes = W::kHasM ? 36 : 34;
  static constexpr size_t kXQs = W::kHasM ? 4 : 2;

  template <int C, int R, bool kTwo>
  static inline void step(const uint8_t* const* wr, const uint8_t* const* xr, size_t b,
                          __m512 (&acc)[R][C]) {
    __m512i wq[C];
    __m512 dw[C];
    __m512 mw[C];
    for (int c = 0; c < C; ++c) {
      const uint8_t* p = wr[c] + b * W::kBytes;
      wq[c] = W::template codes<kTwo>(p);
      dw[c] = scale_pair(ld16(p), kTwo ? ld16(p + W::kBytes) : 0);
      if constexpr (W::kHasM) mw[c] = lane0_pair(ld16(p + 2), kTwo ? ld16(p + W::kBytes + 2) : 0);
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* x = xr[r] + b * kXBytes;
      const __m512i xq =
          join(load256(x + kXQs), kTwo ? load256(x + kXBytes + kXQs) : _mm256_setzero_si256());
      const __m512 dx = scale_pair(ld16(x), kTwo ? ld16(x + kXBytes) : 0);
      __m512i base = _mm512_setzero_si512();
      if constexpr (W::kOffset != 0) {
        const __m512i off = _mm512_set1_epi8(static_cast<char>(W::kOffset));
        base = _mm512_sub_epi32(base, _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xq));
      }
      __m512 sx = _mm512_setzero_ps();
      if constexpr (W::kHasM) sx = lane0_pair(ld16(x + 2), kTwo ? ld16(x + kXBytes + 2) : 0);
      for (int c = 0; c < C; ++c) {
        const __m512i dot = _mm512_dpbusd_epi32(base, wq[c], xq);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw[c], dx), acc[r][c]);
        if constexpr (W::kHasM) acc[r][c] = _mm512_fmadd_ps(mw[c], sx, acc[r][c]);
      }
    }
  }

  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    const uint8_t* wr[C];
    const uint8_t* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + c) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + r) * a.act_stride;
    __m512 acc[R][C];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm512_setzero_ps();
    }
    const size_t nb = a.n_in / 32;
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) step<C, R, true>(wr, xr, b, acc);
    if (b < nb) step<C, R, false>(wr, xr, b, acc);
    store_sums<C, R>(acc, a.y + r0 * a.ldy + o, a.ldy);
  }
};

// ---- float (f32 activation) path ---------------------------------------------------------------
// Each weight format decodes a chunk of kChunk elements (16 or one 32-block) into kVecs registers
// holding exactly the values dequantize_row gives.
struct FW32 {
  static constexpr size_t kChunk = 16, kVecs = 1;
  static void load(const uint8_t* row, size_t k, __m512* w) {
    w[0] = _mm512_loadu_ps(row + 64 * k);
  }
  static __m512 load_tail(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, row + 4 * i);
  }
};
struct FW16 {
  static constexpr size_t kChunk = 16, kVecs = 1;
  static void load(const uint8_t* row, size_t k, __m512* w) {
    w[0] = _mm512_cvtph_ps(load256(row + 32 * k));
  }
  static __m512 load_tail(const uint8_t* row, size_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};
struct FWBF16 {
  static constexpr size_t kChunk = 16, kVecs = 1;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static void load(const uint8_t* row, size_t k, __m512* w) { w[0] = widen(load256(row + 32 * k)); }
  static __m512 load_tail(const uint8_t* row, size_t i, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
};
// d * float(q - offset), or d * float(q) + m: one rounding per step, as in dequant_block.h.
template <bool kHasM>
inline __m512 decode16(__m512i q, __m512 d, __m512 m) {
  const __m512 dq = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  if constexpr (kHasM) return _mm512_add_ps(dq, m);
  return dq;
}
struct FWQ8_0 {
  static constexpr size_t kChunk = 32, kVecs = 2;
  static void load(const uint8_t* row, size_t k, __m512* w) {
    const uint8_t* p = row + 34 * k;
    const __m512 d = _mm512_set1_ps(f16_to_f32(ld16(p)));
    w[0] = decode16<false>(_mm512_cvtepi8_epi32(load128(p + 2)), d, d);
    w[1] = decode16<false>(_mm512_cvtepi8_epi32(load128(p + 18)), d, d);
  }
};
template <size_t kBytes, size_t kQs, int kQh, int kOffset, bool kHasM>
struct FWNibble {  // Q4_0, Q4_1, Q5_0, Q5_1 (kQh < 0: no 5th bit)
  static constexpr size_t kChunk = 32, kVecs = 2;
  static void load(const uint8_t* row, size_t k, __m512* w) {
    const uint8_t* p = row + kBytes * k;
    const __m512 d = _mm512_set1_ps(f16_to_f32(ld16(p)));
    const __m512 m = kHasM ? _mm512_set1_ps(f16_to_f32(ld16(p + 2))) : d;
    const __m512i q = _mm512_cvtepu8_epi32(load128(p + kQs));
    __m512i lo = _mm512_and_si512(q, _mm512_set1_epi32(15));
    __m512i hi = _mm512_srli_epi32(q, 4);
    if constexpr (kQh >= 0) {
      const uint32_t qh = ld32(p + kQh);
      const __m512i bit = _mm512_set1_epi32(16);
      lo = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(qh & 0xFFFF), lo, bit);
      hi = _mm512_mask_or_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, bit);
    }
    if constexpr (kOffset != 0) {
      lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(kOffset));
      hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(kOffset));
    }
    w[0] = decode16<kHasM>(lo, d, m);
    w[1] = decode16<kHasM>(hi, d, m);
  }
};
using FWQ4_0 = FWNibble<18, 2, -1, 8, false>;
using FWQ4_1 = FWNibble<20, 4, -1, 0, true>;
using FWQ5_0 = FWNibble<22, 6, 2, 16, false>;
using FWQ5_1 = FWNibble<24, 8, 4, 0, true>;

template <class W>
struct FKernel {
  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    const uint8_t* wr[C];
    const float* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + c) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) {
      xr[r] = reinterpret_cast<const float*>(a.act + (r0 + r) * a.act_stride);
    }
    __m512 acc[R][C];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm512_setzero_ps();
    }
    const size_t nfull = a.n_in / W::kChunk;
    for (size_t k = 0; k < nfull; ++k) {
      __m512 w[C][W::kVecs];
      for (int c = 0; c < C; ++c) W::load(wr[c], k, w[c]);
      for (int r = 0; r < R; ++r) {
        for (size_t v = 0; v < W::kVecs; ++v) {
          const __m512 x = _mm512_loadu_ps(xr[r] + k * W::kChunk + 16 * v);
          for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(w[c][v], x, acc[r][c]);
        }
      }
    }
    if constexpr (W::kChunk == 16) {
      const size_t i = nfull * 16;
      if (i < a.n_in) {
        const auto m = static_cast<__mmask16>((1u << (a.n_in - i)) - 1u);
        __m512 w[C];
        for (int c = 0; c < C; ++c) w[c] = W::load_tail(wr[c], i, m);
        for (int r = 0; r < R; ++r) {
          const __m512 x = _mm512_maskz_loadu_ps(m, xr[r] + i);
          for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(w[c], x, acc[r][c]);
        }
      }
    }
    store_sums<C, R>(acc, a.y + r0 * a.ldy + o, a.ldy);
  }
};

// 4 x 4 tiles: 16 accumulators plus operands fit the 32 zmm registers; four activation rows
// per weight load is what makes small decode batches nearly as cheap as one row.
constexpr int kC = 4, kR = 4;

}  // namespace

void matmul_avx512(const MatmulArgs& a) {
  if (a.af == ActFormat::f32) {
    switch (a.wt) {
      case GgmlType::F32:
        return tile_loop<FKernel<FW32>, kC, kR>(a);
      case GgmlType::F16:
        return tile_loop<FKernel<FW16>, kC, kR>(a);
      case GgmlType::BF16:
        return tile_loop<FKernel<FWBF16>, kC, kR>(a);
      case GgmlType::Q8_0:
        return tile_loop<FKernel<FWQ8_0>, kC, kR>(a);
      case GgmlType::Q4_0:
        return tile_loop<FKernel<FWQ4_0>, kC, kR>(a);
      case GgmlType::Q4_1:
        return tile_loop<FKernel<FWQ4_1>, kC, kR>(a);
      case GgmlType::Q5_0:
        return tile_loop<FKernel<FWQ5_0>, kC, kR>(a);
      case GgmlType::Q5_1:
        return tile_loop<FKernel<FWQ5_1>, kC, kR>(a);
      default:
        return;
    }
  }
  switch (a.wt) {
    case GgmlType::Q8_0:
      return tile_loop<QKernel<QW8_0>, kC, kR>(a);
    case GgmlType::Q4_0:
      return tile_loop<QKernel<QW4_0>, kC, kR>(a);
    case GgmlType::Q5_0:
      return tile_loop<QKernel<QW5_0>, kC, kR>(a);
    case GgmlType::Q4_1:
      return tile_loop<QKernel<QW4_1>, kC, kR>(a);
    case GgmlType::Q5_1:
      return tile_loop<QKernel<QW5_1>, kC, kR>(a);
    default:
      return;
  }
}

}  // namespace lift::kernels::detail
