// The yardstick matmul: the same decoded operands and the same per-block float scale products as
// the optimized kernels, but summed in double so that only the kernels' float accumulation error
// remains when the two are compared.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/bf16x2.h"
#include "kernels/codec.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"

namespace lift::kernels {
void matmul_reference(GgmlType wt, const void* w, size_t w_row_bytes, size_t n_in, ActFormat af,
                      const void* act, size_t act_stride, size_t n_rows, float* y, size_t ldy,
                      size_t o_begin, size_t o_end) {
  const detail::MatmulArgs a{wt,          static_cast<const uint8_t*>(w),
                             w_row_bytes, n_in,
                             af,          static_cast<const uint8_t*>(act),
                             act_stride,  n_rows,
                             y,           ldy,
                             o_begin,     o_end};
  detail::validate_matmul(a, "matmul_reference");
  std::vector<float> wrow(n_in);
  std::vector<float> xrow(n_in);
  const Codec& c = codec_of(wt, "matmul_reference");
  const size_t nb = n_in / c.block_elems;
  for (size_t o = o_begin; o < o_end; ++o) {
    const uint8_t* wp = a.w + o * w_row_bytes;
    if (af == ActFormat::f32 || af == ActFormat::bf16x2) dequantize_row(wt, wp, wrow.data(), n_in);
    for (size_t r = 0; r < n_rows; ++r) {
      const uint8_t* xp = a.act + r * act_stride;
      double acc = 0.0;
      if (af == ActFormat::f32) {
        std::memcpy(xrow.data(), xp, n_in * sizeof(float));
        for (size_t i = 0; i < n_in; ++i) {
          acc += static_cast<double>(wrow[i]) * static_cast<double>(xrow[i]);
        }
      } else if (af == ActFormat::bf16x2) {
        for (size_t i = 0; i < n_in; ++i) {
          uint16_t hi, lo;
          std::memcpy(&hi, xp + 2 * i, 2);
          std::memcpy(&lo, xp + 2 * (n_in + i), 2);
          const double x =
              static_cast<double>(bf16_value(hi)) + static_cast<double>(bf16_value(lo));
          acc += static_cast<double>(wrow[i]) * x;
        }
      } else {
        acc = c.dot_reference(wp, xp, nb);
      }
      y[r * ldy + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace lift::kernels
