// The fast attention kernel, included by one translation unit per instruction set, each
// defining LIFT_ATTENTION_NS. The code is written lane-wise (16 independent partial sums,
// fixed combining tree, no FMA contraction) so every instruction set rounds the same way.
// (No include guard: meant to be included once per namespace.)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/fp16.h"
#include "kernels/ops.h"

namespace lift::kernels::LIFT_ATTENTION_NS {

namespace {

// Dot product with 16 independent partial sums combined in a fixed tree: the compiler maps
// the lanes onto vector registers without reassociating, so every ISA rounds identically.
#if defined(__AVX512F__)
// The same lanes and the same combining tree as the portable version below, spelled out:
// lane j sums a[i] * b[i] for i = j mod 16 (a masked add for the tail), then lanes j and
// j + w are added for w = 8, 4, 2, 1.
inline float dot16(const float* a, const float* b, size_t n) {
  __m512 acc = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_mask_add_ps(
        acc, m, acc,
        _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(acc, 0), _mm512_extractf32x8_ps(acc, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// o[d] += p[j] * v_j[d] for j = 0..len-1 in order (v_j at v + j * stride): per element the
// same multiply-then-add sequence as the portable loop, with o kept in registers across j.
inline void accumulate_rows(const float* p, const float* v, size_t stride, size_t len, float* o,
                            size_t n) {
  size_t d = 0;
  for (; d + 16 <= n; d += 16) {
    __m512 acc = _mm512_loadu_ps(o + d);
    for (size_t j = 0; j < len; ++j) {
      acc = _mm512_add_ps(acc,
                          _mm512_mul_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + j * stride + d)));
    }
    _mm512_storeu_ps(o + d, acc);
  }
  for (; d < n; ++d) {
    float a = o[d];
    for (size_t j = 0; j < len; ++j) a += p[j] * v[j * stride + d];
    o[d] = a;
  }
}

// Scores of one query against up to 16 K rows (k_j at k + j * stride) at once: each score is
// dot16(q, k_j) exactly (same lanes, same tree), but the 16 trees are evaluated together
// with lane permutes, which costs far less than 16 separate horizontal sums.
inline void scores16(const float* q, const float* k, size_t stride, size_t len, size_t n,
                     float scale, float* out) {
  __m512 acc[16];
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  for (size_t j = 0; j < 16; ++j) {
    acc[j] = _mm512_setzero_ps();
    if (j >= len) continue;
    const float* kj = k + j * stride;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      acc[j] =
          _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(kj + i)));
    }
    if (i < n) {
      acc[j] = _mm512_mask_add_ps(
          acc[j], tail, acc[j],
          _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, q + i), _mm512_maskz_loadu_ps(tail, kj + i)));
    }
  }
  // Level w: lanes j and j + w of every group are added; pairs of vectors are packed so that
  // after four levels lane j holds the score of row j.
  const __m512i lo8 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i hi8 =
      _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const __m512i lo4 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i hi4 = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const __m512i lo2 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
  const __m512i hi2 = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  const __m512i lo1 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i hi1 = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  auto level = [](__m512 a, __m512 b, __m512i lo, __m512i hi) {
    return _mm512_add_ps(_mm512_permutex2var_ps(a, lo, b), _mm512_permutex2var_ps(a, hi, b));
  };
  __m512 s1[8], s2[4], s3[2];
  for (int t = 0; t < 8; ++t) s1[t] = level(acc[2 * t], acc[2 * t + 1], lo8, hi8);
  for (int t = 0; t < 4; ++t) s2[t] = level(s1[2 * t], s1[2 * t + 1], lo4, hi4);
  for (int t = 0; t < 2; ++t) s3[t] = level(s2[2 * t], s2[2 * t + 1], lo2, hi2);
  const __m512 s4 = _mm512_mul_ps(level(s3[0], s3[1], lo1, hi1), _mm512_set1_ps(scale));
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << len) - 1), s4);
}
#else
inline float dot16(const float* a, const float* b, size_t n) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

inline void scores16(const float* q, const float* k, size_t stride, size_t len, size_t n,
                     float scale, float* out) {
  for (size_t j = 0; j < len; ++j) out[j] = dot16(q, k + j * stride, n) * scale;
}

inline void accumulate_rows(const float* p, const float* v, size_t stride, size_t len, float* o,
                            size_t n) {
  for (size_t d = 0; d < n; ++d) {
    float a = o[d];
    for (size_t j = 0; j < len; ++j) a += p[j] * v[j * stride + d];
    o[d] = a;
  }
}
#endif

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

// One head's K or V rows of a block as floats: in place for F32 (rows kv_dim apart),
// converted into buf for F16 (rows head_dim apart).
inline const float* block_rows(const KvLayerView& kv, const void* base, size_t slot0, size_t len,
                               size_t kv_offset, size_t head_dim, float* buf, size_t& stride) {
  if (kv.type == GgmlType::F32) {
    stride = kv.kv_dim;
    return static_cast<const float*>(base) + slot0 * kv.kv_dim + kv_offset;
  }
  for (size_t j = 0; j < len; ++j)
    load_row(kv, base, slot0 + j, kv_offset, head_dim, buf + j * head_dim);
  stride = head_dim;
  return buf;
}

}  // namespace

// Up to kAttentionTile queries of one head of one sequence (consecutive positions of a prompt
// chunk) share every K and V row they read. Each query's own operation sequence is exactly
// the single-query one: same blocks, same order of scores, maxima, rescaling and sums. So a
// query's result does not depend on which other queries share its tile.
void attend_tile(const float* const* q, size_t n_q, const KvLayerView& kv, size_t kv_offset,
                 size_t head_dim, const int32_t* block_table, const int32_t* n_ctx, float scale,
                 float* scratch, float* const* out) {
  const size_t bs = kv.block_size;
  float* row = scratch;                       // head_dim: a converted K or V row
  float* m = row + head_dim;                  // n_q running maxima
  float* l = m + kAttentionTile;              // n_q running sums
  float* score = l + kAttentionTile;          // n_q x bs scores of the current block
  float* vbuf = score + kAttentionTile * bs;  // bs x head_dim: the block's V rows, if F16
  float* pbuf = vbuf + bs * head_dim;         // bs weights of one query
  size_t max_ctx = 0;
  for (size_t i = 0; i < n_q; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
    std::fill(out[i], out[i] + head_dim, 0.0f);
    max_ctx = std::max(max_ctx, static_cast<size_t>(n_ctx[i]));
  }
  for (size_t start = 0, b = 0; start < max_ctx; start += bs, ++b) {
    const size_t slot0 = static_cast<size_t>(block_table[b]) * bs;
    const size_t block_len = std::min(bs, max_ctx - start);
    // The block's K rows once, then each query's scores 16 rows at a time.
    size_t k_stride;
    const float* k0 = block_rows(kv, kv.k, slot0, block_len, kv_offset, head_dim, vbuf, k_stride);
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      if (start >= n) continue;
      const size_t len = std::min(bs, n - start);
      for (size_t j = 0; j < len; j += 16) {
        scores16(q[i], k0 + j * k_stride, k_stride, std::min<size_t>(16, len - j), head_dim, scale,
                 score + i * bs + j);
      }
    }
    float m_new[kAttentionTile] = {};
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      if (start >= n) continue;
      const size_t len = std::min(bs, n - start);
      float block_max = -INFINITY;
      for (size_t j = 0; j < len; ++j) block_max = std::max(block_max, score[i * bs + j]);
      m_new[i] = std::max(m[i], block_max);
      const float correction = std::exp(m[i] - m_new[i]);  // exp(-inf) = 0 on the first block
      l[i] *= correction;
      for (size_t d = 0; d < head_dim; ++d) out[i][d] *= correction;
    }
    // The block's V rows once, then each query's weighted sum over them, position by
    // position as in the single-query order.
    size_t v_stride;
    const float* v0 = block_rows(kv, kv.v, slot0, block_len, kv_offset, head_dim, vbuf, v_stride);
    for (size_t i = 0; i < n_q; ++i) {
      const size_t n = static_cast<size_t>(n_ctx[i]);
      if (start >= n) continue;
      const size_t len = std::min(bs, n - start);
      for (size_t j = 0; j < len; ++j) {
        pbuf[j] = std::exp(score[i * bs + j] - m_new[i]);
        l[i] += pbuf[j];
      }
      accumulate_rows(pbuf, v0, v_stride, len, out[i], head_dim);
    }
    for (size_t i = 0; i < n_q; ++i) {
      if (start < static_cast<size_t>(n_ctx[i])) m[i] = m_new[i];
    }
  }
  for (size_t i = 0; i < n_q; ++i) {
    const float inv = 1.0f / l[i];
    for (size_t d = 0; d < head_dim; ++d) out[i][d] *= inv;
  }
}

}  // namespace lift::kernels::LIFT_ATTENTION_NS
