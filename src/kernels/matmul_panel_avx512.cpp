// AVX-512 products over row panels (see panel.h for the layouts and the per-output order).
// A tile is C panels (16C output rows) by R activation rows; lanes are output rows, so every
// output is one accumulator lane and the tile shape only decides what is computed together.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/panel.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {
namespace {

struct Args {
  const PanelView& w;
  const uint8_t* act;
  size_t act_stride;
  const ActBlockInfo* info;
  size_t nb;  // blocks per row (quantized)
  float* y;
  size_t ldy;
  size_t o_end;
};

inline __m512i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Stores the valid lanes of panel p's accumulator for activation row r.
inline void store_lanes(const Args& a, size_t p, size_t r, __m512 v) {
  const size_t o = p * kPanelRows;
  const size_t valid = min_of(kPanelRows, a.o_end - o);
  float* dst = a.y + r * a.ldy + o;
  if (valid == kPanelRows) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << valid) - 1u), v);
  }
}

// ---- int8 panels -------------------------------------------------------------------------------
// Code vectors of one block, two at a time: quads (j, j + 4) for j < 4.
struct PQ8_0 {
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr bool kStream = false;
  static constexpr size_t kCodeBytes = panel_code_bytes(GgmlType::Q8_0);
  static constexpr float kCodeScale = 1.0f;
  static void quads(const uint8_t* blk, int j, __m512i& lo, __m512i& hi) {
    lo = _mm512_load_si512(blk + 64 * j);
    hi = _mm512_load_si512(blk + 64 * (j + 4));
  }
};
// Codes come out as 16 * q (low nibble shifted up, high nibble masked in place): u8 with the
// same +128 offset as Q8_0 once scaled, so both types share the bias; the scale takes 1/16.
struct PQ4_0 {
  static constexpr GgmlType kType = GgmlType::Q4_0;
  static constexpr bool kStream = false;
  static constexpr size_t kCodeBytes = panel_code_bytes(GgmlType::Q4_0);
  static constexpr float kCodeScale = 1.0f / 16.0f;
  static void quads(const uint8_t* blk, int j, __m512i& lo, __m512i& hi) {
    const __m512i raw = _mm512_load_si512(blk + 64 * j);
    const __m512i mask = _mm512_set1_epi8(static_cast<char>(0xF0));
    lo = _mm512_and_si512(_mm512_slli_epi16(raw, 4), mask);
    hi = _mm512_and_si512(raw, mask);
  }
};

// Q5_0: Q4_0's nibbles with the 5th bits after them, as u8 = 8 q (q = value + 16: the +128
// offset once scaled by 1/8, as Q4_0's). 16-bit shifts: the masks drop what crosses bytes.
struct PQ5_0 {
  static constexpr GgmlType kType = GgmlType::Q5_0;
  static constexpr bool kStream = false;
  static constexpr size_t kCodeBytes = panel_code_bytes(GgmlType::Q5_0);
  static constexpr float kCodeScale = 1.0f / 8.0f;
  static void quads(const uint8_t* blk, int j, __m512i& lo, __m512i& hi) {
    const __m512i raw = _mm512_load_si512(blk + 64 * j);
    const __m512i hv = _mm512_load_si512(blk + 256);
    const __m512i m_low = _mm512_set1_epi8(0x78), m_top = _mm512_set1_epi8(static_cast<char>(0x80));
    // Bit j of a 5th-bit byte (quad j) and bit j + 4 (quad j + 4) moved to bit 7.
    const __m512i h_lo = _mm512_sll_epi16(hv, _mm_cvtsi32_si128(7 - j));
    const __m512i h_hi = _mm512_sll_epi16(hv, _mm_cvtsi32_si128(3 - j));
    lo = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(raw, 3), m_low),
                         _mm512_and_si512(h_lo, m_top));
    hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 1), m_low),
                         _mm512_and_si512(h_hi, m_top));
  }
};

// IQ4_NL: Q4_0's nibbles index the level table; looked up as u8 = level + 128 (Q8_0's offset,
// so the same bias) by one byte shuffle per vector.
struct PIQ4_NL {
  static constexpr GgmlType kType = GgmlType::IQ4_NL;
  static constexpr bool kStream = false;
  static constexpr size_t kCodeBytes = panel_code_bytes(GgmlType::IQ4_NL);
  static constexpr float kCodeScale = 1.0f;
  static void quads(const uint8_t* blk, int j, __m512i& lo, __m512i& hi) {
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4NlShifted.v)));
    const __m512i raw = _mm512_load_si512(blk + 64 * j);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
    hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
  }
};

// The streamed layout of the same codes (panel.h): decode tiles take one panel, one ascending
// stream, which they prefetch kStreamAhead on (see q_tile).
template <class W>
struct Streamed : W {
  static constexpr bool kStream = true;
};

constexpr size_t kPrefetchBlocks = 32;
constexpr size_t kFloatPrefetch = 128;  // inputs ahead: 4 KB of a float panel

template <class W, int C, int R>
void q_tile(const Args& a, size_t p0, size_t r0) {
  const uint8_t* pw[C];
  const uint8_t* ps[C];
  for (int c = 0; c < C; ++c) {
    pw[c] = panel_at(a.w, p0 + c);
    ps[c] = pw[c] + a.nb * W::kCodeBytes;  // the scale stream's prefetch (split layout)
  }
  // Block b's codes and scales of tile panel c.
  auto codes = [&](int c, size_t b) { return pw[c] + q_codes_at(W::kType, W::kStream, b); };
  auto scales = [&](int c, size_t b) { return pw[c] + q_scales_at(W::kType, W::kStream, a.nb, b); };
  const uint8_t* xr[R];
  const ActBlockInfo* ir[R];
  for (int r = 0; r < R; ++r) {
    xr[r] = a.act + (r0 + r) * a.act_stride + offsetof(BlockQ8_0, qs);
    ir[r] = a.info + (r0 + r) * a.nb;
  }
  __m512 acc[R][C];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  for (size_t b = 0; b < a.nb; ++b) {
    // Decode streams each panel once from DRAM; asking for the codes a few blocks ahead keeps
    // more lines in flight than the hardware prefetchers do across page boundaries, into L2
    // (T1: one thread of 1.1B Q4_0 decode on Zen 4, 8 blocks/T0 22 t/s, 24 blocks/T1 27,
    // 48/T1 28; stream_ahead then took 32/T1 from 28.5 to 33.5). (Prefill tiles meet panels a
    // row block's first tile already brought in.)
    if constexpr (R <= 4 && W::kStream) {
      // The streamed pair layout is one ascending stream, which the hardware prefetchers
      // follow; one line asked for kStreamAhead on every kPrefetchEvery blocks (about 2 KiB)
      // keeps them going across pages. Every line asked for, as K panels need, held them back:
      // 1.1B decode, two threads, Zen 5, in alternation: Q4_0 63-83 t/s with every line,
      // 58-91 with none, 79-101 one per 8 blocks (2,304 bytes), 77-89 per 4, 75-80 per 16;
      // Q8_0 37 with every line, 47-49 one per 4 blocks (2,176 bytes), 47-56 per 8.
      constexpr size_t kHalfPair = panel_pair_bytes(W::kType) / 2;
      constexpr size_t kPrefetchEvery = std::bit_ceil(std::max<size_t>(1, 2048 / kHalfPair));
      if (b % kPrefetchEvery == 0) {
        for (int c = 0; c < C; ++c) prefetch_ahead(pw[c] + b * kHalfPair, 64);
      }
    }
    if constexpr (R <= 4 && !W::kStream) {
      const size_t next_tile = C * a.w.panel_bytes;
      for (int c = 0; c < C; ++c) {
        prefetch_stream_l2(pw[c], (b + kPrefetchBlocks) * W::kCodeBytes, W::kCodeBytes,
                           a.nb * W::kCodeBytes, next_tile);
        // The scales' own stream: one line serves two blocks.
        _mm_prefetch(reinterpret_cast<const char*>(
                         stream_ahead(ps[c], (b + 2 * kPrefetchBlocks) * kPanelScaleBytes,
                                      a.nb * kPanelScaleBytes, next_tile)),
                     _MM_HINT_T0);
      }
    }
    __m512i dot[R][C];
    for (int r = 0; r < R; ++r) {
      const __m512i bias = _mm512_set1_epi32(ir[r][b].bias);
      for (int c = 0; c < C; ++c) dot[r][c] = bias;
    }
    if constexpr (W::kType == GgmlType::Q4_0 && R == 1) {
      // One row: the low nibbles used in place (q, not 16 q: no shift) in a second chain, whose
      // sum times 16 joins the first (exact). Two chains of four as well.
      __m512i low[C];
      for (int c = 0; c < C; ++c) low[c] = _mm512_setzero_si512();
      const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8(static_cast<char>(0xF0));
      const uint8_t* x = xr[0] + b * sizeof(BlockQ8_0);
      for (int j = 0; j < 4; ++j) {
        const __m512i xl = bcast32(x + 4 * j);
        const __m512i xh = bcast32(x + 4 * (j + 4));
        for (int c = 0; c < C; ++c) {
          const __m512i raw = _mm512_load_si512(codes(c, b) + 64 * j);
          low[c] = _mm512_dpbusd_epi32(low[c], _mm512_and_si512(raw, m4), xl);
          dot[0][c] = _mm512_dpbusd_epi32(dot[0][c], _mm512_and_si512(raw, m4h), xh);
        }
      }
      for (int c = 0; c < C; ++c) {
        dot[0][c] = _mm512_add_epi32(dot[0][c], _mm512_slli_epi32(low[c], 4));
      }
    }
    for (int j = 0; j < 4 && !(W::kType == GgmlType::Q4_0 && R == 1); ++j) {
      __m512i lo[C], hi[C];
      for (int c = 0; c < C; ++c) W::quads(codes(c, b), j, lo[c], hi[c]);
      for (int r = 0; r < R; ++r) {
        const uint8_t* x = xr[r] + b * sizeof(BlockQ8_0);
        const __m512i xl = bcast32(x + 4 * j);
        const __m512i xh = bcast32(x + 4 * (j + 4));
        for (int c = 0; c < C; ++c) {
          dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], lo[c], xl);
          dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], hi[c], xh);
        }
      }
    }
    __m512 sw[C];
    for (int c = 0; c < C; ++c) {
      const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales(c, b)));
      sw[c] = _mm512_cvtph_ps(h);
      // Codes kept as a multiple of q (Q4_0 16 q, Q5_0 8 q): a power of two, exact.
      if constexpr (W::kCodeScale != 1.0f) {
        sw[c] = _mm512_mul_ps(sw[c], _mm512_set1_ps(W::kCodeScale));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(ir[r][b].d);
      for (int c = 0; c < C; ++c) {
        acc[r][c] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][c]), _mm512_mul_ps(sw[c], dx), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) store_lanes(a, p0 + c, r0 + r, acc[r][c]);
  }
}

// ---- float panels ------------------------------------------------------------------------------
struct PF16 {
  static __m512 load(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
};
struct PBF16 {
  static __m512 load(const uint8_t* p) {
    const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

template <class W, int C, int R>
void f_tile(const Args& a, size_t p0, size_t r0) {
  const uint8_t* pw[C];
  for (int c = 0; c < C; ++c) pw[c] = panel_at(a.w, p0 + c);
  // Row r's input i at xb[r / 3] + (r % 3) * stride, the bases advancing with i: four bases and
  // one stride instead of R pointers, which left too few registers (the rest were reloaded from
  // vector registers by uops on an FMA port).
  constexpr int kBases = (R + 2) / 3;
  const uint8_t* xb[kBases];
  for (int k = 0; k < kBases; ++k) xb[k] = a.act + (r0 + 3 * static_cast<size_t>(k)) * a.act_stride;
  const size_t stride = a.act_stride;
  __m512 acc[R][C];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  const size_t n = a.w.n_in;
  for (size_t i = 0; i < n; ++i) {
    // Decode streams the panels from DRAM (see q_tile): a line (two inputs) each, 4 KB ahead.
    if constexpr (R <= 4) {
      if (i % 2 == 0) {
        for (int c = 0; c < C; ++c) {
          _mm_prefetch(reinterpret_cast<const char*>(pw[c] + (i + kFloatPrefetch) * 2 * kPanelRows),
                       _MM_HINT_T0);
        }
      }
    }
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = W::load(pw[c] + i * 2 * kPanelRows);
    for (int r = 0; r < R; ++r) {
      float xv;
      std::memcpy(&xv, xb[r / 3] + static_cast<size_t>(r % 3) * stride, sizeof xv);
      const __m512 x = _mm512_set1_ps(xv);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(wv[c], x, acc[r][c]);
    }
    for (int k = 0; k < kBases; ++k) xb[k] += sizeof(float);
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) store_lanes(a, p0 + c, r0 + r, acc[r][c]);
  }
}

// ---- tiling ------------------------------------------------------------------------------------
// Row blocks outermost so a block's activations stay in L2 while the panels stream past; each
// panel tile then meets every row of the block from L1/L2. A block is a whole number of wide
// tiles, so only the last block of a call can end in a partial tile.
constexpr size_t kRowBlockTiles = 8;

// One tile of exactly m rows, 1 <= m <= M.
template <template <class, int, int> class Tile, class W, int C, int M>
void rest(const Args& a, size_t p, size_t r, size_t m) {
  if (m == static_cast<size_t>(M)) return Tile<W, C, M>::run(a, p, r);
  if constexpr (M > 1) rest<Tile, W, C, M - 1>(a, p, r, m);
}

// Rows [r_begin, r_end) in tiles of R, then whatever is left (< R rows) as one tile of exactly
// that many: small tiles have too few independent accumulators to hide the FMA latency, so
// splitting a remainder further costs more than its share.
template <template <class, int, int> class Tile, class W, int C, int R>
void rows(const Args& a, size_t p, size_t r_begin, size_t r_end) {
  size_t r = r_begin;
  for (; r + R <= r_end; r += R) Tile<W, C, R>::run(a, p, r);
  if constexpr (R > 1) {
    if (r < r_end) rest<Tile, W, C, R - 1>(a, p, r, r_end - r);
  }
}

// Decode tiles (R <= 4) hold at most kMaxAcc (panel, row) pairs: each needs an int32 and a
// float accumulator, and both sets then fit the 32 vector registers; wider ones run as several
// narrower ones (outputs are the same either way). The 2 x 8 prefill tile measured faster
// whole, its float accumulators (touched once per block) spilling to L1.
constexpr int kMaxAcc = 8;
template <class W, int C, int R>
struct QTile {
  static void run(const Args& a, size_t p, size_t r) {
    if constexpr (C * R > kMaxAcc && R <= 4 && C > 1) {
      QTile<W, C / 2, R>::run(a, p, r);
      QTile<W, C - C / 2, R>::run(a, p + C / 2, r);
    } else {
      q_tile<W, C, R>(a, p, r);
    }
  }
};
template <class W, int C, int R>
struct FTile {
  static void run(const Args& a, size_t p, size_t r) { f_tile<W, C, R>(a, p, r); }
};

// C panels per tile for small batches (decode), where each weight byte is read once and the
// inner loops are short; kWideR rows per tile for prefill.
template <template <class, int, int> class Tile, class W, int kDecodeC, int kWideC, int kWideR>
void tile_loop(const Args& a, size_t p_begin, size_t p_end, size_t n_rows) {
  constexpr size_t kRowBlock = kRowBlockTiles * kWideR;
  for (size_t rb = 0; rb < n_rows; rb += kRowBlock) {
    const size_t re = min_of(n_rows, rb + kRowBlock);
    size_t p = p_begin;
    if (re - rb < static_cast<size_t>(kWideR)) {
      for (; p + kDecodeC <= p_end; p += kDecodeC) rows<Tile, W, kDecodeC, 4>(a, p, rb, re);
    } else {
      for (; p + kWideC <= p_end; p += kWideC) rows<Tile, W, kWideC, kWideR>(a, p, rb, re);
    }
    for (; p < p_end; ++p) rows<Tile, W, 1, 4>(a, p, rb, re);
  }
}

}  // namespace

void act_block_info_avx512(const uint8_t* row, size_t nb, ActBlockInfo* info) {
  // sum(q) = sum(q + 128) - 32 * 128, the biased bytes summed by vpsadbw against zero.
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i s4 = _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
    const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2))) - 4096;
    uint16_t d;
    std::memcpy(&d, blk, 2);
    info[b] = {_cvtsh_ss(d), -128 * sum};
  }
}

void matmul_panels_avx512(const PanelView& w, const void* act, size_t act_stride,
                          const ActBlockInfo* info, size_t n_rows, float* y, size_t ldy,
                          size_t o_begin, size_t o_end) {
  const Args a{w,    static_cast<const uint8_t*>(act), act_stride, info, w.n_in / kQBlock, y, ldy,
               o_end};
  const size_t p_begin = o_begin / kPanelRows;
  const size_t p_end = (o_end + kPanelRows - 1) / kPanelRows;
  switch (w.type) {
    case GgmlType::Q8_0:
      return w.streamed ? tile_loop<QTile, Streamed<PQ8_0>, 1, 2, 8>(a, p_begin, p_end, n_rows)
                        : tile_loop<QTile, PQ8_0, 4, 2, 8>(a, p_begin, p_end, n_rows);
    case GgmlType::Q4_0:
      return w.streamed ? tile_loop<QTile, Streamed<PQ4_0>, 1, 2, 8>(a, p_begin, p_end, n_rows)
                        : tile_loop<QTile, PQ4_0, 4, 2, 8>(a, p_begin, p_end, n_rows);
    case GgmlType::Q5_0:
      return w.streamed ? tile_loop<QTile, Streamed<PQ5_0>, 1, 2, 8>(a, p_begin, p_end, n_rows)
                        : tile_loop<QTile, PQ5_0, 4, 2, 8>(a, p_begin, p_end, n_rows);
    case GgmlType::IQ4_NL:
      return w.streamed ? tile_loop<QTile, Streamed<PIQ4_NL>, 1, 2, 8>(a, p_begin, p_end, n_rows)
                        : tile_loop<QTile, PIQ4_NL, 4, 2, 8>(a, p_begin, p_end, n_rows);
    case GgmlType::F16:
      return tile_loop<FTile, PF16, 4, 2, 12>(a, p_begin, p_end, n_rows);
    case GgmlType::BF16:
      return tile_loop<FTile, PBF16, 4, 2, 12>(a, p_begin, p_end, n_rows);
    default:
      return;
  }
}

}  // namespace lift::kernels::detail
