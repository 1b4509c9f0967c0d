// AVX-512 VNNI products of K-quant panels (Q2_K to Q6_K, IQ4_XS; layouts in panel.h) with Q8_K
// activation rows. Lanes are output rows. Per output and super-block, in this fixed order:
//   Q2_K/Q4_K/Q5_K: summ = sum_k m_k * xsum_k            (vpmaddwd over int16 pairs of sub-blocks)
//         acc  = fma(-float(summ), dmin_w * d_x, acc)
//         sumi = sum_k sc_k * dot_k            (dot_k: vpdpbusd of u8 codes with i8 x)
//         acc  = fma(float(sumi), d_w * d_x, acc)
//   Q3_K/Q6_K/IQ4_XS: sumi = sum_k sc_k * (dot_k - o * xsum_k)
//         (codes stored, or looked up, as q + o: o = 4, 32, 128)
//         acc  = fma(float(sumi), d_w * d_x, acc)
// Every integer is exact, so the tile shape (C panels x R rows) never changes a result.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul_panel_kquant.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kQsOff = kQ8KQsOff;

inline __m512i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// Q5_K high-nibble quads: bit v + 4 down to bit 4.
inline __m512i hv_shift_right(__m512i hv, size_t v) {
  return v == 0 ? hv : _mm512_srli_epi16(hv, static_cast<unsigned>(v));
}
inline __m512 half16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

inline void store_lanes(const KArgs& a, size_t p, size_t r, __m512 v) {
  const size_t o = p * kPanelRows;
  const size_t valid = min_of(kPanelRows, a.o_end - o);
  float* dst = a.y + r * a.ldy + o;
  if (valid == kPanelRows) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << valid) - 1u), v);
  }
}

// Quad J of a Q2_K/Q3_K sub-block's 2-bit code vector: bits 2J..2J+1 of each byte (a 16-bit
// shift: the mask drops what crosses from the neighbouring byte).
template <int J>
inline __m512i bit_pair(__m512i lo) {
  const __m512i v = J == 0 ? lo : _mm512_srli_epi16(lo, 2 * J);
  return _mm512_and_si512(v, _mm512_set1_epi8(0x03));
}

// Q3_K quad J of a sub-block as u8 codes u = q + 4: the low two bits from lo, the third from
// bit S of hv, moved to bit 2 (the crossing bits land below bit 2 on the left shifts and above
// it on the right).
template <int J, int S>
inline __m512i q3_quad(__m512i lo, __m512i hv) {
  __m512i high = hv;
  if constexpr (S < 2) high = _mm512_slli_epi16(hv, 2 - S);
  if constexpr (S > 2) high = _mm512_srli_epi16(hv, S - 2);
  return _mm512_or_si512(bit_pair<J>(lo), _mm512_and_si512(high, _mm512_set1_epi8(0x04)));
}

// The dots of a 16-element sub-block k (Q2_K, Q3_K) over its four quads J: code<J>(c) gives
// panel c's u8 codes of quad J, and every row's dot adds their vpdpbusd with its x.
template <int R, int C, class Code>
inline void small_code_dots(__m512i (&dot)[R][C], const uint8_t* const* xb, size_t k, Code code) {
  auto quad = [&]<int J>() {
    __m512i q[C];
    for (int c = 0; c < C; ++c) q[c] = code.template operator()<J>(c);
    for (int r = 0; r < R; ++r) {
      const __m512i x = bcast32(xb[r] + kQsOff + 16 * k + 4 * static_cast<size_t>(J));
      for (int c = 0; c < C; ++c) dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], q[c], x);
    }
  };
  quad.template operator()<0>();
  quad.template operator()<1>();
  quad.template operator()<2>();
  quad.template operator()<3>();
}

// Decode streams each panel once from DRAM: ask for the lines a fixed distance ahead of the
// part of the codes being read (stream_ahead: on into the next tile's panel), into L2 (T1): an
// L1 prefetch this far ahead holds one of L1's few miss buffers per line, and measured (Zen 4,
// one thread, 1.1B Q4_K_M decode) 19.3 t/s at 4 KiB/T0 against 23.8 at 8 KiB/T1 (16 KiB:
// 20.5), before stream_ahead; with it 4-32 KiB measured alike.
constexpr size_t kAhead = 8192;

// A layout with the rows per prefill tile (k_loop): Q4_K/Q5_K/IQ4_XS 4, Q6_K 8.
template <class W>
struct Layout : W {
  static constexpr int kWideR = W::kHasMin || W::kType == GgmlType::IQ4_XS ? 4 : 8;
  static constexpr size_t kSubBytes = W::kBlockBytes / W::kSubs;  // for prefetching only
};

// Streamed Q6_K keeps its codes as 4 u (matmul_panel_kquant.h), so every sum is 4 times the
// split layout's: sumi at most 2^29 in magnitude (16 sub-blocks x 16 elements x |4q| <= 128 x
// |x| <= 128 x |sc| <= 128), exact in int32.
template <class W>
constexpr bool code_times4() {
  return W::kType == GgmlType::Q6_K && W::kInline;
}

template <class W, int C, int R>
void k_tile(const KArgs& a, size_t p0, size_t r0) {
  const uint8_t* pw[C];
  const uint8_t* ps[C];
  for (int c = 0; c < C; ++c) {
    pw[c] = panel_at(a.w, p0 + static_cast<size_t>(c));
    ps[c] = k_scales<W>(pw[c], a.nb);
  }
  const size_t next_tile = C * a.w.panel_bytes;
  // Decode tiles (k_loop) ask for the lines ahead: of split panels each stream's, of a streamed
  // panel (one ascending stream) kStreamAhead on (panel.h). Prefill tiles meet panels a row
  // block's first tile already brought in.
  constexpr bool kPrefetch = R < 4 && !W::kInline;
  const uint8_t* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + static_cast<size_t>(r)) * a.act_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i iq4_lut =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlShifted.v)));
  __m512 acc[R][C];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* xb[R];
    __m512 dx[R];
    for (int r = 0; r < R; ++r) {
      xb[r] = xr[r] + b * sizeof(BlockQ8_K);
      dx[r] = _mm512_set1_ps(q8k_d(xb[r]));
    }
    const uint8_t* blk[C];
    for (int c = 0; c < C; ++c) blk[c] = pw[c] + b * W::kBlockBytes;
    if constexpr (kPrefetch) {
      for (int c = 0; c < C; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(stream_ahead(ps[c], (b + 8) * W::kScaleBytes,
                                                                a.nb * W::kScaleBytes, next_tile)),
                     _MM_HINT_T0);
      }
    }
    if constexpr (W::kHasMin) {
      // Q2_K/Q4_K/Q5_K's min term: per lane sum_k m_k * xsum_k, two sub-blocks per vpmaddwd
      // (a Q4_K/Q5_K sub-block's xsum is two of Q8_K's 16-element sums, a Q2_K one's one).
      int32_t pairs[R][W::kSubs / 2];
      for (int r = 0; r < R; ++r) sub_block_sum_pairs<W::kSubs>(xb[r], pairs[r]);
      __m512i summ[R][C];
      for (int i = 0; i < static_cast<int>(W::kSubs) / 2; ++i) {
        __m512i xp[R];
        for (int r = 0; r < R; ++r) xp[r] = _mm512_set1_epi32(pairs[r][i]);
        for (int c = 0; c < C; ++c) {
          __m512i mv = _mm512_cvtepu8_epi16(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(blk[c] + W::kMinOff + 32 * i)));
          // Q2_K keeps each sub-block's scale and min in one byte, the min in the high nibble.
          if constexpr (W::kType == GgmlType::Q2_K) mv = _mm512_srli_epi16(mv, 4);
          for (int r = 0; r < R; ++r) {
            // vpdpwssd: the multiply and the add in one instruction (the same exact integers).
            summ[r][c] =
                i == 0 ? _mm512_madd_epi16(mv, xp[r]) : _mm512_dpwssd_epi32(summ[r][c], mv, xp[r]);
          }
        }
      }
      for (int c = 0; c < C; ++c) {
        const __m512 dmin = half16(ps[c] + b * W::kScaleStride + 32);
        for (int r = 0; r < R; ++r) {
          acc[r][c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[r][c]), _mm512_mul_ps(dmin, dx[r]),
                                       acc[r][c]);
        }
      }
    }
    // Q3_K/Q6_K: each row's code offset term per sub-block, -offset * xsum_k, all 16 at once.
    alignas(64) int32_t offsets[W::kHasMin ? 1 : R][16];
    if constexpr (W::kType == GgmlType::IQ4_XS) {
      // Levels looked up as q + 128: -128 * xsum_k, each 32-element sum two of Q8_K's.
      for (int r = 0; r < R; ++r) {
        const __m256i sums = _mm256_madd_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[r] + kQ8KBsumsOff)),
            _mm256_set1_epi16(-128));
        _mm256_store_si256(reinterpret_cast<__m256i*>(offsets[r]), sums);
      }
    } else if constexpr (!W::kHasMin) {
      // Codes stored as q + 4 (Q3_K), q + 32 (Q6_K split) or 4 (q + 32) (Q6_K streamed).
      constexpr int kShift = W::kType == GgmlType::Q3_K ? 2 : code_times4<W>() ? 7 : 5;
      for (int r = 0; r < R; ++r) {
        const __m512i sums = _mm512_cvtepi16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[r] + kQ8KBsumsOff)));
        _mm512_store_si512(
            offsets[r], _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, kShift)));
      }
    }
    __m512i sumi[R][C];
    for (size_t k = 0; k < W::kSubs; ++k) {
      if constexpr (W::kInline && R < 4) {
        // A streamed panel's sub-block share of the block, kStreamAhead on (panel.h).
        for (int c = 0; c < C; ++c) {
          prefetch_ahead(blk[c] + k * W::kSubBytes, W::kSubBytes);
        }
      }
      if constexpr (kPrefetch) {
        for (int c = 0; c < C; ++c) {
          prefetch_stream_l2(pw[c], b * W::kBlockBytes + k * W::kSubBytes + kAhead, W::kSubBytes,
                             a.nb * W::kBlockBytes, next_tile);
        }
      }
      __m512i dot[R][C];
      if constexpr (W::kType == GgmlType::Q5_K && W::kInline) {
        // Q5_K streamed: quads 0-4 one mask each, quads 5-7 from the top three bits of the five
        // vectors (matmul_panel_kquant.h): two or three shifts, one or two bit selects (0xCA:
        // first ? second : third) and a mask, which also clears what the 16-bit shifts carried
        // in from the next byte. 19 operations per sub-block where nibbles and 5th bits took 40.
        // One row: even and odd quads in two chains (the sum is exact either way).
        __m512i odd[R][C];
        for (int r = 0; r < R; ++r) {
          for (int c = 0; c < C; ++c) dot[r][c] = odd[r][c] = _mm512_setzero_si512();
        }
        const __m512i m5 = _mm512_set1_epi8(0x1F);
        __m512i v[5][C];
        for (int c = 0; c < C; ++c) {
          for (int i = 0; i < 5; ++i) {
            v[i][c] = _mm512_load_si512(blk[c] + W::kCodeOff + k * W::kCodeStride + 64 * i);
          }
        }
        auto quad = [&]<int J>(int c) {
          if constexpr (J < 5) {
            return _mm512_and_si512(v[J][c], m5);
          } else if constexpr (J < 7) {
            constexpr int i = 2 * (J - 5);  // quad 5: vectors 0 and 1; quad 6: 2 and 3
            return _mm512_and_si512(
                _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x07), _mm512_srli_epi16(v[i][c], 5),
                                          _mm512_srli_epi16(v[i + 1][c], 2), 0xCA),
                m5);
          } else {
            const __m512i low2 =
                _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x01), _mm512_srli_epi16(v[1][c], 7),
                                          _mm512_srli_epi16(v[3][c], 6), 0xCA);
            return _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_set1_epi8(0x03), low2,
                                                              _mm512_srli_epi16(v[4][c], 3), 0xCA),
                                    m5);
          }
        };
        auto step = [&]<int J>() {
          __m512i q[C];
          for (int c = 0; c < C; ++c) q[c] = quad.template operator()<J>(c);
          for (int r = 0; r < R; ++r) {
            const __m512i x = bcast32(xb[r] + kQsOff + 32 * k + 4 * static_cast<size_t>(J));
            for (int c = 0; c < C; ++c) {
              if constexpr (R == 1 && J % 2 != 0) {
                odd[r][c] = _mm512_dpbusd_epi32(odd[r][c], q[c], x);
              } else {
                dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], q[c], x);
              }
            }
          }
        };
        step.template operator()<0>();
        step.template operator()<1>();
        step.template operator()<2>();
        step.template operator()<3>();
        step.template operator()<4>();
        step.template operator()<5>();
        step.template operator()<6>();
        step.template operator()<7>();
        if constexpr (R == 1) {
          for (int c = 0; c < C; ++c) dot[0][c] = _mm512_add_epi32(dot[0][c], odd[0][c]);
        }
      } else if constexpr (W::kType == GgmlType::Q4_K && R == 1) {
        // Q4_K, one row: the high nibbles are used in place, as 16 times the code (one mask, no
        // shift), in a second chain whose sum is 16 times theirs: exact, so dot = lo + hi / 16.
        // Two chains of 4 instead of one of 8 as well. Compute only (weights in L3, one thread):
        // 98-99 against 103-109 us for 2048 x 5632; a decode from DRAM on this machine stays
        // where it was (bandwidth-bound). With more rows (more chains already) the extra add and
        // shift per sub-block cost more than they save (lift_kernel_bench).
        __m512i dh[R][C];
        for (int r = 0; r < R; ++r) {
          for (int c = 0; c < C; ++c) dot[r][c] = dh[r][c] = _mm512_setzero_si512();
        }
        const __m512i mf0 = _mm512_set1_epi8(static_cast<char>(0xF0));
        for (size_t v = 0; v < 4; ++v) {
          __m512i lo[C], hi[C];
          for (int c = 0; c < C; ++c) {
            const __m512i raw =
                _mm512_load_si512(blk[c] + W::kCodeOff + k * W::kCodeStride + v * 64);
            lo[c] = _mm512_and_si512(raw, m4);
            hi[c] = _mm512_and_si512(raw, mf0);
          }
          for (int r = 0; r < R; ++r) {
            const __m512i xl = bcast32(xb[r] + kQsOff + 32 * k + 4 * v);
            const __m512i xh = bcast32(xb[r] + kQsOff + 32 * k + 16 + 4 * v);
            for (int c = 0; c < C; ++c) {
              dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], lo[c], xl);
              dh[r][c] = _mm512_dpbusd_epi32(dh[r][c], hi[c], xh);
            }
          }
        }
        for (int r = 0; r < R; ++r) {
          for (int c = 0; c < C; ++c) {
            dot[r][c] = _mm512_add_epi32(dot[r][c], _mm512_srai_epi32(dh[r][c], 4));
          }
        }
      } else if constexpr (W::kSubs == 8) {
        // Q4_K (more rows), Q5_K, and IQ4_XS, whose nibbles are level indexes looked up as u =
        // level + 128 (one byte shuffle per vector; every level is below 128 in magnitude), the
        // offset the initial bias.
        constexpr bool kLevels = W::kType == GgmlType::IQ4_XS;
        for (int r = 0; r < R; ++r) {
          const __m512i bias = kLevels ? _mm512_set1_epi32(offsets[r][k]) : _mm512_setzero_si512();
          for (int c = 0; c < C; ++c) dot[r][c] = bias;
        }
        for (size_t v = 0; v < 4; ++v) {
          __m512i lo[C], hi[C];
          for (int c = 0; c < C; ++c) {
            const __m512i raw =
                _mm512_load_si512(blk[c] + W::kCodeOff + k * W::kCodeStride + v * 64);
            lo[c] = _mm512_and_si512(raw, m4);
            hi[c] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if constexpr (W::kHighOff != 0) {
              // Q5_K: bit v of a byte is the 5th bit of quad v (low nibbles), bit v + 4 that
              // of quad v + 4 (high nibbles); moved to bit 4 (16-bit shifts only spill into
              // bits the mask drops).
              const __m512i hv = _mm512_load_si512(blk[c] + W::kHighOff + k * W::kHighStride);
              const __m512i m16 = _mm512_set1_epi8(0x10);
              lo[c] = _mm512_or_si512(
                  lo[c],
                  _mm512_and_si512(_mm512_slli_epi16(hv, static_cast<unsigned>(4 - v)), m16));
              hi[c] = _mm512_or_si512(hi[c], _mm512_and_si512(hv_shift_right(hv, v), m16));
            }
            if constexpr (kLevels) {
              lo[c] = _mm512_shuffle_epi8(iq4_lut, lo[c]);
              hi[c] = _mm512_shuffle_epi8(iq4_lut, hi[c]);
            }
          }
          for (int r = 0; r < R; ++r) {
            const __m512i xl = bcast32(xb[r] + kQsOff + 32 * k + 4 * v);
            const __m512i xh = bcast32(xb[r] + kQsOff + 32 * k + 16 + 4 * v);
            for (int c = 0; c < C; ++c) {
              dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], lo[c], xl);
              dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], hi[c], xh);
            }
          }
        }
      } else if constexpr (W::kType == GgmlType::Q2_K) {
        // Q2_K: the codes q (0..3) are bits 2j..2j+1 of the sub-block's one vector.
        for (auto& row : dot) {
          for (auto& v : row) v = _mm512_setzero_si512();
        }
        __m512i lo[C];
        for (int c = 0; c < C; ++c) {
          lo[c] = _mm512_load_si512(blk[c] + W::kCodeOff + k * W::kCodeStride);
        }
        small_code_dots<R, C>(dot, xb, k, [&]<int J>(int c) { return bit_pair<J>(lo[c]); });
      } else if constexpr (W::kType == GgmlType::Q3_K && W::kInline) {
        // Q3_K streamed (matmul_panel_kquant.h): the pair's first sub-block's codes u (q + 4) in
        // bits 0-2, the second's as 8 u in bits 3-5, the last quad of each from bits 6-7 of the
        // three vectors. The offset comes off up front (-4 * xsum_k, 8 times that for 8 u).
        const bool second = k % 2 != 0;
        for (int r = 0; r < R; ++r) {
          const __m512i bias = _mm512_set1_epi32(offsets[r][k] * (second ? 8 : 1));
          for (int c = 0; c < C; ++c) dot[r][c] = bias;
        }
        const __m512i code = _mm512_set1_epi8(static_cast<char>(second ? 0x38 : 0x07));
        const __m512i pick = _mm512_set1_epi8(static_cast<char>(second ? 0x08 : 0x03));
        __m512i v[3][C], last[C];
        for (int c = 0; c < C; ++c) {
          const uint8_t* p = blk[c] + W::kCodeOff + k / 2 * W::kCodeStride;
          for (int i = 0; i < 3; ++i) v[i][c] = _mm512_load_si512(p + 64 * i);
          // The last quad: first sub-block's bits 0-1 from v0's 6-7 and bit 2 from v1's 6;
          // the second's bit 3 from v1's 7 and bits 4-5 from v2's 6-7 (0xCA: first ? second :
          // third; the mask clears what the 16-bit shifts carried in from the next byte).
          const __m512i s1 = _mm512_srli_epi16(v[1][c], 4);
          const __m512i t =
              second ? _mm512_ternarylogic_epi32(pick, s1, _mm512_srli_epi16(v[2][c], 2), 0xCA)
                     : _mm512_ternarylogic_epi32(pick, _mm512_srli_epi16(v[0][c], 6), s1, 0xCA);
          last[c] = _mm512_and_si512(t, code);
        }
        small_code_dots<R, C>(dot, xb, k, [&]<int J>(int c) {
          if constexpr (J == 3) {
            return last[c];
          } else {
            return _mm512_and_si512(v[J][c], code);
          }
        });
        if (second) {
          // 8 times the dot: exact, so the shift gives it back.
          for (auto& row : dot) {
            for (auto& d : row) d = _mm512_srai_epi32(d, 3);
          }
        }
      } else if constexpr (W::kType == GgmlType::Q3_K) {
        // Q3_K: codes u = q + 4, the offset taken out up front as -4 * xsum_k. Sub-block k's
        // third bits are bits 4 (k % 2) + j of its pair's vector.
        for (int r = 0; r < R; ++r) {
          const __m512i bias = _mm512_set1_epi32(offsets[r][k]);
          for (int c = 0; c < C; ++c) dot[r][c] = bias;
        }
        __m512i lo[C], hv[C];
        for (int c = 0; c < C; ++c) {
          lo[c] = _mm512_load_si512(blk[c] + W::kCodeOff + k / 2 * W::kCodeStride + k % 2 * 64);
          hv[c] = _mm512_load_si512(blk[c] + W::kHighOff + k / 2 * W::kHighStride);
        }
        if (k % 2 == 0) {
          small_code_dots<R, C>(dot, xb, k,
                                [&]<int J>(int c) { return q3_quad<J, J>(lo[c], hv[c]); });
        } else {
          small_code_dots<R, C>(dot, xb, k,
                                [&]<int J>(int c) { return q3_quad<J, 4 + J>(lo[c], hv[c]); });
        }
      } else if constexpr (W::kType == GgmlType::Q6_K && W::kInline) {
        // Q6_K streamed: codes as 4 u (q + 32), whose 4 * 32 offset is taken out up front; quad
        // 3's from the bit pairs under the other three (matmul_panel_kquant.h): 9 operations per
        // sub-block where the split layout's nibbles and high bits take 17.
        for (int r = 0; r < R; ++r) {
          const __m512i bias = _mm512_set1_epi32(offsets[r][k]);
          for (int c = 0; c < C; ++c) dot[r][c] = bias;
        }
        const __m512i code = _mm512_set1_epi8(static_cast<char>(0xFC));
        const __m512i top2 = _mm512_set1_epi8(static_cast<char>(0xC0));
        const __m512i top4 = _mm512_set1_epi8(static_cast<char>(0xF0));
        __m512i q[4][C];
        for (int c = 0; c < C; ++c) {
          const uint8_t* v = blk[c] + W::kCodeOff + k * W::kCodeStride;
          const __m512i v0 = _mm512_load_si512(v);
          const __m512i v1 = _mm512_load_si512(v + 64);
          const __m512i v2 = _mm512_load_si512(v + 128);
          q[0][c] = _mm512_and_si512(v0, code);
          q[1][c] = _mm512_and_si512(v1, code);
          q[2][c] = _mm512_and_si512(v2, code);
          // Bits 6-7 from v2's 0-1, 4-5 from v1's, 2-3 from v0's (0xCA: first ? second : third);
          // the 16-bit shifts carry a byte's top bits into the next byte's bits 0-5, which the
          // selects replace and the last mask clears.
          const __m512i hi = _mm512_ternarylogic_epi32(top2, _mm512_slli_epi16(v2, 6),
                                                       _mm512_slli_epi16(v1, 4), 0xCA);
          q[3][c] = _mm512_and_si512(
              _mm512_ternarylogic_epi32(top4, hi, _mm512_slli_epi16(v0, 2), 0xCA), code);
        }
        for (int j = 0; j < 4; ++j) {
          for (int r = 0; r < R; ++r) {
            const __m512i x = bcast32(xb[r] + kQsOff + 16 * k + 4 * static_cast<size_t>(j));
            for (int c = 0; c < C; ++c) dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], q[j][c], x);
          }
        }
      } else {
        // Q6_K: the codes' +32 offset is taken out up front, -32 * xsum_k.
        for (int r = 0; r < R; ++r) {
          const __m512i bias = _mm512_set1_epi32(offsets[r][k]);
          for (int c = 0; c < C; ++c) dot[r][c] = bias;
        }
        const __m512i m2 = _mm512_set1_epi8(0x30);
        for (int j = 0; j < 4; ++j) {
          __m512i q[C];
          for (int c = 0; c < C; ++c) {
            const __m512i nv = _mm512_load_si512(blk[c] + W::kCodeOff + k * W::kCodeStride +
                                                 static_cast<size_t>(j / 2) * 64);
            const __m512i hv = _mm512_load_si512(blk[c] + W::kHighOff + k * W::kHighStride);
            const __m512i low = j % 2 == 0 ? _mm512_and_si512(nv, m4)
                                           : _mm512_and_si512(_mm512_srli_epi16(nv, 4), m4);
            __m512i high;
            if (j == 0) {
              high = _mm512_slli_epi16(hv, 4);
            } else if (j == 1) {
              high = _mm512_slli_epi16(hv, 2);
            } else if (j == 2) {
              high = hv;
            } else {
              high = _mm512_srli_epi16(hv, 2);
            }
            q[c] = _mm512_or_si512(low, _mm512_and_si512(high, m2));
          }
          for (int r = 0; r < R; ++r) {
            const __m512i x = bcast32(xb[r] + kQsOff + 16 * k + 4 * static_cast<size_t>(j));
            for (int c = 0; c < C; ++c) dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], q[c], x);
          }
        }
      }
      for (int c = 0; c < C; ++c) {
        __m512i sc;
        if constexpr (W::kType == GgmlType::Q2_K) {
          // Q2_K: the low nibble of byte k % 2 of the sub-block pair's int16 lanes.
          const __m512i pair = _mm512_cvtepu16_epi32(_mm256_load_si256(
              reinterpret_cast<const __m256i*>(blk[c] + W::kScOff + 32 * (k / 2))));
          sc = _mm512_and_si512(k % 2 == 0 ? pair : _mm512_srli_epi32(pair, 8),
                                _mm512_set1_epi32(0x0F));
        } else {
          const __m128i raw =
              _mm_load_si128(reinterpret_cast<const __m128i*>(blk[c] + W::kScOff + 16 * k));
          // Q4_K/Q5_K scales are unsigned 6-bit, Q6_K's and Q3_K's signed 8-bit.
          sc = W::kHasMin ? _mm512_cvtepu8_epi32(raw) : _mm512_cvtepi8_epi32(raw);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i t = _mm512_mullo_epi32(dot[r][c], sc);
          sumi[r][c] = k == 0 ? t : _mm512_add_epi32(sumi[r][c], t);
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      const __m512 d = half16(ps[c] + b * W::kScaleStride);
      for (int r = 0; r < R; ++r) {
        // Four times the codes made four times the sum: exact, so the shift gives it back.
        if constexpr (code_times4<W>()) sumi[r][c] = _mm512_srai_epi32(sumi[r][c], 2);
        acc[r][c] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r][c]), _mm512_mul_ps(d, dx[r]), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      store_lanes(a, p0 + static_cast<size_t>(c), r0 + static_cast<size_t>(r), acc[r][c]);
    }
  }
}

// One tile of exactly m rows, 1 <= m <= M.
template <class W, int C, int M>
void k_rest(const KArgs& a, size_t p, size_t r, size_t m) {
  if (m == static_cast<size_t>(M)) return k_tile<W, C, M>(a, p, r);
  if constexpr (M > 1) k_rest<W, C, M - 1>(a, p, r, m);
}

// Rows [r, r_end) in tiles of R, the remainder (< R rows) as one tile of exactly that many.
template <class W, int C, int R>
void k_rows(const KArgs& a, size_t p, size_t r, size_t r_end) {
  for (; r + R <= r_end; r += R) k_tile<W, C, R>(a, p, r);
  if constexpr (R > 1) {
    if (r < r_end) k_rest<W, C, R - 1>(a, p, r, r_end - r);
  }
}

// Row blocks of 64 stay in L2 while the panels stream past. Decode batches (< 4 rows) take
// 4 split panels per tile or 1 streamed one; larger ones 2 panels x kWideR rows. Q4_K/Q5_K's 4 rows
// keep dot, sumi and acc of every (panel, row) pair in registers (1 x 8 and 2 x 8 measured slower);
// Q6_K, whose unpack costs more per code and is shared by every row, measured faster at 8 rows
// despite the spills.
template <class W>
void k_loop(const KArgs& a, size_t p_begin, size_t p_end, size_t n_rows) {
  constexpr size_t kRowBlock = 64;
  for (size_t rb = 0; rb < n_rows; rb += kRowBlock) {
    const size_t re = min_of(n_rows, rb + kRowBlock);
    size_t p = p_begin;
    if (re - rb < 4) {
      // Streamed panels one at a time: one ascending stream (panel.h).
      constexpr int kDecodeC = W::kInline ? 1 : 4;
      for (; p + kDecodeC <= p_end; p += kDecodeC) k_rows<W, kDecodeC, 3>(a, p, rb, re);
    } else {
      for (; p + 2 <= p_end; p += 2) k_rows<W, 2, W::kWideR>(a, p, rb, re);
    }
    for (; p < p_end; ++p) k_rows<W, 1, 4>(a, p, rb, re);
  }
}

}  // namespace

void matmul_k_panels_avx512(const PanelView& w, const uint8_t* act, size_t act_stride,
                            size_t n_rows, float* y, size_t ldy, size_t o_begin, size_t o_end) {
  const KArgs a{w, act, act_stride, w.n_in / kKBlock, y, ldy, o_end};
  const size_t p_begin = o_begin / kPanelRows;
  const size_t p_end = (o_end + kPanelRows - 1) / kPanelRows;
  with_k_layout(w, [&]<class W>() { k_loop<Layout<W>>(a, p_begin, p_end, n_rows); });
}

}  // namespace lift::kernels::detail
