// The loop nest shared by the SIMD matmuls. Outputs are computed in tiles of C weight rows x R
// activation rows by a kernel whose per-output operation sequence does not depend on C or R;
// ragged edges use the same kernel with C = 1 or R = 1. That is what makes results invariant
// to batch composition and to the caller's column split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_impl.h"
#include "kernels/target.h"

namespace lift::kernels::detail {
inline namespace LIFT_TARGET_NS {

// Kernel::template run<C, R>(args, o, r) computes outputs o..o+C-1 for rows r..r+R-1.
template <class Kernel, int C, int R>
void run_rows(const MatmulArgs& a, size_t o, size_t r_begin, size_t r_end) {
  size_t r = r_begin;
  for (; r + R <= r_end; r += R) Kernel::template run<C, R>(a, o, r);
  for (; r < r_end; ++r) Kernel::template run<C, 1>(a, o, r);
}

// Row blocks outermost (see kRowBlock): within one, each C-row weight tile is loaded into L1
// once and meets every activation row of the block.
template <class Kernel, int C, int R>
void tile_loop(const MatmulArgs& a) {
  for (size_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const size_t re = min_of(a.n_rows, rb + kRowBlock);
    size_t o = a.o_begin;
    // A decode product reads its weights once, from DRAM, C consecutive rows at a time: ask for
    // the next tile's rows while this one computes (see prefetch_ahead in panel.h).
    const bool prefetch = re - rb < 4;
    for (; o + C <= a.o_end; o += C) {
      if (prefetch) {
        const uintptr_t next = reinterpret_cast<uintptr_t>(a.w) + (o + 2 * C) * a.w_row_bytes;
        for (size_t off = 0; off < C * a.w_row_bytes; off += 64) {
          __builtin_prefetch(reinterpret_cast<const void*>(next + off), 0, 3);
        }
      }
      run_rows<Kernel, C, R>(a, o, rb, re);
    }
    for (; o < a.o_end; ++o) run_rows<Kernel, 1, R>(a, o, rb, re);
  }
}

}  // namespace LIFT_TARGET_NS
}  // namespace lift::kernels::detail
