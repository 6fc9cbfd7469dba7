// kernels: AVX-512 tiles for FP8 / FP4 weights (compiled with -mavx512f/bw/vl/dq -mf16c -mfma; called
// only after runtime detection). Weights are decoded in registers:
//   FP8: an E4M3 byte b becomes the IEEE half with bits ((b & 0x7F) << 7) | ((b & 0x80) << 8), which is
//        exactly w/256 (normals and subnormals alike), and vcvtph2ps widens it exactly to fp32; the 256
//        is folded into the per-128-block weight scale.
//   FP4: 16 packed bytes are zero-extended to 16 dwords; vpermps looks up the low nibbles directly (it
//        only reads an index's low 4 bits) and the high nibbles after one shift, in a 16-entry E2M1 table
//        pre-multiplied by the block's E8M0 scale (exact: a power of two).
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// 16 E4M3 codes → 16 floats holding w/256.
inline __m512 e4m3x16_div256(__m128i codes) {
  // Sign-extending b to 16 bits and shifting left by 7 puts the magnitude bits at 7..13 and copies of
  // the sign at 14..15; clearing bit 14 leaves exactly the half ((b & 0x7F) << 7) | ((b & 0x80) << 8).
  const __m256i wd = _mm256_cvtepi8_epi16(codes);
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(wd, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  return _mm512_cvtph_ps(h);
}

template <int R, int T>
void fp8_tile(Fp8Tile& t) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < t.k; kb += 128) {
    const int64_t kend = kb + 128 < t.k ? kb + 128 : t.k;
    __m512 part[R][T];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < T; ++j) part[r][j] = _mm512_setzero_ps();
    for (int64_t k = kb; k < kend; k += 16) {
      const int64_t len = kend - k;
      __m512 w[R];
      if ((k & 63) == 0)
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + k + t.prefetch), _MM_HINT_T0);
      if (len >= 16) {
        for (int r = 0; r < R; ++r) w[r] = e4m3x16_div256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.w[r] + k)));
        for (int j = 0; j < T; ++j) {
          const __m512 xv = _mm512_loadu_ps(t.x + j * t.ldx + k);
          for (int r = 0; r < R; ++r) part[r][j] = _mm512_fmadd_ps(w[r], xv, part[r][j]);
        }
      } else {
        const __mmask16 m = static_cast<__mmask16>((1u << len) - 1u);
        for (int r = 0; r < R; ++r) w[r] = e4m3x16_div256(_mm_maskz_loadu_epi8(m, t.w[r] + k));
        for (int j = 0; j < T; ++j) {
          const __m512 xv = _mm512_maskz_loadu_ps(m, t.x + j * t.ldx + k);
          for (int r = 0; r < R; ++r) part[r][j] = _mm512_fmadd_ps(w[r], xv, part[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(kE8m0ToFloat[t.s[r][kb / 128]] * 256.0f);
      for (int j = 0; j < T; ++j) acc[r][j] = _mm512_fmadd_ps(part[r][j], s, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = _mm512_reduce_add_ps(acc[r][j]);
}

// BF16 → fp32 is a 16-bit left shift of the widened word.
template <int R, int T>
void bf16_tile(Bf16Tile& t) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < t.k; k += 16) {
    const int64_t len = t.k - k;
    const __mmask16 m = len >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << len) - 1u);
    __m512 w[R];
    if ((k & 31) == 0)  // every 64 bytes
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + k) + t.prefetch, _MM_HINT_T0);
    for (int r = 0; r < R; ++r)
      w[r] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, t.w[r] + k)), 16));
    for (int j = 0; j < T; ++j) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, t.x + j * t.ldx + k);
      for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(w[r], xv, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = _mm512_reduce_add_ps(acc[r][j]);
}

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f,
                                    -3.0f, -4.0f, -6.0f);
  // Separate accumulators for even and odd elements: two independent FMA chains per (row, token).
  __m512 acc_e[R][T], acc_o[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc_e[r][j] = acc_o[r][j] = _mm512_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512 we[R], wo[R];
    for (int r = 0; r < R; ++r) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.w[r] + b * 16)));
      const __m512 ls = _mm512_mul_ps(lut, _mm512_set1_ps(kE8m0ToFloat[t.s[r][b]]));
      we[r] = _mm512_permutexvar_ps(bytes, ls);
      wo[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), ls);
    }
    for (int j = 0; j < T; ++j) {
      const float* xb = t.x + j * t.ldx + b * 32;
      const __m512 xe = _mm512_loadu_ps(xb), xo = _mm512_loadu_ps(xb + 16);
      for (int r = 0; r < R; ++r) {
        acc_e[r][j] = _mm512_fmadd_ps(we[r], xe, acc_e[r][j]);
        acc_o[r][j] = _mm512_fmadd_ps(wo[r], xo, acc_o[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = _mm512_reduce_add_ps(_mm512_add_ps(acc_e[r][j], acc_o[r][j]));
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

void bf16_tile_avx512(Bf16Tile& t) { DSV4_TILE_SWITCH(bf16_tile, t) }
void fp8_tile_avx512(Fp8Tile& t) { DSV4_TILE_SWITCH(fp8_tile, t) }
void fp4_tile_avx512(Fp4Tile& t) { DSV4_TILE_SWITCH(fp4_tile, t) }

#undef DSV4_TILE_SWITCH

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
