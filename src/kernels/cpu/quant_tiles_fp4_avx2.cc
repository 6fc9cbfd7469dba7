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

#include "kernels/cpu/hsum_avx2.inc"

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

// The 4 vectors of one nibble half (h = 0: elements 2p, h = 1: 2p + 1) of 32 packed bytes, in kAvx2Groups
// order (vectors 4h .. 4h + 3).
inline void e2m1x32(__m256i nib, const E2m1Decode& d, __m256 (&v)[4]) {
  const __m256i b0 = _mm256_shuffle_epi8(d.lo_byte, nib), b1 = _mm256_shuffle_epi8(d.hi_byte, nib);
  const __m256i w0 = _mm256_unpacklo_epi8(b0, b1), w1 = _mm256_unpackhi_epi8(b0, b1);
  v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
  v[1] = _mm256_castsi256_ps(_mm256_and_si256(w0, d.high_word));
  v[2] = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
  v[3] = _mm256_castsi256_ps(_mm256_and_si256(w1, d.high_word));
}

inline __m256i low_nibbles(__m256i b, const E2m1Decode& d) { return _mm256_and_si256(b, d.nibble); }
inline __m256i high_nibbles(__m256i b, const E2m1Decode& d) {
  return _mm256_and_si256(_mm256_srli_epi16(b, 4), d.nibble);
}

// Row r's bytes of group g: 32, or for a last, odd block 16 (the other lane reads as zero codes).
inline __m256i group_bytes(const uint8_t* w, int64_t g, bool odd_tail) {
  const uint8_t* p = w + g * 32;
  if (!odd_tail) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// [2^(e_b − 127) ×4 | 2^(e_{b+1} − 127) ×4] for blocks 2g, 2g + 1 of a row's scales s (a missing second
// block: 1, so that its zero part adds exactly zero).
inline __m256 group_scales(const uint8_t* s, int64_t g, bool odd_tail) {
  const __m128 s0 = _mm_broadcast_ss(&kE8m0ToFloat[s[2 * g]]);
  const __m128 s1 = odd_tail ? _mm_set1_ps(1.0f) : _mm_broadcast_ss(&kE8m0ToFloat[s[2 * g + 1]]);
  return _mm256_insertf128_ps(_mm256_castps128_ps256(s0), s1, 1);
}

// One group of one row × T tokens (T ≤ 4): part[j] = one FMA chain over the 8 vectors (the low-nibble half
// decoded and multiplied, then the high one), each decoded vector feeding the T chains as it is made (T parts
// + 4 vectors + the decode's constants of the 16 registers). Returns the group's scales: the caller folds
// acc = fma(part, scales, acc), so every (row, token) takes the same operations at every tile width.
template <int T>
inline __m256 fp4_group_parts(const uint8_t* w, const uint8_t* s, const float* x, int64_t ldx, int64_t g,
                              bool odd_tail, const E2m1Decode& d, __m256 (&part)[T]) {
  const __m256i b = group_bytes(w, g, odd_tail);
  const float* xg = x + g * 64;
  __m256 v[4];
  e2m1x32(low_nibbles(b, d), d, v);
#pragma GCC unroll 4
  for (int j = 0; j < T; ++j) part[j] = _mm256_mul_ps(v[0], _mm256_loadu_ps(xg + j * ldx));
#pragma GCC unroll 4
  for (int i = 1; i < 4; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) part[j] = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(xg + j * ldx + 8 * i), part[j]);
  e2m1x32(high_nibbles(b, d), d, v);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) part[j] = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(xg + j * ldx + 32 + 8 * i), part[j]);
  return group_scales(s, g, odd_tail);
}

// One token, one group of one row, folded into acc (a register).
inline __m256 fp4_group_dot(const uint8_t* w, const uint8_t* s, const float* x, int64_t g, bool odd_tail,
                            const E2m1Decode& d, __m256 acc) {
  __m256 part[1];
  const __m256 sc = fp4_group_parts<1>(w, s, x, 0, g, odd_tail, d, part);
  return _mm256_fmadd_ps(part[0], sc, acc);
}

// One token: every row's groups in order, decoded and multiplied in registers.
template <int R>
void fp4_one_token(Fp4Tile& t) {
  const E2m1Decode d;
  const int64_t n_blocks = t.k / 32, n_full = n_blocks / 2;
  const uint8_t* w[R];
  const uint8_t* s[R];
  __m256 acc[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    w[r] = t.w[r];
    s[r] = t.s[r];
    acc[r] = _mm256_setzero_ps();
  }
  int64_t g = 0;
  for (; g + 2 <= n_full; g += 2) {  // 64 bytes of each row per step: one prefetch per row
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
      acc[r] = fp4_group_dot(w[r], s[r], t.x, g, false, d, acc[r]);
      acc[r] = fp4_group_dot(w[r], s[r], t.x, g + 1, false, d, acc[r]);
    }
  }
  for (; g < n_full; ++g)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r] = fp4_group_dot(w[r], s[r], t.x, g, false, d, acc[r]);
  if (n_blocks % 2 != 0)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r] = fp4_group_dot(w[r], s[r], t.x, g, true, d, acc[r]);
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) t.sums[r][0] = hsum(acc[r]);
}

// One row × T tokens over one group, folded into acc[j] (memory, touched once per group).
template <int T>
inline void fp4_group_tokens(const uint8_t* w, const uint8_t* s, const float* x, int64_t ldx, int64_t g,
                             bool odd_tail, const E2m1Decode& d, float (*acc)[8]) {
  __m256 part[T];
  const __m256 sc = fp4_group_parts<T>(w, s, x, ldx, g, odd_tail, d, part);
#pragma GCC unroll 4
  for (int j = 0; j < T; ++j) _mm256_store_ps(acc[j], _mm256_fmadd_ps(part[j], sc, _mm256_load_ps(acc[j])));
}

// One row × tokens [j0, j0 + T) over groups [g0, g1) of K.
template <int T>
void fp4_row_tokens(const Fp4Tile& t, int r, int j0, int64_t g0, int64_t g1, float (*acc)[8]) {
  const E2m1Decode d;
  const int64_t n_blocks = t.k / 32, n_full = n_blocks / 2;
  const float* x = t.x + j0 * t.ldx;
  for (int64_t g = g0; g < g1; ++g) {
    if (g % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
    fp4_group_tokens<T>(t.w[r], t.s[r], x, t.ldx, g, g == n_full, d, acc + j0);
  }
}

// 2..8 tokens: each row alone, tokens in passes of up to 4 (5..8 tokens decode each row twice: the FMAs,
// 8 per token per 64 weights, outweigh the 19-instruction decode), and K in spans of kFp4SpanGroups
// groups, every row and pass of a span before the next: the span's activations of all tokens (16 KiB at
// 8 tokens) then stay in L1 for both rows, where one row's pass over all of K read each activation vector
// from L2, one load per FMA (2 tokens ran at 1.9x the time of 1).
constexpr int64_t kFp4SpanGroups = 8;  // 512 columns

void fp4_tokens(Fp4Tile& t) {
  alignas(32) float acc[kTileRows][kTileTokens][8] = {};
  const int64_t n_groups = (t.k / 32 + 1) / 2;
  for (int64_t g0 = 0; g0 < n_groups; g0 += kFp4SpanGroups) {
    const int64_t g1 = g0 + kFp4SpanGroups < n_groups ? g0 + kFp4SpanGroups : n_groups;
    for (int r = 0; r < t.n_rows; ++r)
      for (int j0 = 0; j0 < t.n_tokens; j0 += 4) {
        switch (t.n_tokens - j0) {
          case 1: fp4_row_tokens<1>(t, r, j0, g0, g1, acc[r]); break;
          case 2: fp4_row_tokens<2>(t, r, j0, g0, g1, acc[r]); break;
          case 3: fp4_row_tokens<3>(t, r, j0, g0, g1, acc[r]); break;
          default: fp4_row_tokens<4>(t, r, j0, g0, g1, acc[r]); break;
        }
      }
  }
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j]));
}

}  // namespace

void fp4_tile_avx2(Fp4Tile& t) {
  if (t.n_tokens == 1) return t.n_rows == 2 ? fp4_one_token<2>(t) : fp4_one_token<1>(t);
  return fp4_tokens(t);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
