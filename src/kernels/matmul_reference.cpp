// The yardstick matmul: the same decoded operands and the same per-block float scale products as
// the optimized kernels, but summed in double so that only the kernels' float accumulation error
// remains when the two are compared.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/bf16x2.h"
#include "kernels/dequant.h"
#include "kernels/dequant_block.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"

namespace lift::kernels {
namespace {

template <class WB, class XB>
double block_dot(const uint8_t* wrow, const uint8_t* xrow, size_t nb) {
  double acc = 0.0;
  for (size_t b = 0; b < nb; ++b) {
    const WB wb = load_block<WB>(wrow + b * sizeof(WB));
    const XB xb = load_block<XB>(xrow + b * sizeof(XB));
    int32_t q[32];
    block_codes(wb, q);
    int64_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += q[i] * xb.qs[i];
    const float scale = f16_to_f32(wb.d) * f16_to_f32(xb.d);  // rounded to float, as the kernels do
    acc += static_cast<double>(scale) * static_cast<double>(isum);
    if constexpr (requires { wb.m; }) {
      acc += static_cast<double>(f16_to_f32(wb.m)) * static_cast<double>(f16_to_f32(xb.s));
    }
  }
  return acc;
}

}  // namespace

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
  const size_t nb = n_in / 32;
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
      } else if (wt == GgmlType::Q8_0) {
        acc = block_dot<BlockQ8_0, BlockQ8_0>(wp, xp, nb);
      } else if (wt == GgmlType::Q4_0) {
        acc = block_dot<BlockQ4_0, BlockQ8_0>(wp, xp, nb);
      } else if (wt == GgmlType::Q5_0) {
        acc = block_dot<BlockQ5_0, BlockQ8_0>(wp, xp, nb);
      } else if (wt == GgmlType::Q4_1) {
        acc = block_dot<BlockQ4_1, BlockQ8_1>(wp, xp, nb);
      } else if (wt == GgmlType::Q5_1) {
        acc = block_dot<BlockQ5_1, BlockQ8_1>(wp, xp, nb);
      }
      y[r * ldy + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace lift::kernels
