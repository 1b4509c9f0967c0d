// The codec table (codec.h): every weight format's decoder and scalar dot products, built from
// the per-block decoders (dequant_block.h, kquant_codes.h).
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/codec.h"
#include "kernels/dequant_block.h"
#include "kernels/kquant_codes.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_kquant.h"

namespace lift::kernels {
namespace {

// ---- decoders ---------------------------------------------------------------------------------
void decode_f32(const uint8_t* src, size_t n, float* dst) { std::memcpy(dst, src, n * 4); }

template <float (*Widen)(uint16_t)>
void decode_half(const uint8_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = Widen(h);
  }
}

template <class Block>
void decode_blocks(const uint8_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) {
    const Block b = load_block<Block>(src + i * sizeof(Block));
    if constexpr (KTraits<Block>::kIsK) {
      k_decode(b, dst + i * kKBlock);
    } else {
      dequant_block(b, dst + i * kQBlock);
    }
  }
}

// ---- 32-element blocks with Q8_0 / Q8_1 activations --------------------------------------------
// Per block: exact integer dot, then acc += (d_w * d_x) * isum (+ m_w * s_x), in float.
template <class WB, class XB>
float q8_dot(const uint8_t* w, const uint8_t* x, size_t nb) {
  float acc = 0.0f;
  for (size_t b = 0; b < nb; ++b) {
    const WB wb = load_block<WB>(w + b * sizeof(WB));
    const XB xb = load_block<XB>(x + b * sizeof(XB));
    int32_t q[32];
    block_codes(wb, q);
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += q[i] * xb.qs[i];
    const float scale = f16_to_f32(wb.d) * f16_to_f32(xb.d);
    acc = acc + scale * static_cast<float>(isum);
    if constexpr (requires { wb.m; }) acc = acc + f16_to_f32(wb.m) * f16_to_f32(xb.s);
  }
  return acc;
}

// The same operands; the block scale still rounded to float, as the kernels do.
template <class WB, class XB>
double q8_dot_reference(const uint8_t* w, const uint8_t* x, size_t nb) {
  double acc = 0.0;
  for (size_t b = 0; b < nb; ++b) {
    const WB wb = load_block<WB>(w + b * sizeof(WB));
    const XB xb = load_block<XB>(x + b * sizeof(XB));
    int32_t q[32];
    block_codes(wb, q);
    int64_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += q[i] * xb.qs[i];
    const float scale = f16_to_f32(wb.d) * f16_to_f32(xb.d);
    acc += static_cast<double>(scale) * static_cast<double>(isum);
    if constexpr (requires { wb.m; }) {
      acc += static_cast<double>(f16_to_f32(wb.m)) * static_cast<double>(f16_to_f32(xb.s));
    }
  }
  return acc;
}

// ---- K-quant super-blocks with Q8_K activations -------------------------------------------------
// Per super-block: exact sumi and summ (kquant_codes.h), then
//   acc += (d_w * d_x) * float(sumi);  acc -= (dmin_w * d_x) * float(summ)   (types with mins).
template <class Block>
float k_dot(const uint8_t* w, const uint8_t* x, size_t nb) {
  float acc = 0.0f;
  for (size_t b = 0; b < nb; ++b) {
    KCodes c;
    k_codes(load_block<Block>(w + b * sizeof(Block)), c);
    const BlockQ8_K xb = load_block<BlockQ8_K>(x + b * sizeof(BlockQ8_K));
    int32_t sumi, summ;
    k_int_dot<Block>(c, xb, sumi, summ);
    const float dd = c.d * xb.d;
    acc = acc + dd * static_cast<float>(sumi);
    if constexpr (KTraits<Block>::kHasMin) {
      const float dm = c.dmin * xb.d;
      acc = acc - dm * static_cast<float>(summ);
    }
  }
  return acc;
}

template <class Block>
double k_dot_reference(const uint8_t* w, const uint8_t* x, size_t nb) {
  double acc = 0.0;
  for (size_t b = 0; b < nb; ++b) {
    KCodes c;
    k_codes(load_block<Block>(w + b * sizeof(Block)), c);
    const BlockQ8_K xb = load_block<BlockQ8_K>(x + b * sizeof(BlockQ8_K));
    int32_t sumi, summ;
    k_int_dot<Block>(c, xb, sumi, summ);
    const float dd = c.d * xb.d;
    acc += static_cast<double>(dd) * static_cast<double>(sumi);
    if constexpr (KTraits<Block>::kHasMin) {
      const float dm = c.dmin * xb.d;
      acc -= static_cast<double>(dm) * static_cast<double>(summ);
    }
  }
  return acc;
}

// ---- the table ----------------------------------------------------------------------------------
constexpr Codec float_codec(GgmlType t, size_t bytes, void (*dec)(const uint8_t*, size_t, float*)) {
  return {t,
          1,
          bytes,
          ActFormat::f32,
          dec,
          nullptr,
          nullptr,
          detail::matmul_avx2,
          detail::matmul_avx512};
}

template <class WB, class XB>
constexpr Codec q32_codec(GgmlType t, ActFormat af, bool simd) {
  return {t,
          kQBlock,
          sizeof(WB),
          af,
          decode_blocks<WB>,
          q8_dot<WB, XB>,
          q8_dot_reference<WB, XB>,
          simd ? detail::matmul_avx2 : nullptr,
          simd ? detail::matmul_avx512 : nullptr};
}

// The AVX2 rows kernel repeats the scalar float steps per output (matmul_kquant.h); there is no
// AVX-512 one, so AVX-512 machines run the scalar kernel on stored IQ4_NL rows.
constexpr Codec iq4nl_codec() {
  Codec c = q32_codec<BlockIQ4_NL, BlockQ8_0>(GgmlType::IQ4_NL, ActFormat::q8_0, false);
  c.rows_avx2 = detail::matmul_iq4nl_avx2;
  return c;
}

// The stored-row kernel (AVX2, and AVX-512 machines' matmul() too) is bitwise equal to k_dot
// (matmul_kquant.h); the engine repacks these types into panels (panel.h) where it can.
template <class Block>
constexpr Codec k_codec(GgmlType t) {
  return {t,
          kKBlock,
          sizeof(Block),
          ActFormat::q8_k,
          decode_blocks<Block>,
          k_dot<Block>,
          k_dot_reference<Block>,
          detail::matmul_kquant_avx2,
          nullptr};
}

const Codec kCodecs[] = {
    float_codec(GgmlType::F32, 4, decode_f32),
    float_codec(GgmlType::F16, 2, decode_half<f16_to_f32>),
    float_codec(GgmlType::BF16, 2, decode_half<bf16_to_f32>),
    q32_codec<BlockQ8_0, BlockQ8_0>(GgmlType::Q8_0, ActFormat::q8_0, true),
    q32_codec<BlockQ4_0, BlockQ8_0>(GgmlType::Q4_0, ActFormat::q8_0, true),
    q32_codec<BlockQ5_0, BlockQ8_0>(GgmlType::Q5_0, ActFormat::q8_0, true),
    q32_codec<BlockQ4_1, BlockQ8_1>(GgmlType::Q4_1, ActFormat::q8_1, true),
    q32_codec<BlockQ5_1, BlockQ8_1>(GgmlType::Q5_1, ActFormat::q8_1, true),
    iq4nl_codec(),
    k_codec<BlockQ2_K>(GgmlType::Q2_K),
    k_codec<BlockQ3_K>(GgmlType::Q3_K),
    k_codec<BlockQ4_K>(GgmlType::Q4_K),
    k_codec<BlockQ5_K>(GgmlType::Q5_K),
    k_codec<BlockQ6_K>(GgmlType::Q6_K),
    k_codec<BlockIQ4_XS>(GgmlType::IQ4_XS),
};

}  // namespace

const Codec* find_codec(GgmlType t) {
  for (const Codec& c : kCodecs) {
    if (c.type == t) return &c;
  }
  return nullptr;
}

const Codec& codec_of(GgmlType t, const char* who) {
  const Codec* c = find_codec(t);
  if (c == nullptr) {
    throw std::invalid_argument(std::string(who) + ": unsupported weight type " +
                                std::string(ggml_type_name(t)));
  }
  return *c;
}

}  // namespace lift::kernels
