// Weights repacked at load time into row panels: 16 output rows interleaved so that one 512-bit
// register holds the same input position of 16 rows. A product then keeps one accumulator lane
// per output row and needs no horizontal sums; an int8 block of 16 rows feeds vpdpbusd (and AMX
// tiles) directly, with each lane's int32 the exact dot of the whole 32-element block.
//
// Per-output operation order (fixed, whatever the tile, batch or column split):
//  * Q8_0 / Q4_0 with q8_0 activations: for each block b in order,
//      acc = fma(float(isum_b), s_w(b) * d_x(b), acc)
//    where isum_b is the exact integer dot of the block's codes (Q4_0 codes are kept as 16*q, so
//    isum_b is 16x the signed dot and s_w = d_w / 16, which scales the product exactly).
//  * F16 / BF16 with f32 activations: acc = fma(w_i, x_i, acc) for i = 0, 1, ..., n_in - 1.
// Results match matmul_reference within 1e-4 * max(1, max|y_row|).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"
#include "kernels/target.h"
#include "util/large_alloc.h"

namespace lift::kernels {

inline constexpr size_t kPanelRows = 16;

// Layout of one panel (kPanelRows rows; rows past n_out are zero):
//  * Q8_0: codes [nb][8 quads][16 rows][4 bytes] as u8 = q + 128, then scales [nb][16] f16.
//  * Q4_0: nibbles [nb][4 vectors][16 rows][4 bytes]: the low nibble of byte (v, row, t) is
//    element 4v+t of the block, the high nibble element 4(v+4)+t; then scales [nb][16] f16.
//  * IQ4_NL: Q4_0's layout (the nibbles index the level table).
//  * Q5_0: Q4_0's nibbles, then the 5th bits [16 rows][4 bytes] (bit j of byte t: element
//    4j + t's), then scales [nb][16] f16.
//  * F16 / BF16: [n_in][16] values in the stored type.
//  * Q2_K .. Q6_K, IQ4_XS (q8_k activations; per 256-element super-block, panel_kquant.cpp):
//    Q4_K: codes [8 sub-blocks][4 vectors][16 rows][4 bytes] (low nibble element 32k+4v+t,
//    high nibble element 32k+16+4v+t), scales u8 [8][16], mins u8 [4 pairs][16][2]; Q5_K:
//    Q4_K's codes, then 5th bits [8][16][4] (bit j of byte t: quad j's element t), then Q4_K's
//    scales and mins; Q6_K: low
//    nibbles [16 sub-blocks][2 vectors][16][4] (quads 0/1 and 2/3 of the sub-block), high bit
//    pairs [16][16][4] (quad j in bits 2j..2j+1), scales i8 [16][16]; Q3_K (codes as u = q + 4,
//    0..7): scales i8 [16][16], then per pair of sub-blocks (2m, 2m + 1) the low two bits of
//    each [16][4] (bits 2j..2j+1 of byte t: quad j's element t) and their third bits [16][4]
//    (bit j: sub-block 2m's, bit 4 + j: 2m + 1's); Q2_K: codes [16 sub-blocks][16][4] (bits
//    2j..2j+1 of byte t: quad j's element t), then the stored scale bytes (scale | min << 4)
//    [8 pairs][16][2]; IQ4_XS: Q4_K's codes (each nibble a level index), then scales i8
//    [8][16]; then, after all blocks, f16 d [nb][16] (Q2_K/Q4_K: d [16] then dmin [16] per
//    block).
//  * Streamed layouts (PanelMatrix::streamed; the ones packed unless AMX's K-panel kernels
//    will read them): Q8_0 / Q4_0 blocks in pairs, each pair's 2 x 16 f16 scales, then its
//    two blocks' codes as above. Q4_K each block d [16], dmin [16], scales [8][16], mins
//    [4][16][2], then the codes as above (Q5_K: each sub-block's codes as five vectors of 5-bit
//    fields; matmul_panel_kquant.h). Q6_K d [16], 32 bytes of padding, scales [16][16], then per
//    sub-block three code vectors [3][16][4] (byte t of vector i: 4 u_i above two bits of u_3;
//    matmul_panel_kquant.h). Q3_K d [16], 32 bytes of padding, scales, then per pair of sub-blocks
//    three code vectors (both sub-blocks' codes; matmul_panel_kquant.h); Q2_K d [16], dmin [16],
//    the scale bytes, then the codes (1,344 bytes, as stored); IQ4_XS d [16], 32 bytes of
//    padding, scales [8][16], then the codes. A panel is then read in ascending
//    order, one stream, and decode tiles take one panel and ask for the lines kStreamAhead on. One
//    thread of 1.1B Q4_K decode read 70-76% of a one-thread probe's bandwidth with the split layout
//    and 4-panel decode tiles, 84-95% with this (Zen 4, before the software prefetch, which Zen 5
//    needs: see prefetch_ahead).
// Panels start `panel_bytes` apart, 64-byte aligned.
struct PanelMatrix {
  GgmlType type = GgmlType::F32;
  size_t n_in = 0;
  size_t n_out = 0;
  size_t row0 = 0;  // the first row of the whole matrix held (a tensor-parallel rank's share)
  size_t panel_bytes = 0;
  bool streamed = false;  // quantized blocks in the streamed layout
  StreamedPtr<uint8_t[]> data;

  size_t n_panels() const { return (n_out + kPanelRows - 1) / kPanelRows; }
  size_t bytes() const { return n_panels() * panel_bytes; }
  const uint8_t* panel(size_t p) const { return data.get() + p * panel_bytes; }
};

inline namespace LIFT_TARGET_NS {
// The integer panels: Q8_0, Q4_0, Q5_0 and IQ4_NL (q8_0 activations), Q2_K to Q6_K and IQ4_XS
// (q8_k).
inline bool is_k_panel(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}
inline bool is_quantized(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0 ||
         t == GgmlType::IQ4_NL || is_k_panel(t);
}

// Bytes of one super-block of 16 rows in a K panel (codes and sub-block scales; in the streamed
// layout its d and dmin too), and of its f16 d (and dmin).
constexpr size_t k_panel_block_bytes(GgmlType t, bool stream = false) {
  if (t == GgmlType::Q2_K) return stream ? 1344 : 1280;
  if (t == GgmlType::IQ4_XS) return stream ? 2240 : 2176;
  if (t == GgmlType::Q3_K) return stream ? 1856 : 1792;
  if (stream) return t == GgmlType::Q4_K ? 2368 : t == GgmlType::Q5_K ? 2880 : 3392;
  return t == GgmlType::Q4_K ? 2304 : t == GgmlType::Q5_K ? 2816 : 3328;
}
constexpr size_t k_panel_scale_bytes(GgmlType t) {
  return t == GgmlType::Q6_K || t == GgmlType::Q3_K || t == GgmlType::IQ4_XS ? 32 : 64;
}

// Bytes of one block of 16 rows in a quantized panel: the codes, then (after all blocks' codes)
// the 16 f16 scales.
inline constexpr size_t kPanelScaleBytes = 2 * kPanelRows;
constexpr size_t panel_code_bytes(GgmlType t) {
  return t == GgmlType::Q8_0 ? 512 : t == GgmlType::Q5_0 ? 320 : 256;
}
// Q8_0/Q4_0 streamed: blocks in pairs, the pair's two scale vectors (64 bytes) ahead of its
// codes. Where block b's codes and scales sit from a panel's start.
constexpr size_t panel_pair_bytes(GgmlType t) {
  return 2 * kPanelScaleBytes + 2 * panel_code_bytes(t);
}
constexpr size_t pair_codes_at(GgmlType t, size_t b) {
  return b / 2 * panel_pair_bytes(t) + 2 * kPanelScaleBytes + b % 2 * panel_code_bytes(t);
}
constexpr size_t pair_scales_at(GgmlType t, size_t b) {
  return b / 2 * panel_pair_bytes(t) + b % 2 * kPanelScaleBytes;
}
// Block b's codes and scales in a Q8_0/Q4_0 panel of nb blocks, either layout.
constexpr size_t q_codes_at(GgmlType t, bool streamed, size_t b) {
  return streamed ? pair_codes_at(t, b) : b * panel_code_bytes(t);
}
constexpr size_t q_scales_at(GgmlType t, bool streamed, size_t nb, size_t b) {
  return streamed ? pair_scales_at(t, b) : nb * panel_code_bytes(t) + b * kPanelScaleBytes;
}
}  // namespace LIFT_TARGET_NS

// Whether the active Isa has panel kernels for this weight type (AVX-512 VNNI: the integer
// panels above, F16, BF16; AVX2: Q2_K to Q6_K, IQ4_XS). When false, products use the stored rows
// through matmul().
bool panel_supported(GgmlType type);

// Repacks n_out rows of n_in elements (row o at w + o * row_bytes). Throws std::invalid_argument
// for unsupported types or sizes (quantized n_in must be a multiple of 32).
// Quantized panels' layout: streamed unless the kernels that will read it are AMX's K-panel
// ones (automatic), or as asked (tests).
enum class PanelLayout { automatic, split, stream };
PanelMatrix pack_panels(GgmlType type, const void* w, size_t row_bytes, size_t n_in, size_t n_out,
                        PanelLayout layout = PanelLayout::automatic);

// What the integer panel kernels need of each 32-element block of a q8_0 activation row,
// besides its codes: the scale as f32 and -128 * sum(codes), the correction for the weights'
// +128 offset.
struct ActBlockInfo {
  float d;
  int32_t bias;
};

// Fills info[b] for the n / 32 blocks of one q8_0 activation row.
void act_block_info(const void* q8_0_row, size_t n, ActBlockInfo* info);

// y[r * ldy + o] = dot(row o, act row r) for r < n_rows and o in [o_begin, o_end), o_begin a
// multiple of kPanelRows. Q8_0/Q4_0 panels take q8_0 activations with their block info (row r's
// info at info + r * n_in / 32); K panels q8_k rows and float panels f32 rows (info unused).
// Never allocates.
void matmul_panels(const PanelMatrix& w, const void* act, size_t act_stride,
                   const ActBlockInfo* info, size_t n_rows, float* y, size_t ldy, size_t o_begin,
                   size_t o_end);

// The K panel kernels' steps for one output, in scalar code from the stored row (ggml layout)
// and a Q8_K row: per super-block the exact integers of kquant_codes.h's k_int_dot, then
//   acc = fma(-float(summ), dmin * d_x, acc)   (Q4_K/Q5_K only)
//   acc = fma(float(sumi), d * d_x, acc).
// Every K panel kernel (AVX2, AVX-512, AMX) returns exactly this; the stored-row kernels round
// differently (no FMA, min term last; codec_table.cpp's k_dot).
float k_panel_dot(GgmlType t, const void* row, const void* q8_k_row, size_t n_in);

// Stored-row view of panel row o (for tests): writes n_in elements' worth of the original
// row bytes, ggml layout, to dst. K panels keep decoded sub-block scales, not the packed bytes:
// for them this throws std::invalid_argument.
void unpack_panel_row(const PanelMatrix& w, size_t o, void* dst);

namespace detail {
// A PanelMatrix as the per-Isa kernels read it: plain fields, no member functions, so that code
// compiled with -m flags calls no inline function it shares with baseline code (kernels/target.h).
struct PanelView {
  GgmlType type;
  size_t n_in;
  size_t n_out;
  size_t panel_bytes;
  bool streamed;
  const uint8_t* data;
};
PanelView panel_view(const PanelMatrix& w);
inline namespace LIFT_TARGET_NS {
inline const uint8_t* panel_at(const PanelView& w, size_t p) { return w.data + p * w.panel_bytes; }
// For prefetching in decode tiles of `next` bytes of panels, which walk a thread's panels in
// order: byte `pos` of a stream (a panel's codes or scales, `len` bytes from `base`), and past
// its end the same stream of the next tile's panel. Continuing into the next panel instead would
// ask for lines another stream of this tile has read already, and leave the first `pos` bytes
// of every panel but the first unrequested (1.1B Q4_K_M decode, one thread, Zen 4: 24 -> 30 t/s).
inline const uint8_t* stream_ahead(const uint8_t* base, size_t pos, size_t len, size_t next) {
  return pos < len ? base + pos : base + next + (pos - len);
}
// Decode tiles of streamed panels (one ascending stream per thread) ask for the bytes
// kStreamAhead past those they are about to read, into L1. The hardware prefetchers alone kept
// too few lines in flight on Zen 5 (2 cores, 2026-12-04; 48 copies of a 5632 x 2048 matrix
// decoded from DRAM, one thread, against a plain read at 39-41 GB/s): Q4_K 20 -> 38 GB/s,
// Q6_K 16 -> 38, Q4_0 35 -> 39 GB/s; 2-16 KiB ahead all helped, 4-8 KiB most; into L2 (T1)
// a little less. docs/performance.md has the runs. K panels ask for every line; pair panels
// (Q8_0, Q4_0, ...) for one line in about 2 KiB, which q_tile says why.
inline constexpr size_t kStreamAhead = 6144;
inline void prefetch_ahead(const uint8_t* p, size_t bytes) {
  // Integer arithmetic: past a matrix's end the address may lie outside any object (a
  // prefetch never faults).
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + kStreamAhead;
  for (size_t off = 0; off < bytes; off += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(at + off), 0, 3);
  }
}
// Asks for bytes [pos, pos + bytes) of such a stream into L2 (prefetcht1), line by line.
inline void prefetch_stream_l2(const uint8_t* base, size_t pos, size_t bytes, size_t len,
                               size_t next) {
  for (size_t off = 0; off < bytes; off += 64) {
    __builtin_prefetch(stream_ahead(base, pos + off, len, next), 0, 2);
  }
}
}  // namespace LIFT_TARGET_NS

// K panels (panel_kquant.cpp): writes row `lane` of a panel from one stored row.
void pack_k_row(GgmlType t, bool stream, const uint8_t* src, size_t n_in, size_t lane,
                uint8_t* panel);
void matmul_k_panels_avx512(const PanelView& w, const uint8_t* act, size_t act_stride,
                            size_t n_rows, float* y, size_t ldy, size_t o_begin, size_t o_end);
// The same products and the same bits on AVX2 (matmul_panel_kquant_avx2.cpp).
void matmul_k_panels_avx2(const PanelView& w, const uint8_t* act, size_t act_stride, size_t n_rows,
                          float* y, size_t ldy, size_t o_begin, size_t o_end);
// Q4_K/Q5_K on AMX-INT8 tiles (Isa::amx): whole tiles of 16 rows, the rest through the AVX-512
// kernel; the same results as matmul_k_panels_avx512.
void matmul_k_panels_amx(const PanelView& w, const uint8_t* act, size_t act_stride, size_t n_rows,
                         float* y, size_t ldy, size_t o_begin, size_t o_end);

void act_block_info_avx512(const uint8_t* row, size_t nb, ActBlockInfo* info);
void matmul_panels_avx512(const PanelView& w, const void* act, size_t act_stride,
                          const ActBlockInfo* info, size_t n_rows, float* y, size_t ldy,
                          size_t o_begin, size_t o_end);
}  // namespace detail

}  // namespace lift::kernels
