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

// hsum16 of many vectors at once, transposed: each step pairs the lanes fold16 pairs (j and
// j + w), of two vectors in one add, so every sum is the same additions of the same lanes in the
// same order, in about a third of the instructions of one fold per vector (which is most of a
// small matrix product's time: stories260K's rows are 64 floats, four chunks per output).
// Steps w = 8 and 4 over 128-bit quarters: four vectors in, quarter k of the result holds
// v[k]'s four partial sums.
inline __m512 hsum16_quarters(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
}
// Steps w = 2 and 1 within quarters: lane 4k + e of the result is the sum of quarter k of
// t[e] (hsum16_quarters' output).
inline __m512 hsum16_lanes(__m512 t0, __m512 t1, __m512 t2, __m512 t3) {
  const __m512 u0 = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u1 = _mm512_add_ps(_mm512_shuffle_ps(t2, t3, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(t2, t3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
}
// Lane i of the result: hsum16(v[i]), for 16 vectors.
inline __m512 hsum16_x16(const __m512* v) {
  const __m512 z = hsum16_lanes(
      hsum16_quarters(v[0], v[1], v[2], v[3]), hsum16_quarters(v[4], v[5], v[6], v[7]),
      hsum16_quarters(v[8], v[9], v[10], v[11]), hsum16_quarters(v[12], v[13], v[14], v[15]));
  // z's lane 4k + e holds v[4e + k]'s sum.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, z);
}
// Lane i of the result: hsum16(v[i]), for 4 vectors.
inline __m128 hsum16_x4(const __m512* v) {
  const __m512 t = hsum16_quarters(v[0], v[1], v[2], v[3]);
  const __m512 z = hsum16_lanes(t, t, t, t);  // lane 4k + e: v[k]'s sum, for every e
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(order, z));
}
#endif

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels
