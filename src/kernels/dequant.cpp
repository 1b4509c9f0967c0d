#include "kernels/dequant.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/dequant_block.h"

namespace lift::kernels {
namespace {

template <class Block>
void dequant_blocks(const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n / kQBlock; ++i) {
    dequant_block(load_block<Block>(src + i * sizeof(Block)), dst + i * kQBlock);
  }
}

}  // namespace

void dequantize_row(GgmlType t, const void* src, float* dst, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  const bool blocked = t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 ||
                       t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
  if (blocked && n % kQBlock != 0) {
    throw std::invalid_argument("dequantize_row: " + std::string(ggml_type_name(t)) + " row of " +
                                std::to_string(n) + " elements is not a multiple of 32");
  }
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, p, n * sizeof(float));
      return;
    case GgmlType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case GgmlType::Q8_0:
      return dequant_blocks<BlockQ8_0>(p, dst, n);
    case GgmlType::Q4_0:
      return dequant_blocks<BlockQ4_0>(p, dst, n);
    case GgmlType::Q4_1:
      return dequant_blocks<BlockQ4_1>(p, dst, n);
    case GgmlType::Q5_0:
      return dequant_blocks<BlockQ5_0>(p, dst, n);
    case GgmlType::Q5_1:
      return dequant_blocks<BlockQ5_1>(p, dst, n);
    default:
      throw std::invalid_argument("dequantize_row: unsupported type " +
                                  std::string(ggml_type_name(t)));
  }
}

}  // namespace lift::kernels
