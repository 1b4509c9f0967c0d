// AMX-INT8 products of Q4_K / Q5_K panels with Q8_K prompt rows: the same integers as the
// AVX-512 kernel (matmul_panel_kquant_avx512.cpp), so the same bits for every output.
//
// A tile product sums over 64 inputs, two sub-blocks, but each sub-block has its own 6-bit scale
// sc per output. The scale goes into the weights instead: sc = 8 * a + b with digits a, b < 8,
// and the tiles multiply the activations by a * q and by b * q (at most 7 * 31, unsigned bytes),
// so a super-block's sumi = sum_k sc_k * dot_k = 8 * A + B comes out of two accumulator tiles
// with no per-sub-block work. Per output and super-block the float steps are then the AVX-512
// kernel's: acc = fma(-float(summ), dmin_w * d_x, acc), acc = fma(float(sumi), d_w * d_x, acc).
//
// Blocking: panels go in pairs; the digit-scaled codes of kChunk super-blocks of a pair are
// written once (32 KB, stays in L1) and serve every row tile of the call; the f32 accumulators
// of up to kRowTiles row tiles wait in scratch between chunks. Rows past the last whole tile of
// 16 go to the AVX-512 kernel. Like every -m file, this one calls no inline function shared with
// baseline code (kernels/target.h); its scratch comes from baseline code.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/panel.h"
#include "kernels/panel_amx.h"
#include "kernels/quant_blocks.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kTileBytes = kAmxTileBytes;
constexpr size_t kGroup = 2;       // panels per group: accumulator tiles 0..3
constexpr size_t kChunk = 2;       // super-blocks of codes prepared at a time
constexpr size_t kRowTiles = 32;   // row tiles whose accumulators wait in scratch
constexpr size_t kSteps = 4;       // 64-input tile products per super-block
constexpr size_t kDigitTiles = 2;  // a * q and b * q

constexpr size_t kQsOff = offsetof(BlockQ8_K, qs);
constexpr size_t kBsumsOff = offsetof(BlockQ8_K, bsums);

// Tiles 0-3: int32 accumulators (Q4_K/Q5_K panel c: 2c for a * q, 2c + 1 for b * q; Q6_K: one
// per digit); 4: activations; 5-7: weights.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// Scratch: prepared codes [kChunk][kGroup][digit][step] tiles, the int32 tiles of one row tile,
// the f32 accumulators [row tile][panel][16 rows][16 outputs], then what each activation row's
// super-blocks give every panel (RowInfo [row][super-block]).
constexpr size_t kCodeBytes = kChunk * kGroup * kDigitTiles * kSteps * kTileBytes;
constexpr size_t kIntBytes = kGroup * kDigitTiles * kTileBytes;
constexpr size_t kAccBytes = kRowTiles * kGroup * kTileBytes;

// A row's super-block scale, and the sums of each pair of its sub-blocks' codes as the int16
// pairs the min term's vpmaddwd takes.
struct RowInfo {
  float d;
  int32_t pairs[4];
};

inline size_t code_tile(size_t sb, size_t c, size_t digit, size_t step) {
  return ((sb * kGroup + c) * kDigitTiles + digit) * kSteps + step;
}

// Offsets within one panel super-block (panel.h).
struct Q4K {
  static constexpr size_t kBlockBytes = k_panel_block_bytes(GgmlType::Q4_K);
  static constexpr size_t kScaleBytes = k_panel_scale_bytes(GgmlType::Q4_K);  // d, dmin
  static constexpr size_t kHighOff = 0, kScOff = 2048, kMinOff = 2176;
  static constexpr bool kSixBit = false;
};
struct Q5K {
  static constexpr size_t kBlockBytes = k_panel_block_bytes(GgmlType::Q5_K);
  static constexpr size_t kScaleBytes = k_panel_scale_bytes(GgmlType::Q5_K);
  static constexpr size_t kHighOff = 2048, kScOff = 2560, kMinOff = 2688;
  static constexpr bool kSixBit = false;
};
struct Q6K {
  static constexpr size_t kBlockBytes = k_panel_block_bytes(GgmlType::Q6_K);
  static constexpr size_t kScaleBytes = k_panel_scale_bytes(GgmlType::Q6_K);  // d
  static constexpr size_t kHighOff = 2048, kScOff = 3072;
  static constexpr bool kSixBit = true;
};

// Writes the a * q and b * q tiles of one super-block of one panel. In step j, tile row v holds
// quad v of the 64 inputs 64j.. of all 16 outputs: quads 0-3 are sub-block 2j's low nibbles,
// 4-7 its high nibbles, 8-15 the same for sub-block 2j + 1.
template <class W>
void prepare(const uint8_t* blk, uint8_t* a_tiles, uint8_t* b_tiles) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m16 = _mm512_set1_epi8(0x10);
  for (size_t k = 0; k < 8; ++k) {
    const __m512i sc = _mm512_cvtepu8_epi32(
        _mm_load_si128(reinterpret_cast<const __m128i*>(blk + W::kScOff + 16 * k)));
    // Each digit in both 16-bit halves of its lane: one vpmullw scales two codes, and a digit
    // times a code (< 256) never carries into the next byte.
    const __m512i da = _mm512_srli_epi32(sc, 3);
    const __m512i db = _mm512_and_si512(sc, _mm512_set1_epi32(7));
    const __m512i wa = _mm512_or_si512(da, _mm512_slli_epi32(da, 16));
    const __m512i wb = _mm512_or_si512(db, _mm512_slli_epi32(db, 16));
    const size_t row0 = (k % 2) * 8;
    uint8_t* ta = a_tiles + (k / 2) * kTileBytes;
    uint8_t* tb = b_tiles + (k / 2) * kTileBytes;
    for (size_t v = 0; v < 4; ++v) {
      const __m512i raw = _mm512_load_si512(blk + (4 * k + v) * 64);
      __m512i lo = _mm512_and_si512(raw, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (W::kHighOff != 0) {
        // Q5_K: bit v of a byte is the 5th bit of quad v, bit v + 4 that of quad v + 4.
        const __m512i hv = _mm512_load_si512(blk + W::kHighOff + k * 64);
        lo = _mm512_or_si512(
            lo, _mm512_and_si512(_mm512_slli_epi16(hv, static_cast<unsigned>(4 - v)), m16));
        const __m512i down = v == 0 ? hv : _mm512_srli_epi16(hv, static_cast<unsigned>(v));
        hi = _mm512_or_si512(hi, _mm512_and_si512(down, m16));
      }
      _mm512_store_si512(ta + (row0 + v) * 64, _mm512_mullo_epi16(lo, wa));
      _mm512_store_si512(ta + (row0 + 4 + v) * 64, _mm512_mullo_epi16(hi, wa));
      _mm512_store_si512(tb + (row0 + v) * 64, _mm512_mullo_epi16(lo, wb));
      _mm512_store_si512(tb + (row0 + 4 + v) * 64, _mm512_mullo_epi16(hi, wb));
    }
  }
}

// g++'s tile intrinsics paste tile numbers into the instruction text: literal numbers only.
#define LIFT_K_STEP(CA, CB, WA, WB) \
  do {                              \
    _tile_loadd(5, (WA), 64);       \
    _tile_dpbsud(CA, 4, 5);         \
    _tile_loadd(6, (WB), 64);       \
    _tile_dpbsud(CB, 4, 6);         \
  } while (0)

struct Ctx {
  const PanelView& w;
  const uint8_t* act;
  size_t act_stride;
  size_t nb;
  uint8_t* codes;
  int32_t* ints;
  float* acc;
  RowInfo* info;  // rows of the current pass of row tiles
};

void row_info(const Ctx& x, size_t r0, size_t r1) {
  for (size_t r = r0; r < r1; ++r) {
    for (size_t b = 0; b < x.nb; ++b) {
      const uint8_t* xb = x.act + r * x.act_stride + b * sizeof(BlockQ8_K);
      RowInfo& ri = x.info[(r - r0) * x.nb + b];
      std::memcpy(&ri.d, xb, 4);
      // Sub-block sums (two bsums each, |sum| <= 32 * 127, so the int16 pack is exact), then
      // pairs (0, 1), (2, 3) from the low 128-bit lane and (4, 5), (6, 7) from the high one.
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + kBsumsOff));
      const __m256i sums = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
      const __m256i packed = _mm256_packs_epi32(sums, sums);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ri.pairs),
                       _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
    }
  }
}

// One row tile (16 activation rows from `rows`, their info at `info`) times G panels (p, p + 1)
// over super-blocks [b0, b1) of the chunk; accumulators at acc_t.
template <class W, size_t G>
void row_tile(const Ctx& x, const uint8_t* rows, const RowInfo* info, size_t p, size_t b0,
              size_t b1, float* acc_t) {
  for (size_t b = b0; b < b1; ++b) {
    const size_t sb = b - b0;
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (G > 1) {
      _tile_zero(2);
      _tile_zero(3);
    }
    const uint8_t* a0 = rows + b * sizeof(BlockQ8_K) + kQsOff;
    for (size_t j = 0; j < kSteps; ++j) {
      _tile_loadd(4, a0 + 64 * j, x.act_stride);
      LIFT_K_STEP(0, 1, x.codes + code_tile(sb, 0, 0, j) * kTileBytes,
                  x.codes + code_tile(sb, 0, 1, j) * kTileBytes);
      if constexpr (G > 1) {
        LIFT_K_STEP(2, 3, x.codes + code_tile(sb, 1, 0, j) * kTileBytes,
                    x.codes + code_tile(sb, 1, 1, j) * kTileBytes);
      }
    }
    _tile_stored(0, x.ints, 64);
    _tile_stored(1, x.ints + 256, 64);
    if constexpr (G > 1) {
      _tile_stored(2, x.ints + 512, 64);
      _tile_stored(3, x.ints + 768, 64);
    }
    // The vector loads below read what the tile stores wrote; the tile intrinsics do not tell
    // the compiler that they write memory.
    __asm__ volatile("" ::: "memory");
    for (size_t c = 0; c < G; ++c) {
      const uint8_t* pw = panel_at(x.w, p + c);
      const uint8_t* blk = pw + b * W::kBlockBytes;
      const uint8_t* ps = pw + x.nb * W::kBlockBytes + b * W::kScaleBytes;
      const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ps)));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ps + 32)));
      __m512i mv[4];
      for (size_t q = 0; q < 4; ++q) {
        mv[q] = _mm512_cvtepu8_epi16(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + W::kMinOff + 32 * q)));
      }
      const int32_t* ia = x.ints + c * 512;
      float* ac = acc_t + c * 256;
      for (size_t i = 0; i < 16; ++i) {
        const __m512i sumi = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(ia + 16 * i), 3),
                                              _mm512_load_si512(ia + 256 + 16 * i));
        const RowInfo& ri = info[i * x.nb + b];
        __m512i summ = _mm512_madd_epi16(mv[0], _mm512_set1_epi32(ri.pairs[0]));
        for (size_t q = 1; q < 4; ++q) {
          summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mv[q], _mm512_set1_epi32(ri.pairs[q])));
        }
        __m512 a = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(ac + 16 * i);
        const __m512 dxi = _mm512_set1_ps(ri.d);
        a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, dxi), a);
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, dxi), a);
        _mm512_store_ps(ac + 16 * i, a);
      }
    }
  }
}

#undef LIFT_K_STEP

// Q6_K: codes q in [-32, 31] and signed 8-bit scales, one per 16 inputs. With s = sc + 128
// written in base 4, sc = 64 * (s3 - 2) + 16 * s2 + 4 * s1 + s0: four tiles of digit * q (at
// most 96 in size, signed bytes) give sumi = 64 * C3 + 16 * C2 + 4 * C1 + C0, the AVX-512
// kernel's sum_k sc_k * (dot_k - 32 * xsum_k). Tiles [digit][step] per super-block.
constexpr size_t kQ6Digits = 4;

// digit * q per byte: even and odd bytes multiplied apart, so no product carries into the next.
inline __m512i times_digit(__m512i q, __m512i wd) {
  const __m512i even = _mm512_set1_epi16(0x00FF);
  const __m512i lo = _mm512_and_si512(_mm512_mullo_epi16(_mm512_and_si512(q, even), wd), even);
  const __m512i hi = _mm512_mullo_epi16(_mm512_andnot_si512(even, q), wd);
  return _mm512_or_si512(lo, _mm512_andnot_si512(even, hi));
}

void prepare_q6(const uint8_t* blk, uint8_t* tiles) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
  const __m512i bias = _mm512_set1_epi8(32);
  for (size_t k = 0; k < 16; ++k) {
    const __m512i s = _mm512_add_epi32(
        _mm512_cvtepi8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(blk + Q6K::kScOff + 16 * k))),
        _mm512_set1_epi32(128));
    __m512i wd[kQ6Digits];
    for (size_t g = 0; g < kQ6Digits; ++g) {
      __m512i dg = _mm512_srli_epi32(s, static_cast<unsigned>(2 * g));
      dg = g < 3 ? _mm512_and_si512(dg, _mm512_set1_epi32(3))
                 : _mm512_sub_epi32(dg, _mm512_set1_epi32(2));
      wd[g] = _mm512_or_si512(_mm512_and_si512(dg, _mm512_set1_epi32(0xFFFF)),
                              _mm512_slli_epi32(dg, 16));
    }
    const __m512i hv = _mm512_load_si512(blk + Q6K::kHighOff + k * 64);
    for (size_t j = 0; j < 4; ++j) {
      const __m512i nv = _mm512_load_si512(blk + (2 * k + j / 2) * 64);
      const __m512i low =
          j % 2 == 0 ? _mm512_and_si512(nv, m4) : _mm512_and_si512(_mm512_srli_epi16(nv, 4), m4);
      const __m512i high = j == 0   ? _mm512_slli_epi16(hv, 4)
                           : j == 1 ? _mm512_slli_epi16(hv, 2)
                           : j == 2 ? hv
                                    : _mm512_srli_epi16(hv, 2);
      const __m512i q = _mm512_sub_epi8(_mm512_or_si512(low, _mm512_and_si512(high, m2)), bias);
      // Step k / 4, tile row 4 * (k % 4) + j: inputs 16k + 4j .. of the super-block.
      const size_t row = 4 * (k % 4) + j;
      for (size_t g = 0; g < kQ6Digits; ++g) {
        uint8_t* tile = tiles + (g * kSteps + k / 4) * kTileBytes;
        _mm512_store_si512(tile + row * 64, times_digit(q, wd[g]));
      }
    }
  }
}

void row_tile_q6(const Ctx& x, const uint8_t* rows, const RowInfo* info, size_t p, size_t b0,
                 size_t b1, float* acc_t) {
  const size_t super_tiles = kQ6Digits * kSteps;
  for (size_t b = b0; b < b1; ++b) {
    const uint8_t* tiles = x.codes + (b - b0) * super_tiles * kTileBytes;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const uint8_t* a0 = rows + b * sizeof(BlockQ8_K) + kQsOff;
    for (size_t j = 0; j < kSteps; ++j) {
      _tile_loadd(4, a0 + 64 * j, x.act_stride);
      _tile_loadd(5, tiles + (0 * kSteps + j) * kTileBytes, 64);
      _tile_dpbssd(0, 4, 5);
      _tile_loadd(6, tiles + (1 * kSteps + j) * kTileBytes, 64);
      _tile_dpbssd(1, 4, 6);
      _tile_loadd(7, tiles + (2 * kSteps + j) * kTileBytes, 64);
      _tile_dpbssd(2, 4, 7);
      _tile_loadd(5, tiles + (3 * kSteps + j) * kTileBytes, 64);
      _tile_dpbssd(3, 4, 5);
    }
    _tile_stored(0, x.ints, 64);
    _tile_stored(1, x.ints + 256, 64);
    _tile_stored(2, x.ints + 512, 64);
    _tile_stored(3, x.ints + 768, 64);
    __asm__ volatile("" ::: "memory");  // the loads below read the tile stores
    const uint8_t* ps = panel_at(x.w, p) + x.nb * Q6K::kBlockBytes + b * Q6K::kScaleBytes;
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ps)));
    for (size_t i = 0; i < 16; ++i) {
      const int32_t* ci = x.ints + 16 * i;
      __m512i sumi = _mm512_slli_epi32(_mm512_load_si512(ci + 768), 2);
      sumi = _mm512_slli_epi32(_mm512_add_epi32(sumi, _mm512_load_si512(ci + 512)), 2);
      sumi = _mm512_slli_epi32(_mm512_add_epi32(sumi, _mm512_load_si512(ci + 256)), 2);
      sumi = _mm512_add_epi32(sumi, _mm512_load_si512(ci));
      __m512 a = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc_t + 16 * i);
      const __m512 dxi = _mm512_set1_ps(info[i * x.nb + b].d);
      a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, dxi), a);
      _mm512_store_ps(acc_t + 16 * i, a);
    }
  }
}

// Row tiles [t0, t1) times panels p.. (G of them) over all super-blocks, results to y.
template <class W, size_t G>
void run_group(const Ctx& x, size_t t0, size_t t1, size_t p, float* y, size_t ldy, size_t o_end) {
  for (size_t b0 = 0; b0 < x.nb; b0 += kChunk) {
    const size_t b1 = min_of(x.nb, b0 + kChunk);
    for (size_t b = b0; b < b1; ++b) {
      for (size_t c = 0; c < G; ++c) {
        const uint8_t* blk = panel_at(x.w, p + c) + b * W::kBlockBytes;
        if constexpr (W::kSixBit) {
          prepare_q6(blk, x.codes + (b - b0) * kQ6Digits * kSteps * kTileBytes);
        } else {
          prepare<W>(blk, x.codes + code_tile(b - b0, c, 0, 0) * kTileBytes,
                     x.codes + code_tile(b - b0, c, 1, 0) * kTileBytes);
        }
      }
    }
    // The tile loads read what the vector stores just wrote.
    __asm__ volatile("" ::: "memory");
    for (size_t t = t0; t < t1; ++t) {
      const uint8_t* rows = x.act + t * 16 * x.act_stride;
      const RowInfo* info = x.info + (t - t0) * 16 * x.nb;
      float* acc_t = x.acc + (t - t0) * kGroup * 256;
      if constexpr (W::kSixBit) {
        row_tile_q6(x, rows, info, p, b0, b1, acc_t);
      } else {
        row_tile<W, G>(x, rows, info, p, b0, b1, acc_t);
      }
    }
  }
  for (size_t t = t0; t < t1; ++t) {
    for (size_t c = 0; c < G; ++c) {
      const size_t o = (p + c) * kPanelRows;
      const size_t valid = min_of(kPanelRows, o_end - o);
      const auto mask = static_cast<__mmask16>((1u << valid) - 1u);
      const float* ac = x.acc + ((t - t0) * kGroup + c) * 256;
      for (size_t i = 0; i < 16; ++i) {
        _mm512_mask_storeu_ps(y + (t * 16 + i) * ldy + o, mask, _mm512_load_ps(ac + 16 * i));
      }
    }
  }
}

template <class W>
void run(const Ctx& x, size_t n_tiles, size_t p_begin, size_t p_end, float* y, size_t ldy,
         size_t o_end) {
  for (size_t t0 = 0; t0 < n_tiles; t0 += kRowTiles) {
    const size_t t1 = min_of(n_tiles, t0 + kRowTiles);
    row_info(x, t0 * 16, t1 * 16);
    size_t p = p_begin;
    if constexpr (!W::kSixBit) {
      for (; p + kGroup <= p_end; p += kGroup) run_group<W, 2>(x, t0, t1, p, y, ldy, o_end);
    }
    for (; p < p_end; ++p) run_group<W, 1>(x, t0, t1, p, y, ldy, o_end);
  }
}

}  // namespace

void matmul_k_panels_amx(const PanelView& w, const uint8_t* act, size_t act_stride, size_t n_rows,
                         float* y, size_t ldy, size_t o_begin, size_t o_end) {
  const size_t n_tiles = n_rows / 16;
  if (n_tiles > 0) {
    static const TileConfig config;
    _tile_loadconfig(&config);
    const size_t nb = w.n_in / kKBlock;
    const size_t fixed = kCodeBytes + kIntBytes + kAccBytes;
    uint8_t* mem = amx_thread_scratch(fixed + kRowTiles * 16 * nb * sizeof(RowInfo));
    const Ctx x{w,
                act,
                act_stride,
                nb,
                mem,
                reinterpret_cast<int32_t*>(mem + kCodeBytes),
                reinterpret_cast<float*>(mem + kCodeBytes + kIntBytes),
                reinterpret_cast<RowInfo*>(mem + fixed)};
    const size_t p_begin = o_begin / kPanelRows, p_end = (o_end + kPanelRows - 1) / kPanelRows;
    if (w.type == GgmlType::Q6_K) {
      run<Q6K>(x, n_tiles, p_begin, p_end, y, ldy, o_end);
    } else if (w.type == GgmlType::Q5_K) {
      run<Q5K>(x, n_tiles, p_begin, p_end, y, ldy, o_end);
    } else {
      run<Q4K>(x, n_tiles, p_begin, p_end, y, ldy, o_end);
    }
    _tile_release();
  }
  const size_t done = n_tiles * 16;
  if (done < n_rows) {
    matmul_k_panels_avx512(w, act + done * act_stride, act_stride, n_rows - done, y + done * ldy,
                           ldy, o_begin, o_end);
  }
}

}  // namespace lift::kernels::detail
