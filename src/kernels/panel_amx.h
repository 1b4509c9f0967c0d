// Prompt-row products of F16/BF16 panels on AMX tiles (Isa::amx).
//
// The tile multiplier (TDPBF16PS) multiplies bf16 pairs into f32 sums, at about four times the
// arithmetic rate of AVX-512 FMAs. Nothing is rounded away to use it:
//  * each weight w (F16 or BF16) is split exactly into w = wh + wl, both bf16 (wh keeps the top
//    8 significant bits, wl the rest; wl = 0 for BF16), from the panel as stored, per block;
//  * each activation is rounded to x = xh + xl (ActFormat::bf16x2, kernels/bf16x2.h), 16
//    significant bits, once per product.
// A product then needs the four tile products xh.wh, xl.wh, xl.wl, xh.wl (two for BF16): per
// output, for each 32-input step k in order, in that order, into one f32 accumulator. How the
// hardware adds within one step is its own, but it is the same for every row and tile, so an
// output depends only on its activation row and weight row: any number of rows, any row
// position within the call and any panel split gives the same bits. matmul_reference with
// bf16x2 activations is the yardstick (within 1e-4 * max(1, max|y_row|)).
//
// These products serve prompt rows only (RowKind::prompt). Generated tokens keep the AVX-512
// panel kernels: they arrive one row at a time, where splitting every weight for the tiles
// costs more than the FMAs it saves.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/panel.h"

namespace lift::kernels {

// Activation rows packed for the tiles: [ceil(n_rows/16)][ceil(n_in/32)][hi, lo][16][32] bf16,
// zero past the last row and input. Bytes for n_rows rows of n_in inputs:
size_t amx_act_bytes(size_t n_in, size_t n_rows);

// Packs rows [16 * group, 16 * group + 16) of the n_rows rows of x (row r at x + r * n_in) into
// their place in dst (amx_act_bytes(n_in, n_rows) bytes, 64-byte aligned). Each value is split
// as split_bf16x2 does. Groups are independent, so a pool can pack them in parallel. Needs
// AVX-512 (best_isa() >= Isa::avx512), else throws std::invalid_argument.
void amx_pack_activations(const float* x, size_t n_in, size_t n_rows, size_t group, void* dst);

// y[r * ldy + o] = dot(row o, activation row r) for r < n_rows and o in [o_begin, o_end),
// o_begin a multiple of kPanelRows; w is an F16 or BF16 panel matrix and act the packed rows.
// Requires active_isa() == Isa::amx. Allocates only the first time a thread calls it.
void matmul_panels_amx(const PanelMatrix& w, const void* act, size_t n_rows, float* y, size_t ldy,
                       size_t o_begin, size_t o_end);

// The functions above check their arguments in baseline code (panel.cpp) and then run these,
// compiled for AMX (matmul_panel_amx.cpp).
namespace detail {
inline constexpr size_t kAmxStep = 32;         // inputs per tile product (16 bf16 pairs)
inline constexpr size_t kAmxTileBytes = 1024;  // 16 rows of 64 bytes
void amx_pack_group(const float* x, size_t n_in, size_t n_rows, size_t group, void* dst);
void matmul_panels_amx_tiles(const PanelView& w, const void* act, size_t n_rows, float* y,
                             size_t ldy, size_t o_begin, size_t o_end);
// The calling thread's scratch of at least `bytes`, 64-byte aligned, allocated on its first call
// and grown when a call asks for more (throws std::bad_alloc if that fails). Its contents do not
// survive a call that grows it.
uint8_t* amx_thread_scratch(size_t bytes);
}  // namespace detail

}  // namespace lift::kernels
