// Packing into row panels, activation block info and dispatch of the panel products (the
// FMA and AMX ones): the checks in baseline code, the work in the per-Isa files.
#include "kernels/panel.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "kernels/fp16.h"
#include "kernels/isa.h"
#include "kernels/panel_amx.h"
#include "kernels/quant_blocks.h"
#include "util/large_alloc.h"

namespace lift::kernels {
namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("pack_panels: " + what);
}

bool has_amx_k_kernel(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

bool packable(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0 ||
         t == GgmlType::IQ4_NL || t == GgmlType::F16 || t == GgmlType::BF16 || is_k_panel(t);
}

size_t panel_bytes_for(GgmlType t, size_t n_in, bool streamed) {
  if (t == GgmlType::F16 || t == GgmlType::BF16) return round_up(n_in * 2 * kPanelRows, 64);
  if (streamed && is_k_panel(t)) return n_in / kKBlock * k_panel_block_bytes(t, true);
  if (is_k_panel(t)) {
    return round_up(n_in / kKBlock * (k_panel_block_bytes(t) + k_panel_scale_bytes(t)), 64);
  }
  if (streamed) return (n_in / kQBlock + 1) / 2 * panel_pair_bytes(t);
  return round_up(n_in / kQBlock * (panel_code_bytes(t) + kPanelScaleBytes), 64);
}

// Where element i of panel row `lane` lives, for the float layouts.
size_t float_offset(size_t i, size_t lane) { return (i * kPanelRows + lane) * 2; }

void pack_row(GgmlType t, bool streamed, const uint8_t* src, size_t n_in, size_t lane,
              uint8_t* panel) {
  if (is_k_panel(t)) return detail::pack_k_row(t, streamed, src, n_in, lane, panel);
  const size_t nb = n_in / kQBlock;
  switch (t) {
    case GgmlType::F16:
    case GgmlType::BF16:
      for (size_t i = 0; i < n_in; ++i) std::memcpy(panel + float_offset(i, lane), src + 2 * i, 2);
      return;
    case GgmlType::Q8_0:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        uint8_t* codes = panel + q_codes_at(t, streamed, b) + lane * 4;
        for (size_t e = 0; e < kQBlock; ++e) {
          codes[e / 4 * 64 + e % 4] = static_cast<uint8_t>(static_cast<uint8_t>(blk.qs[e]) ^ 0x80u);
        }
        std::memcpy(panel + q_scales_at(t, streamed, nb, b) + lane * 2, &blk.d, 2);
      }
      return;
    case GgmlType::Q5_0:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ5_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        uint8_t* codes = panel + q_codes_at(t, streamed, b);
        for (size_t v = 0; v < 4; ++v) std::memcpy(codes + v * 64 + lane * 4, blk.qs + 4 * v, 4);
        const uint32_t qh = load_qh(blk.qh);
        for (size_t byte = 0; byte < 4; ++byte) {
          unsigned bits = 0;
          for (size_t j = 0; j < 8; ++j) bits |= ((qh >> (4 * j + byte)) & 1u) << j;
          codes[256 + lane * 4 + byte] = static_cast<uint8_t>(bits);
        }
        std::memcpy(panel + q_scales_at(t, streamed, nb, b) + lane * 2, &blk.d, 2);
      }
      return;
    case GgmlType::Q4_0:
    case GgmlType::IQ4_NL:  // the same block layout
      for (size_t b = 0; b < nb; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, src + b * sizeof blk, sizeof blk);
        // Byte i = 4v + t of qs holds elements i (low) and i + 16 (high): exactly the panel's
        // byte (v, lane, t), so the raw bytes move in 4-byte groups.
        for (size_t v = 0; v < 4; ++v) {
          std::memcpy(panel + q_codes_at(t, streamed, b) + v * 64 + lane * 4, blk.qs + 4 * v, 4);
        }
        std::memcpy(panel + q_scales_at(t, streamed, nb, b) + lane * 2, &blk.d, 2);
      }
      return;
    default:
      fail("unsupported type");
  }
}

void unpack_row(const PanelMatrix& w, size_t lane, const uint8_t* panel, uint8_t* dst) {
  if (is_k_panel(w.type)) fail("K panels cannot be unpacked to stored rows");
  const size_t nb = w.n_in / kQBlock;
  switch (w.type) {
    case GgmlType::F16:
    case GgmlType::BF16:
      for (size_t i = 0; i < w.n_in; ++i)
        std::memcpy(dst + 2 * i, panel + float_offset(i, lane), 2);
      return;
    case GgmlType::Q8_0:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk.d, panel + q_scales_at(w.type, w.streamed, nb, b) + lane * 2, 2);
        const uint8_t* codes = panel + q_codes_at(w.type, w.streamed, b) + lane * 4;
        for (size_t e = 0; e < kQBlock; ++e) {
          blk.qs[e] = static_cast<int8_t>(codes[e / 4 * 64 + e % 4] ^ 0x80);
        }
        std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    case GgmlType::Q5_0:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ5_0 blk;
        std::memcpy(&blk.d, panel + q_scales_at(w.type, w.streamed, nb, b) + lane * 2, 2);
        const uint8_t* codes = panel + q_codes_at(w.type, w.streamed, b);
        for (size_t v = 0; v < 4; ++v) std::memcpy(blk.qs + 4 * v, codes + v * 64 + lane * 4, 4);
        uint32_t qh = 0;
        for (size_t byte = 0; byte < 4; ++byte) {
          for (size_t j = 0; j < 8; ++j) {
            qh |= static_cast<uint32_t>((codes[256 + lane * 4 + byte] >> j) & 1u) << (4 * j + byte);
          }
        }
        std::memcpy(blk.qh, &qh, 4);
        std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    case GgmlType::Q4_0:
    case GgmlType::IQ4_NL:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk.d, panel + q_scales_at(w.type, w.streamed, nb, b) + lane * 2, 2);
        for (size_t v = 0; v < 4; ++v) {
          std::memcpy(blk.qs + 4 * v, panel + q_codes_at(w.type, w.streamed, b) + v * 64 + lane * 4,
                      4);
        }
        std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    default:
      return;
  }
}

// Bytes of a zero row in the stored layout: scale 0 and codes that decode to 0.
void zero_row(GgmlType t, size_t n_in, uint8_t* dst) {
  const size_t nb = n_in / kQBlock;
  switch (t) {
    case GgmlType::Q8_0:
      std::memset(dst, 0, nb * sizeof(BlockQ8_0));
      return;
    case GgmlType::Q4_0:
      for (size_t b = 0; b < nb; ++b) {
        BlockQ4_0 blk{};
        std::memset(blk.qs, 0x88, sizeof blk.qs);
        std::memcpy(dst + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    default:
      // Float types, and K types: zero scales (all codes then decode to 0).
      std::memset(dst, 0, ggml_row_bytes(t, n_in));
  }
}

}  // namespace

bool panel_supported(GgmlType type) {
  if (is_k_panel(type)) return active_isa() >= Isa::avx2;
  return packable(type) && active_isa() >= Isa::avx512;
}

PanelMatrix pack_panels(GgmlType type, const void* w, size_t row_bytes, size_t n_in, size_t n_out,
                        PanelLayout layout) {
  if (!packable(type)) fail("type has no panel layout");
  if (n_in == 0 || n_out == 0) fail("empty matrix");
  if (is_quantized(type) && n_in % kQBlock != 0)
    fail("n_in " + std::to_string(n_in) + " not a multiple of 32");
  if (is_k_panel(type) && n_in % kKBlock != 0)
    fail("n_in " + std::to_string(n_in) + " not a multiple of 256");
  if (row_bytes < ggml_row_bytes(type, n_in)) fail("row_bytes too small");
  PanelMatrix m;
  m.type = type;
  m.n_in = n_in;
  m.n_out = n_out;
  // AMX's K-panel kernels (Q4_K, Q5_K, Q6_K) read the split layout; the other quantized panels
  // never meet AMX.
  const bool amx_k = has_amx_k_kernel(type) && active_isa() == Isa::amx;
  m.streamed = is_quantized(type) &&
               (layout == PanelLayout::automatic ? !amx_k : layout == PanelLayout::stream);
  m.panel_bytes = panel_bytes_for(type, n_in, m.streamed);
  const size_t total = m.bytes();
  m.data.reset(static_cast<uint8_t*>(alloc_streamed(total)));
  std::memset(m.data.get(), 0, total);
  const auto* src = static_cast<const uint8_t*>(w);
  std::unique_ptr<uint8_t[]> zero(new uint8_t[ggml_row_bytes(type, n_in)]);
  zero_row(type, n_in, zero.get());
  for (size_t p = 0; p < m.n_panels(); ++p) {
    for (size_t lane = 0; lane < kPanelRows; ++lane) {
      const size_t o = p * kPanelRows + lane;
      pack_row(type, m.streamed, o < n_out ? src + o * row_bytes : zero.get(), n_in, lane,
               m.data.get() + p * m.panel_bytes);
    }
  }
  return m;
}

void unpack_panel_row(const PanelMatrix& w, size_t o, void* dst) {
  unpack_row(w, o % kPanelRows, w.panel(o / kPanelRows), static_cast<uint8_t*>(dst));
}

void act_block_info(const void* q8_0_row, size_t n, ActBlockInfo* info) {
  const auto* p = static_cast<const uint8_t*>(q8_0_row);
  if (active_isa() >= Isa::avx512) return detail::act_block_info_avx512(p, n / kQBlock, info);
  for (size_t b = 0; b < n / kQBlock; ++b) {
    BlockQ8_0 blk;
    std::memcpy(&blk, p + b * sizeof blk, sizeof blk);
    int32_t sum = 0;
    for (int8_t q : blk.qs) sum += q;
    info[b] = {f16_to_f32(blk.d), -128 * sum};
  }
}

void matmul_panels(const PanelMatrix& w, const void* act, size_t act_stride,
                   const ActBlockInfo* info, size_t n_rows, float* y, size_t ldy, size_t o_begin,
                   size_t o_end) {
  if (o_begin % kPanelRows != 0 || o_end > w.n_out || o_begin > o_end) {
    throw std::invalid_argument("matmul_panels: bad output range");
  }
  if (!panel_supported(w.type)) {
    throw std::invalid_argument("matmul_panels: no panel kernel for the active instruction set");
  }
  if (n_rows == 0 || o_begin == o_end) return;
  if (is_k_panel(w.type)) {
    // Whole tiles of 16 prompt rows on AMX: the same integers, so the same bits as AVX-512.
    if (active_isa() == Isa::amx && n_rows >= 16 && !w.streamed && has_amx_k_kernel(w.type)) {
      return detail::matmul_k_panels_amx(detail::panel_view(w), static_cast<const uint8_t*>(act),
                                         act_stride, n_rows, y, ldy, o_begin, o_end);
    }
    const auto* a = static_cast<const uint8_t*>(act);
    if (active_isa() >= Isa::avx512) {
      return detail::matmul_k_panels_avx512(detail::panel_view(w), a, act_stride, n_rows, y, ldy,
                                            o_begin, o_end);
    }
    return detail::matmul_k_panels_avx2(detail::panel_view(w), a, act_stride, n_rows, y, ldy,
                                        o_begin, o_end);
  }
  detail::matmul_panels_avx512(detail::panel_view(w), act, act_stride, info, n_rows, y, ldy,
                               o_begin, o_end);
}

size_t amx_act_bytes(size_t n_in, size_t n_rows) {
  using detail::kAmxStep, detail::kAmxTileBytes;
  return (n_rows + 15) / 16 * ((n_in + kAmxStep - 1) / kAmxStep) * 2 * kAmxTileBytes;
}

void amx_pack_activations(const float* x, size_t n_in, size_t n_rows, size_t group, void* dst) {
  if (best_isa() < Isa::avx512) {
    throw std::invalid_argument("amx_pack_activations: needs a CPU with AVX-512");
  }
  detail::amx_pack_group(x, n_in, n_rows, group, dst);
}

void matmul_panels_amx(const PanelMatrix& w, const void* act, size_t n_rows, float* y, size_t ldy,
                       size_t o_begin, size_t o_end) {
  if ((w.type != GgmlType::F16 && w.type != GgmlType::BF16) || o_begin % kPanelRows != 0 ||
      o_end > w.n_out || active_isa() != Isa::amx) {
    throw std::invalid_argument("matmul_panels_amx: needs an F16/BF16 panel, whole panels, amx");
  }
  if (n_rows == 0 || o_begin >= o_end) return;
  detail::matmul_panels_amx_tiles(detail::panel_view(w), act, n_rows, y, ldy, o_begin, o_end);
}

namespace detail {

PanelView panel_view(const PanelMatrix& w) {
  return {w.type, w.n_in, w.n_out, w.panel_bytes, w.streamed, w.data.get()};
}

uint8_t* amx_thread_scratch(size_t bytes) {
  static thread_local std::unique_ptr<uint8_t, decltype(&std::free)> mem(nullptr, &std::free);
  static thread_local size_t capacity = 0;
  if (capacity < bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    mem.reset(static_cast<uint8_t*>(std::aligned_alloc(64, rounded)));
    if (mem == nullptr) throw std::bad_alloc();
    capacity = rounded;
  }
  return mem.get();
}

}  // namespace detail

}  // namespace lift::kernels
