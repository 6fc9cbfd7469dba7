// kernels: the AVX2 FP4 tile (CPUs without AVX-512): E2M1 codes decoded by byte-table lookups, no
// conversions. Per row, 32 packed bytes hold two 32-blocks (one per 128-bit lane):
//   lo = b & 0x0F, hi = (b >> 4) & 0x0F        the nibbles of elements 2p and 2p + 1 (p: byte in lane)
//   vpshufb ×2 per nibble vector               the low and high byte of the code's bf16 value (E2M1 is
//                                              exact in bf16: 2 significant bits)
//   vpunpck{l,h}bw                             16-bit words: bf16 values of bytes 0..7 / 8..15 of a lane
//   << 16 (even words), & 0xFFFF0000 (odd)     fp32 values, 8 per vector, 8 vectors per 64 elements
// 19 instructions per 64 weights, none on the convert pipes (Zen 3's vcvtph2ps, the other tiles' decode,
// would take 8 cycles of them). The vectors hold the elements in the order of Fp4XLayout::kAvx2Groups,
// which fp4_prepare_x gives the activations. Each 32-block's E8M0 scale multiplies that block's part of
// the sum once: acc = fma(part, [2^(e_b − 127) ×4 | 2^(e_{b+1} − 127) ×4], acc) per 64 elements, part
// being one FMA chain over the 8 vectors in order (v = 0..7). That is every (row, token)'s sequence of
// operations, at any tile width, so results are batch- and thread-count invariant.
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The decode's constants: bytes 0 and 1 of the bf16 value of each E2M1 code (sign in bit 3), in both
// lanes; the nibble mask; the high-word mask.
struct E2m1Decode {
  __m256i lo_byte = _mm256_setr_epi8(0, 0, static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0x40,
                                     static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0, static_cast<char>(0x80),
                                     static_cast<char>(0xC0), 0, 0x40, static_cast<char>(0x80), static_cast<char>(0xC0),
                                     0, 0, static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0x40,
                                     static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0, static_cast<char>(0x80),
                                     static_cast<char>(0xC0), 0, 0x40, static_cast<char>(0x80), static_cast<char>(0xC0));
  //                                 0     0.5   1     1.5   2     3     4     6     (then the negatives)
  __m256i hi_byte = _mm256_setr_epi8(0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, static_cast<char>(0x80),
                                     static_cast<char>(0xBF), static_cast<char>(0xBF), static_cast<char>(0xBF),
                                     static_cast<char>(0xC0), static_cast<char>(0xC0), static_cast<char>(0xC0),
                                     static_cast<char>(0xC0), 0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                     static_cast<char>(0x80), static_cast<char>(0xBF), static_cast<char>(0xBF),
                                     static_cast<char>(0xBF), static_cast<char>(0xC0), static_cast<char>(0xC0),
                                     static_cast<char>(0xC0), static_cast<char>(0xC0));
  __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i high_word = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
};

// 32 packed bytes → the 8 fp32 vectors of their 64 E2M1 values (unscaled), in kAvx2Groups order.
inline void e2m1x64(__m256i b, const E2m1Decode& d, __m256 (&v)[8]) {
  const __m256i nib[2] = {_mm256_and_si256(b, d.nibble), _mm256_and_si256(_mm256_srli_epi16(b, 4), d.nibble)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i b0 = _mm256_shuffle_epi8(d.lo_byte, nib[h]), b1 = _mm256_shuffle_epi8(d.hi_byte, nib[h]);
    const __m256i w0 = _mm256_unpacklo_epi8(b0, b1), w1 = _mm256_unpackhi_epi8(b0, b1);
    v[4 * h + 0] = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
    v[4 * h + 1] = _mm256_castsi256_ps(_mm256_and_si256(w0, d.high_word));
    v[4 * h + 2] = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
    v[4 * h + 3] = _mm256_castsi256_ps(_mm256_and_si256(w1, d.high_word));
  }
}

// Row r's bytes of group g (32, or 16 for a last, odd block: the other lane reads as zero codes).
inline __m256i group_bytes(const Fp4Tile& t, int r, int64_t g, int64_t n_blocks) {
  const uint8_t* p = t.w[r] + g * 32;
  if (2 * g + 2 <= n_blocks) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// [2^(e_b − 127) ×4 | 2^(e_{b+1} − 127) ×4] for row r's blocks 2g, 2g + 1 (a missing second block: 1, so
// that its zero part adds exactly zero).
inline __m256 group_scales(const Fp4Tile& t, int r, int64_t g, int64_t n_blocks) {
  const float s0 = kE8m0ToFloat[t.s[r][2 * g]];
  const float s1 = 2 * g + 1 < n_blocks ? kE8m0ToFloat[t.s[r][2 * g + 1]] : 1.0f;
  return _mm256_setr_m128(_mm_set1_ps(s0), _mm_set1_ps(s1));
}

// One token: both rows decoded and multiplied in registers, two groups per step (their parts are separate
// chains, so four chains are in flight for two rows).
template <int R>
void fp4_one_token(Fp4Tile& t) {
  const E2m1Decode d;
  const int64_t n_blocks = t.k / 32, n_groups = (n_blocks + 1) / 2;
  __m256 acc[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_groups; ++g) {
    const float* xg = t.x + g * 64;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      if (g % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
      __m256 v[8];
      e2m1x64(group_bytes(t, r, g, n_blocks), d, v);
      __m256 part = _mm256_mul_ps(v[0], _mm256_loadu_ps(xg));
#pragma GCC unroll 8
      for (int i = 1; i < 8; ++i) part = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(xg + 8 * i), part);
      acc[r] = _mm256_fmadd_ps(part, group_scales(t, r, g, n_blocks), acc[r]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) t.sums[r][0] = hsum(acc[r]);
}

// 2..8 tokens: each group of each row decoded once into an L1 buffer, then multiplied with up to 4 tokens
// per pass (R·T chains of the 16 registers, the accumulators in memory, touched once per group).
template <int R, int T>
inline void fp4_group_pass(const float (*w)[8][8], const float* x, int64_t ldx, const __m256 (&scale)[R],
                           float (*acc)[kTileTokens][8], int j0) {
  __m256 part[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    const __m256 wv = _mm256_load_ps(w[r][0]);
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) part[r][j] = _mm256_mul_ps(wv, _mm256_loadu_ps(x + (j0 + j) * ldx));
  }
#pragma GCC unroll 8
  for (int i = 1; i < 8; ++i) {
    __m256 wv[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) wv[r] = _mm256_load_ps(w[r][i]);
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) {
      __m256 xv = _mm256_loadu_ps(x + (j0 + j) * ldx + 8 * i);
      asm("" : "+x"(xv));  // one load per token for both rows
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r][j] = _mm256_fmadd_ps(wv[r], xv, part[r][j]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j)
      _mm256_store_ps(acc[r][j0 + j], _mm256_fmadd_ps(part[r][j], scale[r], _mm256_load_ps(acc[r][j0 + j])));
}

template <int R>
void fp4_tokens(Fp4Tile& t) {
  const E2m1Decode d;
  const int64_t n_blocks = t.k / 32, n_groups = (n_blocks + 1) / 2;
  alignas(32) float acc[R][kTileTokens][8] = {};
  alignas(32) float w[R][8][8];
  for (int64_t g = 0; g < n_groups; ++g) {
    __m256 scale[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      if (g % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
      __m256 v[8];
      e2m1x64(group_bytes(t, r, g, n_blocks), d, v);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) _mm256_store_ps(w[r][i], v[i]);
      scale[r] = group_scales(t, r, g, n_blocks);
    }
    const float* xg = t.x + g * 64;
    for (int j0 = 0; j0 < t.n_tokens; j0 += 4) {
      switch (t.n_tokens - j0) {
        case 1: fp4_group_pass<R, 1>(w, xg, t.ldx, scale, acc, j0); break;
        case 2: fp4_group_pass<R, 2>(w, xg, t.ldx, scale, acc, j0); break;
        case 3: fp4_group_pass<R, 3>(w, xg, t.ldx, scale, acc, j0); break;
        default: fp4_group_pass<R, 4>(w, xg, t.ldx, scale, acc, j0); break;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j]));
}

}  // namespace

void fp4_tile_avx2(Fp4Tile& t) {
  if (t.n_tokens == 1) return t.n_rows == 2 ? fp4_one_token<2>(t) : fp4_one_token<1>(t);
  return t.n_rows == 2 ? fp4_tokens<2>(t) : fp4_tokens<1>(t);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
