// kernels: the AVX-512-BF16 FP4 tile — the decode (batch < 16) hot path of the routed experts. The
// plain AVX-512 tile spends 28 vector uops per 64 packed bytes of a row (widen to dwords, vpermps per
// nibble, a scaled table per block, fp32 FMAs): ~9 GB/s of weights per core here, about DRAM speed, so the
// experts were compute-bound. This tile spends ~15 per 64 bytes (128 weights, four 32-blocks):
//   one 64-byte load as 32 words; word j holds elements 4j .. 4j+3 (nibbles, low first)
//   vpsrlw ×3, vpermw ×4    nibble p of every word → its E2M1 value in bf16 (exact, unscaled)
//   vdpbf16ps ×4            plane p · the activations' plane p, pairwise products summed in fp32;
//                           fp32 lane i covers words 2i, 2i+1: lanes 4b .. 4b+3 are block b
//   masked broadcasts ×3, vfmadd ×1   × each block's E8M0 scale, into the fp32 accumulator
// The activations come prepared as bf16 planes (Fp4XLayout::kBf16Planes, fp4_prepare_x) and must be
// exact in bf16 (the caller checks; fake-quantized FP8 activations always are), so every product is exact
// and each fp32 addition rounds once: the fp32 tiles' error bound, another summation order. vdpbf16ps
// treats denormal inputs as zero and flushes denormal results; products here stay far above 2^-126
// unless a weight scale or activation comes within a few binades of fp32's denormal range, which
// quantized checkpoints and fake-quantized activations (amax floor 1e-4) do not.
// Compiled for its ISA with a target pragma; called only after runtime detection of AVX512_BF16.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c,avx2")
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers (the other
// AVX-512 files silence it with per-file flags in src/kernels/CMakeLists.txt).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// bf16 bits of the 16 E2M1 values (sign in bit 3), twice: vpermw reads 5 index bits, and bit 4 of a
// shifted word is the next nibble's bit 0.
alignas(64) constexpr uint16_t kLut[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80,
    0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0, 0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
    0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// The four bf16 planes of 64 packed bytes.
inline void decode_planes(__m512i words, __m512i lut, __m512bh p[4]) {
  p[0] = as_bh(_mm512_permutexvar_epi16(words, lut));
  p[1] = as_bh(_mm512_permutexvar_epi16(_mm512_srli_epi16(words, 4), lut));
  p[2] = as_bh(_mm512_permutexvar_epi16(_mm512_srli_epi16(words, 8), lut));
  p[3] = as_bh(_mm512_permutexvar_epi16(_mm512_srli_epi16(words, 12), lut));
}

// Lanes 4b .. 4b+3 = scale of block b (b < n, the rest 0: their weights are zero-padded too).
inline __m512 block_scales(const uint8_t* s, int n) {
  __m512 v = _mm512_set1_ps(kE8m0ToFloat[s[0]]);
  if (n > 1) v = _mm512_mask_broadcastss_ps(v, 0x00F0, _mm_set_ss(kE8m0ToFloat[s[1]]));
  if (n > 2) v = _mm512_mask_broadcastss_ps(v, 0x0F00, _mm_set_ss(kE8m0ToFloat[s[2]]));
  if (n > 3) v = _mm512_mask_broadcastss_ps(v, 0xF000, _mm_set_ss(kE8m0ToFloat[s[3]]));
  if (n < 4) v = _mm512_maskz_mov_ps(static_cast<__mmask16>((1u << (4 * n)) - 1u), v);
  return v;
}

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m512i lut = _mm512_load_si512(kLut);
  const auto* xw = reinterpret_cast<const uint16_t*>(t.x);  // bf16 planes
  const int64_t ldw = 2 * t.ldx;                             // words per token row
  __m512 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  for (int64_t b = 0; b < n_blocks; b += 4) {
    const int nb = n_blocks - b >= 4 ? 4 : static_cast<int>(n_blocks - b);
    __m512bh w[R][4];
    __m512 sv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i words = nb == 4 ? _mm512_loadu_si512(t.w[r] + b * 16)
                                    : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << (8 * nb)) - 1u), t.w[r] + b * 16);
      _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + b * 16 + t.prefetch), _MM_HINT_T0);
      if ((b & 63) == 0) _mm_prefetch(reinterpret_cast<const char*>(t.s[r] + b + t.prefetch / 16), _MM_HINT_T0);
      decode_planes(words, lut, w[r]);
      sv[r] = nb == 4 ? block_scales(t.s[r] + b, 4) : block_scales(t.s[r] + b, nb);
    }
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const uint16_t* xc = xw + j * ldw + b * 32;  // chunk b/4: 4 planes of 32 words
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

// 2 rows × 8 tokens: 16 accumulators, 8 decoded planes, 2 scale vectors, 4 activation planes and the
// table fit in 32 registers, so every width keeps both rows in one pass.
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
