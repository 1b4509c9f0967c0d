// AVX2 loops for the machine probes (see probes.h).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace lift::probes {

float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : t) s += v;
  return s;
}

float fma_avx2(int64_t iters) {
  __m256 a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_ps(1.0f + static_cast<float>(k) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
  }
  __m256 s = a[0];
  for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, a[k]);
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  return t[0];
}

// The int8 sequence of the AVX2 kernels: maddubs (32 u8 x s8 products, pairwise summed to
// int16), madd by ones to int32, add. Values stay tiny, so nothing saturates.
int32_t maddubs_avx2(int64_t iters) {
  __m256i a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm256_set1_epi32(k);
  const __m256i x = _mm256_set1_epi8(3), y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 10; ++k) {
      a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones));
    }
  }
  __m256i s = a[0];
  for (int k = 1; k < 10; ++k) s = _mm256_add_epi32(s, a[k]);
  alignas(32) int32_t t[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), s);
  return t[0];
}

}  // namespace lift::probes
