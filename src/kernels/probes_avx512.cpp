// AVX-512 loops for the machine probes (see probes.h). Only called when the CPU has AVX-512.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace lift::probes {

float sum_avx512(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// 10 independent FMA chains hide the 4-cycle latency on 2 FMA ports.
float fma_avx512(int64_t iters) {
  __m512 a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm512_set1_ps(1.0f + static_cast<float>(k) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm512_fmadd_ps(a[k], m, c);
  }
  __m512 s = a[0];
  for (int k = 1; k < 10; ++k) s = _mm512_add_ps(s, a[k]);
  return _mm512_reduce_add_ps(s);
}

int32_t vnni_avx512(int64_t iters) {
  __m512i a[10];
  for (int k = 0; k < 10; ++k) a[k] = _mm512_set1_epi32(k);
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 10; ++k) a[k] = _mm512_dpbusd_epi32(a[k], x, y);
  }
  __m512i s = a[0];
  for (int k = 1; k < 10; ++k) s = _mm512_add_epi32(s, a[k]);
  return _mm512_reduce_add_epi32(s);
}

}  // namespace lift::probes
