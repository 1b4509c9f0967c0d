#include "kernels/dequant.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/codec.h"

namespace lift::kernels {

void dequantize_row(GgmlType t, const void* src, float* dst, size_t n) {
  const Codec& c = codec_of(t, "dequantize_row");
  if (n % c.block_elems != 0) {
    throw std::invalid_argument("dequantize_row: " + std::string(ggml_type_name(t)) + " row of " +
                                std::to_string(n) + " elements is not a multiple of " +
                                std::to_string(c.block_elems));
  }
  c.decode(static_cast<const uint8_t*>(src), n / c.block_elems, dst);
}

}  // namespace lift::kernels
