// The fast attention kernel, included by one translation unit per instruction set, each
// defining LIFT_ATTENTION_NS. Every operation is spelled out (explicit fused multiply-adds,
// fixed combining trees, no contraction) so every instruction set rounds the same way.
// That includes exp: a polynomial in fused multiply-adds (one rounding each, the same in
// hardware and in std::fma), not the C library's, whose vector and scalar versions could not be
// made to agree.
// (No include guard: meant to be included once per namespace.) As everything compiled with -m
// flags, it calls no shared inline function and no out-of-line standard-library template
// (kernels/target.h): min_of/max_of/bits_as, its own loops and index helpers instead.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/backend.h"
#include "kernels/fp16.h"
#include "kernels/lane_tree.h"
#include "kernels/ops.h"
#include "kernels/target.h"

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
// coefficients. Evaluated in float by Horner's rule in fused multiply-adds (half the
// operations of separate multiplies and adds) the result is within 1 ulp of exp (rounded from
// double) for every float in [kExpLo, kExpHi]; the attention test checks every 101st.
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
  const float t = std::fma(xc, kLog2e, kRoundMagic);
  const float n = t - kRoundMagic;
  const float r = std::fma(n, -kLn2Lo, std::fma(n, -kLn2Hi, xc));
  float q = std::fma(kExpC6, r, kExpC5);
  q = std::fma(q, r, kExpC4);
  q = std::fma(q, r, kExpC3);
  q = std::fma(q, r, kExpC2);
  const float p = 1.0f + std::fma(r * r, q, r);
  // The low bits of t hold n + 2^22; shifted by 23 only n's bits remain, at the exponent.
  const float y = bits_as<float>(bits_as<uint32_t>(p) + (bits_as<uint32_t>(t) << 23));
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
  const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(kLog2e), _mm512_set1_ps(kRoundMagic));
  const __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(kRoundMagic));
  const __m512 r =
      _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc));
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(kExpC6), r, _mm512_set1_ps(kExpC5));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC4));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC3));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC2));
  const __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r));
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
  const __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), _mm256_set1_ps(kRoundMagic));
  const __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(kRoundMagic));
  const __m256 r =
      _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc));
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(kExpC6), r, _mm256_set1_ps(kExpC5));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC4));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC3));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC2));
  const __m256 p = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r));
  const __m256 y = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(t), 23)));
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_andnot_ps(under, y), _mm256_set1_ps(INFINITY), over);
}
#endif

// Sums and maxima of 16 lanes combine lanes j and j + w for w = 8, 4, 2, 1, in every ISA
// (kernels/lane_tree.h; the portable versions below spell the same tree out).
#if defined(__AVX512F__)
inline float sum16(__m512 v) { return fold16<LaneAdd>(v); }
inline float max16(__m512 v) { return fold16<LaneMax>(v); }
#elif defined(__AVX2__)
inline float sum16(__m256 lo, __m256 hi) { return fold16<LaneAdd>(lo, hi); }
inline float max16(__m256 lo, __m256 hi) { return fold16<LaneMax>(lo, hi); }
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

// Scores. Each is one chain of fused multiply-adds over the head's dimensions in order,
// s = fma(q[d], k[d], s) for d = 0, 1, ..., from 0, then times the scale: one correctly
// rounded operation per step, the same in hardware and in std::fma, so every ISA gives the
// same bits. K blocks are stored transposed (see KvLayerView), so 16 keys' k[d] are one
// vector and one vector of scores needs no horizontal sums. A batch of such vectors runs
// together: one chain alone would wait on the FMA latency at every step.
//
// A score job: `len` keys (<= 16) whose k[d] lie at kt + d * stride, against query q.
struct ScoreJob {
  const float* q;
  const float* kt;
  size_t len;
  float* out;  // 16 floats: the scores, then lanes past len (never read)
};
inline constexpr size_t kScoreBatch = kAttentionScoreBatch;

#if defined(__AVX512F__)
inline __mmask16 mask16(size_t len) {
  return static_cast<__mmask16>(len >= 16 ? 0xFFFF : (1u << len) - 1);
}

// G jobs at once. kShared: all read the same keys (a tile's queries against one block), so
// each k[d] is loaded once, for the longest len (lanes past a job's own len see other keys of
// the block; those scores are never read). Every loop over the batch is unrolled: otherwise
// GCC keeps acc in memory and stores it at every step.
template <size_t G, bool kShared>
inline void score_batch(const ScoreJob* jobs, size_t stride, size_t n, float scale) {
  __m512 acc[G];
  __mmask16 m[G];
  size_t longest = 0;
#pragma GCC unroll 16
  for (size_t a = 0; a < G; ++a) {
    acc[a] = _mm512_setzero_ps();
    m[a] = mask16(jobs[a].len);
    longest = max_of(longest, jobs[a].len);
  }
  const __mmask16 shared_mask = mask16(longest);
  for (size_t d = 0; d < n; ++d) {
    if constexpr (kShared) {
      const __m512 k = _mm512_maskz_loadu_ps(shared_mask, jobs[0].kt + d * stride);
#pragma GCC unroll 16
      for (size_t a = 0; a < G; ++a) {
        acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(jobs[a].q[d]), k, acc[a]);
      }
    } else {
#pragma GCC unroll 16
      for (size_t a = 0; a < G; ++a) {
        acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(jobs[a].q[d]),
                                 _mm512_maskz_loadu_ps(m[a], jobs[a].kt + d * stride), acc[a]);
      }
    }
  }
#pragma GCC unroll 16
  for (size_t a = 0; a < G; ++a) {
    _mm512_storeu_ps(jobs[a].out, _mm512_mul_ps(acc[a], _mm512_set1_ps(scale)));
  }
}
#elif defined(__AVX2__)
// Lanes 0..7 and 8..15 of a 16-key row that lie below len, as maskload/maskstore masks.
inline void mask8x2(size_t len, __m256i& lo, __m256i& hi) {
  const __m256i l = _mm256_set1_epi32(static_cast<int>(len));
  lo = _mm256_cmpgt_epi32(l, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  hi = _mm256_cmpgt_epi32(l, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
}

// As the AVX-512 version, each job two 8-lane vectors; four jobs at a time fit the 16
// registers.
template <size_t G, bool kShared>
inline void score_batch4(const ScoreJob* jobs, size_t stride, size_t n, float scale) {
  __m256 acc[G][2];
  __m256i lo[G], hi[G];
  size_t longest = 0;
  for (size_t a = 0; a < G; ++a) {
    acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    mask8x2(jobs[a].len, lo[a], hi[a]);
    longest = max_of(longest, jobs[a].len);
  }
  __m256i shared_lo, shared_hi;
  mask8x2(longest, shared_lo, shared_hi);
  for (size_t d = 0; d < n; ++d) {
    __m256 k0 = _mm256_setzero_ps(), k1 = k0;
    if constexpr (kShared) {
      const float* k = jobs[0].kt + d * stride;
      k0 = _mm256_maskload_ps(k, shared_lo);
      k1 = _mm256_maskload_ps(k + 8, shared_hi);
    }
    for (size_t a = 0; a < G; ++a) {
      if constexpr (!kShared) {
        const float* k = jobs[a].kt + d * stride;
        k0 = _mm256_maskload_ps(k, lo[a]);
        k1 = _mm256_maskload_ps(k + 8, hi[a]);
      }
      const __m256 q = _mm256_broadcast_ss(jobs[a].q + d);
      acc[a][0] = _mm256_fmadd_ps(q, k0, acc[a][0]);
      acc[a][1] = _mm256_fmadd_ps(q, k1, acc[a][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  for (size_t a = 0; a < G; ++a) {
    _mm256_storeu_ps(jobs[a].out, _mm256_mul_ps(acc[a][0], sc));
    _mm256_storeu_ps(jobs[a].out + 8, _mm256_mul_ps(acc[a][1], sc));
  }
}

template <size_t G, bool kShared>
inline void score_batch(const ScoreJob* jobs, size_t stride, size_t n, float scale) {
  size_t a = 0;
  for (; a + 4 <= G; a += 4) score_batch4<4, kShared>(jobs + a, stride, n, scale);
  switch (G - a) {
    case 3:
      return score_batch4<3, kShared>(jobs + a, stride, n, scale);
    case 2:
      return score_batch4<2, kShared>(jobs + a, stride, n, scale);
    case 1:
      return score_batch4<1, kShared>(jobs + a, stride, n, scale);
    default:
      return;
  }
}
#else
template <size_t G, bool kShared>
inline void score_batch(const ScoreJob* jobs, size_t stride, size_t n, float scale) {
  for (size_t a = 0; a < G; ++a) {
    float acc[16] = {};
    const ScoreJob& job = jobs[a];
    for (size_t d = 0; d < n; ++d) {
      const float qd = job.q[d];
      const float* k = job.kt + d * stride;
      for (size_t j = 0; j < job.len; ++j) acc[j] = std::fma(qd, k[j], acc[j]);
    }
    for (size_t j = 0; j < job.len; ++j) job.out[j] = acc[j] * scale;
  }
}
#endif

// Runs n_jobs jobs in batches of kScoreBatch; `shared` says they all read the same keys.
template <bool kShared, size_t... G>
inline void run_score_batches(const ScoreJob* jobs, size_t n_jobs, size_t stride, size_t n,
                              float scale, std::index_sequence<G...>) {
  size_t a = 0;
  for (; a + kScoreBatch <= n_jobs; a += kScoreBatch) {
    score_batch<kScoreBatch, kShared>(jobs + a, stride, n, scale);
  }
  // The rest, 1..kScoreBatch - 1 jobs, by the batch of exactly that size.
  const size_t rest = n_jobs - a;
  ((rest == G + 1 ? score_batch<G + 1, kShared>(jobs + a, stride, n, scale) : void()), ...);
}
inline void run_scores(const ScoreJob* jobs, size_t n_jobs, bool shared, size_t stride, size_t n,
                       float scale) {
  constexpr auto kRests = std::make_index_sequence<kScoreBatch - 1>{};
  if (shared) return run_score_batches<true>(jobs, n_jobs, stride, n, scale, kRests);
  run_score_batches<false>(jobs, n_jobs, stride, n, scale, kRests);
}

#if defined(__AVX512F__)
// For each of Q queries: o[d] = o[d] * c, then o[d] = fma(p[j], v_j[d], o[d]) for j = 0, 1, ...
// left to right (v_j at v + j * stride), its own weights, row count, correction and output. Per
// element the same sequence as the portable loop; the queries share every load of V, and
// with four vectors per query there are 4Q independent chains of adds: Q = 4 keeps both
// floating-point ports busy, fewer leave them waiting on the adds' latency.
// One slice of U <= 4 vectors of the head, elements [d, d + 16 U) below n.
template <size_t Q, size_t U>
inline void accumulate_slice(const float* const* p, const size_t* len, size_t all, const float* c,
                             float* const* o, const float* v, size_t stride, size_t n, size_t d) {
  __mmask16 m[U];
#pragma GCC unroll 4
  for (size_t u = 0; u < U; ++u) {
    const size_t at = d + 16 * u;
    m[u] = mask16(at < n ? n - at : 0);
  }
  // Every loop over t and u unrolled: otherwise GCC keeps acc in memory and stores it at
  // every row.
  __m512 acc[Q][U];
#pragma GCC unroll 4
  for (size_t t = 0; t < Q; ++t) {
#pragma GCC unroll 4
    for (size_t u = 0; u < U; ++u) {
      acc[t][u] =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(m[u], o[t] + d + 16 * u), _mm512_set1_ps(c[t]));
    }
  }
  for (size_t j = 0; j < all; ++j) {
    __m512 w[Q];
#pragma GCC unroll 4
    for (size_t t = 0; t < Q; ++t) w[t] = _mm512_set1_ps(p[t][j]);
#pragma GCC unroll 4
    for (size_t u = 0; u < U; ++u) {
      const __m512 vv = _mm512_maskz_loadu_ps(m[u], v + j * stride + d + 16 * u);
#pragma GCC unroll 4
      for (size_t t = 0; t < Q; ++t) acc[t][u] = _mm512_fmadd_ps(w[t], vv, acc[t][u]);
    }
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < Q; ++t) {
    for (size_t j = all; j < len[t]; ++j) {
      const __m512 w = _mm512_set1_ps(p[t][j]);
#pragma GCC unroll 4
      for (size_t u = 0; u < U; ++u) {
        acc[t][u] =
            _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[u], v + j * stride + d + 16 * u), acc[t][u]);
      }
    }
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < Q; ++t) {
#pragma GCC unroll 4
    for (size_t u = 0; u < U; ++u) _mm512_mask_storeu_ps(o[t] + d + 16 * u, m[u], acc[t][u]);
  }
}

// Slices of 64 elements, then one of the 1-3 vectors left: a head of 8 (stories260K) or 32
// dimensions would otherwise run four vectors' loads and FMAs per row for one or two vectors'
// worth of lanes (the elements' operations are the same either way).
template <size_t Q>
inline void accumulate_rows(const float* const* p, const size_t* len, const float* c,
                            float* const* o, const float* v, size_t stride, size_t n) {
  size_t all = len[0];
  for (size_t t = 1; t < Q; ++t) all = min_of(all, len[t]);
  size_t d = 0;
  for (; d + 64 <= n; d += 64) accumulate_slice<Q, 4>(p, len, all, c, o, v, stride, n, d);
  const size_t rest = (n - d + 15) / 16;
  if (rest == 3) accumulate_slice<Q, 3>(p, len, all, c, o, v, stride, n, d);
  if (rest == 2) accumulate_slice<Q, 2>(p, len, all, c, o, v, stride, n, d);
  if (rest == 1) accumulate_slice<Q, 1>(p, len, all, c, o, v, stride, n, d);
}

#elif defined(__AVX2__)
// As the AVX-512 version, in 16-float slices of the head (two 8-lane vectors per query) so
// that four queries' accumulators fit the 16 registers.
template <size_t Q>
inline void accumulate_rows(const float* const* p, const size_t* len, const float* c,
                            float* const* o, const float* v, size_t stride, size_t n) {
  size_t all = len[0];
  for (size_t t = 1; t < Q; ++t) all = min_of(all, len[t]);
  for (size_t d = 0; d < n; d += 16) {
    __m256i m[2];
    mask8x2(n - d, m[0], m[1]);
    __m256 acc[Q][2];
    for (size_t t = 0; t < Q; ++t) {
      for (size_t u = 0; u < 2; ++u) {
        acc[t][u] = _mm256_mul_ps(_mm256_maskload_ps(o[t] + d + 8 * u, m[u]), _mm256_set1_ps(c[t]));
      }
    }
    for (size_t j = 0; j < all; ++j) {
      const float* vj = v + j * stride + d;
      const __m256 v0 = _mm256_maskload_ps(vj, m[0]), v1 = _mm256_maskload_ps(vj + 8, m[1]);
      for (size_t t = 0; t < Q; ++t) {
        const __m256 w = _mm256_broadcast_ss(p[t] + j);
        acc[t][0] = _mm256_fmadd_ps(w, v0, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(w, v1, acc[t][1]);
      }
    }
    for (size_t t = 0; t < Q; ++t) {
      for (size_t j = all; j < len[t]; ++j) {
        const float* vj = v + j * stride + d;
        const __m256 w = _mm256_broadcast_ss(p[t] + j);
        acc[t][0] = _mm256_fmadd_ps(w, _mm256_maskload_ps(vj, m[0]), acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(w, _mm256_maskload_ps(vj + 8, m[1]), acc[t][1]);
      }
    }
    for (size_t t = 0; t < Q; ++t) {
      for (size_t u = 0; u < 2; ++u) _mm256_maskstore_ps(o[t] + d + 8 * u, m[u], acc[t][u]);
    }
  }
}
#else
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
  const __mmask16 valid = mask16(len);
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
  const __mmask16 valid = mask16(len);
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
  for (size_t j = 0; j < len; ++j) p[j] = x[j];
  return sum16(lo, hi);
#else
  for (size_t j = 0; j < 16; ++j) x[j] = exp_lane(x[j]);
  for (size_t j = 0; j < len; ++j) p[j] = x[j];
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

// KvLayerView::k_index and v_index (not called here: per-target code calls no inline member of
// a shared type).
inline size_t v_run(const KvLayerView& kv) { return kv.v_run == 0 ? kv.kv_dim : kv.v_run; }
inline size_t k_at(const KvLayerView& kv, size_t s, size_t e) {
  const size_t r = v_run(kv), bs = kv.block_size;
  return e / r * kv.head_stride + (s / bs * r + e % r) * bs + s % bs;
}
inline size_t v_at(const KvLayerView& kv, size_t s, size_t e) {
  if (kv.v_transposed) return k_at(kv, s, e);
  const size_t r = v_run(kv);
  return e / r * kv.head_stride + s * r + e % r;
}

// n consecutive F16 K or V values starting at element `at`, converted into buf (the hardware
// conversion is exact, as the scalar one).
inline const float* f16_to_floats(const void* base, size_t at, size_t n, float* buf) {
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
// The same values as floats: a view for F32, tested here at the call site (GCC does not inline
// the conversion loop, and a call per block costs a vzeroupper and the vector registers'
// spills), a conversion for F16.
inline const float* load_floats(const KvLayerView& kv, const void* base, size_t at, size_t n,
                                float* buf) {
  if (kv.type == GgmlType::F32) return static_cast<const float*>(base) + at;
  return f16_to_floats(base, at, n, buf);
}

// The `n` values of one head at `slot` from a block-transposed store (K, or V for narrow heads),
// gathered (for the reference; the kernels read whole blocks).
inline const float* gather_row(const KvLayerView& kv, const void* base, size_t slot,
                               size_t kv_offset, size_t n, float* buf) {
  for (size_t d = 0; d < n; ++d) {
    const size_t at = k_at(kv, slot, kv_offset + d);
    buf[d] = kv.type == GgmlType::F32 ? static_cast<const float*>(base)[at]
                                      : f16_to_f32(static_cast<const uint16_t*>(base)[at]);
  }
  return buf;
}

// The `n` V values of one head at `slot` as floats.
inline const float* load_row(const KvLayerView& kv, size_t slot, size_t kv_offset, size_t n,
                             float* buf) {
  if (kv.v_transposed) return gather_row(kv, kv.v, slot, kv_offset, n, buf);
  return load_floats(kv, kv.v, v_at(kv, slot, kv_offset), n, buf);
}

// The `n` K values of one head at `slot` as floats.
inline const float* load_k_row(const KvLayerView& kv, size_t slot, size_t kv_offset, size_t n,
                               float* buf) {
  return gather_row(kv, kv.k, slot, kv_offset, n, buf);
}

// One head's K of cache block `block` as floats, transposed: dimension d of the block's slots
// at the result + d * block_size. Contiguous in the cache, so a view for F32 and one linear
// conversion into buf for F16.
inline const float* k_block(const KvLayerView& kv, size_t block, size_t kv_offset, size_t head_dim,
                            float* buf) {
  const size_t bs = kv.block_size;
  return load_floats(kv, kv.k, k_at(kv, block * bs, kv_offset), head_dim * bs, buf);
}

// A cache block's K and V of one head, asked for into L1 kPrefetchBlocks blocks before use.
// Blocks sit wherever the block table puts them (a head's K and V each a 4 KiB run per block
// in the 1.1B shape), and the hardware prefetchers do not follow from one block to the next: a
// context whose K/V had left the caches was read at 6 GB/s by one thread
// (attention/model/F32/22x2048/8). Narrow heads, whose V is transposed, go to attend_narrow.
// Always inlined: on its own, a function that only prefetches is `const` to GCC (no side
// effects, nothing returned) and its calls were deleted.
[[gnu::always_inline]] inline void prefetch_block(const KvLayerView& kv, size_t block,
                                                  size_t kv_offset, size_t head_dim) {
  const size_t bs = kv.block_size, elem = kv.type == GgmlType::F32 ? 4 : 2;
  const uintptr_t k = reinterpret_cast<uintptr_t>(kv.k) + k_at(kv, block * bs, kv_offset) * elem;
  for (size_t o = 0; o < head_dim * bs * elem; o += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(k + o), 0, 3);
  }
  const size_t row = v_run(kv) * elem;
  uintptr_t v = reinterpret_cast<uintptr_t>(kv.v) + v_at(kv, block * bs, kv_offset) * elem;
  for (size_t j = 0; j < bs; ++j, v += row) {
    for (size_t o = 0; o < head_dim * elem; o += 64) {
      __builtin_prefetch(reinterpret_cast<const void*>(v + o), 0, 3);
    }
  }
}
inline constexpr size_t kPrefetchBlocks = 2;

// One head's V rows of a block as floats, `stride` apart. A KV cache's runs hold them next to
// each other (KvLayerView::v_run = head_dim): F32 is read in place, F16 converted in one
// pass. V stored by slot (rows kv_dim apart) is read in place too, unless a tile reads each row
// more than once (over 4 queries: see accumulate_rows) and rows 2 KiB or more apart crowd into
// few cache sets (8 of a block's rows per L1 set): then they are copied next to each other.
inline const float* v_rows(const KvLayerView& kv, size_t slot0, size_t len, size_t kv_offset,
                           size_t head_dim, float* buf, size_t& stride, bool tile) {
  const size_t run = v_run(kv), at = v_at(kv, slot0, kv_offset);  // rows `run` apart from at
  if (kv.type == GgmlType::F32) {
    if (run == head_dim || !tile || run * sizeof(float) < 2048) {
      stride = run;
      return static_cast<const float*>(kv.v) + at;
    }
    for (size_t j = 0; j < len; ++j) {
      copy_floats(static_cast<const float*>(kv.v) + at + j * run, head_dim, buf + j * head_dim);
    }
  } else if (run == head_dim) {
    f16_to_floats(kv.v, at, len * head_dim, buf);
  } else {
    for (size_t j = 0; j < len; ++j) {
      f16_to_floats(kv.v, at + j * run, head_dim, buf + j * head_dim);
    }
  }
  stride = head_dim;
  return buf;
}

// Heads of at most kNarrowHeadDim dimensions (stories260K's 8) have so little work per position
// that attend_tile's per-block bookkeeping (a maximum, an exp and a sum tree per 16 positions
// and query, then one chain of 16 FMAs per block into one accumulator) costs several times the
// arithmetic. attend_narrow runs the online softmax over units of kScoreBatch blocks instead,
// and, their V being stored transposed like K (KvLayerView::v_transposed), multiplies 16
// positions' weights by 16 positions' v[d] in one vector: each query keeps 16 lane-wise sums
// per dimension (lane l: the positions at l within a block's 16-position chunks), summed by the
// fixed tree at the end. A query's operations depend only on its own context and the block
// size, never on its tile.
// The largest score of a query's rows in one unit (row g at s + g * rs, len[g] scores each):
// a lane-wise maximum over every 16-score chunk, rows and chunks in order, lanes past a row's
// len counting as -inf; then the fixed tree.
inline float unit_max(const float* s, size_t rs, const size_t* len, size_t n_rows) {
#if defined(__AVX512F__)
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 acc = ninf;
  for (size_t g = 0; g < n_rows; ++g) {
    for (size_t j = 0; j < len[g]; j += 16) {
      const __m512 x =
          _mm512_mask_mov_ps(ninf, mask16(len[g] - j), _mm512_loadu_ps(s + g * rs + j));
      acc = _mm512_max_ps(acc, x);
    }
  }
  return max16(acc);
#else
  alignas(32) float acc[16];
  for (size_t e = 0; e < 16; ++e) acc[e] = -INFINITY;
  for (size_t g = 0; g < n_rows; ++g) {
    for (size_t j = 0; j < len[g]; j += 16) {
      const float* x = s + g * rs + j;
      for (size_t e = 0; e < 16; ++e) acc[e] = max_lane(acc[e], j + e < len[g] ? x[e] : -INFINITY);
    }
  }
#if defined(__AVX2__)
  return max16(_mm256_load_ps(acc), _mm256_load_ps(acc + 8));
#else
  return max16(acc);
#endif
#endif
}

// The weights exp(s - m) of the same rows, written over the scores, and their sum: lane-wise
// over the chunks in order (lanes past len adding 0), then the fixed tree.
inline float unit_weights(float* s, size_t rs, const size_t* len, size_t n_rows, float m) {
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  const __m512 mv = _mm512_set1_ps(m);
  for (size_t g = 0; g < n_rows; ++g) {
    for (size_t j = 0; j < len[g]; j += 16) {
      float* x = s + g * rs + j;
      const __mmask16 valid = mask16(len[g] - j);
      const __m512 w = _mm512_maskz_mov_ps(
          valid, exp16(_mm512_sub_ps(_mm512_maskz_mov_ps(valid, _mm512_loadu_ps(x)), mv)));
      _mm512_storeu_ps(x, w);
      acc = _mm512_add_ps(acc, w);
    }
  }
  return sum16(acc);
#else
  alignas(32) float acc[16] = {};
  for (size_t g = 0; g < n_rows; ++g) {
    for (size_t j = 0; j < len[g]; j += 16) {
      float* x = s + g * rs + j;
      const size_t n = min_of<size_t>(16, len[g] - j);
      // Lanes past len get exp(-inf) = 0, exactly the zero the AVX-512 mask gives.
      alignas(32) float w[16];
      for (size_t e = 0; e < 16; ++e) w[e] = e < n ? x[e] - m : -INFINITY;
#if defined(__AVX2__)
      _mm256_store_ps(w, exp8(_mm256_load_ps(w)));
      _mm256_store_ps(w + 8, exp8(_mm256_load_ps(w + 8)));
#else
      for (size_t e = 0; e < 16; ++e) w[e] = exp_lane(w[e]);
#endif
      for (size_t e = 0; e < 16; ++e) acc[e] = acc[e] + w[e];
      for (size_t e = 0; e < n; ++e) x[e] = w[e];
    }
  }
#if defined(__AVX2__)
  return sum16(_mm256_load_ps(acc), _mm256_load_ps(acc + 8));
#else
  return sum16(acc);
#endif
#endif
}

// One unit's weighted sums of V for Q queries: acc[t][d * 16 + l] = fma(w_j, v_j[d], that) for
// every position j = j0 + l of every 16-position chunk the query sees (j < len[t][g]), blocks g
// and chunks in order; w_j at p[t] + g * rs + j, block g's transposed V at vt[g] + d * bs (null
// where no query sees the block).
struct NarrowRows {
  const float* const* p;
  size_t rs;
  const size_t* const* len;
  const float* const* vt;
  size_t bs, n_blocks, head_dim;
  float* const* acc;
};

#if defined(__AVX512F__)
// The Q x D sums in registers over the whole unit, D the head's dimensions (8 or 16) or more
// (kExact false: dimensions past head_dim skipped). Every loop unrolled, so they stay there.
template <size_t Q, size_t D, bool kExact>
inline void narrow_v(const NarrowRows& r) {
  __m512 a[Q][D];
#pragma GCC unroll 4
  for (size_t t = 0; t < Q; ++t) {
#pragma GCC unroll 16
    for (size_t d = 0; d < D; ++d) {
      if (kExact || d < r.head_dim) a[t][d] = _mm512_loadu_ps(r.acc[t] + d * 16);
    }
  }
  for (size_t g = 0; g < r.n_blocks; ++g) {
    const float* vt = r.vt[g];
    if (vt == nullptr) continue;
    for (size_t j0 = 0; j0 < r.bs; j0 += 16) {
      __mmask16 m[Q], any = 0;
      __m512 w[Q];
#pragma GCC unroll 4
      for (size_t t = 0; t < Q; ++t) {
        const size_t n = r.len[t][g];
        m[t] = n > j0 ? mask16(n - j0) : 0;
        any = static_cast<__mmask16>(any | m[t]);
        w[t] = _mm512_loadu_ps(r.p[t] + g * r.rs + j0);
      }
      if (any == 0) break;
#pragma GCC unroll 16
      for (size_t d = 0; d < D; ++d) {
        if (!kExact && d >= r.head_dim) continue;
        const __m512 v = _mm512_maskz_loadu_ps(any, vt + d * r.bs + j0);
#pragma GCC unroll 4
        for (size_t t = 0; t < Q; ++t) a[t][d] = _mm512_mask3_fmadd_ps(w[t], v, a[t][d], m[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < Q; ++t) {
#pragma GCC unroll 16
    for (size_t d = 0; d < D; ++d) {
      if (kExact || d < r.head_dim) _mm512_storeu_ps(r.acc[t] + d * 16, a[t][d]);
    }
  }
}

// Queries per call: as many as keep the sums in 16 of the 32 registers.
inline size_t narrow_group(size_t head_dim) { return head_dim <= 4 ? 4 : head_dim <= 8 ? 2 : 1; }

inline void narrow_v(const NarrowRows& r, size_t q) {
  if (r.head_dim == 8) return q == 2 ? narrow_v<2, 8, true>(r) : narrow_v<1, 8, true>(r);
  if (r.head_dim == 16) return narrow_v<1, 16, true>(r);
  if (r.head_dim <= 4) {
    if (q == 4) return narrow_v<4, 4, false>(r);
    if (q == 3) return narrow_v<3, 4, false>(r);
    if (q == 2) return narrow_v<2, 4, false>(r);
    return narrow_v<1, 4, false>(r);
  }
  if (r.head_dim <= 8) return q == 2 ? narrow_v<2, 8, false>(r) : narrow_v<1, 8, false>(r);
  narrow_v<1, 16, false>(r);
}
#else
inline size_t narrow_group(size_t) { return 1; }

// The sums in memory, one query at a time.
inline void narrow_v(const NarrowRows& r, size_t q) {
  for (size_t t = 0; t < q; ++t) {
    float* acc = r.acc[t];
    for (size_t g = 0; g < r.n_blocks; ++g) {
      const float* vt = r.vt[g];
      const size_t n = r.len[t][g];
      if (vt == nullptr || n == 0) continue;
      const float* w = r.p[t] + g * r.rs;
#if defined(__AVX2__)
      // Eight lanes at a time: the FMA for every lane, then the old sum kept where the
      // position is past len (as AVX-512's merge masking).
      for (size_t j0 = 0; j0 < n; j0 += 8) {
        const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - j0)),
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 wv = _mm256_maskload_ps(w + j0, valid);
        const size_t lane = j0 % 16;
        for (size_t d = 0; d < r.head_dim; ++d) {
          float* at = acc + d * 16 + lane;
          const __m256 old = _mm256_loadu_ps(at);
          const __m256 v = _mm256_maskload_ps(vt + d * r.bs + j0, valid);
          _mm256_storeu_ps(
              at, _mm256_blendv_ps(old, _mm256_fmadd_ps(wv, v, old), _mm256_castsi256_ps(valid)));
        }
      }
#else
      for (size_t j = 0; j < n; ++j) {
        for (size_t d = 0; d < r.head_dim; ++d) {
          float& at = acc[d * 16 + j % 16];
          at = std::fma(w[j], vt[d * r.bs + j], at);
        }
      }
#endif
    }
  }
}
#endif

}  // namespace

// y[i] = exp_lane(x[i]), vectorized as in attend_tile.
void exp_lanes(const float* x, size_t n, float* y) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
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

// out[i] = gelu_tanh(g) * up[i] with g = gate[i], where gelu_tanh(g) = g / 2 * (1 + tanh(y)),
// y = sqrt(2 / pi) * (g + 0.044715 g^3), written as g / (1 + exp(-2y)) (the same function, and
// no cancellation near 0): exp_lane's operations in every lane width, as swiglu_lanes.
void geglu_lanes(const float* gate, const float* up, size_t n, float* out) {
  constexpr float kCubic = 0.044715f;
  constexpr float kMinusTwoSqrt2OverPi = -1.5957691216057308f;  // -2 sqrt(2 / pi)
  size_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    const __m512 y = _mm512_add_ps(g, _mm512_mul_ps(g3, _mm512_set1_ps(kCubic)));
    const __m512 e = exp16(_mm512_mul_ps(y, _mm512_set1_ps(kMinusTwoSqrt2OverPi)));
    _mm512_storeu_ps(
        out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#elif defined(__AVX2__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 y = _mm256_add_ps(g, _mm256_mul_ps(g3, _mm256_set1_ps(kCubic)));
    const __m256 e = exp8(_mm256_mul_ps(y, _mm256_set1_ps(kMinusTwoSqrt2OverPi)));
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) {
    const float g = gate[i];
    const float y = g + (g * g) * g * kCubic;
    out[i] = g / (1.0f + exp_lane(y * kMinusTwoSqrt2OverPi)) * up[i];
  }
}

namespace {

// What both attention paths share. With a sliding window query i sees positions [lo[i],
// n_ctx[i]); the blocks before the tile's earliest lo are never read (the KV manager may have
// released them: table entry -1).
struct TileExtent {
  size_t lo[kAttentionTile];
  size_t min_lo = SIZE_MAX, max_ctx = 0;

  TileExtent(const int32_t* n_ctx, size_t n_q, int32_t window) {
    const size_t w = static_cast<size_t>(window);
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      lo[i] = (w > 0 && n > w) ? n - w : 0;
      min_lo = min_of(min_lo, lo[i]);
      max_ctx = max_of(max_ctx, n);
    }
  }
  // Rows query i sees of the block starting at `start`: 0 past its context or before its
  // window (rows before the window inside a block are scored, then given weight 0).
  size_t rows(const int32_t* n_ctx, size_t i, size_t start, size_t bs) const {
    const size_t n = static_cast<size_t>(n_ctx[i]);
    return (start < n && lo[i] < start + bs) ? min_of(bs, n - start) : 0;
  }
};

// Score jobs, run kScoreBatch chains at a time. A tile of at least that many queries shares
// each block's K loads (one batch per 16 keys); fewer queries batch several blocks, each job
// loading its own keys.
struct ScoreQueue {
  ScoreJob jobs[kAttentionTile];
  size_t n = 0;
  bool share_k;
  size_t stride, head_dim;
  float scale;

  void flush(bool shared) {
    run_scores(jobs, n, shared, stride, head_dim, scale);
    n = 0;
  }
  // A block's keys (K transposed at kt, block_len rows) against every query that sees them:
  // query i its len(i) rows, its scores to out(i).
  template <class Len, class Out>
  void add_block(const float* const* q, size_t n_q, const float* kt, size_t block_len, Len len,
                 Out out) {
    for (size_t j0 = 0; j0 < block_len; j0 += 16) {
      for (size_t i = 0; i < n_q; ++i) {
        if (len(i) <= j0) continue;
        jobs[n++] = {q[i], kt + j0, min_of<size_t>(16, len(i) - j0), out(i) + j0};
        if (!share_k && n == kScoreBatch) flush(false);
      }
      if (share_k) flush(true);
    }
  }
};

// Soft-capping, then the rows before the window (those of [start, lo)) get weight
// exp(-inf) = 0: the same operations for a query in any tile.
inline void cap_and_mask(float* s, size_t len, size_t start, size_t lo, float softcap) {
  if (softcap > 0.0f) softcap_scores(s, len, softcap);
  for (size_t j = start; j < lo; ++j) s[j - start] = -INFINITY;
}

// The queries' corrections exp(m - m_new) in one vector (exp(-inf) = 0 at the start). Once the
// maxima settle most blocks move none, and exp(0) is exactly 1: no exp then (and no wait on
// the deltas' stores, which a vector load of them would stall on).
inline void corrections(const float* delta, bool moved, size_t n_q, float* c) {
  if (moved) {
    exp_lanes(delta, kAttentionTile, c);
  } else {
    for (size_t i = 0; i < n_q; ++i) c[i] = 1.0f;
  }
}

// Attention for heads of at most kNarrowHeadDim dimensions whose V is stored transposed:
// attend_tile's contract (and scratch, see attention_scratch_floats), by units (see above).
void attend_narrow(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                   size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                   float* scratch, float* const* out, AttendMods mods) {
  const size_t bs = kv.block_size, per_query = kNarrowHeadDim * 16;
  float* acc = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64 / sizeof(float);
  float* m = acc + kAttentionTile * per_query;  // n_q running maxima
  float* l = m + kAttentionTile;                // n_q running sums
  const size_t srow = attention_score_row(bs), rs = n_q * srow;
  float* score = l + kAttentionTile;  // unit block g, query i: row g * n_q + i
  float* kbuf = score + kScoreBatch * kAttentionTile * srow;  // the unit's K and V from F16
  float* vbuf = kbuf + kScoreBatch * head_dim * bs;
  const TileExtent ext(n_ctx, n_q, mods.window);
  const size_t* lo = ext.lo;
  for (size_t i = 0; i < n_q; ++i) {
    for (size_t e = 0; e < head_dim * 16; ++e) acc[i * per_query + e] = 0.0f;
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  const size_t n_ctx_blocks = (ext.max_ctx + bs - 1) / bs;
  ScoreQueue scores{{}, 0, n_q >= kScoreBatch, bs, head_dim, scale};
  // Units are kScoreBatch blocks from position 0 on, whichever block a tile starts at.
  for (size_t b0 = ext.min_lo / bs / kScoreBatch * kScoreBatch; b0 < n_ctx_blocks;
       b0 += kScoreBatch) {
    const size_t n_blocks = min_of(kScoreBatch, n_ctx_blocks - b0);
    size_t lens[kAttentionTile][kScoreBatch];  // rows query i sees in block g
    const float* vt[kScoreBatch];
    for (size_t g = 0; g < n_blocks; ++g) {
      const size_t start = (b0 + g) * bs;
      bool used = false;
      for (size_t i = 0; i < n_q; ++i) {
        lens[i][g] = ext.rows(n_ctx, i, start, bs);
        used = used || lens[i][g] > 0;
      }
      // Blocks no query sees are never read (before every window they may be released).
      vt[g] = nullptr;
      if (!used) continue;
      // The head's K and V of the block: head_dim rows of bs, from (block, kv_offset) on.
      const size_t at = k_at(kv, static_cast<size_t>(block_table[b0 + g]) * bs, kv_offset);
      const float* kt = load_floats(kv, kv.k, at, head_dim * bs, kbuf + g * head_dim * bs);
      vt[g] = load_floats(kv, kv.v, at, head_dim * bs, vbuf + g * head_dim * bs);
      scores.add_block(
          q, n_q, kt, bs, [&](size_t i) { return lens[i][g]; },
          [&](size_t i) { return score + (g * n_q + i) * srow; });
    }
    scores.flush(false);
    // Each query's new maximum over the unit, then all corrections exp(m - m_new) at once.
    float m_new[kAttentionTile], delta[kAttentionTile] = {}, correction[kAttentionTile];
    bool moved = false, any[kAttentionTile];
    for (size_t i = 0; i < n_q; ++i) {
      float* sc = score + i * srow;
      m_new[i] = m[i];
      any[i] = false;
      for (size_t g = 0; g < n_blocks; ++g) {
        if (lens[i][g] == 0) continue;
        any[i] = true;
        cap_and_mask(sc + g * rs, lens[i][g], (b0 + g) * bs, lo[i], mods.softcap);
      }
      if (!any[i]) continue;
      m_new[i] = max_lane(m[i], unit_max(sc, rs, lens[i], n_blocks));
      delta[i] = m[i] - m_new[i];
      moved = moved || delta[i] != 0.0f;
    }
    corrections(delta, moved, n_q, correction);
    for (size_t i = 0; i < n_q; ++i) {
      if (!any[i]) continue;
      const float c = correction[i];
      const float sum = unit_weights(score + i * srow, rs, lens[i], n_blocks, m_new[i]);
      l[i] = l[i] * c + sum;
      m[i] = m_new[i];
      // exp(0) is exactly 1, and times 1 changes nothing.
      if (c != 1.0f) {
        for (size_t e = 0; e < head_dim * 16; ++e) acc[i * per_query + e] *= c;
      }
    }
    // V: a few queries at a time share each load (narrow_group).
    const size_t per = narrow_group(head_dim);
    const float* p[4];
    const size_t* len[4];
    float* a[4];
    size_t k = 0;
    for (size_t i = 0; i < n_q; ++i) {
      if (!any[i]) continue;
      p[k] = score + i * srow;
      len[k] = lens[i];
      a[k] = acc + i * per_query;
      if (++k == per) {
        narrow_v(NarrowRows{p, rs, len, vt, bs, n_blocks, head_dim, a}, k);
        k = 0;
      }
    }
    if (k > 0) narrow_v(NarrowRows{p, rs, len, vt, bs, n_blocks, head_dim, a}, k);
  }
  for (size_t i = 0; i < n_q; ++i) {
    const float inv = 1.0f / l[i];
    const float* c = acc + i * per_query;
    for (size_t d = 0; d < head_dim; ++d) {
#if defined(__AVX512F__)
      const float o = sum16(_mm512_loadu_ps(c + d * 16));
#elif defined(__AVX2__)
      const float o = sum16(_mm256_loadu_ps(c + d * 16), _mm256_loadu_ps(c + d * 16 + 8));
#else
      alignas(32) float lanes[16];
      for (size_t e = 0; e < 16; ++e) lanes[e] = c[d * 16 + e];
      const float o = sum16(lanes);
#endif
      out[i][d] = o * inv;
    }
  }
}

}  // namespace

// Up to kAttentionTile queries of one head of one sequence (consecutive positions of a prompt
// chunk) share every K and V row they read. Each query's own operation sequence is exactly
// the single-query one: same blocks, same order of scores, maxima, rescaling and sums. So a
// query's result does not depend on which other queries share its tile.
void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out, AttendMods mods) {
  if (kv.v_transposed) {
    return attend_narrow(q, n_q, kv, kv_offset, head_dim, block_table, n_ctx, scale, scratch, out,
                         mods);
  }
  const size_t bs = kv.block_size;
  // Scores run kScoreBatch chains at a time (ScoreQueue): fewer queries than that score a
  // group of blocks together.
  const bool share_k = n_q >= kScoreBatch;
  const size_t group = share_k ? 1 : kScoreBatch / n_q;
  // Blocks asked for ahead (prefetch_block) by tiles of several queries (a decode token's
  // grouped query heads, a prompt chunk): they score fewer blocks per pass and waited on memory
  // block by block. From DRAM (attention/model/T/22x2048/G, one thread): F32 G = 8 13.7
  // -> 11.2-11.6 ms, G = 4 11.4 -> 8.3-8.9, G = 2 7.0-8.6 -> 6.4-7.0; F16 G = 8 8.8-9.3 -> 7.0-7.9,
  // G = 4 8.7 -> 6.5, G = 2 7.5 -> 5.3-5.5. From cache (1x2048) F32 costs 8-14% at G = 2-4 (F16
  // alike), a small share of a short context's step. One query scores kScoreBatch blocks per pass,
  // which keeps their loads in flight already: there the prefetches measured no faster from
  // DRAM in F32 and 15-25% slower from cache.
  const bool prefetch = n_q > 1;
  // The queries and outputs are worked on in rows next to each other too (see v_rows), from
  // the first cache line boundary in the scratch on.
  float* qbuf = scratch + (64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64 / sizeof(float);
  float* obuf = qbuf + kAttentionTile * head_dim;  // n_q x head_dim: the outputs, unnormalized
  float* m = obuf + kAttentionTile * head_dim;     // n_q running maxima
  float* l = m + kAttentionTile;                   // n_q running sums
  const size_t srow = attention_score_row(bs);     // bs padded to whole 16-lane vectors
  float* score = l + kAttentionTile;               // group x n_q x srow scores
  float* vbuf = score + kAttentionTile * srow;     // bs x head_dim: the block's V rows
  float* pbuf = vbuf + bs * head_dim;              // n_q x srow weights of the current block
  float* kbuf = pbuf + kAttentionTile * srow;      // group x head_dim x bs: F16 K as floats
  const float* qi[kAttentionTile];
  float* oi[kAttentionTile];
  const TileExtent ext(n_ctx, n_q, mods.window);
  const size_t* lo = ext.lo;
  const size_t max_ctx = ext.max_ctx;
  for (size_t i = 0; i < n_q; ++i) {
    copy_floats(q[i], head_dim, qbuf + i * head_dim);
    qi[i] = qbuf + i * head_dim;
    oi[i] = obuf + i * head_dim;
    for (size_t d = 0; d < head_dim; ++d) oi[i][d] = 0.0f;
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  ScoreQueue scores{{}, 0, share_k, bs, head_dim, scale};
  // The first blocks too, all at once: a short context is little more than them.
  if (prefetch) {
    for (size_t b = ext.min_lo / bs, e = b + kPrefetchBlocks; b < e && b * bs < max_ctx; ++b) {
      prefetch_block(kv, static_cast<size_t>(block_table[b]), kv_offset, head_dim);
    }
  }
  // One group of blocks per pass (b counts blocks, start their first positions): all their
  // scores first, then each block's softmax and V in order.
  for (size_t b = ext.min_lo / bs, start = b * bs; start < max_ctx;) {
    // The group's blocks: where they are, how many rows, and the rows query i sees in each.
    size_t slot0[kScoreBatch], block_len[kScoreBatch], block_start[kScoreBatch];
    size_t lens[kScoreBatch][kAttentionTile];
    size_t n_blocks = 0;
    for (; n_blocks < group && start < max_ctx; ++n_blocks, start += bs, ++b) {
      const size_t g = n_blocks;
      // A block right after the one before it in the cache continues the ascending stream of
      // the head's region (KvLayerView::head_stride) that the hardware prefetchers follow, and
      // asking for it too kept them from it: blocks in order from DRAM (attention/model-in-order
      // /T/22x2048/G, one thread) F32 G = 8 11.9-12.7 -> 6.0-6.1 ms, G = 4 10.7-12.1 -> 7.5-7.6,
      // F16 G = 8 9.7-10.7 -> 6.8-6.9, G = 4 7.6-7.8 -> 5.5-6.3 (blocks in descending order
      // gained nothing from the same).
      const size_t ahead = b + kPrefetchBlocks;
      if (prefetch && ahead * bs < max_ctx && block_table[ahead] != block_table[ahead - 1] + 1) {
        prefetch_block(kv, static_cast<size_t>(block_table[ahead]), kv_offset, head_dim);
      }
      slot0[g] = static_cast<size_t>(block_table[b]) * bs;
      block_len[g] = min_of(bs, max_ctx - start);
      block_start[g] = start;
      for (size_t i = 0; i < n_q; ++i) lens[g][i] = ext.rows(n_ctx, i, start, bs);
      const float* kt = k_block(kv, static_cast<size_t>(block_table[b]), kv_offset, head_dim,
                                kbuf + g * head_dim * bs);
      scores.add_block(
          qi, n_q, kt, block_len[g], [&](size_t i) { return lens[g][i]; },
          [&](size_t i) { return score + (g * n_q + i) * srow; });
    }
    scores.flush(false);
    for (size_t g = 0; g < n_blocks; ++g) {
      const size_t* len = lens[g];
      float* sc = score + g * n_q * srow;
      for (size_t i = 0; i < n_q; ++i) {
        if (len[i] > 0) cap_and_mask(sc + i * srow, len[i], block_start[g], lo[i], mods.softcap);
      }
      // New maxima, then all the queries' corrections exp(m - m_new) in one vector (exp(-inf)
      // = 0 on the first block); queries past their context keep m with a correction of 1.
      float m_new[kAttentionTile], delta[kAttentionTile] = {}, correction[kAttentionTile];
      bool moved = false;
      for (size_t i = 0; i < n_q; ++i) {
        m_new[i] = m[i];
        if (len[i] == 0) continue;
        float block_max = block_max16(sc + i * srow, min_of<size_t>(16, len[i]));
        for (size_t j = 16; j < len[i]; j += 16) {
          block_max =
              max_lane(block_max, block_max16(sc + i * srow + j, min_of<size_t>(16, len[i] - j)));
        }
        m_new[i] = max_lane(m[i], block_max);
        delta[i] = m[i] - m_new[i];
        moved = moved || delta[i] != 0.0f;
      }
      corrections(delta, moved, n_q, correction);
      // Weights and their sum (16 at a time, each 16 summed by the fixed tree), then the
      // block's V rows once and each query's weighted sum over them, position by position as in
      // the single-query order; four queries at a time share the V loads.
      for (size_t i = 0; i < n_q; ++i) {
        if (len[i] == 0) continue;
        float sum = l[i] * correction[i];
        for (size_t j = 0; j < len[i]; j += 16) {
          sum += weights16(sc + i * srow + j, min_of<size_t>(16, len[i] - j), m_new[i],
                           pbuf + i * srow + j);
        }
        l[i] = sum;
        m[i] = m_new[i];
      }
      size_t v_stride;
      const float* v0 =
          v_rows(kv, slot0[g], block_len[g], kv_offset, head_dim, vbuf, v_stride, n_q > 4);
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
  }
  for (size_t i = 0; i < n_q; ++i) {
    const float inv = 1.0f / l[i];
    for (size_t d = 0; d < head_dim; ++d) out[i][d] = oi[i][d] * inv;
  }
}

}  // namespace lift::kernels::LIFT_ATTENTION_NS
