// AVX-512 VNNI products of IQ4_XS rows with Q8_K activation rows, bitwise equal to the scalar
// kernel (codec_table.cpp's k_dot). Per output and super-block that kernel forms the exact
//   sumi = sum_k sc_k * sum_{e in k} q_e * x_e   (sc_k = ls_k - 32, q_e an IQ4_NL level)
// and then runs acc = acc + (d_w * d_x) * float(sumi) in float, without FMA. Here the levels go
// through vpdpbusd as bytes u = q + 128 (one vpshufb of the nibbles), whose offset comes off as
// -128 * sum_k sc_k * xsum_k (xsum_k from the Q8_K block's bsums). Every partial sum is an exact
// int32 (|sumi| < 2^28), so the order of the integer steps changes nothing, and the float step
// is the scalar one, per output: tile shape, batch and column split leave every bit alone.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_tiling.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kQsOff = offsetof(BlockQ8_K, qs);
constexpr size_t kBsumsOff = offsetof(BlockQ8_K, bsums);

// The 8 sub-block scales ls - 32 of a block, as int32: ls's low nibble is nibble k of
// scales_l (read as one little-endian word), its top two bits bits 2k..2k+1 of scales_h.
inline __m256i block_scales(const uint8_t* b) {
  uint32_t low;
  uint16_t high;
  std::memcpy(&low, b + offsetof(BlockIQ4_XS, scales_l), 4);
  std::memcpy(&high, b + offsetof(BlockIQ4_XS, scales_h), 2);
  const __m256i lo =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(0x0F));
  const __m256i hi = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(high), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

// The codes of sub-blocks 4h .. 4h + 3 as u = level + 128: the low nibbles of their 64 bytes
// (elements 0-15 of each sub-block) and the high ones (16-31), each in byte order.
inline void codes(const uint8_t* b, int h, __m512i lut, __m512i& lo, __m512i& hi) {
  const __m512i v = _mm512_loadu_si512(b + offsetof(BlockIQ4_XS, qs) + 64 * static_cast<size_t>(h));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
  hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
}

struct Iq4XsRows {
  // Outputs o..o+C-1 of rows r0..r0+R-1.
  template <int C, int R>
  static void run(const MatmulArgs& a, size_t o, size_t r0) {
    const uint8_t* wr[C];
    const uint8_t* xr[R];
    for (int c = 0; c < C; ++c) wr[c] = a.w + (o + static_cast<size_t>(c)) * a.w_row_bytes;
    for (int r = 0; r < R; ++r) xr[r] = a.act + (r0 + static_cast<size_t>(r)) * a.act_stride;
    alignas(16) uint8_t shifted[16];
    for (int i = 0; i < 16; ++i) shifted[i] = static_cast<uint8_t>(kIq4NlLevels[i] + 128);
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(shifted)));
    // The x a code vector meets: half h's low nibbles elements 32k .. 32k + 15 of each of its
    // sub-blocks k (128-bit lanes 0 and 2 of each 64-element x vector), the high ones 32k + 16
    // .. 32k + 31 (lanes 1 and 3). A dpbusd's lanes 4k .. 4k + 3 then sum sub-block 4h + k,
    // whose scale pick[h] spreads over them.
    const __m512i pick[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
    float acc[R][C] = {};
    const size_t nb = a.n_in / kKBlock;
    for (size_t b = 0; b < nb; ++b) {
      __m512i xlo[R][2], xhi[R][2];
      __m256i offset[R];  // -128 * xsum_k, k = 0..7
      float dx[R];
      for (int r = 0; r < R; ++r) {
        const uint8_t* xb = xr[r] + b * sizeof(BlockQ8_K);
        std::memcpy(&dx[r], xb + offsetof(BlockQ8_K, d), 4);
        for (int h = 0; h < 2; ++h) {
          const __m512i x0 = _mm512_loadu_si512(xb + kQsOff + 128 * h);
          const __m512i x1 = _mm512_loadu_si512(xb + kQsOff + 128 * h + 64);
          xlo[r][h] = _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
          xhi[r][h] = _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
        }
        offset[r] =
            _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kBsumsOff)),
                              _mm256_set1_epi16(-128));
      }
      for (int c = 0; c < C; ++c) {
        const uint8_t* wb = wr[c] + b * sizeof(BlockIQ4_XS);
        uint16_t dh;
        std::memcpy(&dh, wb + offsetof(BlockIQ4_XS, d), 2);
        const float dw = f16_to_f32(dh);
        const __m256i sc = block_scales(wb);
        __m512i lo[2], hi[2], sch[2];
        for (int h = 0; h < 2; ++h) {
          codes(wb, h, lut, lo[h], hi[h]);
          sch[h] = _mm512_permutexvar_epi32(pick[h], _mm512_zextsi256_si512(sc));
        }
        for (int r = 0; r < R; ++r) {
          __m512i isum = _mm512_zextsi256_si512(_mm256_mullo_epi32(sc, offset[r]));
          for (int h = 0; h < 2; ++h) {
            const __m512i dot = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[h], xlo[r][h]), hi[h], xhi[r][h]);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, sch[h]));
          }
          const float dd = dw * dx[r];
          acc[r][c] = acc[r][c] + dd * static_cast<float>(_mm512_reduce_add_epi32(isum));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        a.y[(r0 + static_cast<size_t>(r)) * a.ldy + o + static_cast<size_t>(c)] = acc[r][c];
      }
    }
  }
};

}  // namespace

void matmul_iq4xs_avx512(const MatmulArgs& a) {
  if (a.af != ActFormat::q8_k || a.wt != GgmlType::IQ4_XS) return matmul_kquant_avx2(a);
  if (a.n_rows < 4) return tile_loop<Iq4XsRows, 4, 1>(a);
  tile_loop<Iq4XsRows, 2, 4>(a);
}

}  // namespace lift::kernels::detail
