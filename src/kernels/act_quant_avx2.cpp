// AVX2 activation quantization; bit-identical to the scalar version (see act_quant_avx512.cpp).
#include <immintrin.h>

#include <cstring>

#include "kernels/act_quant_impl.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {

void quantize_q8_avx2(const float* x, size_t n, uint8_t* dst, bool with_sum) {
  const size_t block_bytes = with_sum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lo = _mm256_set1_epi32(-128);
  const __m256i hi = _mm256_set1_epi32(127);
  // packs works within 128-bit lanes; this puts the 4-byte groups back in element order.
  const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xb + 8 * k);
    __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                      _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(q8_inverse_scale(amax));
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
      q[k] = _mm256_max_epi32(_mm256_min_epi32(q[k], hi), lo);
    }
    const __m256i packed = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
        unshuffle);
    uint8_t* blk = dst + b * block_bytes;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    uint8_t* qs = blk + 2;
    if (with_sum) {
      const __m256i s8 =
          _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
      const int sum = _mm_cvtsi128_si32(s4);
      const uint16_t sh = f32_to_f16(d * static_cast<float>(sum));
      std::memcpy(blk + 2, &sh, 2);
      qs = blk + 4;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), packed);
  }
}

}  // namespace lift::kernels::detail
