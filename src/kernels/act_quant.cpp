#include "kernels/act_quant.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/act_quant_impl.h"
#include "kernels/bf16x2.h"
#include "kernels/codec.h"
#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {

ActFormat act_format(GgmlType weight, bool quantize_activations, RowKind kind) {
  const Codec& c = codec_of(weight, "act_format");
  if (weight == GgmlType::F16 || weight == GgmlType::BF16) {
    return quantize_activations && kind == RowKind::prompt && active_isa() == Isa::amx
               ? ActFormat::bf16x2
               : ActFormat::f32;
  }
  return quantize_activations ? c.act : ActFormat::f32;
}

bool kinds_differ(GgmlType weight, bool quantize_activations) {
  return (weight == GgmlType::F16 || weight == GgmlType::BF16) &&
         act_format(weight, quantize_activations, RowKind::prompt) !=
             act_format(weight, quantize_activations, RowKind::generated);
}

size_t act_row_bytes(ActFormat af, size_t n) {
  if (af == ActFormat::f32 || af == ActFormat::bf16x2) return n * 4;
  if (af == ActFormat::q8_k) {
    if (n % kKBlock != 0) {
      throw std::invalid_argument("act_row_bytes: q8_k activation row of " + std::to_string(n) +
                                  " elements is not a multiple of 256");
    }
    return n / kKBlock * sizeof(BlockQ8_K);
  }
  if (n % kQBlock != 0) {
    throw std::invalid_argument("act_row_bytes: quantized activation row of " + std::to_string(n) +
                                " elements is not a multiple of 32");
  }
  return n / kQBlock * (af == ActFormat::q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8_1));
}

void quantize_activation_row(ActFormat af, const float* x, size_t n, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  if (af == ActFormat::f32) {
    std::memcpy(out, x, n * sizeof(float));
    return;
  }
  if (af == ActFormat::bf16x2) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t hi, lo;
      split_bf16x2(x[i], hi, lo);
      std::memcpy(out + 2 * i, &hi, 2);
      std::memcpy(out + 2 * (n + i), &lo, 2);
    }
    return;
  }
  (void)act_row_bytes(af, n);  // validates n
  const bool with_sum = af == ActFormat::q8_1;
  switch (active_isa()) {
    case Isa::amx:
    case Isa::avx512:
      if (af == ActFormat::q8_k) return detail::quantize_q8_k_avx512(x, n, out);
      return detail::quantize_q8_avx512(x, n, out, with_sum);
    case Isa::avx2:
      if (af == ActFormat::q8_k) break;
      return detail::quantize_q8_avx2(x, n, out, with_sum);
    case Isa::scalar:
      break;
  }
  if (af == ActFormat::q8_k) return detail::quantize_q8_k(x, n, out);
  detail::quantize_q8_scalar(x, n, out, with_sum);
}

namespace detail {

void quantize_q8_scalar(const float* x, size_t n, uint8_t* dst, bool with_sum) {
  const size_t block_bytes = with_sum ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  for (size_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (size_t i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = q8_inverse_scale(amax);
    int8_t qs[kQBlock];
    int32_t sum = 0;
    for (size_t i = 0; i < kQBlock; ++i) {
      const float v = xb[i] * id;
      // SIMD converts with cvtps2dq (INT_MIN when out of range) and then saturates to int8.
      long q = std::fabs(v) < 2147483648.0f ? std::lrint(v) : LONG_MIN;
      q = std::clamp(q, -128L, 127L);
      qs[i] = static_cast<int8_t>(q);
      sum += static_cast<int32_t>(q);
    }
    uint8_t* blk = dst + b * block_bytes;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    if (with_sum) {
      const uint16_t sh = f32_to_f16(d * static_cast<float>(sum));
      std::memcpy(blk + 2, &sh, 2);
      std::memcpy(blk + 4, qs, kQBlock);
    } else {
      std::memcpy(blk + 2, qs, kQBlock);
    }
  }
}

void quantize_q8_k(const float* x, size_t n, uint8_t* dst) {
  for (size_t b = 0; b < n / kKBlock; ++b) {
    const float* xb = x + b * kKBlock;
    float amax = 0.0f, xm = 0.0f;
    for (size_t i = 0; i < kKBlock; ++i) {
      const float ax = std::fabs(xb[i]);
      if (ax > amax) {
        amax = ax;
        xm = xb[i];
      }
    }
    BlockQ8_K blk{};
    if (amax != 0.0f) {
      const float iscale = -127.0f / xm;
      for (size_t i = 0; i < kKBlock; ++i) {
        // |iscale * x| <= 127 * (1 + eps): lrint rounds half to even as ggml's nearest_int does.
        blk.qs[i] = static_cast<int8_t>(std::min(127L, std::lrint(iscale * xb[i])));
      }
      for (size_t j = 0; j < 16; ++j) {
        int32_t sum = 0;
        for (size_t i = 0; i < 16; ++i) sum += blk.qs[16 * j + i];
        blk.bsums[j] = static_cast<int16_t>(sum);
      }
      blk.d = 1.0f / iscale;
    }
    std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
  }
}

}  // namespace detail
}  // namespace lift::kernels
