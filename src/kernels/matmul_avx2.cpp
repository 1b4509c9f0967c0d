// AVX2 (+FMA, F16C) matmul.
//
// Per-output operation order (fixed, whatever the tile):
//  * quantized activations: one 256-bit register per block; each int32 lane is the exact dot of
//    4 codes (sign trick + maddubs + madd); acc = fma(float(lane), d_w * d_x, acc), and for
//    Q4_1/Q5_1 a second fma adds m_w * s_x into lane 0. The 8 lanes are summed by hsum() at the
//    end.
//  * f32 activations: lane l accumulates fma(w_i, x_i) for i = l mod 8 in order of i, with a
//    zero-filled final partial chunk, then hsum().
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/fp16.h"
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
inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m128i load64(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

inline float hsum(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

inline __m256 broadcast_f16(uint16_t h) { return _mm256_set1_ps(f16_to_f32(h)); }
// [h, 0 x7] as floats: one term per block once the lanes are summed.
inline __m256 lane0_f16(uint16_t h) { return _mm256_cvtph_ps(_mm_cvtsi32_si128(h)); }

// 16 nibble bytes -> 32 codes in element order (low nibbles are elements 0-15).
inline __m256i nibbles(__m128i q) {
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}
// 0x10 in byte e where bit e of qh is set.
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---- integer (quantized activation) path -------------------------------------------------------
// kSigned: codes are q - offset in int8 and go through the sign trick (|w| as the unsigned
// operand, x with w's sign as the signed one); otherwise codes are unsigned q (<= 31) directly.
struct QW8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr bool kSigned = true, kHasM = false;
  static __m256i codes(const uint8_t* p) { return load256(p + 2); }
};
struct QW4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr bool kSigned = true, kHasM = false;
  static __m256i codes(const uint8_t* p) {
    return _mm256_sub_epi8(nibbles(load128(p + 2)), _mm256_set1_epi8(8));
  }
};
struct QW5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr bool kSigned = true, kHasM = false;
  static __m256i codes(const uint8_t* p) {
    const __m256i q = _mm256_or_si256(nibbles(load128(p + 6)), fifth_bits(ld32(p + 2)));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  }
};
struct QW4_1 {
  static constexpr size_t kBytes = 20;
  static constexpr bool kSigned = false, kHasM = true;
  static __m256i codes(const uint8_t* p) { return nibbles(load128(p + 4)); }
};
struct QW5_1 {
  static constexpr size_t kBytes = 24;
  static constexpr bool kSigned = false, kHasM = true;
  static __m256i codes(const uint8_t* p) {
    return _mm256_or_si256(nibbles(load128(p + 8)), fifth_bits(ld32(p + 4)));
  }
};

template <class W>
struct QKernel {
  static constexpr size_t kXBytes = W::kHasM ? 36 : 34;
  static constexpr size_t kXQs = W::kHasM ? 4 : 2;

  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    const uint8_t* wr[C];
    const uint8_t* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + c) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + r) * a.act_stride;
    __m256 acc[R][C];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm256_setzero_ps();
    }
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t nb = a.n_in / 32;
    for (size_t b = 0; b < nb; ++b) {
      __m256i wq[C], wa[C];
      __m256 dw[C], mw[C];
      for (int c = 0; c < C; ++c) {
        const uint8_t* p = wr[c] + b * W::kBytes;
        wq[c] = W::codes(p);
        wa[c] = W::kSigned ? _mm256_sign_epi8(wq[c], wq[c]) : wq[c];
        dw[c] = broadcast_f16(ld16(p));
        if constexpr (W::kHasM) mw[c] = lane0_f16(ld16(p + 2));
      }
      for (int r = 0; r < R; ++r) {
        const uint8_t* x = xr[r] + b * kXBytes;
        const __m256i xq = load256(x + kXQs);
        const __m256 dx = broadcast_f16(ld16(x));
        __m256 sx = _mm256_setzero_ps();
        if constexpr (W::kHasM) sx = lane0_f16(ld16(x + 2));
        for (int c = 0; c < C; ++c) {
          const __m256i xs = W::kSigned ? _mm256_sign_epi8(xq, wq[c]) : xq;
          const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[c], xs), ones);
          acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw[c], dx), acc[r][c]);
          if constexpr (W::kHasM) acc[r][c] = _mm256_fmadd_ps(mw[c], sx, acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) a.y[(r0 + r) * a.ldy + o + c] = hsum(acc[r][c]);
    }
  }
};

// ---- float (f32 activation) path ---------------------------------------------------------------
// load(row, k) gives elements [8k, 8k + 8) of the row exactly as dequantize_row decodes them.
struct FW32 {
  static constexpr bool kBlocked = false;
  static __m256 load(const uint8_t* row, size_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + 8 * k);
  }
};
struct FW16 {
  static constexpr bool kBlocked = false;
  static __m256 load(const uint8_t* row, size_t k) {
    return _mm256_cvtph_ps(load128(row + 16 * k));
  }
};
struct FWBF16 {
  static constexpr bool kBlocked = false;
  static __m256 load(const uint8_t* row, size_t k) {
    const __m256i h = _mm256_cvtepu16_epi32(load128(row + 16 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};
// d * float(q - offset), or d * float(q) + m, one rounding per step as in dequant_block.h.
template <bool kHasM>
inline __m256 decode8(__m256i q, const uint8_t* blk) {
  const __m256 dq = _mm256_mul_ps(_mm256_cvtepi32_ps(q), broadcast_f16(ld16(blk)));
  if constexpr (kHasM) return _mm256_add_ps(dq, broadcast_f16(ld16(blk + 2)));
  return dq;
}
struct FWQ8_0 {
  static constexpr bool kBlocked = true;
  static __m256 load(const uint8_t* row, size_t k) {
    const uint8_t* p = row + 34 * (k / 4);
    return decode8<false>(_mm256_cvtepi8_epi32(load64(p + 2 + 8 * (k % 4))), p);
  }
};
template <size_t kBytes, size_t kQs, int kQh, int kOffset, bool kHasM>
struct FWNibble {  // Q4_0, Q4_1, Q5_0, Q5_1 (kQh < 0: no 5th bit)
  static constexpr bool kBlocked = true;
  static __m256 load(const uint8_t* row, size_t k) {
    const uint8_t* p = row + kBytes * (k / 4);
    const size_t s = k % 4;  // elements 8s..8s+7: low nibbles for s < 2, high ones after
    __m256i q = _mm256_cvtepu8_epi32(load64(p + kQs + 8 * (s % 2)));
    q = s < 2 ? _mm256_and_si256(q, _mm256_set1_epi32(15)) : _mm256_srli_epi32(q, 4);
    if constexpr (kQh >= 0) {
      const __m256i bits = _mm256_set1_epi32(static_cast<int>((ld32(p + kQh) >> (8 * s)) & 0xFF));
      const __m256i hi = _mm256_and_si256(
          _mm256_srlv_epi32(bits, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), _mm256_set1_epi32(1));
      q = _mm256_or_si256(q, _mm256_slli_epi32(hi, 4));
    }
    if constexpr (kOffset != 0) q = _mm256_sub_epi32(q, _mm256_set1_epi32(kOffset));
    return decode8<kHasM>(q, p);
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
    __m256 acc[R][C];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm256_setzero_ps();
    }
    const size_t nfull = a.n_in / 8;
    for (size_t k = 0; k < nfull; ++k) {
      __m256 w[C];
      for (int c = 0; c < C; ++c) w[c] = W::load(wr[c], k);
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_loadu_ps(xr[r] + 8 * k);
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(w[c], x, acc[r][c]);
      }
    }
    if constexpr (!W::kBlocked) {
      // Final partial chunk through zero-filled copies (float types only; blocks are whole).
      const size_t i = nfull * 8, rem = a.n_in - i;
      if (rem != 0) {
        constexpr size_t kElem = std::is_same_v<W, FW32> ? 4 : 2;
        __m256 w[C];
        for (int c = 0; c < C; ++c) {
          alignas(32) uint8_t buf[32] = {};
          std::memcpy(buf, wr[c] + kElem * i, kElem * rem);
          w[c] = W::load(buf, 0);
        }
        for (int r = 0; r < R; ++r) {
          alignas(32) float xb[8] = {};
          std::memcpy(xb, xr[r] + i, 4 * rem);
          const __m256 x = _mm256_load_ps(xb);
          for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(w[c], x, acc[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) a.y[(r0 + r) * a.ldy + o + c] = hsum(acc[r][c]);
    }
  }
};

// 16 ymm registers: 2 weight rows x 4 activation rows keeps 8 accumulators plus operands in
// registers, and still streams each weight block once for up to 4 decode rows.
constexpr int kC = 2, kR = 4;

}  // namespace

void matmul_avx2(const MatmulArgs& a) {
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
