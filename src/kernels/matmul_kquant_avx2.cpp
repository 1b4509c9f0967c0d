// AVX2 products of K-quant rows (Q2_K .. Q6_K, IQ4_XS) with Q8_K activation rows, bitwise equal to
// the scalar kernel (codec_table.cpp's k_dot). That kernel forms two exact integers per output and
// super-block, sumi and summ, and then runs, in float and without FMA,
//   acc = acc + (d_w * d_x) * float(sumi);   acc = acc - (dmin_w * d_x) * float(summ).
// Here the integers come from maddubs/madd in whatever order suits the registers (they are
// exact, and no int16 step can saturate: codes are at most 63, |x| at most 128), and the float
// steps run in one vector lane per output of the tile (C weight rows x R activation rows), each
// lane doing exactly the scalar operations. So neither the tile shape nor the batch or the column
// split changes a bit of any result.
//
// Integer form per 32-element group of a super-block: the codes as bytes u = q + bias (bias 32
// for Q6_K, 4 for Q3_K, 0 otherwise) go through maddubs with x, whose int16 pair sums madd
// multiplies by the scale of their 16-element half. The bias comes out at the end as
// -bias * sum_k sc_k * xsum_k, and the min term is sum_k m_k * xsum_k, both one madd of the
// Q8_K block's bsums (the 16-element sums of x that the scalar min term reads too).
// IQ4_XS's codes are signed levels up to 127 in magnitude, whose maddubs pair sums could
// saturate: they and x are widened to int16 for madd instead, and each 32-element group's sum is
// multiplied by its scale as an int32.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/dequant_block.h"
#include "kernels/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_tiling.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kQsOff = offsetof(BlockQ8_K, qs);
constexpr size_t kBsumsOff = offsetof(BlockQ8_K, bsums);

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t ld32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// Lane r * C + c of acc holds output (activation row r0 + r, weight row o + c).
template <int R, int C>
inline void store_tile(const MatmulArgs& a, size_t r0, size_t o, __m256 acc) {
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      a.y[(r0 + static_cast<size_t>(r)) * a.ldy + o + static_cast<size_t>(c)] = out[r * C + c];
    }
  }
}

// Byte-wise shift of v by S bits (left for S > 0) with 16-bit shifts: the caller masks away the
// bits that cross from one byte into the other.
template <int S>
inline __m256i shift16(__m256i v) {
  if constexpr (S > 0) return _mm256_slli_epi16(v, S);
  if constexpr (S < 0) return _mm256_srli_epi16(v, -S);
  return v;
}

// One weight super-block's scalars and scales: sc[j] and m[j] apply to elements 16j..16j+15
// (a 32-element sub-block's values appear twice), the layout of the Q8_K bsums they meet.
struct Prep {
  float d = 0.0f;
  float dmin = 0.0f;
  alignas(32) int16_t sc[16];
  alignas(32) int16_t m[16];
};

// Per format: block bytes, whether it has the min term, the code bias (as a shift: 2^kBiasShift,
// or none when negative), prep() and group<G>() = the 32 codes u of elements 32G..32G+31 as
// bytes, in element order: unsigned, or int8 where kSigned (IQ4_XS's levels, which maddubs's
// unsigned operand cannot take).
struct Q2K {
  static constexpr bool kSigned = false;
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr bool kHasMin = true;
  static constexpr int kBiasShift = -1;
  static void prep(const uint8_t* b, Prep& p) {
    p.d = f16_to_f32(ld16(b + offsetof(BlockQ2_K, d)));
    p.dmin = f16_to_f32(ld16(b + offsetof(BlockQ2_K, dmin)));
    // scales[k]: scale in the low nibble, min in the high one.
    const __m256i v = _mm256_cvtepu8_epi16(load128(b + offsetof(BlockQ2_K, scales)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc),
                       _mm256_and_si256(v, _mm256_set1_epi16(0x0F)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.m), _mm256_srli_epi16(v, 4));
  }
  // Element 128n + 32s + l: bits 2s..2s+1 of qs[32n + l].
  template <int G>
  static __m256i group(const uint8_t* b) {
    const __m256i v = load256(b + offsetof(BlockQ2_K, qs) + 32 * (G / 4));
    return _mm256_and_si256(shift16<-2 * (G % 4)>(v), bytes(3));
  }
};

struct Q3K {
  static constexpr bool kSigned = false;
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr bool kHasMin = false;
  static constexpr int kBiasShift = 2;  // q = u - 4
  static void prep(const uint8_t* b, Prep& p) {
    p.d = f16_to_f32(ld16(b + offsetof(BlockQ3_K, d)));
    // k_codes' 6-bit scales four at a time: sub-block 4i + m takes its low nibble from byte m
    // (i = 0), m + 4 (i = 1) or their high nibbles (i = 2, 3), and its top two bits from bits
    // 2i..2i+1 of byte 8 + m. (A loop over k spent more per block than the codes' products.)
    const uint8_t* s = b + offsetof(BlockQ3_K, scales);
    const uint32_t w0 = ld32(s), w1 = ld32(s + 4), w2 = ld32(s + 8);
    constexpr uint32_t kLow = 0x0F0F0F0Fu, kHigh = 0x03030303u;
    const __m128i sc =
        _mm_setr_epi32(static_cast<int>((w0 & kLow) | ((w2 & kHigh) << 4)),
                       static_cast<int>((w1 & kLow) | (((w2 >> 2) & kHigh) << 4)),
                       static_cast<int>(((w0 >> 4) & kLow) | (((w2 >> 4) & kHigh) << 4)),
                       static_cast<int>(((w1 >> 4) & kLow) | (((w2 >> 6) & kHigh) << 4)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc),
                       _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32)));
  }
  // Q2_K's low bits; bit G of hmask[l] set adds 4 (q = low - 4 when clear).
  template <int G>
  static __m256i group(const uint8_t* b) {
    const __m256i lo = load256(b + offsetof(BlockQ3_K, qs) + 32 * (G / 4));
    const __m256i hm = load256(b + offsetof(BlockQ3_K, hmask));
    const __m256i low = _mm256_and_si256(shift16<-2 * (G % 4)>(lo), bytes(3));
    return _mm256_or_si256(low, _mm256_and_si256(shift16<2 - G>(hm), bytes(4)));
  }
};

// Eight byte values as int16, each twice (the two 16-element halves of its sub-block).
inline void store_twice(int16_t* dst, uint64_t b8) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(b8)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(dst),
                     _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v)));
}

// Q4_K/Q5_K: the 6-bit scales and mins of sub-blocks 0-3 are the low bits of bytes 0-3 and 4-7;
// those of 4-7 take their low nibbles from bytes 8-11 and their top two bits from the top bits
// of bytes 0-3 (scales) and 4-7 (mins) - k_scale_min's layout, four sub-blocks per word.
inline void prep_q4k_q5k(const uint8_t* b, Prep& p) {
  p.d = f16_to_f32(ld16(b + offsetof(BlockQ4_K, d)));
  p.dmin = f16_to_f32(ld16(b + offsetof(BlockQ4_K, dmin)));
  const uint8_t* s = b + offsetof(BlockQ4_K, scales);
  const uint32_t w0 = ld32(s), w1 = ld32(s + 4), w2 = ld32(s + 8);
  const uint32_t sc_lo = w0 & 0x3F3F3F3Fu, m_lo = w1 & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u);
  store_twice(p.sc, sc_lo | static_cast<uint64_t>(sc_hi) << 32);
  store_twice(p.m, m_lo | static_cast<uint64_t>(m_hi) << 32);
}
// Element 64j + l is the low nibble of qs[32j + l], element 64j + 32 + l its high nibble.
template <int G>
inline __m256i nibbles_of(const uint8_t* qs) {
  const __m256i v = load256(qs + 32 * (G / 2));
  return _mm256_and_si256(shift16<-4 * (G % 2)>(v), bytes(0x0F));
}

struct Q4K {
  static constexpr bool kSigned = false;
  static constexpr size_t kBytes = sizeof(BlockQ4_K);
  static constexpr bool kHasMin = true;
  static constexpr int kBiasShift = -1;
  static void prep(const uint8_t* b, Prep& p) { prep_q4k_q5k(b, p); }
  template <int G>
  static __m256i group(const uint8_t* b) {
    return nibbles_of<G>(b + offsetof(BlockQ4_K, qs));
  }
};

struct Q5K {
  static constexpr bool kSigned = false;
  static constexpr size_t kBytes = sizeof(BlockQ5_K);
  static constexpr bool kHasMin = true;
  static constexpr int kBiasShift = -1;
  static void prep(const uint8_t* b, Prep& p) { prep_q4k_q5k(b, p); }
  // Q4_K's nibbles, bit G of qh[l] as bit 4.
  template <int G>
  static __m256i group(const uint8_t* b) {
    const __m256i qh = load256(b + offsetof(BlockQ5_K, qh));
    const __m256i high = _mm256_and_si256(shift16<4 - G>(qh), bytes(0x10));
    return _mm256_or_si256(nibbles_of<G>(b + offsetof(BlockQ5_K, qs)), high);
  }
};

struct Q6K {
  static constexpr bool kSigned = false;
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr bool kHasMin = false;
  static constexpr int kBiasShift = 5;  // q = u - 32
  static void prep(const uint8_t* b, Prep& p) {
    p.d = f16_to_f32(ld16(b + offsetof(BlockQ6_K, d)));
    const __m256i sc = _mm256_cvtepi8_epi16(load128(b + offsetof(BlockQ6_K, scales)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc), sc);
  }
  // Element 128n + 32s + l: low 4 bits from ql[64n + 32(s%2) + l] (low nibble for s < 2),
  // bits 4..5 from bits 2s..2s+1 of qh[32n + l].
  template <int G>
  static __m256i group(const uint8_t* b) {
    constexpr int n = G / 4, s = G % 4;
    const __m256i ql = load256(b + offsetof(BlockQ6_K, ql) + 64 * n + 32 * (s % 2));
    const __m256i qh = load256(b + offsetof(BlockQ6_K, qh) + 32 * n);
    const __m256i low = _mm256_and_si256(shift16<(s < 2 ? 0 : -4)>(ql), bytes(0x0F));
    return _mm256_or_si256(low, _mm256_and_si256(shift16<4 - 2 * s>(qh), bytes(0x30)));
  }
};

// IQ4_XS: sub-block k's scale ls - 32 (ls: nibble k % 2 of scales_l[k / 2], bits 2k..2k+1 of
// scales_h above it); codes are IQ4_NL's levels, elements 0-15 of a sub-block from the low
// nibbles of its 16 bytes and 16-31 from the high ones.
struct IQ4XS {
  static constexpr bool kSigned = true;
  static constexpr size_t kBytes = sizeof(BlockIQ4_XS);
  static constexpr bool kHasMin = false;
  static constexpr int kBiasShift = -1;
  static void prep(const uint8_t* b, Prep& p) {
    p.d = f16_to_f32(ld16(b + offsetof(BlockIQ4_XS, d)));
    const uint32_t low4 = ld32(b + offsetof(BlockIQ4_XS, scales_l));
    const uint32_t high = ld16(b + offsetof(BlockIQ4_XS, scales_h));
    uint64_t ls = 0;
    for (int k = 0; k < 8; ++k) {
      const uint32_t v = ((low4 >> (4 * k)) & 0x0F) | (((high >> (2 * k)) & 3) << 4);
      ls |= static_cast<uint64_t>(v) << (8 * k);
    }
    store_twice(p.sc, ls);
    const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.sc));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc),
                       _mm256_sub_epi16(sc, _mm256_set1_epi16(32)));
  }
  template <int G>
  static __m256i group(const uint8_t* b) {
    const __m128i v = load128(b + offsetof(BlockIQ4_XS, qs) + 16 * G);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i idx =
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    const __m128i levels = load128(reinterpret_cast<const uint8_t*>(kIq4NlLevels));
    return _mm256_shuffle_epi8(_mm256_set_m128i(levels, levels), idx);
  }
};

// Scales of group g's two 16-element halves, as int16 for madd: sc[2g] in the low 128 bits,
// sc[2g + 1] in the high ones.
inline __m256i group_scales(const int16_t* sc, int g) {
  const __m256i pair = _mm256_set1_epi32(static_cast<int>(ld32(sc + 2 * g)));
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(pair, spread);
}

// Lane i of the result is the sum of v[i]'s eight lanes (exact int32).
inline __m256i lane_sums(const __m256i v[8]) {
  const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

template <class F, int... G>
inline void each_group(F& f, std::integer_sequence<int, G...>) {
  (f.template operator()<G>(), ...);
}

template <class W>
struct KRows {
  // Outputs o..o+C-1 of rows r0..r0+R-1; lane p = r * C + c.
  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    static_assert(C * R <= 8, "one lane per output");
    const uint8_t* wr[C];
    const uint8_t* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + static_cast<size_t>(c)) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + static_cast<size_t>(r)) * a.act_stride;
    alignas(32) float dw[8] = {}, dx[8] = {}, dm[8] = {};
    __m256 acc = _mm256_setzero_ps();
    const size_t nb = a.n_in / kKBlock;
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* wb[C];
      const uint8_t* xb[R];
      Prep p[C];
      for (int c = 0; c < C; ++c) {
        wb[c] = wr[c] + b * W::kBytes;
        W::prep(wb[c], p[c]);
      }
      for (int r = 0; r < R; ++r) xb[r] = xr[r] + b * sizeof(BlockQ8_K);

      __m256i isum[R][C];
      for (auto& row : isum) {
        for (auto& v : row) v = _mm256_setzero_si256();
      }
      auto step = [&]<int G>() {
        __m256i q[C], s[C];
        for (int c = 0; c < C; ++c) {
          q[c] = W::template group<G>(wb[c]);
          if constexpr (!W::kSigned) s[c] = group_scales(p[c].sc, G);
        }
        for (int r = 0; r < R; ++r) {
          const __m256i x = load256(xb[r] + kQsOff + 32 * G);
          // Signed codes: int8 x int8 widened to int16 (madd is exact for every pair, -128
          // included); both halves of a 32-element group share its scale.
          [[maybe_unused]] const __m256i x0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x));
          [[maybe_unused]] const __m256i x1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(x, 1));
          for (int c = 0; c < C; ++c) {
            if constexpr (W::kSigned) {
              const __m256i q0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q[c]));
              const __m256i q1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q[c], 1));
              const __m256i dot =
                  _mm256_add_epi32(_mm256_madd_epi16(q0, x0), _mm256_madd_epi16(q1, x1));
              isum[r][c] = _mm256_add_epi32(
                  isum[r][c], _mm256_mullo_epi32(dot, _mm256_set1_epi32(p[c].sc[2 * G])));
            } else {
              const __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], x), s[c]);
              isum[r][c] = _mm256_add_epi32(isum[r][c], d);
            }
          }
        }
      };
      each_group(step, std::make_integer_sequence<int, 8>{});

      __m256i bs[R];
      for (int r = 0; r < R; ++r) bs[r] = load256(xb[r] + kBsumsOff);
      __m256i li[8], lm[8];
      for (int i = 0; i < 8; ++i) li[i] = lm[i] = _mm256_setzero_si256();
      for (int c = 0; c < C; ++c) {
        for (int r = 0; r < R; ++r) {
          __m256i v = isum[r][c];
          if constexpr (W::kBiasShift >= 0) {
            const __m256i bias = _mm256_madd_epi16(load256(p[c].sc), bs[r]);
            v = _mm256_sub_epi32(v, _mm256_slli_epi32(bias, W::kBiasShift));
          }
          li[r * C + c] = v;
          if constexpr (W::kHasMin) lm[r * C + c] = _mm256_madd_epi16(load256(p[c].m), bs[r]);
        }
      }
      for (int r = 0; r < R; ++r) {
        const float xd = ldf(xb[r]);
        for (int c = 0; c < C; ++c) {
          dw[r * C + c] = p[c].d;
          dx[r * C + c] = xd;
          dm[r * C + c] = p[c].dmin;
        }
      }
      const __m256 vx = _mm256_load_ps(dx);
      const __m256 dd = _mm256_mul_ps(_mm256_load_ps(dw), vx);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(lane_sums(li))));
      if constexpr (W::kHasMin) {
        const __m256 dmx = _mm256_mul_ps(_mm256_load_ps(dm), vx);
        acc = _mm256_sub_ps(acc, _mm256_mul_ps(dmx, _mm256_cvtepi32_ps(lane_sums(lm))));
      }
    }
    store_tile<R, C>(a, r0, o, acc);
  }
};

// ---- f32 activations --------------------------------------------------------------------------
// The scalar kernel (matmul.cpp's scalar_f32_act) decodes a super-block as k_decode does, then
// adds w_i * x_i (multiply, then add) into partial sum i % 8, and folds the eight sums as
// ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). One vector of eight partial sums per output
// does exactly that; the decode is k_decode's: dl = d * sc and ml = dmin * m rounded once, then
// dl * q - ml per element.
template <class W>
inline void decode_block(const uint8_t* blk, float* wv) {
  constexpr int kBias = W::kBiasShift >= 0 ? 1 << W::kBiasShift : 0;
  Prep p;
  W::prep(blk, p);
  auto step = [&]<int G>() {
    const __m256i u = W::template group<G>(blk);
    const __m128i halves[2] = {_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)};
    for (int h = 0; h < 2; ++h) {
      const __m256 dl = _mm256_set1_ps(p.d * static_cast<float>(p.sc[2 * G + h]));
      for (int e = 0; e < 2; ++e) {
        const __m128i bytes8 = e == 0 ? halves[h] : _mm_srli_si128(halves[h], 8);
        const __m256i q =
            W::kSigned ? _mm256_cvtepi8_epi32(bytes8)
                       : _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes8), _mm256_set1_epi32(kBias));
        __m256 v = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(q));
        if constexpr (W::kHasMin) {
          v = _mm256_sub_ps(v, _mm256_set1_ps(p.dmin * static_cast<float>(p.m[2 * G + h])));
        }
        _mm256_store_ps(wv + 32 * G + 16 * h + 8 * e, v);
      }
    }
  };
  each_group(step, std::make_integer_sequence<int, 8>{});
}

template <class W>
struct KFloatRows {
  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    static_assert(C == 1, "one weight row per tile");
    const uint8_t* wrow = a.w + o * a.w_row_bytes;
    const float* xr[R];
    for (int r = 0; r < R; ++r) {
      xr[r] = reinterpret_cast<const float*>(a.act + (r0 + static_cast<size_t>(r)) * a.act_stride);
    }
    __m256 acc[R];
    for (auto& v : acc) v = _mm256_setzero_ps();
    alignas(32) float wv[kKBlock];
    const size_t nb = a.n_in / kKBlock;
    for (size_t b = 0; b < nb; ++b) {
      decode_block<W>(wrow + b * W::kBytes, wv);
      for (int r = 0; r < R; ++r) {
        const float* x = xr[r] + b * kKBlock;
        for (size_t k = 0; k < kKBlock / 8; ++k) {
          const __m256 prod = _mm256_mul_ps(_mm256_load_ps(wv + 8 * k), _mm256_loadu_ps(x + 8 * k));
          acc[r] = _mm256_add_ps(acc[r], prod);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      alignas(32) float q[8];
      _mm256_store_ps(q, acc[r]);
      a.y[(r0 + static_cast<size_t>(r)) * a.ldy + o] =
          ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
    }
  }
};

// Decode batches (under 4 rows) take 4 weight rows per tile, larger ones 2 x 4 rows: every
// tile fills at most the 8 lanes, and each weight block is loaded once per tile.
template <class W>
void k_rows(const MatmulArgs& a) {
  if (a.af == ActFormat::f32) return tile_loop<KFloatRows<W>, 1, 4>(a);
  if (a.n_rows < 4) return tile_loop<KRows<W>, 4, 1>(a);
  tile_loop<KRows<W>, 2, 4>(a);
}

// ---- IQ4_NL (32-element blocks, q8_0 activations) -----------------------------------------------
// The scalar kernel (codec_table.cpp's q8_dot) runs acc = acc + (d_w * d_x) * float(isum) per
// block; isum comes from the table levels and x widened to int16 (madd is exact for every int8
// pair, x = -128 included), and the float step again runs one lane per output.
struct Iq4Rows {
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  static constexpr size_t kXBytes = sizeof(BlockQ8_0);

  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    static_assert(C * R <= 8, "one lane per output");
    const uint8_t* wr[C];
    const uint8_t* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + static_cast<size_t>(c)) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + static_cast<size_t>(r)) * a.act_stride;
    const __m128i levels = load128(reinterpret_cast<const uint8_t*>(kIq4NlLevels));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    alignas(16) uint16_t dw[8] = {}, dx[8] = {};
    __m256 acc = _mm256_setzero_ps();
    const size_t nb = a.n_in / kQBlock;
    for (size_t b = 0; b < nb; ++b) {
      __m256i w0[C], w1[C];  // elements 0-15 and 16-31 as int16
      for (int c = 0; c < C; ++c) {
        const uint8_t* p = wr[c] + b * kBytes;
        const __m128i qs = load128(p + offsetof(BlockIQ4_NL, qs));
        w0[c] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(levels, _mm_and_si128(qs, m4)));
        w1[c] = _mm256_cvtepi8_epi16(
            _mm_shuffle_epi8(levels, _mm_and_si128(_mm_srli_epi16(qs, 4), m4)));
        for (int r = 0; r < R; ++r) dw[r * C + c] = ld16(p + offsetof(BlockIQ4_NL, d));
      }
      __m256i li[8];
      for (int i = 0; i < 8; ++i) li[i] = _mm256_setzero_si256();
      for (int r = 0; r < R; ++r) {
        const uint8_t* x = xr[r] + b * kXBytes;
        const __m128i xlo = load128(x + offsetof(BlockQ8_0, qs));
        const __m128i xhi = load128(x + offsetof(BlockQ8_0, qs) + 16);
        const __m256i x0 = _mm256_cvtepi8_epi16(xlo), x1 = _mm256_cvtepi8_epi16(xhi);
        for (int c = 0; c < C; ++c) {
          li[r * C + c] =
              _mm256_add_epi32(_mm256_madd_epi16(w0[c], x0), _mm256_madd_epi16(w1[c], x1));
          dx[r * C + c] = ld16(x + offsetof(BlockQ8_0, d));
        }
      }
      const __m256 scale =
          _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dw))),
                        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dx))));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(lane_sums(li))));
    }
    store_tile<R, C>(a, r0, o, acc);
  }
};

}  // namespace

void matmul_kquant_avx2(const MatmulArgs& a) {
  switch (a.wt) {
    case GgmlType::Q2_K:
      return k_rows<Q2K>(a);
    case GgmlType::Q3_K:
      return k_rows<Q3K>(a);
    case GgmlType::Q4_K:
      return k_rows<Q4K>(a);
    case GgmlType::Q5_K:
      return k_rows<Q5K>(a);
    case GgmlType::Q6_K:
      return k_rows<Q6K>(a);
    case GgmlType::IQ4_XS:
      return k_rows<IQ4XS>(a);
    default:
      return matmul_scalar(a);
  }
}

void matmul_iq4nl_avx2(const MatmulArgs& a) {
  if (a.af != ActFormat::q8_0 || a.wt != GgmlType::IQ4_NL) return matmul_scalar(a);
  if (a.n_rows < 4) return tile_loop<Iq4Rows, 4, 1>(a);
  tile_loop<Iq4Rows, 2, 4>(a);
}

}  // namespace lift::kernels::detail
