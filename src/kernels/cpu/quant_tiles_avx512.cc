// kernels: AVX-512 tiles for FP8 / FP4 weights (compiled with -mavx512f/bw/vl/dq -mf16c -mfma; called
// only after runtime detection). Weights are decoded in registers:
//   FP8: an E4M3 byte b becomes the IEEE half with bits ((b & 0x7F) << 7) | ((b & 0x80) << 8), which is
//        exactly w/256 (normals and subnormals alike), and vcvtph2ps widens it exactly to fp32; the 256
//        is folded into the per-128-block weight scale. This is every AVX-512 CPU's FP8 decode tile: the
//        former vdpbf16ps tile (32 products per insn, but at a quarter of the FMA's insn rate here and a
//        7-uop bf16 decode) was 1.17x (1 token) to 1.30x (4..8 tokens) slower per call, 256x4096 cached.
//   FP4: 16 packed bytes are zero-extended to 16 dwords; vpermps looks up the low nibbles directly (it
//        only reads an index's low 4 bits) and the high nibbles after one shift, in a 16-entry E2M1 table
//        pre-multiplied by the block's E8M0 scale (exact: a power of two).
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/reduce16_avx512.inc"  // reduce16, reduce16_into: the lane tree of every tile

// 32 E4M3 codes → w/256 of codes 0..15 (lo) and 16..31 (hi). Sign-extending b to 16 bits and shifting
// left by 7 puts the magnitude bits at 7..13 and copies of the sign at 14..15; clearing bit 14 leaves
// exactly the half ((b & 0x7F) << 7) | ((b & 0x80) << 8). One widen/shift/and serves 32 codes; the two
// vcvtph2ps (2 uops each) are most of the decode: 4 uops per 16 weights in all.
inline void e4m3x32_div256(__m256i codes, __m512& lo, __m512& hi) {
  const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7),
                                     _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

inline __mmask16 mask16(int64_t rem) {
  if (rem >= 16) return static_cast<__mmask16>(0xFFFF);
  return rem <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << rem) - 1u);
}

// One 128-K block (kTail: the row's last, partial one; codes and activations past k load as 0, which
// adds exact zeros) into part[r][j]: lane l sums k = kb + 16i + l for i = 0..7 in order, whatever R and T.
template <int R, int T, bool kTail>
inline void fp8_block(const Fp8Tile& t, int64_t kb, __m512 (&part)[R][T]) {
  const int64_t len = t.k - kb;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    if (kTail && len <= 32 * q) break;
    __m512 wl[R], wh[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = t.w[r] + kb + 32 * q;
      if (q % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(wr + t.prefetch), _MM_HINT_T0);
      const __m256i codes =
          kTail ? _mm256_maskz_loadu_epi8(static_cast<__mmask32>(mask16(len - 32 * q)) |
                                              static_cast<__mmask32>(mask16(len - 32 * q - 16)) << 16,
                                          wr)
                : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr));
      e4m3x32_div256(codes, wl[r], wh[r]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const float* xj = t.x + j * t.ldx + kb + 32 * q;
      __m512 xl = kTail ? _mm512_maskz_loadu_ps(mask16(len - 32 * q), xj) : _mm512_loadu_ps(xj);
      __m512 xh = kTail ? _mm512_maskz_loadu_ps(mask16(len - 32 * q - 16), xj + 16) : _mm512_loadu_ps(xj + 16);
      // One load per token, not one folded into each row's FMA (see bf16_step).
      asm("" : "+v"(xl), "+v"(xh));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r][j] = _mm512_fmadd_ps(wl[r], xl, part[r][j]);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r][j] = _mm512_fmadd_ps(wh[r], xh, part[r][j]);
    }
  }
}

// acc[r][j] += part[r][j] · 2^(e−127) · 256 (the decode's 1/256 undone; exact: a power of two). Scale
// codes from 247 up would make that factor overflow, so there the part is multiplied by 256 first (also
// exact), which rounds the same.
template <int R, int T>
inline void fp8_scale_add(const Fp8Tile& t, int64_t kb, __m512 (&part)[R][T], __m512* acc) {
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    const uint8_t e = t.s[r][kb / 128];
    const float sf = kE8m0ToFloat[e];
    if (e < 247) {
      const __m512 s = _mm512_set1_ps(sf * 256.0f);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) acc[r * T + j] = _mm512_fmadd_ps(part[r][j], s, acc[r * T + j]);
    } else {
      const __m512 s = _mm512_set1_ps(sf);
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j)
        acc[r * T + j] = _mm512_fmadd_ps(_mm512_mul_ps(part[r][j], _mm512_set1_ps(256.0f)), s, acc[r * T + j]);
    }
  }
}

// Rows × tokens of FP8 on fp32 FMAs. The accumulators stay in registers up to 8 of them; past that
// (2 rows × 5..8 tokens) the 16 block partial sums, 4 weight and 2 activation vectors fill the register
// file, and the accumulators live in memory, touched once per 128-K block rather than per FMA.
// At 8 tokens the tile is bound by the vector ports, not by loads: per 64 codes of a row, 32 FMAs, 16
// decode uops and 4 scale FMAs (~26 cycles) against ~34 measured (256×4096 cached), and K = 1024, whose
// 8 activation rows stay in L1, runs no faster than K = 4096, whose rows come from L2. Tried and
// dropped: an AVX512_VBMI decode (two vpermi2b byte-table lookups for bytes 2 and 3 of the fp32, a
// ternlog for the sign, four zero-masked vpermi2b to spread them in natural order: 7 instructions per
// 64 codes, the same values and bits) ran 1.10-1.17x slower at 1..8 tokens here (whole tile, its loop
// restructured to 64-code steps; the two parts not timed apart), vpermi2b being 3 uops on Intel cores;
// worth re-measuring on Zen 4/5, where it is cheaper.
template <int R, int T>
void fp8_tile(Fp8Tile& t) {
  constexpr bool kAccInRegs = R * T <= 8;
  __m512 acc_regs[kAccInRegs ? R * T : 1];
  alignas(64) float acc_mem[kAccInRegs ? 1 : R * T][16];
#pragma GCC unroll 16
  for (int i = 0; i < R * T; ++i) {
    if constexpr (kAccInRegs) acc_regs[i] = _mm512_setzero_ps();
    else _mm512_store_ps(acc_mem[i], _mm512_setzero_ps());
  }
  const int64_t full = t.k & ~int64_t{127};
  for (int64_t kb = 0; kb < t.k; kb += 128) {
    __m512 part[R][T];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) part[r][j] = _mm512_setzero_ps();
    if (kb < full) fp8_block<R, T, false>(t, kb, part);
    else fp8_block<R, T, true>(t, kb, part);
    if constexpr (kAccInRegs) {
      fp8_scale_add<R, T>(t, kb, part, acc_regs);
    } else {
      __m512 a[R * T];
#pragma GCC unroll 16
      for (int i = 0; i < R * T; ++i) a[i] = _mm512_load_ps(acc_mem[i]);
      fp8_scale_add<R, T>(t, kb, part, a);
#pragma GCC unroll 16
      for (int i = 0; i < R * T; ++i) _mm512_store_ps(acc_mem[i], a[i]);
    }
  }
  __m512 sums[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) sums[r][j] = kAccInRegs ? acc_regs[r * T + j] : _mm512_load_ps(acc_mem[r * T + j]);
  reduce16_into(sums, t.sums);
}

// BF16 → fp32 is a 16-bit left shift of the widened word. Per 16 columns a pass of R rows × T tokens
// issues R weight loads + R widen/shift pairs, T activation loads and R·T FMAs: the loads, not the FMAs,
// bound it (measured in isolation, 16 FMAs with 10 loads ran at half the FMA peak, 16 with 8 loads or
// 24 with 10 at ~70%), hence 4 rows and up to 6 tokens per pass (24 accumulators + 4 weights + 1
// activation in 32 registers). Full 16-wide steps use plain loads; only the last partial step is masked
// (a zero-masked load adds an ALU uop on the FMA ports).
// Tried at 8 tokens (decoding each row once, not twice as 4 + 4 does): 2 rows × 8 tokens per pass ran
// 1.09x slower at K = 4096 (every pair re-reads 8 activation rows from L2) and equal at K = 1024; a 6-row
// tile run as 3 + 3 rows × 8 tokens gained 1.03-1.05x at 8 tokens but its 4 + 2 split cost 1.1-1.2x at
// 1..4 tokens (a 2-row pass at 1 token leaves 2 FMA chains to hide a 4-cycle latency); 3 + 1 rows × 8
// tokens ran 1.15x slower at K = 4096 (the 1-row pass loads an activation per FMA).
template <int R, int T, bool kMasked>
inline void bf16_step(const uint16_t* const* w, const float* x, int64_t ldx, int64_t k, __mmask16 m,
                      __m512 (&acc)[R][T]) {
  __m512 wv[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(m, w[r] + k)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + k));
    wv[r] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    const float* xj = x + j * ldx + k;
    __m512 xv = kMasked ? _mm512_maskz_loadu_ps(m, xj) : _mm512_loadu_ps(xj);
    // NOTE: keeps xv in a register: GCC otherwise folds the load into every row's FMA, R loads instead
    // of one (measured: 2 rows × 8 tokens 1.2x slower).
    asm("" : "+v"(xv));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
  }
}

// Rows [0, R) × tokens [j0, j0 + T) of the tile, each (row, token) on its own accumulator in the same
// K order, so the sums do not depend on R, T or j0 (batch invariance).
template <int R, int T>
void bf16_pass(Bf16Tile& t, int j0) {
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  const float* x = t.x + j0 * t.ldx;
  const int64_t full = t.k & ~int64_t{15};
  int64_t k = 0;
  for (; k < full; k += 16) {
    if ((k & 31) == 0)  // every 64 bytes
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + k) + t.prefetch, _MM_HINT_T0);
    bf16_step<R, T, false>(t.w, x, t.ldx, k, 0, acc);
  }
  if (k < t.k) {
    if ((k & 31) == 0)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + k) + t.prefetch, _MM_HINT_T0);
    bf16_step<R, T, true>(t.w, x, t.ldx, k, static_cast<__mmask16>((1u << (t.k - k)) - 1u), acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) t.sums[r][j0 + j] = reduce16(acc[r][j]);
}

template <int R>
void bf16_rows(Bf16Tile& t) {
  switch (t.n_tokens) {
    case 1: return bf16_pass<R, 1>(t, 0);
    case 2: return bf16_pass<R, 2>(t, 0);
    case 3: return bf16_pass<R, 3>(t, 0);
    case 4: return bf16_pass<R, 4>(t, 0);
    case 5: return bf16_pass<R, 5>(t, 0);
    case 6: return bf16_pass<R, 6>(t, 0);
    case 7:  // 4 + 3 tokens: 28 or 32 accumulators would spill
      bf16_pass<R, 4>(t, 0);
      return bf16_pass<R, 3>(t, 4);
    default:  // 4 + 4: measured no slower than 6 + 2
      bf16_pass<R, 4>(t, 0);
      return bf16_pass<R, 4>(t, 4);
  }
}

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f,
                                    -3.0f, -4.0f, -6.0f);
  // Separate accumulators for even and odd elements: two independent FMA chains per (row, token).
  __m512 acc_e[R][T], acc_o[R][T];
  #pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc_e[r][j] = acc_o[r][j] = _mm512_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512 we[R], wo[R];
    #pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.w[r] + b * 16)));
      const __m512 ls = _mm512_mul_ps(lut, _mm512_set1_ps(kE8m0ToFloat[t.s[r][b]]));
      we[r] = _mm512_permutexvar_ps(bytes, ls);
      wo[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), ls);
    }
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const float* xb = t.x + j * t.ldx + b * 32;
      const __m512 xe = _mm512_loadu_ps(xb), xo = _mm512_loadu_ps(xb + 16);
      #pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        acc_e[r][j] = _mm512_fmadd_ps(we[r], xe, acc_e[r][j]);
        acc_o[r][j] = _mm512_fmadd_ps(wo[r], xo, acc_o[r][j]);
      }
    }
  }
  __m512 sums[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) sums[r][j] = _mm512_add_ps(acc_e[r][j], acc_o[r][j]);
  reduce16_into(sums, t.sums);
}

}  // namespace

// 1..2 rows × 1..8 tokens, each (row, token) on its own accumulators, so a row's sums do not depend on
// the tile width. FP8 and FP4 at 2 × 8 hold 32 accumulators and spill a few to the stack; measured
// (512×4096, one thread, m=8 in one call vs two calls of m=4) that is still no slower than two 4-token
// passes within noise (FP8 0.95-1.02x, FP4 0.97-1.01x), while BF16 and the AVX512-BF16 FP4 tile gain
// 1.05-1.08x: the fp32 tiles are FMA-bound (one FMA per 16 products), so decoding
// a weight once for 8 tokens instead of twice saves little beyond the decode uops.
#define DSV4_TILE_SWITCH(fn, t)                     \
  switch ((t.n_rows - 1) * 8 + (t.n_tokens - 1)) { \
    case 0: return fn<1, 1>(t);                    \
    case 1: return fn<1, 2>(t);                    \
    case 2: return fn<1, 3>(t);                    \
    case 3: return fn<1, 4>(t);                    \
    case 4: return fn<1, 5>(t);                    \
    case 5: return fn<1, 6>(t);                    \
    case 6: return fn<1, 7>(t);                    \
    case 7: return fn<1, 8>(t);                    \
    case 8: return fn<2, 1>(t);                    \
    case 9: return fn<2, 2>(t);                    \
    case 10: return fn<2, 3>(t);                   \
    case 11: return fn<2, 4>(t);                   \
    case 12: return fn<2, 5>(t);                   \
    case 13: return fn<2, 6>(t);                   \
    case 14: return fn<2, 7>(t);                   \
    default: return fn<2, 8>(t);                   \
  }

void bf16_tile_avx512(Bf16Tile& t) {
  switch (t.n_rows) {
    case 1: return bf16_rows<1>(t);
    case 2: return bf16_rows<2>(t);
    case 3: return bf16_rows<3>(t);
    default: return bf16_rows<4>(t);
  }
}
void fp8_tile_avx512(Fp8Tile& t) { DSV4_TILE_SWITCH(fp8_tile, t) }
void fp4_tile_avx512(Fp4Tile& t) { DSV4_TILE_SWITCH(fp4_tile, t) }

#undef DSV4_TILE_SWITCH

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
