// AVX-512 activation quantization. Only max, multiply and the round-half-even conversion are
// vectorised; they are exact or correctly rounded per lane, so the blocks equal the scalar ones.
#include <immintrin.h>

#include <cstring>

#include "kernels/act_quant_impl.h"
#include "kernels/fp16.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {

void quantize_q8_avx512(const float* x, size_t n, uint8_t* dst, bool with_sum) {
  const size_t block_bytes = with_sum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  const __m512i lo = _mm512_set1_epi32(-128);
  const __m512i hi = _mm512_set1_epi32(127);
  for (size_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    const __m512 v0 = _mm512_loadu_ps(xb);
    const __m512 v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(q8_inverse_scale(amax));
    // cvtps2dq rounds with MXCSR's default mode, nearest-even, like lrint in the scalar version.
    __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    i0 = _mm512_max_epi32(_mm512_min_epi32(i0, hi), lo);
    i1 = _mm512_max_epi32(_mm512_min_epi32(i1, hi), lo);
    uint8_t* blk = dst + b * block_bytes;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    uint8_t* qs = blk + 2;
    if (with_sum) {
      const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
      const uint16_t sh = f32_to_f16(d * static_cast<float>(sum));
      std::memcpy(blk + 2, &sh, 2);
      qs = blk + 4;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(i1));
  }
}

}  // namespace lift::kernels::detail

namespace lift::kernels::detail {

void quantize_q8_k_avx512(const float* x, size_t n, uint8_t* dst) {
  const __m512i cap = _mm512_set1_epi32(127);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (size_t b = 0; b < n / kKBlock; ++b) {
    const float* xb = x + b * kKBlock;
    __m512 vmax = _mm512_setzero_ps();
    for (size_t i = 0; i < kKBlock; i += 16) {
      vmax = _mm512_max_ps(vmax, _mm512_andnot_ps(sign, _mm512_loadu_ps(xb + i)));
    }
    const float amax = _mm512_reduce_max_ps(vmax);
    BlockQ8_K blk{};
    if (amax != 0.0f) {
      // The scale comes from the first element whose |x| equals the maximum.
      size_t first = 0;
      const __m512 vam = _mm512_set1_ps(amax);
      for (size_t i = 0; i < kKBlock; i += 16) {
        const __mmask16 hit =
            _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(xb + i)), vam, _CMP_EQ_OQ);
        if (hit != 0) {
          first = i + static_cast<size_t>(__builtin_ctz(hit));
          break;
        }
      }
      const float iscale = -127.0f / xb[first];
      const __m512 vs = _mm512_set1_ps(iscale);
      for (size_t j = 0; j < 16; ++j) {
        // cvtps2dq rounds half to even (MXCSR's default), as lrint does in the scalar version;
        // |iscale * x| <= 127 * (1 + eps), so only the cap at 127 is needed.
        const __m512i q = _mm512_min_epi32(
            _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(xb + 16 * j))), cap);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(blk.qs + 16 * j), _mm512_cvtepi32_epi8(q));
        blk.bsums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
      }
      blk.d = 1.0f / iscale;
    }
    std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
  }
}

}  // namespace lift::kernels::detail
