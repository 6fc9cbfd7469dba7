// kernels: the AVX-512-BF16 FP8 tile — fp8_gemm's decode (batch < 16) path for activations exact in
// bf16 (attention and shared-expert projections read fake-quantized FP8 activations, which always are).
// The fp32 tile (quant_tiles_avx512.cc) spends one FMA per 16 products and is FMA-bound; here one
// vdpbf16ps does 32 products (two per fp32 lane), and a row's 32 codes decode to bf16 in 7 uops:
//   vpmovsxbw                 32 codes → words, sign copied into bits 7..15
//   vpsllw, vpand, vpaddw     normals: magnitude bits << 4 plus (127 − 7) << 7 rebias the exponent,
//                             i.e. the bf16 of |w| exactly (E4M3 has 3 mantissa bits, bf16 has 7)
//   vptestnmw, masked vpermw  subnormal codes (exponent field 0: |w| = m·2^-9) and zero from a table
//   vpternlogd                the sign bit from the code
// Each 128-K block is four vdpbf16ps per (row, token) into a fresh fp32 vector, then one FMA applies the
// block's E8M0 scale into the accumulator, so a (row, token) sum follows the same order at every tile
// width (batch invariance). Products are exact and each fp32 addition rounds once: the fp32 tile's error
// bound, another summation order inside a block. vdpbf16ps treats denormal inputs as zero and flushes
// denormal results; weights here are ≥ 2^-9 and fake-quantized activations stay far above 2^-126.
// The activations come as bf16 words in natural order, each row zero-padded to a multiple of 128
// (fp8_prepare_x_bf16). Compiled for its ISA with a target pragma; called only after runtime detection.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c,avx2")
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// bf16 bits of the E4M3 subnormal magnitudes m·2^-9 (m = 0..7) at index m; vpermw reads the low 5 bits
// of a code, which are m for every subnormal code (exponent bits 3..6 are zero).
alignas(64) constexpr uint16_t kSubnormals[32] = {0x0000, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// 32 E4M3 codes → their exact values in bf16.
inline __m512bh e4m3x32_to_bf16(__m256i codes, __m512i subnormals) {
  const __m512i sx = _mm512_cvtepi8_epi16(codes);
  __m512i mag = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(sx, 4), _mm512_set1_epi16(0x07F0)),
                                 _mm512_set1_epi16(0x3C00));
  const __mmask32 sub = _mm512_testn_epi16_mask(sx, _mm512_set1_epi16(0x0078));
  mag = _mm512_mask_permutexvar_epi16(mag, sub, sx, subnormals);
  // 0xD8: bit from sx where the constant's bit is set (the sign), else from mag.
  return as_bh(_mm512_ternarylogic_epi32(mag, sx, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xD8));
}

inline __mmask32 tail_mask(int64_t rem) {
  if (rem >= 32) return ~__mmask32{0};
  return rem <= 0 ? __mmask32{0} : static_cast<__mmask32>((1u << rem) - 1u);
}

template <int R, int T>
void fp8_tile(Fp8Tile& t) {
  const __m512i subnormals = _mm512_load_si512(kSubnormals);
  const auto* xw = reinterpret_cast<const uint16_t*>(t.x);  // bf16 words
  const int64_t ldw = 2 * t.ldx;                             // words per token row
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < t.k; kb += 128) {
    const int64_t len = t.k - kb;
    __m512bh w[R][4];
    __m512 sv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = t.w[r] + kb;
      _mm_prefetch(reinterpret_cast<const char*>(wr + t.prefetch), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wr + 64 + t.prefetch), _MM_HINT_T0);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        // Past the row's end the codes load as 0 (weight 0; the padded activations are 0 there too).
        const __m256i codes = len >= 128 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + 32 * q))
                                         : _mm256_maskz_loadu_epi8(tail_mask(len - 32 * q), wr + 32 * q);
        w[r][q] = e4m3x32_to_bf16(codes, subnormals);
      }
      sv[r] = _mm512_set1_ps(kE8m0ToFloat[t.s[r][kb / 128]]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const uint16_t* xc = xw + j * ldw + kb;
      const __m512bh x0 = as_bh(_mm512_loadu_si512(xc)), x1 = as_bh(_mm512_loadu_si512(xc + 32));
      const __m512bh x2 = as_bh(_mm512_loadu_si512(xc + 64)), x3 = as_bh(_mm512_loadu_si512(xc + 96));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m512 d = _mm512_dpbf16_ps(_mm512_setzero_ps(), w[r][0], x0);
        d = _mm512_dpbf16_ps(d, w[r][1], x1);
        d = _mm512_dpbf16_ps(d, w[r][2], x2);
        d = _mm512_dpbf16_ps(d, w[r][3], x3);
        acc[r][j] = _mm512_fmadd_ps(d, sv[r], acc[r][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) t.sums[r][j] = _mm512_reduce_add_ps(acc[r][j]);
}

}  // namespace

// 2 rows × 8 tokens: 16 accumulators, 8 decoded weight vectors, 4 activation vectors and a partial sum
// fit in 32 registers, so every width keeps both rows in one pass.
void fp8_tile_avx512bf16(Fp8Tile& t) {
  switch ((t.n_rows - 1) * 8 + (t.n_tokens - 1)) {
    case 0: return fp8_tile<1, 1>(t);
    case 1: return fp8_tile<1, 2>(t);
    case 2: return fp8_tile<1, 3>(t);
    case 3: return fp8_tile<1, 4>(t);
    case 4: return fp8_tile<1, 5>(t);
    case 5: return fp8_tile<1, 6>(t);
    case 6: return fp8_tile<1, 7>(t);
    case 7: return fp8_tile<1, 8>(t);
    case 8: return fp8_tile<2, 1>(t);
    case 9: return fp8_tile<2, 2>(t);
    case 10: return fp8_tile<2, 3>(t);
    case 11: return fp8_tile<2, 4>(t);
    case 12: return fp8_tile<2, 5>(t);
    case 13: return fp8_tile<2, 6>(t);
    case 14: return fp8_tile<2, 7>(t);
    default: return fp8_tile<2, 8>(t);
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
