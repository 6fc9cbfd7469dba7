// kernels: the FP4 tile on VDPBF16PS for Isa::kAvx512Bf16 — the routed experts' decode / small-batch path
// on CPUs with AVX512_BF16 and no AMX (AMD Zen 4/5). There VDPBF16PS issues about as often as an fp32 FMA
// (~1.9 vs 2 per cycle on Zen 5) and does twice its products, and a word permute (vpermw) decodes 32 E2M1
// codes straight to bf16 in one uop; the Intel-tuned fp32 nibble-plane tile (quant_tiles_fp4_avx512.cc)
// spends ~25 vector uops per 64 packed bytes at one token where this one spends ~13.
// Per 64 packed bytes of a row (128 weights, four 32-blocks), read as 32 words of 4 nibbles each:
//   vpsrlw ×3, vpermw ×4   plane q = nibble q of every word → its E2M1 value in bf16 (exact; vpermw reads
//                          an index's low 5 bits and the table holds the 16 values twice, so no masking);
//                          word j of plane q is element 4j + q, so fp32 lane i of plane q pairs elements
//                          8i + q (even word) and 8i + 4 + q (odd word): lanes 4b .. 4b+3 are block b
//   vpermps ×1             the four blocks' E8M0 scales to lanes 4b .. 4b+3 (as the nibble-plane tile)
// and per token: four VDPBF16PS (planes 0..3 against the activations prepared in Fp4XLayout::kBf16Pairs)
// into a fresh fp32 vector, then one FMA applies the block scales into the token's accumulator. The
// decode is shared by all the tile's tokens and rows hold 2 × 8 accumulators, so 8 tokens run in one
// pass (the fp32 tile needed two).
//
// The order of every (row, token) sum, identical at every tile shape (batch invariance), is documented
// here because the unit test emulates it bit for bit (KernelQuantMatmul.Fp4Bf16DotTileMatchesEmulationBitForBit):
//   for each 128-element chunk c, lane i (16 lanes):  s = +0
//     for q = 0..3:  s = (s + x[e + 4]·w[e + 4]) + x[e]·w[e],  e = 128c + 8i + q   (VDPBF16PS: odd word first)
//     acc[i] = fma(s, scale(block 4c + i/4), acc[i])                  (acc[i] starts at +0)
//   a[i] = acc[i] + acc[i + 8] (i < 8), b[i] = a[i] + a[i + 4] (i < 4), result = (b0 + b2) + (b1 + b3)
//            (reduce16_avx512.inc).
// Each product is exact in fp32 (an E2M1 value has 2 significant bits, a bf16 activation 8) and each
// addition rounds once (RNE), so the fp32 tiles' error bound holds. VDPBF16PS reads bf16 denormals as zero
// and flushes denormal results; the caller guarantees neither can happen (x_exactness == kBf16Dot: every
// nonzero |x| ≥ 2^-100, so every nonzero product and partial sum is a multiple of ≥ 2^-126), which makes
// the instruction's result equal the plain fp32 arithmetic above. The scale FMA is a plain fp32 FMA
// (denormal scale 2^-127 kept): fused because the nibble-plane tile's scale step is one too and the
// single rounding is within the bound.
// Measured on Zen 5 (one core, CPU time, shared host: ranges over runs), dsv4_bench fp4_gemm/<isa>/m=../512x4096
// cache-resident, the nibble-plane tile → this one: m=1 22.4 → 30.5-34.5 GB/s, m=2 14.7 → 19-24, m=8 3.2 →
// 4.6-5.9. DRAM streams (fp4_tile_stream/avx512bf16/*, 2 MiB pages): two or four row streams per thread
// still beat one on this CPU (m=1 k=4096: one_stream 19 GB/s, two_halves 23-28, four_streams 23-25), and
// the T0 prefetch distance (0, 1, 2 or 4 rows ahead) moved nothing outside the noise, so the callers' row
// orders and one-row distance stay as tuned on Intel.
// Tried and dropped (no gain outside the noise): tokens in pairs, plane-major inside a pair (four chains
// in flight instead of two; m=8 195-212 µs vs 177-228), and a vpshufb + vpunpck*bw decode instead of
// vpsrlw + vpermw (cheaper pipes, 9 uops instead of 7; m=1 31-38 µs, m=8 174-194 µs vs 31 / 177-228).
// Where the time goes (the tile alone over 512 rows × k 4096 in 2-row calls, min of 30 runs, CPU time, host
// quiet, ~3.45 GHz): per 2-row 128-element chunk the vector pipes that run VDPBF16PS and FMAs take 8m
// VDPBF16PS + 2m scale FMAs, and the decode's 8 vpermw + 2 vpermps share them (a register-only loop of
// the same chains runs VDPBF16PS + FMA at ~2 per cycle; the decode adds ~2-3 cycles at m = 1). Measured:
// m=1 23.5 µs (~9.9 cycles per 2-row chunk; that model: ~10), m=2 32 (~13.5; 15), m=4 53 (~22; 25),
// m=8 110-123 (~46-52; 45): every m is within ~15% of it. The earlier "~75 cycles at m=8" came from a
// contended host (the same binary took 143-149 µs then). Measured and dropped (min over interleaved runs):
//   GCC's accumulator spills at m=8 (69 zmm stack references in fp4_tile<2, 8>): the group's 4 chunks left
//   rolled for T ≥ 4 (18 references) 117-124 vs 120-122 µs (2048 × 1024: 111-113 vs 112-116); the scale
//   vectors read from memory by the FMAs: no gain in dsv4_bench either. Spills are not what limits m=8.
//   8 tokens' prepared activations overflow L1 at k = 4096 (64 KB): the same work at k = 1024 (16 KB)
//   takes 111-116 µs, so it costs 5-10% at most; blocking K would need the callers to carry partial sums.
//   m=8 as two 4-token passes: 141-144 vs 119-127 µs (decode twice; at k = 4096 the halves evict each
//   other); one row per pass, planes outermost: ~20% slower at m=8 (dsv4_bench).
//   Each chunk's scales from a dword broadcast + vprolvd + vpandd (no shuffle) where the tile has a
//   vpermps, with a per-call check that no code is 0 or 255: m=1 22.6-23.7 vs 23.4-25.9 µs, m=2 33.1-34.6
//   vs 31.9-32.2 — no net gain.
// What is left: at m=1-2 the decode's shuffles are a third to a half of the time (a decode without
// shuffles that keeps this order), at m=8 the scale FMAs (fixed by the documented order) and ~10% decode.
// Compiled for its ISA with a target pragma; called only after runtime detection of AVX512_BF16.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c,avx2")
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// The 16 E2M1 codes (sign in bit 3) as bf16 bits, twice: vpermw indexes with the low 5 bits of a word,
// whose bit 4 is the next nibble's low bit.
alignas(64) constexpr uint16_t kE2m1Bf16[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};
// Lane i → i / 4: the scale lane of block i / 4 within a chunk (add 4c for chunk c of a 16-block group).
alignas(64) constexpr int32_t kScaleLane[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};

// The E8M0 scales of up to 16 blocks (n of them; the rest read as code 0) as floats, exactly as
// kE8m0ToFloat: e << 23, except 0 → 2^-127 (an fp32 subnormal) and 255 → NaN.
inline __m512 scales16(const uint8_t* s, int64_t n) {
  const __m128i bytes = n >= 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(s))
                                : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << n) - 1u), s);
  const __m512i e = _mm512_cvtepu8_epi32(bytes);
  __m512i f = _mm512_slli_epi32(e, 23);
  f = _mm512_mask_mov_epi32(f, _mm512_testn_epi32_mask(e, e), _mm512_set1_epi32(0x00400000));
  f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(f);
}

// The 4 bf16 planes of `blocks` (1..4) 16-byte blocks at w (the rest zero codes; nothing past them is
// read): word j of plane q is element 4j + q.
inline void decode(const uint8_t* w, int64_t blocks, __m512i lut, __m512i p[4]) {
  const __m512i d = blocks >= 4 ? _mm512_loadu_si512(w) : _mm512_maskz_loadu_epi8((1ull << (16 * blocks)) - 1u, w);
  p[0] = _mm512_permutexvar_epi16(d, lut);
  p[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(d, 4), lut);
  p[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(d, 8), lut);
  p[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(d, 12), lut);
}

// One 128-element chunk (blocks b .. b+3, `blocks` of them present) of every row: decode, then per token
// the four dot products and the scale FMA. sidx: lanes 4i .. 4i+3 = the chunk's blocks' lanes in s16.
template <int R, int T>
inline void chunk(const Fp4Tile& t, int64_t b, int64_t blocks, __m512i lut, __m512i sidx, const __m512 s16[R],
                  __m512 acc[R][T]) {
  __m512i w[R][4];
  __m512 sv[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    sv[r] = _mm512_permutexvar_ps(sidx, s16[r]);
    _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + b * 16 + t.prefetch), _MM_HINT_T0);
    decode(t.w[r] + b * 16, blocks, lut, w[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    // Chunk b/4 of token j: 4 planes of 16 bf16 pairs (64 floats' worth).
    const float* xc = t.x + j * t.ldx + b * 16;
    __m512 p[R];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      // Loaded once for both rows (a load folded into each row's VDPBF16PS doubles the loads at R = 2).
      __m512i xq = _mm512_loadu_si512(xc + 16 * q);
      asm("" : "+v"(xq));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r)
        p[r] = _mm512_dpbf16_ps(q == 0 ? _mm512_setzero_ps() : p[r], (__m512bh)w[r][q], (__m512bh)xq);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(p[r], sv[r], acc[r][j]);
  }
}

#include "kernels/cpu/reduce16_avx512.inc"  // reduce16_into: the documented lane tree

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m512i lut = _mm512_load_si512(kE2m1Bf16);
  const __m512i lane4 = _mm512_load_si512(kScaleLane);
  __m512 acc[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  __m512 s16[R];
  // Whole 16-block groups (one scale load per row, the four chunks' scale lanes fixed), then the rest.
  int64_t b = 0;
  for (; b + 16 <= n_blocks; b += 16) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      s16[r] = scales16(t.s[r] + b, 16);
      if ((b & 63) == 0) _mm_prefetch(reinterpret_cast<const char*>(t.s[r] + b + t.prefetch / 16), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c)
      chunk<R, T>(t, b + 4 * c, 4, lut, _mm512_add_epi32(lane4, _mm512_set1_epi32(4 * c)), s16, acc);
  }
  if (b < n_blocks) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) s16[r] = scales16(t.s[r] + b, n_blocks - b);
    for (int c = 0; b + 4 * c < n_blocks; ++c) {
      const int64_t left = n_blocks - b - 4 * c;
      chunk<R, T>(t, b + 4 * c, left < 4 ? left : 4, lut, _mm512_add_epi32(lane4, _mm512_set1_epi32(4 * c)), s16, acc);
    }
  }
  reduce16_into(acc, t.sums);
}

}  // namespace

void fp4_tile_avx512bf16(Fp4Tile& t) {
  switch ((t.n_rows - 1) * 8 + (t.n_tokens - 1)) {
    case 0: return fp4_tile<1, 1>(t);
    case 1: return fp4_tile<1, 2>(t);
    case 2: return fp4_tile<1, 3>(t);
    case 3: return fp4_tile<1, 4>(t);
    case 4: return fp4_tile<1, 5>(t);
    case 5: return fp4_tile<1, 6>(t);
    case 6: return fp4_tile<1, 7>(t);
    case 7: return fp4_tile<1, 8>(t);
    case 8: return fp4_tile<2, 1>(t);
    case 9: return fp4_tile<2, 2>(t);
    case 10: return fp4_tile<2, 3>(t);
    case 11: return fp4_tile<2, 4>(t);
    case 12: return fp4_tile<2, 5>(t);
    case 13: return fp4_tile<2, 6>(t);
    case 14: return fp4_tile<2, 7>(t);
    default: return fp4_tile<2, 8>(t);
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
