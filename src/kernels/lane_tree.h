// The one way the SIMD kernels fold 16 float lanes into one: lanes j and j + w are combined
// for w = 8, 4, 2, 1. Matmul's horizontal sum and attention's sums and maxima all promise that
// tree (attention's portable versions follow it too), so it lives in one place, once per
// combining operation.
#pragma once

#include <immintrin.h>

#include "kernels/target.h"

namespace lift::kernels {
inline namespace LIFT_TARGET_NS {

#if defined(__AVX2__)
struct LaneAdd {
  static __m256 v8(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m128 v4(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
  static __m128 s1(__m128 a, __m128 b) { return _mm_add_ss(a, b); }
};
// maxps(a, b) is `a > b ? a : b`, which the portable max_lane copies.
struct LaneMax {
  static __m256 v8(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
  static __m128 v4(__m128 a, __m128 b) { return _mm_max_ps(a, b); }
  static __m128 s1(__m128 a, __m128 b) { return _mm_max_ss(a, b); }
};

// The 16 lanes lo[0..8) ++ hi[0..8).
template <class Op>
inline float fold16(__m256 lo, __m256 hi) {
  const __m256 s8 = Op::v8(lo, hi);
  __m128 s4 = Op::v4(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = Op::v4(s4, _mm_movehl_ps(s4, s4));
  s4 = Op::s1(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}
#endif

#if defined(__AVX512F__)
// (extractf32x8 for the low half: GCC 12 warns spuriously on _mm512_castps512_ps256 here.)
template <class Op>
inline float fold16(__m512 v) {
  return fold16<Op>(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
}
inline float hsum16(__m512 v) { return fold16<LaneAdd>(v); }
#endif

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
