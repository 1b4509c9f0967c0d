// Argument checks, Isa dispatch and the portable scalar implementation of matmul.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/dequant_block.h"
#include "kernels/matmul_impl.h"

namespace lift::kernels {
namespace detail {
namespace {

bool is_block_type(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::Q4_1 ||
         t == GgmlType::Q5_1;
}

bool pair_supported(GgmlType wt, ActFormat af) {
  switch (af) {
    case ActFormat::f32:
      return is_block_type(wt) || wt == GgmlType::F32 || wt == GgmlType::F16 ||
             wt == GgmlType::BF16;
    case ActFormat::q8_0:
      return wt == GgmlType::Q8_0 || wt == GgmlType::Q4_0 || wt == GgmlType::Q5_0;
    case ActFormat::q8_1:
      return wt == GgmlType::Q4_1 || wt == GgmlType::Q5_1;
    case ActFormat::bf16x2:
      return wt == GgmlType::F16 || wt == GgmlType::BF16;
  }
  return false;
}

const char* act_name(ActFormat af) {
  switch (af) {
    case ActFormat::f32:
      return "f32";
    case ActFormat::q8_0:
      return "q8_0";
    case ActFormat::q8_1:
      return "q8_1";
    case ActFormat::bf16x2:
      return "bf16x2";
  }
  return "?";
}

[[noreturn]] void fail(const char* who, const std::string& what) {
  throw std::invalid_argument(std::string(who) + ": " + what);
}

// ---- scalar kernels ---------------------------------------------------------------------------
// Rows are handled in groups of kRows so each decoded weight block serves several activation
// rows; every (r, o) still runs the same operations whatever the group size.
constexpr size_t kRows = 4;

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes elements [i0, i0 + cnt) of a float-typed or block-typed weight row (i0 % 32 == 0).
void decode_chunk(GgmlType wt, const uint8_t* row, size_t i0, size_t cnt, float* out) {
  switch (wt) {
    case GgmlType::F32:
      std::memcpy(out, row + 4 * i0, cnt * 4);
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (size_t j = 0; j < cnt; ++j) {
        uint16_t h;
        std::memcpy(&h, row + 2 * (i0 + j), 2);
        out[j] = wt == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case GgmlType::Q8_0:
      return dequant_block(load_block<BlockQ8_0>(row + i0 / 32 * sizeof(BlockQ8_0)), out);
    case GgmlType::Q4_0:
      return dequant_block(load_block<BlockQ4_0>(row + i0 / 32 * sizeof(BlockQ4_0)), out);
    case GgmlType::Q5_0:
      return dequant_block(load_block<BlockQ5_0>(row + i0 / 32 * sizeof(BlockQ5_0)), out);
    case GgmlType::Q4_1:
      return dequant_block(load_block<BlockQ4_1>(row + i0 / 32 * sizeof(BlockQ4_1)), out);
    case GgmlType::Q5_1:
      return dequant_block(load_block<BlockQ5_1>(row + i0 / 32 * sizeof(BlockQ5_1)), out);
    default:
      return;
  }
}

// Per (r, o): eight partial sums, element i going to p[i % 8] (multiply, then add), reduced
// pairwise at the end. Eight chains let the compiler overlap the adds.
void scalar_f32_act(const MatmulArgs& a) {
  for (size_t o = a.o_begin; o < a.o_end; ++o) {
    const uint8_t* wrow = a.w + o * a.w_row_bytes;
    for (size_t r0 = 0; r0 < a.n_rows; r0 += kRows) {
      const size_t nr = std::min(kRows, a.n_rows - r0);
      float p[kRows][8] = {};
      for (size_t i0 = 0; i0 < a.n_in; i0 += 32) {
        const size_t cnt = std::min<size_t>(32, a.n_in - i0);
        float wv[32];
        decode_chunk(a.wt, wrow, i0, cnt, wv);
        for (size_t r = 0; r < nr; ++r) {
          const uint8_t* x = a.act + (r0 + r) * a.act_stride + 4 * i0;
          for (size_t j = 0; j < cnt; ++j) {
            const float prod = wv[j] * load_f32(x + 4 * j);
            p[r][j % 8] = p[r][j % 8] + prod;
          }
        }
      }
      for (size_t r = 0; r < nr; ++r) {
        const float s = ((p[r][0] + p[r][1]) + (p[r][2] + p[r][3])) +
                        ((p[r][4] + p[r][5]) + (p[r][6] + p[r][7]));
        a.y[(r0 + r) * a.ldy + o] = s;
      }
    }
  }
}

// Per (r, o) and block: exact integer dot, then acc += (d_w * d_x) * isum (+ m_w * s_x).
template <class WB, class XB>
void scalar_q8_act(const MatmulArgs& a) {
  const size_t nb = a.n_in / 32;
  for (size_t o = a.o_begin; o < a.o_end; ++o) {
    const uint8_t* wrow = a.w + o * a.w_row_bytes;
    for (size_t r0 = 0; r0 < a.n_rows; r0 += kRows) {
      const size_t nr = std::min(kRows, a.n_rows - r0);
      float acc[kRows] = {};
      for (size_t b = 0; b < nb; ++b) {
        const WB wb = load_block<WB>(wrow + b * sizeof(WB));
        int32_t q[32];
        block_codes(wb, q);
        const float dw = f16_to_f32(wb.d);
        for (size_t r = 0; r < nr; ++r) {
          const XB xb = load_block<XB>(a.act + (r0 + r) * a.act_stride + b * sizeof(XB));
          int32_t isum = 0;
          for (int i = 0; i < 32; ++i) isum += q[i] * xb.qs[i];
          const float scale = dw * f16_to_f32(xb.d);
          acc[r] = acc[r] + scale * static_cast<float>(isum);
          if constexpr (requires { wb.m; }) {
            acc[r] = acc[r] + f16_to_f32(wb.m) * f16_to_f32(xb.s);
          }
        }
      }
      for (size_t r = 0; r < nr; ++r) a.y[(r0 + r) * a.ldy + o] = acc[r];
    }
  }
}

}  // namespace

void validate_matmul(const MatmulArgs& a, const char* who) {
  // Messages are only built on failure: this runs on every matmul call.
  auto tname = [&] { return std::string(ggml_type_name(a.wt)); };
  if (!pair_supported(a.wt, a.af)) {
    fail(who, "unsupported weight type " + tname() + " with " + act_name(a.af) + " activations");
  }
  const bool blocks = a.af == ActFormat::q8_0 || a.af == ActFormat::q8_1;
  if ((is_block_type(a.wt) || blocks) && a.n_in % 32 != 0) {
    fail(who, tname() + " needs n_in to be a multiple of 32, got " + std::to_string(a.n_in));
  }
  if (a.o_begin > a.o_end) fail(who, "o_begin > o_end");
  if (a.o_end > a.o_begin && a.w_row_bytes < ggml_row_bytes(a.wt, a.n_in)) {
    fail(who, "w_row_bytes " + std::to_string(a.w_row_bytes) + " is less than a " + tname() +
                  " row of " + std::to_string(a.n_in));
  }
  if (a.n_rows > 1 && a.act_stride < act_row_bytes(a.af, a.n_in)) {
    fail(who, "act_stride " + std::to_string(a.act_stride) + " is less than an activation row");
  }
  if (a.n_rows > 1 && a.ldy < a.o_end) fail(who, "ldy is less than o_end");
  if (a.af == ActFormat::f32 &&
      (reinterpret_cast<uintptr_t>(a.act) % 4 != 0 || (a.n_rows > 1 && a.act_stride % 4 != 0))) {
    fail(who, "f32 activations must be 4-byte aligned");
  }
}

void matmul_scalar(const MatmulArgs& a) {
  if (a.af == ActFormat::f32) return scalar_f32_act(a);
  switch (a.wt) {
    case GgmlType::Q8_0:
      return scalar_q8_act<BlockQ8_0, BlockQ8_0>(a);
    case GgmlType::Q4_0:
      return scalar_q8_act<BlockQ4_0, BlockQ8_0>(a);
    case GgmlType::Q5_0:
      return scalar_q8_act<BlockQ5_0, BlockQ8_0>(a);
    case GgmlType::Q4_1:
      return scalar_q8_act<BlockQ4_1, BlockQ8_1>(a);
    case GgmlType::Q5_1:
      return scalar_q8_act<BlockQ5_1, BlockQ8_1>(a);
    default:
      return;
  }
}

}  // namespace detail

void matmul(GgmlType wt, const void* w, size_t w_row_bytes, size_t n_in, ActFormat af,
            const void* act, size_t act_stride, size_t n_rows, float* y, size_t ldy, size_t o_begin,
            size_t o_end) {
  const detail::MatmulArgs a{wt,          static_cast<const uint8_t*>(w),
                             w_row_bytes, n_in,
                             af,          static_cast<const uint8_t*>(act),
                             act_stride,  n_rows,
                             y,           ldy,
                             o_begin,     o_end};
  detail::validate_matmul(a, "matmul");
  if (af == ActFormat::bf16x2) {
    throw std::invalid_argument("matmul: bf16x2 activations run on AMX panels (matmul_panels_amx)");
  }
  if (n_rows == 0 || o_begin == o_end) return;
  switch (active_isa()) {
    case Isa::amx:
    case Isa::avx512:
      return detail::matmul_avx512(a);
    case Isa::avx2:
      return detail::matmul_avx2(a);
    case Isa::scalar:
      break;
  }
  detail::matmul_scalar(a);
}

}  // namespace lift::kernels
