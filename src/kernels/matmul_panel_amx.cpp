// AMX tile products of F16/BF16 panels with bf16x2 activations (see panel_amx.h).
//
// Blocking: a thread's panels go in groups of four (four f32 accumulator tiles, 64 outputs);
// for each group the weights of kBlockSteps 32-input steps are split into bf16 tiles once and
// then serve every row tile of the call (up to kRowTiles at a time), so the split costs one pass
// over the weights per kRowTiles * 16 rows. Accumulators round-trip through memory between
// weight blocks, which does not change their values.
//
// The entry points of panel_amx.h check their arguments in panel.cpp and call the detail
// functions here. Like every file compiled with -m flags, this one calls no inline function or
// standard-library template that baseline code may share (kernels/target.h); its scratch memory
// comes from baseline code too.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/panel_amx.h"

namespace lift::kernels::detail {
namespace {

constexpr size_t kStep = kAmxStep;
constexpr size_t kTileBytes = kAmxTileBytes;
constexpr size_t kGroup = 4;       // panels per group: accumulator tiles 0..3
constexpr size_t kBlockSteps = 2;  // weight steps split per block: 16 KB, stays in L1
constexpr size_t kRowTiles = 32;   // row tiles per pass over a weight block

// Tiles 0-3: accumulators; 4, 5: activation hi, lo; 6, 7: weight hi, lo.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

struct Scratch {
  // Split weights: [step][panel][hi, lo] tiles.
  uint8_t* w;
  // Accumulators: [row tile][panel] tiles of 16 x 16 f32.
  float* acc;
};

constexpr size_t kSplitBytes = kBlockSteps * kGroup * 2 * kTileBytes;
constexpr size_t kScratchBytes = kSplitBytes + kRowTiles * kGroup * kTileBytes;

Scratch scratch() {
  uint8_t* mem = amx_thread_scratch(kScratchBytes);
  return {mem, reinterpret_cast<float*>(mem + kSplitBytes)};
}

// ---- activations -------------------------------------------------------------------------------
// split_bf16x2 on 16 lanes: round-to-nearest-even bits (upper halves meaningful), subnormals to
// signed zero.
inline __m512i round_bits(__m512i b) {
  const __m512i r = _mm512_add_epi32(
      b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                          _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1))));
  const __mmask16 tiny = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_and_epi32(r, tiny, b, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
}

inline void split16(__m512 x, __m512i& hi, __m512i& lo) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  hi = round_bits(_mm512_castps_si512(x));
  const __m512 rest = _mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_and_si512(hi, high)));
  lo = round_bits(_mm512_castps_si512(rest));
}

// The upper halves of a's 16 and then b's 16 dwords, as 32 words.
inline __m512i upper_words(__m512i a, __m512i b) {
  alignas(64) static constexpr uint16_t kOdd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                    23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                    45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(a, _mm512_load_si512(kOdd), b);
}

// ---- weights -----------------------------------------------------------------------------------
// Inputs 2j, 2j+1 of a panel are two rows of 16 values, one 64-byte line; the tile wants them
// as pairs per output (row j, dword n = input 2j+1 of output n over input 2j of output n).
struct SplitF16 {
  static constexpr bool kLo = true;
  static void pair(const uint8_t* src, uint8_t* hi, uint8_t* lo) {
    const __m512 a = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(src)));
    const __m512 b = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32)));
    // Truncating to the top 8 significant bits leaves at most 3 for the rest: both parts are
    // exact bf16 values (the low 16 bits of their f32 patterns are zero).
    const __m512 high = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
    const __m512 ah = _mm512_and_ps(a, high), bh = _mm512_and_ps(b, high);
    const __m512i al = _mm512_castps_si512(_mm512_sub_ps(a, ah));
    const __m512i bl = _mm512_castps_si512(_mm512_sub_ps(b, bh));
    _mm512_store_si512(hi, _mm512_or_si512(_mm512_castps_si512(bh),
                                           _mm512_srli_epi32(_mm512_castps_si512(ah), 16)));
    _mm512_store_si512(lo, _mm512_or_si512(bl, _mm512_srli_epi32(al, 16)));
  }
};
struct SplitBF16 {
  static constexpr bool kLo = false;
  static void pair(const uint8_t* src, uint8_t* hi, uint8_t*) {
    alignas(64) static constexpr uint16_t kZip[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    _mm512_store_si512(hi,
                       _mm512_permutexvar_epi16(_mm512_load_si512(kZip), _mm512_load_si512(src)));
  }
};

// Splits step `step` (inputs 32*step ..) of one panel into its hi (and lo) tiles. The last step
// of an n_in that is not a multiple of 32 reads its rows through a zero-padded copy.
template <class S>
void split_step(const PanelView& w, size_t panel, size_t step, uint8_t* hi, uint8_t* lo) {
  const uint8_t* src = panel_at(w, panel) + step * kStep * 2 * kPanelRows;
  alignas(64) uint8_t padded[kStep * 2 * kPanelRows];
  const size_t rows = min_of(kStep, w.n_in - step * kStep);
  if (rows < kStep) {
    std::memset(padded, 0, sizeof padded);
    std::memcpy(padded, src, rows * 2 * kPanelRows);
    src = padded;
  }
  for (size_t j = 0; j < kStep / 2; ++j) S::pair(src + j * 64, hi + j * 64, lo + j * 64);
}

// ---- products ----------------------------------------------------------------------------------
// g++'s tile intrinsics paste the tile number into the instruction text, so tiles are named by
// literal numbers: one macro use per accumulator tile.
#define LIFT_AMX_STEP(C, wt)                 \
  do {                                       \
    _tile_loadd(6, (wt), 64);                \
    _tile_dpbf16ps(C, 4, 6);                 \
    _tile_dpbf16ps(C, 5, 6);                 \
    if constexpr (kLo) {                     \
      _tile_loadd(7, (wt) + kTileBytes, 64); \
      _tile_dpbf16ps(C, 5, 7);               \
      _tile_dpbf16ps(C, 4, 7);               \
    }                                        \
  } while (0)

#define LIFT_AMX_LOAD_ACC(C, p) \
  do {                          \
    if (zero) {                 \
      _tile_zero(C);            \
    } else {                    \
      _tile_loadd(C, (p), 64);  \
    }                           \
  } while (0)

// Row tiles [t0, t1) of one group of G panels over weight steps [s0, s1) (split into ws).
template <int G, bool kLo>
void run_block(const uint8_t* act, size_t n_steps, size_t t0, size_t t1, size_t s0, size_t s1,
               const uint8_t* ws, float* acc) {
  const bool zero = s0 == 0;
  for (size_t t = t0; t < t1; ++t) {
    float* at = acc + (t - t0) * kGroup * 256;
    LIFT_AMX_LOAD_ACC(0, at);
    if constexpr (G > 1) LIFT_AMX_LOAD_ACC(1, at + 256);
    if constexpr (G > 2) LIFT_AMX_LOAD_ACC(2, at + 512);
    if constexpr (G > 3) LIFT_AMX_LOAD_ACC(3, at + 768);
    for (size_t s = s0; s < s1; ++s) {
      const uint8_t* a = act + (t * n_steps + s) * 2 * kTileBytes;
      _tile_loadd(4, a, 64);
      _tile_loadd(5, a + kTileBytes, 64);
      const uint8_t* wt = ws + (s - s0) * kGroup * 2 * kTileBytes;
      LIFT_AMX_STEP(0, wt);
      if constexpr (G > 1) LIFT_AMX_STEP(1, wt + 2 * kTileBytes);
      if constexpr (G > 2) LIFT_AMX_STEP(2, wt + 4 * kTileBytes);
      if constexpr (G > 3) LIFT_AMX_STEP(3, wt + 6 * kTileBytes);
    }
    _tile_stored(0, at, 64);
    if constexpr (G > 1) _tile_stored(1, at + 256, 64);
    if constexpr (G > 2) _tile_stored(2, at + 512, 64);
    if constexpr (G > 3) _tile_stored(3, at + 768, 64);
  }
}

#undef LIFT_AMX_STEP
#undef LIFT_AMX_LOAD_ACC

template <class S, int G>
void run_group(const PanelView& w, const uint8_t* act, size_t n_rows, size_t t0, size_t t1,
               size_t p, float* y, size_t ldy, size_t o_end) {
  const Scratch sc = scratch();
  const size_t n_steps = (w.n_in + kStep - 1) / kStep;
  for (size_t s0 = 0; s0 < n_steps; s0 += kBlockSteps) {
    const size_t s1 = min_of(n_steps, s0 + kBlockSteps);
    for (size_t s = s0; s < s1; ++s) {
      for (int c = 0; c < G; ++c) {
        uint8_t* wt = sc.w + ((s - s0) * kGroup + static_cast<size_t>(c)) * 2 * kTileBytes;
        split_step<S>(w, p + static_cast<size_t>(c), s, wt, wt + kTileBytes);
      }
    }
    // The tile loads read what the vector stores just wrote; g++'s tile intrinsics do not tell
    // the compiler that they read memory.
    __asm__ volatile("" ::: "memory");
    run_block<G, S::kLo>(act, n_steps, t0, t1, s0, s1, sc.w, sc.acc);
  }
  // Accumulator rows out to y: valid rows, valid outputs.
  for (size_t t = t0; t < t1; ++t) {
    for (size_t i = 0; i < 16 && t * 16 + i < n_rows; ++i) {
      float* dst = y + (t * 16 + i) * ldy;
      for (int c = 0; c < G; ++c) {
        const size_t o = (p + static_cast<size_t>(c)) * kPanelRows;
        const size_t valid = min_of(kPanelRows, o_end - o);
        const __m512 v =
            _mm512_load_ps(sc.acc + ((t - t0) * kGroup + static_cast<size_t>(c)) * 256 + i * 16);
        _mm512_mask_storeu_ps(dst + o, static_cast<__mmask16>((1u << valid) - 1u), v);
      }
    }
  }
}

template <class S>
void run(const PanelView& w, const uint8_t* act, size_t n_rows, float* y, size_t ldy,
         size_t p_begin, size_t p_end, size_t o_end) {
  const size_t n_tiles = (n_rows + 15) / 16;
  for (size_t t0 = 0; t0 < n_tiles; t0 += kRowTiles) {
    const size_t t1 = min_of(n_tiles, t0 + kRowTiles);
    for (size_t p = p_begin; p < p_end; p += kGroup) {
      switch (min_of(kGroup, p_end - p)) {
        case 4:
          run_group<S, 4>(w, act, n_rows, t0, t1, p, y, ldy, o_end);
          break;
        case 3:
          run_group<S, 3>(w, act, n_rows, t0, t1, p, y, ldy, o_end);
          break;
        case 2:
          run_group<S, 2>(w, act, n_rows, t0, t1, p, y, ldy, o_end);
          break;
        default:
          run_group<S, 1>(w, act, n_rows, t0, t1, p, y, ldy, o_end);
      }
    }
  }
}

}  // namespace

void amx_pack_group(const float* x, size_t n_in, size_t n_rows, size_t group, void* dst) {
  const size_t n_steps = (n_in + kStep - 1) / kStep;
  auto* out = static_cast<uint8_t*>(dst) + group * n_steps * 2 * kTileBytes;
  for (size_t s = 0; s < n_steps; ++s) {
    uint8_t* hi = out + s * 2 * kTileBytes;
    const size_t k0 = s * kStep, nk = min_of(kStep, n_in - k0);
    const __mmask16 m0 = static_cast<__mmask16>(nk >= 16 ? 0xFFFF : (1u << nk) - 1u);
    const __mmask16 m1 = static_cast<__mmask16>(nk >= 32   ? 0xFFFF
                                                : nk <= 16 ? 0
                                                           : (1u << (nk - 16)) - 1u);
    for (size_t i = 0; i < 16; ++i) {
      const size_t r = group * 16 + i;
      __m512i h = _mm512_setzero_si512(), l = _mm512_setzero_si512();
      if (r < n_rows) {
        const float* xr = x + r * n_in + k0;
        __m512i h0, l0, h1, l1;
        split16(_mm512_maskz_loadu_ps(m0, xr), h0, l0);
        split16(nk > 16 ? _mm512_maskz_loadu_ps(m1, xr + 16) : _mm512_setzero_ps(), h1, l1);
        h = upper_words(h0, h1);
        l = upper_words(l0, l1);
      }
      _mm512_store_si512(hi + i * 64, h);
      _mm512_store_si512(hi + kTileBytes + i * 64, l);
    }
  }
}

void matmul_panels_amx_tiles(const PanelView& w, const void* act, size_t n_rows, float* y,
                             size_t ldy, size_t o_begin, size_t o_end) {
  static const TileConfig config;
  _tile_loadconfig(&config);
  const auto* a = static_cast<const uint8_t*>(act);
  const size_t p_begin = o_begin / kPanelRows, p_end = (o_end + kPanelRows - 1) / kPanelRows;
  if (w.type == GgmlType::F16) {
    run<SplitF16>(w, a, n_rows, y, ldy, p_begin, p_end, o_end);
  } else {
    run<SplitBF16>(w, a, n_rows, y, ldy, p_begin, p_end, o_end);
  }
  _tile_release();
}

}  // namespace lift::kernels::detail
