// kernels: the AVX-512 FP4 tile on nibble planes — the decode (batch < 16) hot path of the routed experts,
// for activations exact in bf16 (fake-quantized ones always are). On the cores this project runs on,
// VDPBF16PS takes two cycles of both vector ports (32 products per 2 cycles) while an fp32 FMA is one
// uop on either (16 products per half cycle), so fp32 FMAs do the products and the decode spends its uops
// on whole-register table lookups. Per 64 packed bytes of a row (128 weights, four 32-blocks), read as
// 16 dwords of 8 nibbles each:
//   vpsrld ×7, vpermps ×8   plane q = nibble q of every dword → its E2M1 value in fp32 (exact, unscaled;
//                           vpermps reads only an index's low 4 bits, so no masking is needed);
//                           lane i of plane q is element 8i + q, so lanes 4b .. 4b+3 are block b
//   vpermps ×1              the four blocks' E8M0 scales to lanes 4b .. 4b+3 (decoded 16 blocks at a time
//                           with vector shifts, not one table load per block)
// and per token: one multiply and seven FMAs (plane q × the activations' plane q, in plane order) into a
// fresh fp32 vector, then one FMA applies the block scales into the accumulator: 9 vector uops per token
// where the bf16 dot-product tile spent 4 VDPBF16PS (8 port-cycles) and an FMA. A (row, token) sum follows
// the same order at every tile width (batch invariance); each product is exact (an E2M1 value has 2
// significant bits, a bf16-exact activation 8) and each fp32 addition rounds once: the fp32 tiles' error
// bound in another summation order. Unlike VDPBF16PS, nothing flushes denormals.
// The loop runs whole 16-block groups (one scale load per row, the four chunks' scale lanes fixed, no
// per-chunk tail or group tests: those scalar uops share ports 0 and 5 with the vector work).
// Measured per 64 bytes of a row, weights and activations in L1, one core: 16 / 25 / 42 cycles at
// 1 / 2 / 4 tokens, against 21 / 30 / 51 for the bf16 dot-product tile it replaced; loading each
// activation plane once for both rows (not folded into each row's FMA) then took 2 and 4 tokens to
// ~20 / ~37 (512×4096 cached, CPU time at the 3.4 GHz the FMA probe implies; T = 1 unchanged at ~14.5).
// Tried and dropped: the even planes as loads at byte offsets 1..3 instead of shifts (the loads split
// cache lines: 22 cycles), and two or four partial chains per token (more uops, no latency was exposed).
// Compiled for its ISA with a target pragma; called only after runtime detection of AVX-512.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/reduce16_avx512.inc"  // reduce16_into: the lane tree of every tile

// The 16 E2M1 values (sign in bit 3).
alignas(64) constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
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

// The 8 nibble planes of `blocks` (1..4) 16-byte blocks at w (the rest zero; nothing past them is read):
// plane q holds element 8i + q in lane i, as its E2M1 value.
inline void decode(const uint8_t* w, int64_t blocks, __m512 lut, __m512 p[8]) {
  const __m512i d = blocks >= 4 ? _mm512_loadu_si512(w) : _mm512_maskz_loadu_epi8((1ull << (16 * blocks)) - 1u, w);
  p[0] = _mm512_permutexvar_ps(d, lut);
#pragma GCC unroll 8
  for (int q = 1; q < 8; ++q) p[q] = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4 * q), lut);
}

// One 128-element chunk (blocks b .. b+3, `blocks` of them present) of every row: decode, then per token
// the plane dot product and the scale FMA. sidx: lanes 4i .. 4i+3 = the chunk's blocks' lanes in s16.
template <int R, int T>
inline void chunk(const Fp4Tile& t, int64_t b, int64_t blocks, __m512 lut, __m512i sidx, const __m512 s16[R],
                  __m512 acc[R][T]) {
  __m512 w[R][8];
  __m512 sv[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    sv[r] = _mm512_permutexvar_ps(sidx, s16[r]);
    _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + b * 16 + t.prefetch), _MM_HINT_T0);
    decode(t.w[r] + b * 16, blocks, lut, w[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    const float* xc = t.x + j * t.ldx + b * 32;  // chunk b/4: 8 planes of 16 floats
    // Each activation plane is loaded once for all R rows (a load folded into every row's FMA made two
    // rows issue 16 loads per token, which with the decode saturated both load ports at 2 tokens).
    __m512 p[R];
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      __m512 xq = _mm512_loadu_ps(xc + 16 * q);
      asm("" : "+v"(xq));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) p[r] = q == 0 ? _mm512_mul_ps(w[r][0], xq) : _mm512_fmadd_ps(w[r][q], xq, p[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(p[r], sv[r], acc[r][j]);
  }
}

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m512 lut = _mm512_load_ps(kE2m1);
  const __m512i lane4 = _mm512_load_si512(kScaleLane);
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  __m512 s16[R];
  // Whole 16-block groups (one scale load per row, the four chunks' scale lanes fixed), then the rest.
  int64_t b = 0;
  for (; b + 16 <= n_blocks; b += 16) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      s16[r] = scales16(t.s[r] + b, 16);
      if ((b & 63) == 0) _mm_prefetch(reinterpret_cast<const char*>(t.s[r] + b + t.prefetch / 16), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c)
      chunk<R, T>(t, b + 4 * c, 4, lut, _mm512_add_epi32(lane4, _mm512_set1_epi32(4 * c)), s16, acc);
  }
  if (b < n_blocks) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) s16[r] = scales16(t.s[r] + b, n_blocks - b);
    for (int c = 0; b + 4 * c < n_blocks; ++c) {
      const int64_t left = n_blocks - b - 4 * c;
      chunk<R, T>(t, b + 4 * c, left < 4 ? left : 4, lut, _mm512_add_epi32(lane4, _mm512_set1_epi32(4 * c)), s16, acc);
    }
  }
  reduce16_into(acc, t.sums);
}

// More than 4 tokens run as two passes of up to 4 (each decoding the rows again): 2 rows × 8 tokens of
// accumulators plus 16 decoded planes would not fit in 32 registers, and a (row, token) result does not
// depend on which tokens share its tile.
template <int R, int T>
void fp4_tile_split(Fp4Tile& t) {
  Fp4Tile hi = t;
  hi.x = t.x + 4 * t.ldx;
  hi.n_tokens = T - 4;
  fp4_tile<R, 4>(t);
  fp4_tile<R, T - 4>(hi);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 4; j < T; ++j) t.sums[r][j] = hi.sums[r][j - 4];
}

}  // namespace

void fp4_tile_avx512_planes(Fp4Tile& t) {
  switch ((t.n_rows - 1) * 8 + (t.n_tokens - 1)) {
    case 0: return fp4_tile<1, 1>(t);
    case 1: return fp4_tile<1, 2>(t);
    case 2: return fp4_tile<1, 3>(t);
    case 3: return fp4_tile<1, 4>(t);
    case 4: return fp4_tile_split<1, 5>(t);
    case 5: return fp4_tile_split<1, 6>(t);
    case 6: return fp4_tile_split<1, 7>(t);
    case 7: return fp4_tile_split<1, 8>(t);
    case 8: return fp4_tile<2, 1>(t);
    case 9: return fp4_tile<2, 2>(t);
    case 10: return fp4_tile<2, 3>(t);
    case 11: return fp4_tile<2, 4>(t);
    case 12: return fp4_tile_split<2, 5>(t);
    case 13: return fp4_tile_split<2, 6>(t);
    case 14: return fp4_tile_split<2, 7>(t);
    default: return fp4_tile_split<2, 8>(t);
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
