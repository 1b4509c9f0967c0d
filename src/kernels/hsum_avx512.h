// The one horizontal sum of 16 float lanes the AVX-512 kernels use: lanes j and j + w are
// added for w = 8, 4, 2, 1. Matmul and attention both promise that tree (attention's portable
// versions follow it too), so it lives in one place.
#pragma once

#include <immintrin.h>

namespace lift::kernels {

#if defined(__AVX512F__)
// (extractf32x8 for the low half: GCC 12 warns spuriously on _mm512_castps512_ps256 here.)
inline float hsum16(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}
#endif

}  // namespace lift::kernels
