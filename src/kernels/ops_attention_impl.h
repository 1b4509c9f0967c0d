// The fast attention kernel, included by one translation unit per instruction set, each
// defining LIFT_ATTENTION_NS. The code is written lane-wise (16 independent partial sums,
// fixed combining trees, no FMA contraction) so every instruction set rounds the same way.
// That includes exp: a polynomial in separate IEEE multiplies and adds, not the C library's,
// whose vector and scalar versions could not be made to agree.
// (No include guard: meant to be included once per namespace.)
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/fp16.h"
#include "kernels/hsum_avx512.h"
#include "kernels/ops.h"

namespace lift::kernels::LIFT_ATTENTION_NS {

namespace {

// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln 2 / 2, ln 2 / 2].
// Below kExpLo the result would be subnormal and is 0 instead (so exp(-inf) = 0, which the
// first block's correction relies on); above kExpHi it is +inf. Both bounds keep 2^n * exp(r)
// a normal float, so the scaling is an exact add to the exponent field.
constexpr float kExpLo = -87.33f;
constexpr float kExpHi = 88.72f;
constexpr float kLog2e = 0x1.715476p+0f;
// 1.5 * 2^23: adding it rounds to an integer (to nearest even), which then sits in the low
// mantissa bits, so n needs no float-to-int conversion (whose vector and scalar forms differ).
constexpr float kRoundMagic = 0x1.8p+23f;
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 15 significant bits: n * kLn2Hi is exact for |n| <= 2^8
// and x - n * kLn2Hi is exact too (the operands are within a factor of two).
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
// exp(r) ~ 1 + r + r^2 * (c2 + c3 r + c4 r^2 + c5 r^3 + c6 r^4): a Chebyshev fit of
// (exp(r) - 1 - r) / r^2 on [-ln 2 / 2, ln 2 / 2], relative error 1e-8 with these float
// coefficients. Evaluated in float the result is within 1 ulp of exp (rounded from double)
// for every float in [kExpLo, kExpHi]; the attention test checks every 101st.
constexpr float kExpC2 = 0x1p-1f;
constexpr float kExpC3 = 0x1.5554dep-3f;
constexpr float kExpC4 = 0x1.55551ap-5f;
constexpr float kExpC5 = 0x1.120b62p-7f;
constexpr float kExpC6 = 0x1.6d10fcp-10f;

// The definition every vector version follows operation by operation. NaN stays NaN (the
// clamps keep it and any scale times NaN is NaN).
inline float exp_lane(float x) {
  float xc = x < kExpLo ? kExpLo : x;
  xc = xc > kExpHi ? kExpHi : xc;
  const float t = xc * kLog2e + kRoundMagic;
  const float n = t - kRoundMagic;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float q = kExpC6 * r + kExpC5;
  q = q * r + kExpC4;
  q = q * r + kExpC3;
  q = q * r + kExpC2;
  const float p = 1.0f + (r + (r * r) * q);
  // The low bits of t hold n + 2^22; shifted by 23 only n's bits remain, at the exponent.
  const float y =
      std::bit_cast<float>(std::bit_cast<uint32_t>(p) + (std::bit_cast<uint32_t>(t) << 23));
  if (x < kExpLo) return 0.0f;
  if (x > kExpHi) return INFINITY;
  return y;
}

// max(a, b) as maxps computes it (a if a > b, else b), so scalar and vector code agree even
// on signed zeros.
inline float max_lane(float a, float b) { return a > b ? a : b; }

#if defined(__AVX512F__)
// exp_lane on 16 lanes.
inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(kExpLo), hi = _mm512_set1_ps(kExpHi);
  // maxps(lo, x) is `lo > x ? lo : x`, the scalar clamp with NaN kept; likewise minps.
  const __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  const __m512 t =
      _mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _mm512_set1_ps(kRoundMagic));
  const __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(kRoundMagic));
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Hi))),
                                 _mm512_mul_ps(n, _mm512_set1_ps(kLn2Lo)));
  __m512 q = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(kExpC6), r), _mm512_set1_ps(kExpC5));
  q = _mm512_add_ps(_mm512_mul_ps(q, r), _mm512_set1_ps(kExpC4));
  q = _mm512_add_ps(_mm512_mul_ps(q, r), _mm512_set1_ps(kExpC3));
  q = _mm512_add_ps(_mm512_mul_ps(q, r), _mm512_set1_ps(kExpC2));
  const __m512 p =
      _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(r, _mm512_mul_ps(_mm512_mul_ps(r, r), q)));
  const __m512 y = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(_mm512_castps_si512(t), 23)));
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __mmask16 over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
  return _mm512_mask_mov_ps(_mm512_maskz_mov_ps(static_cast<__mmask16>(~under), y), over,
                            _mm512_set1_ps(INFINITY));
}
#elif defined(__AVX2__)
// exp_lane on 8 lanes.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo), hi = _mm256_set1_ps(kExpHi);
  const __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 t =
      _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _mm256_set1_ps(kRoundMagic));
  const __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(kRoundMagic));
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 q = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(kExpC6), r), _mm256_set1_ps(kExpC5));
  q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(kExpC4));
  q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(kExpC3));
  q = _mm256_add_ps(_mm256_mul_ps(q, r), _mm256_set1_ps(kExpC2));
  const __m256 p =
      _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(r, _mm256_mul_ps(_mm256_mul_ps(r, r), q)));
  const __m256 y = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(t), 23)));
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_andnot_ps(under, y), _mm256_set1_ps(INFINITY), over);
}
#endif

// Sums and maxima of 16 lanes combine lanes j and j + w for w = 8, 4, 2, 1, in every ISA.
#if defined(__AVX512F__)
inline float sum16(__m512 v) { return hsum16(v); }

inline float max16(__m512 v) {
  const __m256 s8 = _mm256_max_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_max_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}
#elif defined(__AVX2__)
inline float sum16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

inline float max16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_max_ps(lo, hi);
  __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_max_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}
#else
inline float sum16(float* v) {
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) v[j] += v[j + w];
  }
  return v[0];
}

inline float max16(float* v) {
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) v[j] = max_lane(v[j], v[j + w]);
  }
  return v[0];
}
#endif

// Dot product with 16 independent partial sums combined in a fixed tree: the compiler maps
// the lanes onto vector registers without reassociating, so every ISA rounds identically.
// Products are accumulated with fused multiply-adds: one correctly rounded operation, the same
// in hardware and in std::fma, so the scalar path keeps the vector paths' bits.
#if defined(__AVX512F__)
// The same lanes and the same combining tree as the portable version below, spelled out:
// lane j is fma(a[i], b[i], lane j) for i = j mod 16 (masked for the tail), then lanes j and
// j + w are added for w = 8, 4, 2, 1.
inline float dot16(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i),
                                acc, m);
  }
  return sum16(acc);
}

// For each of Q queries: o[d] = o[d] * c, then o[d] = fma(p[j], v_j[d], o[d]) for j = 0, 1, ...
// left to right (v_j at v + j * stride), its own weights, row count, correction and output. Per
// element the same sequence as the portable loop; the queries share every load of V, and
// with four vectors per query there are 4Q independent chains of adds: Q = 4 keeps both
// floating-point ports busy, fewer leave them waiting on the adds' latency.
template <size_t Q>
inline void accumulate_rows(const float* const* p, const size_t* len, const float* c,
                            float* const* o, const float* v, size_t stride, size_t n) {
  size_t all = len[0];
  for (size_t t = 1; t < Q; ++t) all = std::min(all, len[t]);
  for (size_t d = 0; d < n; d += 64) {
    __mmask16 m[4];
    for (size_t u = 0; u < 4; ++u) {
      const size_t at = d + 16 * u;
      m[u] = static_cast<__mmask16>(at + 16 <= n ? 0xFFFF : at < n ? (1u << (n - at)) - 1 : 0);
    }
    __m512 acc[Q][4];
    for (size_t t = 0; t < Q; ++t) {
      for (size_t u = 0; u < 4; ++u) {
        acc[t][u] =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(m[u], o[t] + d + 16 * u), _mm512_set1_ps(c[t]));
      }
    }
    for (size_t j = 0; j < all; ++j) {
      __m512 w[Q];
      for (size_t t = 0; t < Q; ++t) w[t] = _mm512_set1_ps(p[t][j]);
      for (size_t u = 0; u < 4; ++u) {
        const __m512 vv = _mm512_maskz_loadu_ps(m[u], v + j * stride + d + 16 * u);
        for (size_t t = 0; t < Q; ++t) acc[t][u] = _mm512_fmadd_ps(w[t], vv, acc[t][u]);
      }
    }
    // Unrolled so that acc stays in registers.
#pragma GCC unroll 4
    for (size_t t = 0; t < Q; ++t) {
      for (size_t j = all; j < len[t]; ++j) {
        const __m512 w = _mm512_set1_ps(p[t][j]);
        for (size_t u = 0; u < 4; ++u) {
          acc[t][u] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[u], v + j * stride + d + 16 * u),
                                      acc[t][u]);
        }
      }
    }
    for (size_t t = 0; t < Q; ++t) {
      for (size_t u = 0; u < 4; ++u) _mm512_mask_storeu_ps(o[t] + d + 16 * u, m[u], acc[t][u]);
    }
  }
}

// The 16 lanes of each score of scores16 (see there), chunk by chunk of q for all rows at once:
// 16 independent chains of adds. Rows past len read the last row again; their lanes are never
// stored. All rows are usually there, and then no offsets need loading; kN != 0 fixes n = kN,
// for the common head sizes: the fully unrolled loop is much faster.
template <bool kFull, size_t kN>
[[gnu::always_inline]] inline void score_lanes16(const float* q, const float* k, size_t stride,
                                                 size_t len, size_t n, __m512* acc) {
  if constexpr (kN != 0) n = kN;
  // Lane vector s holds row bitrev(s) (see scores16).
  constexpr size_t kRow[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
  size_t off[16];
  for (size_t j = 0; j < 16; ++j) off[j] = std::min(kRow[j], len - 1) * stride;
  auto row = [&](size_t j) { return k + (kFull ? kRow[j] * stride : off[j]); };
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 qv = _mm512_loadu_ps(q + i);
    for (size_t j = 0; j < 16; ++j) {
      acc[j] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(row(j) + i), acc[j]);
    }
  }
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 qv = _mm512_maskz_loadu_ps(tail, q + i);
    for (size_t j = 0; j < 16; ++j) {
      acc[j] = _mm512_mask3_fmadd_ps(qv, _mm512_maskz_loadu_ps(tail, row(j) + i), acc[j], tail);
    }
  }
}

// Scores of one query against up to 16 K rows (k_j at k + j * stride) at once: each score is
// dot16(q, k_j) exactly (same lanes, same tree), but the 16 trees are evaluated together
// with lane shuffles, which costs far less than 16 separate horizontal sums.
inline void scores16(const float* q, const float* k, size_t stride, size_t len, size_t n,
                     float scale, float* out) {
  __m512 acc[16];
  if (len == 16 && n == 64) {
    score_lanes16<true, 64>(q, k, stride, len, n, acc);
  } else if (len == 16 && n == 128) {
    score_lanes16<true, 128>(q, k, stride, len, n, acc);
  } else if (len == 16) {
    score_lanes16<true, 0>(q, k, stride, len, n, acc);
  } else {
    score_lanes16<false, 0>(q, k, stride, len, n, acc);
  }
  // Level w: lanes j and j + w of every group are added, two vectors at a time: the half of
  // the result's lanes where the first vector's sums land take one addend in place from it,
  // the other half from the second vector, so one blend and one shuffle line up both addends
  // (the obvious two shuffles would both need the one shuffle port). Sums land in bit-reversed
  // order, hence the bit-reversed rows in score_lanes16: lane j ends with row j's score.
  auto level = [](__m512 a, __m512 b, __mmask16 own, __m512 partner) {
    return _mm512_add_ps(_mm512_mask_blend_ps(own, a, b), partner);
  };
  const __m512i idx4 =
      _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
  const __m512i idx1 = _mm512_setr_epi32(1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30);
  __m512 s1[8], s2[4], s3[2];
  for (int t = 0; t < 8; ++t) {
    const __m512 a = acc[2 * t], b = acc[2 * t + 1];
    s1[t] = level(a, b, 0xFF00, _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 3, 2)));
  }
  for (int t = 0; t < 4; ++t) {
    const __m512 a = s1[2 * t], b = s1[2 * t + 1];
    s2[t] = level(a, b, 0xF0F0, _mm512_permutex2var_ps(a, idx4, b));
  }
  for (int t = 0; t < 2; ++t) {
    const __m512 a = s2[2 * t], b = s2[2 * t + 1];
    s3[t] = level(a, b, 0xCCCC, _mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 3, 2)));
  }
  const __m512 s4 =
      _mm512_mul_ps(level(s3[0], s3[1], 0xAAAA, _mm512_permutex2var_ps(s3[0], idx1, s3[1])),
                    _mm512_set1_ps(scale));
  // All 16 lanes (the rows are padded to 16): the readers load them whole, and a masked store
  // could not forward to those loads.
  _mm512_storeu_ps(out, s4);
}
#else
inline float dot16(const float* a, const float* b, size_t n) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] = std::fma(a[i + j], b[i + j], acc[j]);
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] = std::fma(a[i], b[i], acc[j]);
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

inline void scores16(const float* q, const float* k, size_t stride, size_t len, size_t n,
                     float scale, float* out) {
  for (size_t j = 0; j < len; ++j) out[j] = dot16(q, k + j * stride, n) * scale;
}

// Row by row rather than element by element, so that the inner loop is a plain vector loop;
// each element still sees the same operations in the same order.
template <size_t Q>
inline void accumulate_rows(const float* const* p, const size_t* len, const float* c,
                            float* const* o, const float* v, size_t stride, size_t n) {
  for (size_t t = 0; t < Q; ++t) {
    float* ot = o[t];
    for (size_t d = 0; d < n; ++d) ot[d] *= c[t];
    for (size_t j = 0; j < len[t]; ++j) {
      const float pj = p[t][j];
      const float* vj = v + j * stride;
      for (size_t d = 0; d < n; ++d) ot[d] = std::fma(pj, vj[d], ot[d]);
    }
  }
}
#endif

// The largest of s[0..len), len <= 16 (lanes past len count as -inf).
inline float block_max16(const float* s, size_t len) {
#if defined(__AVX512F__)
  const __mmask16 valid = static_cast<__mmask16>((1u << len) - 1);
  return max16(_mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, _mm512_loadu_ps(s)));
#else
  alignas(32) float x[16];
  for (size_t j = 0; j < 16; ++j) x[j] = j < len ? s[j] : -INFINITY;
#if defined(__AVX2__)
  return max16(_mm256_load_ps(x), _mm256_load_ps(x + 8));
#else
  return max16(x);
#endif
#endif
}

// Softmax weights p[j] = exp(s[j] - m) for j < len <= 16; returns their sum by the fixed
// 16-lane tree, lanes past len counting as 0.
inline float weights16(const float* s, size_t len, float m, float* p) {
#if defined(__AVX512F__)
  const __mmask16 valid = static_cast<__mmask16>((1u << len) - 1);
  const __m512 w = _mm512_maskz_mov_ps(
      valid,
      exp16(_mm512_sub_ps(_mm512_maskz_mov_ps(valid, _mm512_loadu_ps(s)), _mm512_set1_ps(m))));
  _mm512_storeu_ps(p, w);
  return sum16(w);
#else
  // Lanes past len get exp(-inf) = 0, exactly the zero the AVX-512 mask gives.
  alignas(32) float x[16];
  for (size_t j = 0; j < 16; ++j) x[j] = j < len ? s[j] - m : -INFINITY;
#if defined(__AVX2__)
  const __m256 lo = exp8(_mm256_load_ps(x)), hi = exp8(_mm256_load_ps(x + 8));
  _mm256_store_ps(x, lo);
  _mm256_store_ps(x + 8, hi);
  std::copy(x, x + len, p);
  return sum16(lo, hi);
#else
  for (size_t j = 0; j < 16; ++j) x[j] = exp_lane(x[j]);
  std::copy(x, x + len, p);
  return sum16(x);
#endif
#endif
}

// to[0..n) = from[0..n): inline, where a call to memmove for a few hundred bytes would cost
// more than the copy.
inline void copy_floats(const float* from, size_t n, float* to) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(to + i, _mm512_loadu_ps(from + i));
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(to + i, _mm256_loadu_ps(from + i));
#endif
  for (; i < n; ++i) to[i] = from[i];
}

// Reads `n` K or V values of one head at `slot` as floats (a view for F32, a conversion for
// F16: the hardware conversion is exact, as the scalar one).
inline const float* load_row(const KvLayerView& kv, const void* base, size_t slot, size_t kv_offset,
                             size_t n, float* buf) {
  const size_t at = slot * kv.kv_dim + kv_offset;
  if (kv.type == GgmlType::F32) return static_cast<const float*>(base) + at;
  const uint16_t* h = static_cast<const uint16_t*>(base) + at;
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(buf + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(buf + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
#endif
  for (; i < n; ++i) buf[i] = f16_to_f32(h[i]);
  return buf;
}

// One head's K or V rows of a block as floats, `stride` apart: converted into buf for F16. For
// F32 they are read in place (rows kv_dim apart) by one query, but copied next to each other
// into buf for a tile, whose queries read each row many times: rows of all heads apart crowd
// into a few cache sets.
inline const float* block_rows(const KvLayerView& kv, const void* base, size_t slot0, size_t len,
                               size_t kv_offset, size_t head_dim, float* buf, size_t& stride,
                               bool tile) {
  if (kv.type == GgmlType::F32 && (!tile || kv.kv_dim == head_dim)) {
    stride = kv.kv_dim;
    return static_cast<const float*>(base) + slot0 * kv.kv_dim + kv_offset;
  }
  for (size_t j = 0; j < len; ++j) {
    float* to = buf + j * head_dim;
    const float* row = load_row(kv, base, slot0 + j, kv_offset, head_dim, to);
    if (row != to) copy_floats(row, head_dim, to);
  }
  stride = head_dim;
  return buf;
}

// y[i] = exp_lane(x[i]) for i < kAttentionTile.
inline void exp_tile(const float* x, float* y) {
  static_assert(kAttentionTile == 16);
#if defined(__AVX512F__)
  _mm512_storeu_ps(y, exp16(_mm512_loadu_ps(x)));
#elif defined(__AVX2__)
  _mm256_storeu_ps(y, exp8(_mm256_loadu_ps(x)));
  _mm256_storeu_ps(y + 8, exp8(_mm256_loadu_ps(x + 8)));
#else
  for (size_t i = 0; i < kAttentionTile; ++i) y[i] = exp_lane(x[i]);
#endif
}

}  // namespace

// y[i] = exp_lane(x[i]), vectorized as in attend_tile.
void exp_lanes(const float* x, size_t n, float* y) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = exp_lane(x[i]);
}

// out[i] = g / (1 + exp_lane(-g)) * up[i] with g = gate[i]: the same IEEE operations per
// element in every lane width, so every ISA gives the same bits.
void swiglu_lanes(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_storeu_ps(
        out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#elif defined(__AVX2__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_lane(0.0f - g)) * up[i];
  }
}

// Up to kAttentionTile queries of one head of one sequence (consecutive positions of a prompt
// chunk) share every K and V row they read. Each query's own operation sequence is exactly
// the single-query one: same blocks, same order of scores, maxima, rescaling and sums. So a
// query's result does not depend on which other queries share its tile.
void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out) {
  const size_t bs = kv.block_size;
  // The queries and outputs are worked on in rows next to each other too (see block_rows),
  // from the first cache line boundary in the scratch on.
  float* qbuf = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64 / sizeof(float);
  float* obuf = qbuf + kAttentionTile * head_dim;  // n_q x head_dim: the outputs, unnormalized
  float* m = obuf + kAttentionTile * head_dim;     // n_q running maxima
  float* l = m + kAttentionTile;                   // n_q running sums
  const size_t srow = attention_score_row(bs);     // bs padded to whole 16-lane vectors
  float* score = l + kAttentionTile;               // n_q x srow scores of the current block
  float* vbuf = score + kAttentionTile * srow;     // bs x head_dim: the block's K or V rows
  float* pbuf = vbuf + bs * head_dim;              // n_q x srow weights of the current block
  const float* qi[kAttentionTile];
  float* oi[kAttentionTile];
  size_t max_ctx = 0;
  for (size_t i = 0; i < n_q; ++i) {
    copy_floats(q[i], head_dim, qbuf + i * head_dim);
    qi[i] = qbuf + i * head_dim;
    oi[i] = obuf + i * head_dim;
    std::fill(oi[i], oi[i] + head_dim, 0.0f);
    m[i] = -INFINITY;
    l[i] = 0.0f;
    max_ctx = std::max(max_ctx, static_cast<size_t>(n_ctx[i]));
  }
  // Rows of the current block query i sees (0 once past its context).
  size_t len[kAttentionTile];
  for (size_t start = 0, b = 0; start < max_ctx; start += bs, ++b) {
    const size_t slot0 = static_cast<size_t>(block_table[b]) * bs;
    const size_t block_len = std::min(bs, max_ctx - start);
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      len[i] = start < n ? std::min(bs, n - start) : 0;
    }
    // The block's K rows once, then each query's scores 16 rows at a time.
    size_t k_stride;
    const float* k0 =
        block_rows(kv, kv.k, slot0, block_len, kv_offset, head_dim, vbuf, k_stride, n_q > 1);
    for (size_t i = 0; i < n_q; ++i) {
      for (size_t j = 0; j < len[i]; j += 16) {
        scores16(qi[i], k0 + j * k_stride, k_stride, std::min<size_t>(16, len[i] - j), head_dim,
                 scale, score + i * srow + j);
      }
    }
    // New maxima, then all the queries' corrections exp(m - m_new) in one vector (exp(-inf)
    // = 0 on the first block); queries past their context keep m with a correction of 1.
    float m_new[kAttentionTile], delta[kAttentionTile] = {}, correction[kAttentionTile];
    for (size_t i = 0; i < n_q; ++i) {
      m_new[i] = m[i];
      if (len[i] == 0) continue;
      float block_max = block_max16(score + i * srow, std::min<size_t>(16, len[i]));
      for (size_t j = 16; j < len[i]; j += 16) {
        block_max = max_lane(block_max,
                             block_max16(score + i * srow + j, std::min<size_t>(16, len[i] - j)));
      }
      m_new[i] = max_lane(m[i], block_max);
      delta[i] = m[i] - m_new[i];
    }
    exp_tile(delta, correction);
    // Weights and their sum (16 at a time, each 16 summed by the fixed tree), then the
    // block's V rows once and each query's weighted sum over them, position by position as in
    // the single-query order; four queries at a time share the V loads.
    for (size_t i = 0; i < n_q; ++i) {
      if (len[i] == 0) continue;
      float sum = l[i] * correction[i];
      for (size_t j = 0; j < len[i]; j += 16) {
        sum += weights16(score + i * srow + j, std::min<size_t>(16, len[i] - j), m_new[i],
                         pbuf + i * srow + j);
      }
      l[i] = sum;
      m[i] = m_new[i];
    }
    size_t v_stride;
    const float* v0 =
        block_rows(kv, kv.v, slot0, block_len, kv_offset, head_dim, vbuf, v_stride, n_q > 1);
    // Queries four by four (those past their context skipped), then the rest together.
    const float* p[4];
    size_t len4[4];
    float c[4];
    float* o[4];
    size_t k = 0;
    for (size_t i = 0; i < n_q; ++i) {
      if (len[i] == 0) continue;
      p[k] = pbuf + i * srow;
      len4[k] = len[i];
      c[k] = correction[i];
      o[k] = oi[i];
      if (++k == 4) {
        accumulate_rows<4>(p, len4, c, o, v0, v_stride, head_dim);
        k = 0;
      }
    }
    if (k == 3) accumulate_rows<3>(p, len4, c, o, v0, v_stride, head_dim);
    if (k == 2) accumulate_rows<2>(p, len4, c, o, v0, v_stride, head_dim);
    if (k == 1) accumulate_rows<1>(p, len4, c, o, v0, v_stride, head_dim);
  }
  for (size_t i = 0; i < n_q; ++i) {
    const float inv = 1.0f / l[i];
    for (size_t d = 0; d < head_dim; ++d) out[i][d] = oi[i][d] * inv;
  }
}

}  // namespace lift::kernels::LIFT_ATTENTION_NS
