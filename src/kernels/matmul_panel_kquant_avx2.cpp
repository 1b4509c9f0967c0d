// AVX2 products of K-quant panels (Q2_K to Q6_K, IQ4_XS; layouts in panel.h) with Q8_K activation
// rows. Each output gets the integers sumi and summ of matmul_panel_kquant_avx512.cpp and the
// same float steps in the same order,
//   Q4_K/Q5_K: acc = fma(-float(summ), dmin_w * d_x, acc);  acc = fma(float(sumi), d_w * d_x, acc)
//   Q3_K/Q6_K/IQ4_XS: acc = fma(float(sumi), d_w * d_x, acc)
// so an AVX2 machine computes every K-quant logit bit for bit as an AVX-512 or AMX one does.
//
// A 16-row panel is two halves of eight lanes (one 256-bit register each). Without vpdpbusd, a
// quad of codes meets its activations in vpmaddubsw (u8 x i8, int16 pair sums); the int16 sums of
// several quads of one sub-block are added and then widened by one vpmaddwd with the sub-block's
// scale, which gives sc_k * dot_k directly. That is exact while no int16 sum can overflow: a
// pair is at most 2 * umax * 128, so Q4_K (codes < 16) widens every 8 quads (30720), Q5_K (< 32)
// every 4 (31744), Q6_K (< 64, stored as q + 32) every 2 (32256), Q2_K (< 4) and Q3_K (< 8,
// stored as q + 4) once per 16-element sub-block, its 4 quads (3072, 7168); IQ4_XS's level + 128
// goes in as two base-16 digits, each summed over its 32-element sub-block (30720). Every
// integer is exact, so neither the grouping nor the tile shape changes a result.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_panel_kquant.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kQsOff = kQ8KQsOff;
constexpr size_t kBsumsOff = kQ8KBsumsOff;
constexpr size_t kHalf = kPanelRows / 2;  // lanes per 256-bit register

inline int32_t ld32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i bcast32(const uint8_t* p) { return _mm256_set1_epi32(ld32(p)); }
inline __m256i load(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(p));
}
// Eight f16 values of half h of a 16-lane row of f16.
inline __m256 half8(const uint8_t* p, int h) { return _mm256_cvtph_ps(load128(p + 16 * h)); }

// 16-bit shifts of whole registers (the callers mask away bits that cross bytes).
template <int S>
inline __m256i shift16(__m256i v) {
  if constexpr (S > 0) return _mm256_slli_epi16(v, S);
  if constexpr (S < 0) return _mm256_srli_epi16(v, -S);
  return v;
}

// The eight lanes of half h of a 16-lane row of byte scales, each as the int16 pair (sc, sc)
// that vpmaddwd multiplies a pair of int16 sums by: unsigned (Q4_K/Q5_K) or signed (Q6_K).
template <bool kSigned>
inline __m256i scale_pairs(const uint8_t* row, int h) {
  const __m128i v = load128(row);
  const __m128i twice = h == 0 ? _mm_unpacklo_epi8(v, v) : _mm_unpackhi_epi8(v, v);
  return kSigned ? _mm256_cvtepi8_epi16(twice) : _mm256_cvtepu8_epi16(twice);
}

// Decode streams each panel once from DRAM: ask for the lines a fixed distance ahead of the
// part being read (the blocks are contiguous, so this crosses into later ones), into L2 (T1,
// as the AVX-512 file: on Zen 4 with LIFT_ISA=avx2, one thread, 1.1B Q4_K_M decode went from
// 12.6 t/s at 4 KiB/T0 to 24.6 t/s).
constexpr size_t kAhead = 8192;
inline void prefetch_span(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kAhead + off), _MM_HINT_T1);
  }
}

inline void store_lanes(const KArgs& a, size_t o, size_t r, __m256 v) {
  if (o >= a.o_end) return;
  float* dst = a.y + r * a.ldy + o;
  if (o + kHalf <= a.o_end) return _mm256_storeu_ps(dst, v);
  alignas(32) float lanes[kHalf];
  _mm256_store_ps(lanes, v);
  for (size_t i = 0; o + i < a.o_end; ++i) dst[i] = lanes[i];
}

// Per format (matmul_panel_kquant.h's layouts): sub-block k's sc_k * dot_k goes into sumi for
// each row and half, H halves from h0 (the whole panel, H = 2, or one half).
//
// Streamed Q5_K's quads V and V + 4 of sub-block k for lanes [8 (h0 + h), +8): quads 0-4 are
// the low five bits of the five vectors, 5-7 gathered from their top three bits
// (matmul_panel_kquant.h); each field is shifted down and masked, so no bit crosses a byte.
template <class W, int V>
inline void q5_stream_quads(const uint8_t* blk, size_t k, int h, __m256i& lo, __m256i& hi) {
  const uint8_t* p = blk + W::kCodeOff + k * W::kCodeStride + 32 * h;
  const __m256i m5 = _mm256_set1_epi8(0x1F);
  auto field = [](__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
  };
  lo = _mm256_and_si256(load(p + 64 * V), m5);
  if constexpr (V == 0) {
    hi = _mm256_and_si256(load(p + 256), m5);
  } else if constexpr (V < 3) {
    const int i = 2 * (V - 1);  // quad 5: vectors 0 and 1; quad 6: 2 and 3
    hi = _mm256_or_si256(field(load(p + 64 * i), 5, 0x07), field(load(p + 64 * i + 64), 2, 0x18));
  } else {
    hi = _mm256_or_si256(
        _mm256_or_si256(field(load(p + 64), 7, 0x01), field(load(p + 192), 6, 0x02)),
        field(load(p + 256), 3, 0x1C));
  }
}

// Q4_K/Q5_K sub-block k: vectors 4k..4k+3; byte (v, lane, t) holds element 32k + 4v + t in its
// low nibble and element 32k + 16 + 4v + t in its high one (split Q5_K: 5th bits in the plane
// at kHighOff, bit v for the low quad, bit v + 4 for the high one; streamed: q5_stream_quads).
template <class W, int R, int H>
inline void affine_sub_block(const uint8_t* blk, const uint8_t* const* xb, size_t k, int h0,
                             __m256i (&sumi)[R][H]) {
  constexpr bool kQ5 = W::kType == GgmlType::Q5_K;
  constexpr int kWidenEvery = kQ5 ? 2 : 4;  // vectors (two quads each) per widening
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i sc[H];
  for (int h = 0; h < H; ++h) sc[h] = scale_pairs<false>(blk + W::kScOff + 16 * k, h0 + h);
  __m256i s16[R][H];
  auto quads = [&]<int V>() {
    __m256i lo[H], hi[H];
    for (int h = 0; h < H; ++h) {
      if constexpr (kQ5 && W::kInline) {
        q5_stream_quads<W, V>(blk, k, h0 + h, lo[h], hi[h]);
        continue;
      }
      const __m256i raw = load(blk + W::kCodeOff + k * W::kCodeStride + V * 64 + 32 * (h0 + h));
      lo[h] = _mm256_and_si256(raw, m4);
      hi[h] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (kQ5) {
        const __m256i hv = load(blk + W::kHighOff + k * W::kHighStride + 32 * (h0 + h));
        const __m256i m16 = _mm256_set1_epi8(0x10);
        lo[h] = _mm256_or_si256(lo[h], _mm256_and_si256(shift16<4 - V>(hv), m16));
        hi[h] = _mm256_or_si256(hi[h], _mm256_and_si256(shift16<-V>(hv), m16));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256i xl = bcast32(xb[r] + kQsOff + 32 * k + 4 * V);
      const __m256i xh = bcast32(xb[r] + kQsOff + 32 * k + 16 + 4 * V);
      for (int h = 0; h < H; ++h) {
        const __m256i t =
            _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xl), _mm256_maddubs_epi16(hi[h], xh));
        s16[r][h] = V % kWidenEvery == 0 ? t : _mm256_add_epi16(s16[r][h], t);
      }
    }
    if constexpr (V % kWidenEvery == kWidenEvery - 1) {
      for (int r = 0; r < R; ++r) {
        for (int h = 0; h < H; ++h) {
          sumi[r][h] = _mm256_add_epi32(sumi[r][h], _mm256_madd_epi16(s16[r][h], sc[h]));
        }
      }
    }
  };
  quads.template operator()<0>();
  quads.template operator()<1>();
  quads.template operator()<2>();
  quads.template operator()<3>();
}

// Sub-block k of 16 elements with codes under 8 (Q2_K, Q3_K): code.operator()<J>(h) gives half
// h's u8 codes of quad J; the int16 sums of the four quads are added, then widened by one
// vpmaddwd with the sub-block's scale pairs.
template <int R, int H, class Code>
inline void small_code_sub_block(const uint8_t* const* xb, size_t k, const __m256i (&sc)[H],
                                 Code code, __m256i (&sumi)[R][H]) {
  __m256i s16[R][H];
  auto quad = [&]<int J>() {
    __m256i q[H];
    for (int h = 0; h < H; ++h) q[h] = code.template operator()<J>(h);
    for (int r = 0; r < R; ++r) {
      const __m256i x = bcast32(xb[r] + kQsOff + 16 * k + 4 * static_cast<size_t>(J));
      for (int h = 0; h < H; ++h) {
        const __m256i t = _mm256_maddubs_epi16(q[h], x);
        s16[r][h] = J == 0 ? t : _mm256_add_epi16(s16[r][h], t);
      }
    }
  };
  quad.template operator()<0>();
  quad.template operator()<1>();
  quad.template operator()<2>();
  quad.template operator()<3>();
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < H; ++h) {
      sumi[r][h] = _mm256_add_epi32(sumi[r][h], _mm256_madd_epi16(s16[r][h], sc[h]));
    }
  }
}

// Q2_K sub-block k: one vector, quad j in bits 2j..2j+1 of each byte; the scale is the low
// nibble of byte k % 2 of the lane's int16 pair at kScOff + 32 (k / 2) (its min the high one).
template <class W, int R, int H>
inline void q2_sub_block(const uint8_t* blk, const uint8_t* const* xb, size_t k, int h0,
                         __m256i (&sumi)[R][H]) {
  const __m256i m2 = _mm256_set1_epi8(0x03);
  __m256i v[H], sc[H];
  for (int h = 0; h < H; ++h) {
    v[h] = load(blk + W::kCodeOff + k * W::kCodeStride + 32 * (h0 + h));
    const __m256i pair =
        _mm256_cvtepu16_epi32(load128(blk + W::kScOff + 32 * (k / 2) + 16 * (h0 + h)));
    const __m256i s =
        _mm256_and_si256(k % 2 == 0 ? pair : _mm256_srli_epi32(pair, 8), _mm256_set1_epi32(0x0F));
    sc[h] = _mm256_or_si256(s, _mm256_slli_epi32(s, 16));  // the int16 pair (sc, sc)
  }
  // 16-bit shifts: the mask drops what crosses from the neighbouring byte.
  small_code_sub_block<R, H>(
      xb, k, sc, [&]<int J>(int h) { return _mm256_and_si256(shift16<-2 * J>(v[h]), m2); }, sumi);
}

// Q3_K sub-block k: codes u = q + 4 (0..7; the offset comes off in q_bias). Split: the low two
// bits as Q2_K's in the vector at kCodeOff + (k / 2) kCodeStride + (k % 2) 64, the third bit of
// quad j in bit 4 (k % 2) + j of the pair's vector at kHighOff. Streamed: the pair's three
// vectors (matmul_panel_kquant.h), each field shifted down to bit 0 and masked.
template <class W, int R, int H>
inline void q3_sub_block(const uint8_t* blk, const uint8_t* const* xb, size_t k, int h0,
                         __m256i (&sumi)[R][H]) {
  const __m256i m2 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x04);
  if constexpr (W::kInline) {
    const bool second = k % 2 != 0;
    const __m256i m7 = _mm256_set1_epi8(0x07), m1 = _mm256_set1_epi8(0x01);
    const __m256i m6 = _mm256_set1_epi8(0x06);
    __m256i q[4][H], sc[H];
    for (int h = 0; h < H; ++h) {
      const uint8_t* p = blk + W::kCodeOff + k / 2 * W::kCodeStride + 32 * (h0 + h);
      const __m256i v0 = load(p), v1 = load(p + 64), v2 = load(p + 128);
      if (second) {
        q[0][h] = _mm256_and_si256(_mm256_srli_epi16(v0, 3), m7);
        q[1][h] = _mm256_and_si256(_mm256_srli_epi16(v1, 3), m7);
        q[2][h] = _mm256_and_si256(_mm256_srli_epi16(v2, 3), m7);
        q[3][h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 7), m1),
                                  _mm256_and_si256(_mm256_srli_epi16(v2, 5), m6));
      } else {
        q[0][h] = _mm256_and_si256(v0, m7);
        q[1][h] = _mm256_and_si256(v1, m7);
        q[2][h] = _mm256_and_si256(v2, m7);
        q[3][h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 6), m2),
                                  _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4));
      }
      sc[h] = scale_pairs<true>(blk + W::kScOff + 16 * k, h0 + h);
    }
    small_code_sub_block<R, H>(
        xb, k, sc, [&]<int J>(int h) { return q[J][h]; }, sumi);
    return;
  }
  __m256i lo[H], hv[H], sc[H];
  for (int h = 0; h < H; ++h) {
    lo[h] = load(blk + W::kCodeOff + k / 2 * W::kCodeStride + k % 2 * 64 + 32 * (h0 + h));
    hv[h] = load(blk + W::kHighOff + k / 2 * W::kHighStride + 32 * (h0 + h));
    sc[h] = scale_pairs<true>(blk + W::kScOff + 16 * k, h0 + h);
  }
  auto quads = [&]<int B>() {
    small_code_sub_block<R, H>(
        xb, k, sc,
        [&]<int J>(int h) {
          return _mm256_or_si256(_mm256_and_si256(shift16<-2 * J>(lo[h]), m2),
                                 _mm256_and_si256(shift16<2 - B - J>(hv[h]), m4));
        },
        sumi);
  };
  if (k % 2 == 0) {
    quads.template operator()<0>();
  } else {
    quads.template operator()<4>();
  }
}

// Q6_K sub-block k (16 elements), as u = q + 32 (0..63). Split: vector 2k holds quads 0 and 1
// in its low and high nibbles, 2k + 1 quads 2 and 3; the plane at kHighOff the two top bits,
// quad j in bits 2j..2j+1. Streamed: three vectors of 4 u_i over two bits of u_3 (the AVX-512
// kernel uses 4 u as it is; vpmaddubsw could overflow on it, so it is shifted back to u here).
template <class W, int R, int H>
inline void q6_sub_block(const uint8_t* blk, const uint8_t* const* xb, size_t k, int h0,
                         __m256i (&sumi)[R][H]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
  const __m256i code = _mm256_set1_epi8(static_cast<char>(0xFC)), low2 = _mm256_set1_epi8(0x03);
  __m256i hv[H], sc[H], u3[H];
  for (int h = 0; h < H; ++h) {
    if constexpr (W::kInline) {
      const uint8_t* v = blk + W::kCodeOff + k * W::kCodeStride + 32 * (h0 + h);
      // Masked before they are shifted, so no bit crosses into the next byte.
      u3[h] = _mm256_or_si256(
          _mm256_or_si256(_mm256_and_si256(load(v), low2),
                          _mm256_slli_epi16(_mm256_and_si256(load(v + 64), low2), 2)),
          _mm256_slli_epi16(_mm256_and_si256(load(v + 128), low2), 4));
    } else {
      hv[h] = load(blk + W::kHighOff + k * W::kHighStride + 32 * (h0 + h));
    }
    sc[h] = scale_pairs<true>(blk + W::kScOff + 16 * k, h0 + h);
  }
  for (int half = 0; half < 2; ++half) {  // quads 2*half and 2*half + 1
    __m256i q0[H], q1[H];
    for (int h = 0; h < H; ++h) {
      if constexpr (W::kInline) {
        const uint8_t* v = blk + W::kCodeOff + k * W::kCodeStride + 32 * (h0 + h);
        q0[h] = _mm256_srli_epi16(_mm256_and_si256(load(v + 128 * half), code), 2);
        q1[h] = half == 0 ? _mm256_srli_epi16(_mm256_and_si256(load(v + 64), code), 2) : u3[h];
        continue;
      }
      const __m256i nv = load(blk + W::kCodeOff + k * W::kCodeStride +
                              static_cast<size_t>(half) * 64 + 32 * (h0 + h));
      const __m256i hi0 = half == 0 ? _mm256_slli_epi16(hv[h], 4) : hv[h];
      const __m256i hi1 = half == 0 ? _mm256_slli_epi16(hv[h], 2) : _mm256_srli_epi16(hv[h], 2);
      q0[h] = _mm256_or_si256(_mm256_and_si256(nv, m4), _mm256_and_si256(hi0, m2));
      q1[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(nv, 4), m4),
                              _mm256_and_si256(hi1, m2));
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* x = xb[r] + kQsOff + 16 * k + 8 * static_cast<size_t>(half);
      const __m256i x0 = bcast32(x), x1 = bcast32(x + 4);
      for (int h = 0; h < H; ++h) {
        const __m256i t =
            _mm256_add_epi16(_mm256_maddubs_epi16(q0[h], x0), _mm256_maddubs_epi16(q1[h], x1));
        sumi[r][h] = _mm256_add_epi32(sumi[r][h], _mm256_madd_epi16(t, sc[h]));
      }
    }
  }
}

// IQ4_XS sub-block k: Q4_K's nibble order, each nibble a level index. The level as u = q + 128
// (1..241) would overflow vpmaddubsw's pair sums, so u = 16 u_hi + u_lo goes in as two digits
// under 16 (two byte shuffles per index vector): the int16 sums of either digit over the
// sub-block's 8 quads stay within 8 * 2 * 15 * 128 = 30720, and widen by sc and by 16 sc.
template <class W, int R, int H>
inline void iq4_xs_sub_block(const uint8_t* blk, const uint8_t* const* xb, size_t k, int h0,
                             __m256i (&sumi)[R][H]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i shifted = _mm256_broadcastsi128_si256(load128(kIq4NlShifted.v));
  const __m256i lo_lut = _mm256_and_si256(shifted, m4);
  const __m256i hi_lut = _mm256_and_si256(_mm256_srli_epi16(shifted, 4), m4);
  __m256i sc[H], sc16[H];
  for (int h = 0; h < H; ++h) {
    sc[h] = scale_pairs<true>(blk + W::kScOff + 16 * k, h0 + h);
    sc16[h] = _mm256_slli_epi16(sc[h], 4);
  }
  __m256i s_lo[R][H], s_hi[R][H];
  for (size_t v = 0; v < 4; ++v) {
    __m256i ul[2][H], uh[2][H];  // [low / high nibble][half]: digit vectors
    for (int h = 0; h < H; ++h) {
      const __m256i raw = load(blk + W::kCodeOff + k * W::kCodeStride + v * 64 + 32 * (h0 + h));
      const __m256i il = _mm256_and_si256(raw, m4);
      const __m256i ih = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      ul[0][h] = _mm256_shuffle_epi8(lo_lut, il);
      uh[0][h] = _mm256_shuffle_epi8(hi_lut, il);
      ul[1][h] = _mm256_shuffle_epi8(lo_lut, ih);
      uh[1][h] = _mm256_shuffle_epi8(hi_lut, ih);
    }
    for (int r = 0; r < R; ++r) {
      const __m256i xl = bcast32(xb[r] + kQsOff + 32 * k + 4 * v);
      const __m256i xh = bcast32(xb[r] + kQsOff + 32 * k + 16 + 4 * v);
      for (int h = 0; h < H; ++h) {
        const __m256i tl = _mm256_add_epi16(_mm256_maddubs_epi16(ul[0][h], xl),
                                            _mm256_maddubs_epi16(ul[1][h], xh));
        const __m256i th = _mm256_add_epi16(_mm256_maddubs_epi16(uh[0][h], xl),
                                            _mm256_maddubs_epi16(uh[1][h], xh));
        s_lo[r][h] = v == 0 ? tl : _mm256_add_epi16(s_lo[r][h], tl);
        s_hi[r][h] = v == 0 ? th : _mm256_add_epi16(s_hi[r][h], th);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < H; ++h) {
      const __m256i t = _mm256_add_epi32(_mm256_madd_epi16(s_lo[r][h], sc[h]),
                                         _mm256_madd_epi16(s_hi[r][h], sc16[h]));
      sumi[r][h] = _mm256_add_epi32(sumi[r][h], t);
    }
  }
}

// Q6_K's codes carry +32, Q3_K's +4, IQ4_XS's +128: per lane and row, that times
// sum_k sc_k * xsum_k comes off sumi. The scales of 16-element sub-blocks 2i and 2i + 1
// interleaved as int16 pairs meet the Q8_K bsums pair (2i, 2i + 1); a 32-element sub-block i
// meets that pair with its scale twice.
template <class W, int R, int H>
inline void q_bias(const uint8_t* blk, const uint8_t* const* xb, int h0, __m256i (&sumi)[R][H]) {
  constexpr int kShift = W::kType == GgmlType::Q3_K ? 2 : W::kType == GgmlType::IQ4_XS ? 7 : 5;
  constexpr size_t kRows = W::kSubs == 16 ? 2 : 1;  // scale rows per bsums pair
  __m256i bias[R][H];
  for (int i = 0; i < 8; ++i) {
    const __m128i r0 = load128(blk + W::kScOff + 16 * kRows * static_cast<size_t>(i));
    const __m128i r1 =
        load128(blk + W::kScOff + 16 * kRows * static_cast<size_t>(i) + 16 * (kRows - 1));
    __m256i pairs[H];
    for (int h = 0; h < H; ++h) {
      pairs[h] =
          _mm256_cvtepi8_epi16(h0 + h == 0 ? _mm_unpacklo_epi8(r0, r1) : _mm_unpackhi_epi8(r0, r1));
    }
    for (int r = 0; r < R; ++r) {
      const __m256i bs = bcast32(xb[r] + kBsumsOff + 4 * static_cast<size_t>(i));
      for (int h = 0; h < H; ++h) {
        const __m256i t = _mm256_madd_epi16(pairs[h], bs);
        bias[r][h] = i == 0 ? t : _mm256_add_epi32(bias[r][h], t);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < H; ++h) {
      sumi[r][h] = _mm256_sub_epi32(sumi[r][h], _mm256_slli_epi32(bias[r][h], kShift));
    }
  }
}

// Outputs of panel p, halves h0..h0+H-1, for activation rows r0..r0+R-1.
template <class W, int R, int H>
void k_tile(const KArgs& a, size_t p, int h0, size_t r0) {
  constexpr size_t kBlockBytes = W::kBlockBytes;
  const uint8_t* pw = panel_at(a.w, p);
  const uint8_t* ps = k_scales<W>(pw, a.nb);
  const uint8_t* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + static_cast<size_t>(r)) * a.act_stride;
  __m256 acc[R][H];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm256_setzero_ps();
  }
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* xb[R];
    __m256 dx[R];
    for (int r = 0; r < R; ++r) {
      xb[r] = xr[r] + b * sizeof(BlockQ8_K);
      dx[r] = _mm256_set1_ps(q8k_d(xb[r]));
    }
    const uint8_t* blk = pw + b * kBlockBytes;
    const uint8_t* scales = ps + b * W::kScaleStride;
    if constexpr (R < 4) {  // decode tiles stream the panel once; prefill tiles meet it cached
      prefetch_span(blk, kBlockBytes);
      _mm_prefetch(reinterpret_cast<const char*>(scales + 8 * W::kScaleStride), _MM_HINT_T0);
    }
    if constexpr (W::kHasMin) {
      // The min term: per lane sum_k m_k * xsum_k, two sub-blocks per vpmaddwd.
      constexpr int kPairs = static_cast<int>(W::kSubs) / 2;
      int32_t pairs[R][kPairs];
      for (int r = 0; r < R; ++r) sub_block_sum_pairs<W::kSubs>(xb[r], pairs[r]);
      __m256i summ[R][H];
      for (int i = 0; i < kPairs; ++i) {
        __m256i xp[R];
        for (int r = 0; r < R; ++r) xp[r] = _mm256_set1_epi32(pairs[r][i]);
        for (int h = 0; h < H; ++h) {
          __m256i mv = _mm256_cvtepu8_epi16(
              load128(blk + W::kMinOff + 32 * static_cast<size_t>(i) + 16 * (h0 + h)));
          // Q2_K keeps each sub-block's scale and min in one byte, the min in the high nibble.
          if constexpr (W::kType == GgmlType::Q2_K) mv = _mm256_srli_epi16(mv, 4);
          for (int r = 0; r < R; ++r) {
            const __m256i t = _mm256_madd_epi16(mv, xp[r]);
            summ[r][h] = i == 0 ? t : _mm256_add_epi32(summ[r][h], t);
          }
        }
      }
      for (int h = 0; h < H; ++h) {
        const __m256 dmin = half8(scales + 32, h0 + h);
        for (int r = 0; r < R; ++r) {
          acc[r][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[r][h]), _mm256_mul_ps(dmin, dx[r]),
                                       acc[r][h]);
        }
      }
    }
    __m256i sumi[R][H];
    for (auto& row : sumi) {
      for (auto& v : row) v = _mm256_setzero_si256();
    }
    for (size_t k = 0; k < W::kSubs; ++k) {
      if constexpr (W::kType == GgmlType::Q2_K) {
        q2_sub_block<W, R, H>(blk, xb, k, h0, sumi);
      } else if constexpr (W::kType == GgmlType::Q3_K) {
        q3_sub_block<W, R, H>(blk, xb, k, h0, sumi);
      } else if constexpr (W::kType == GgmlType::IQ4_XS) {
        iq4_xs_sub_block<W, R, H>(blk, xb, k, h0, sumi);
      } else if constexpr (W::kHasMin) {
        affine_sub_block<W, R, H>(blk, xb, k, h0, sumi);
      } else {
        q6_sub_block<W, R, H>(blk, xb, k, h0, sumi);
      }
    }
    if constexpr (!W::kHasMin) q_bias<W, R, H>(blk, xb, h0, sumi);
    for (int h = 0; h < H; ++h) {
      const __m256 d = half8(scales, h0 + h);
      for (int r = 0; r < R; ++r) {
        acc[r][h] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r][h]), _mm256_mul_ps(d, dx[r]), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < H; ++h) {
      store_lanes(a, p * kPanelRows + static_cast<size_t>(h0 + h) * kHalf,
                  r0 + static_cast<size_t>(r), acc[r][h]);
    }
  }
}

// One tile of exactly m rows, 1 <= m <= M.
template <class W, int M, int H>
void k_rest(const KArgs& a, size_t p, int h0, size_t r, size_t m) {
  if (m == static_cast<size_t>(M)) return k_tile<W, M, H>(a, p, h0, r);
  if constexpr (M > 1) k_rest<W, M - 1, H>(a, p, h0, r, m);
}

// Row blocks of 64 stay in L2 while the panels stream past. Decode batches (< 4 rows) take the
// whole panel per tile, so each code vector is loaded once; larger batches take one half-panel
// by 4 rows, which keeps the int16 and int32 sums of every (row, half) pair in the 16 registers.
template <class W>
void k_loop(const KArgs& a, size_t p_begin, size_t p_end, size_t n_rows) {
  constexpr size_t kRowBlock = 64;
  constexpr int kWideR = 4;
  for (size_t rb = 0; rb < n_rows; rb += kRowBlock) {
    const size_t re = min_of(n_rows, rb + kRowBlock);
    for (size_t p = p_begin; p < p_end; ++p) {
      if (re - rb < 4) {
        k_rest<W, 3, 2>(a, p, 0, rb, re - rb);
        continue;
      }
      for (int h = 0; h < 2; ++h) {
        if (p * kPanelRows + static_cast<size_t>(h) * kHalf >= a.o_end) break;
        size_t r = rb;
        for (; r + kWideR <= re; r += kWideR) k_tile<W, kWideR, 1>(a, p, h, r);
        if (r < re) k_rest<W, kWideR - 1, 1>(a, p, h, r, re - r);
      }
    }
  }
}

}  // namespace

void matmul_k_panels_avx2(const PanelView& w, const uint8_t* act, size_t act_stride, size_t n_rows,
                          float* y, size_t ldy, size_t o_begin, size_t o_end) {
  const KArgs a{w, act, act_stride, w.n_in / kKBlock, y, ldy, o_end};
  const size_t p_begin = o_begin / kPanelRows;
  const size_t p_end = (o_end + kPanelRows - 1) / kPanelRows;
  with_k_layout(w, [&]<class W>() { k_loop<W>(a, p_begin, p_end, n_rows); });
}

}  // namespace lift::kernels::detail
