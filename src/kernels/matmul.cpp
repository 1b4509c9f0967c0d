// Argument checks, Isa dispatch and the portable scalar implementation of matmul.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/codec.h"
#include "kernels/matmul_impl.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels {
namespace detail {
namespace {

// Float weights take f32 rows (or bf16x2 prompt rows on AMX); quantized ones f32 (exact) or
// their codec's activation format.
bool pair_supported(const Codec* c, ActFormat af) {
  if (c == nullptr) return false;
  if (af == ActFormat::f32) return true;
  if (af == ActFormat::bf16x2) return c->type == GgmlType::F16 || c->type == GgmlType::BF16;
  return c->act == af;
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
    case ActFormat::q8_k:
      return "q8_k";
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

// Per (r, o): eight partial sums, element i going to p[i % 8] (multiply, then add), reduced
// pairwise at the end. Eight chains let the compiler overlap the adds. Weights are decoded a
// chunk (32 elements, or one 256-element super-block) at a time.
void scalar_f32_act(const MatmulArgs& a, const Codec& c) {
  const size_t chunk = c.block_elems > kQBlock ? c.block_elems : kQBlock;
  float wv[kKBlock];
  for (size_t o = a.o_begin; o < a.o_end; ++o) {
    const uint8_t* wrow = a.w + o * a.w_row_bytes;
    for (size_t r0 = 0; r0 < a.n_rows; r0 += kRows) {
      const size_t nr = std::min(kRows, a.n_rows - r0);
      float p[kRows][8] = {};
      for (size_t i0 = 0; i0 < a.n_in; i0 += chunk) {
        const size_t cnt = std::min(chunk, a.n_in - i0);
        c.decode(wrow + i0 / c.block_elems * c.block_bytes, cnt / c.block_elems, wv);
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

// Quantized activations: the codec's block-by-block integer dot, per (r, o).
void scalar_q_act(const MatmulArgs& a, const Codec& c) {
  const size_t nb = a.n_in / c.block_elems;
  for (size_t o = a.o_begin; o < a.o_end; ++o) {
    const uint8_t* wrow = a.w + o * a.w_row_bytes;
    for (size_t r = 0; r < a.n_rows; ++r) {
      a.y[r * a.ldy + o] = c.dot(wrow, a.act + r * a.act_stride, nb);
    }
  }
}

}  // namespace

void validate_matmul(const MatmulArgs& a, const char* who) {
  // Messages are only built on failure: this runs on every matmul call.
  auto tname = [&] { return std::string(ggml_type_name(a.wt)); };
  const Codec* c = find_codec(a.wt);
  if (!pair_supported(c, a.af)) {
    fail(who, "unsupported weight type " + tname() + " with " + act_name(a.af) + " activations");
  }
  if (a.n_in % c->block_elems != 0) {
    fail(who, tname() + " needs n_in to be a multiple of " + std::to_string(c->block_elems) +
                  ", got " + std::to_string(a.n_in));
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
  const Codec& c = *find_codec(a.wt);
  if (a.af == ActFormat::f32) return scalar_f32_act(a, c);
  scalar_q_act(a, c);
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
  const Codec& c = *find_codec(wt);
  // The widest stored-row kernel the active Isa runs; every one gives the scalar kernel's bits
  // (codec.h), so a format without an AVX-512 kernel (Q2_K, Q3_K, IQ4_NL) takes the AVX2 one
  // there rather than the scalar loop, which read their rows ~100x slower (stream_bench.cpp).
  const Isa isa = active_isa();
  if (isa >= Isa::avx512 && c.rows_avx512 != nullptr) return c.rows_avx512(a);
  if (isa >= Isa::avx2 && c.rows_avx2 != nullptr) return c.rows_avx2(a);
  detail::matmul_scalar(a);
}

}  // namespace lift::kernels
