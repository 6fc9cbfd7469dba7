// kernels: the AVX2 FP4 tile (CPUs without AVX-512). Activations come prepared (fp4_prepare_x_avx2,
// Fp4XLayout::kAvx2Fixed in quant_tiles.h): per 64-element group either exact fixed point or floats.
//
// Fixed point (every group of fake-quantized activations): the E2M1 codes go through one byte-table
// lookup to 2w (an int8 in −12..12) and are widened to int16 2w·2^8 in place (<< 8 for even bytes,
// & 0xFF00 for odd ones); VPMADDWD against the int16 activations sums 8 products per int32 lane exactly.
// Per 64 weights: 9 decode instructions, 4 VPMADDWD, 3 adds, one conversion, one multiply by the group's
// unit and one FMA by the weight scales: ~20 FP-pipe instructions against ~30 for the fp32 path, whose
// 8 FMAs plus 19-instruction decode held one Zen 3 core at ~7 GB/s (fp4_gemm/avx2/m=1: 7.0 -> 10.4).
// A group with residue bits (an r ≠ 0: an activation whose lowest significant bit lies more than 15
// bits under its block's max, so one under ~2^-11 of it for E4M3's 4 bits) adds a second VPMADDWD pass
// over r behind a branch: 16% of the medium model's groups (random weights) take it, and activations
// massed near zero (x^5 of a uniform draw: nearly every group) ran fp4_gemm/avx2/m=1 38% slower.
//
// Floats (a group not exact in fixed point: raw fp32 activations, tiny or non-finite ones): the codes
// are decoded by byte-table lookups to bf16 and widened to fp32 with no conversions:
//   lo = b & 0x0F, hi = (b >> 4) & 0x0F        the nibbles of elements 2p and 2p + 1 (p: byte in lane)
//   vpshufb ×2 per nibble vector               the low and high byte of the code's bf16 value
//   vpunpck{l,h}bw                             16-bit words: bf16 values of bytes 0..7 / 8..15 of a lane
//   << 16 (even words), & 0xFFFF0000 (odd)     fp32 values, 8 per vector, 8 vectors per 64 elements
// and part = one FMA chain over the 8 vectors in order.
//
// Either way a group yields t, its two blocks' dots per lane (lanes 0..3 block 2g, 4..7 block 2g + 1),
// and acc = fma(t, [2^(e_b − 127) ×4 | 2^(e_{b+1} − 127) ×4], acc): every (row, token) takes the same
// operations at every tile width (the group's path is the token's own), so results are batch- and
// thread-count invariant.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/fp4_float_groups.h"
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

// The 4 vectors of one nibble half (h = 0: elements 2p, h = 1: 2p + 1) of 32 packed bytes, in xf order
// (vectors 4h .. 4h + 3).
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

// The float path's t: one FMA chain over the 8 decoded vectors (the low-nibble half, then the high one)
// against xg, the group's 64 floats.
inline __m256 float_group_dot(__m256i b, const float* xg, const E2m1Decode& d) {
  __m256 v[4];
  e2m1x32(low_nibbles(b, d), d, v);
  __m256 part = _mm256_mul_ps(v[0], _mm256_loadu_ps(xg));
#pragma GCC unroll 4
  for (int i = 1; i < 4; ++i) part = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(xg + 8 * i), part);
  e2m1x32(high_nibbles(b, d), d, v);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) part = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(xg + 32 + 8 * i), part);
  return part;
}

// The fixed-point decode's constants: 2w for each E2M1 code (sign in bit 3) in both lanes, the nibble
// mask, the high byte of each word.
struct FixedDecode {
  __m256i two_w = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,  //
                                   0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i high_byte = _mm256_set1_epi16(static_cast<short>(0xFF00));
};

// A group's 64 weights as int16 2w·2^8 in the y / r vector order: low nibbles of the even bytes (elements
// 4i), of the odd bytes (4i + 2), then high nibbles (4i + 1, 4i + 3).
inline void fixed_weights(__m256i b, const FixedDecode& c, __m256i (&w)[4]) {
  const __m256i lo = _mm256_shuffle_epi8(c.two_w, _mm256_and_si256(b, c.nibble));
  const __m256i hi = _mm256_shuffle_epi8(c.two_w, _mm256_and_si256(_mm256_srli_epi16(b, 4), c.nibble));
  w[0] = _mm256_slli_epi16(lo, 8);
  w[1] = _mm256_and_si256(lo, c.high_byte);
  w[2] = _mm256_slli_epi16(hi, 8);
  w[3] = _mm256_and_si256(hi, c.high_byte);
}

// Σ a · w per int32 lane over a group's 64 int16 activations a: 8 products of |a| ≤ 2^15 and |2w·2^8| ≤
// 3072 per lane, so |sum| < 2^30: exact, in any order.
inline __m256i fixed_sum(const __m256i (&w)[4], const int16_t* a) {
  const __m256i* p = reinterpret_cast<const __m256i*>(a);
  const __m256i s0 = _mm256_madd_epi16(w[0], _mm256_loadu_si256(p));
  const __m256i s1 = _mm256_madd_epi16(w[1], _mm256_loadu_si256(p + 1));
  const __m256i s2 = _mm256_madd_epi16(w[2], _mm256_loadu_si256(p + 2));
  const __m256i s3 = _mm256_madd_epi16(w[3], _mm256_loadu_si256(p + 3));
  return _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
}

// The fixed path's t: the y sums converted once and scaled by the group's unit (a power of two: exact),
// plus the r sums at 2^-15 of it in kFixedResidue groups.
inline __m256 fixed_group_dot(const __m256i (&w)[4], const Fp4Avx2ConstRow& row, int64_t g, Fp4Avx2Mode mode) {
  const __m256 unit = _mm256_loadu_ps(row.unit + 8 * g);
  __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(fixed_sum(w, row.y + 64 * g)), unit);
  if (mode == Fp4Avx2Mode::kFixedResidue)
    t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fixed_sum(w, row.r + 64 * g)),
                        _mm256_mul_ps(unit, _mm256_set1_ps(0x1p-15f)), t);
  return t;
}

struct Decode {
  E2m1Decode f;
  FixedDecode i;
};

// t of one token's group g, its weights already decoded to fixed point (w) from the packed bytes b: the
// float path for a kFloat group (kMixed only: the tile has one; without, the float decode's constants
// take no registers), else the fixed one.
template <bool kMixed>
inline __m256 token_dot(__m256i b, const __m256i (&w)[4], const Fp4Avx2ConstRow& row, int64_t g, const Decode& d) {
  const Fp4Avx2Mode mode = row.mode[g];
  if (kMixed && mode == Fp4Avx2Mode::kFloat) return float_group_dot(b, row.xf + 64 * g, d.f);
  return fixed_group_dot(w, row, g, mode);
}

// One to three tokens: every row's groups in order, both rows side by side, two groups per step, the
// accumulators in registers, each group decoded once for every token. Each (row, token) takes
// fp4_row_tokens' operations in the same order: the same bits. More than one token only without a kFloat
// group: measured (dsv4 bench --threads 1 --gemm-tokens 2,3,4, ffn.experts.w1/w3 2048x4096, against
// fp4_tokens) m=2 0.64 -> 0.55 ms, m=3 0.81 -> 0.78; four tokens (one row per pass, as 2 rows × 4
// accumulators would spill) were 10% slower than fp4_tokens, whose spans keep every token's activations in
// L1 for both rows.
template <int R, int T, bool kMixed>
void fp4_few_tokens(Fp4Tile& t) {
  const Decode d;
  const int64_t n_blocks = t.k / 32, n_full = n_blocks / 2;
  Fp4Avx2ConstRow x[T];
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int j = 0; j < T; ++j) {
    x[j] = fp4_avx2_row(t.x + j * t.ldx, t.k);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r][j] = _mm256_setzero_ps();
  }
  auto step = [&](int r, int64_t g, bool odd_tail) __attribute__((always_inline)) {
    const __m256i b = group_bytes(t.w[r], g, odd_tail);
    const __m256 sc = group_scales(t.s[r], g, odd_tail);
    __m256i w[4];
    fixed_weights(b, d.i, w);
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_fmadd_ps(token_dot<kMixed>(b, w, x[j], g, d), sc, acc[r][j]);
  };
  int64_t g = 0;
  for (; g + 2 <= n_full; g += 2)  // 64 bytes of each row per step: one prefetch per row
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
      step(r, g, false);
      step(r, g + 1, false);
    }
  for (; g < n_full; ++g)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) step(r, g, false);
  if (n_blocks % 2 != 0)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) step(r, g, true);
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < T; ++j) t.sums[r][j] = hsum(acc[r][j]);
}

// One row × tokens [0, T) over groups [g0, g1) of K, folded into acc[j] (memory, touched once per group):
// the weights decoded once per group for all T tokens (to fixed point; a token whose group is kFloat
// decodes its own floats). Zen 3 issues two VPMADDWD per cycle (32 int16 products, twice the FMA pipes'
// fp32 ones), yet this loop runs at ~1.7 instructions per cycle for reasons not found without hardware
// counters: accumulators in registers (4-token passes), two groups per step and both rows per pass were
// each no faster than these 8 in memory. What did measure: the mode-byte load, compare and branch per token
// per group is ~9% of it (a residue list instead of the branch: reverted in 7a88016, whose message has the
// numbers; it lost on the MoE layer's dense-residue w2 inputs).
template <int T, bool kMixed>
void fp4_row_tokens(const Fp4Tile& t, int r, int64_t g0, int64_t g1, float (*acc)[8]) {
  const Decode d;
  const int64_t n_full = t.k / 64;
  Fp4Avx2ConstRow rows[T];
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) rows[j] = fp4_avx2_row(t.x + j * t.ldx, t.k);
  for (int64_t g = g0; g < g1; ++g) {
    if (g % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + g * 32) + t.prefetch, _MM_HINT_T0);
    const bool odd_tail = g == n_full;
    const __m256i b = group_bytes(t.w[r], g, odd_tail);
    const __m256 sc = group_scales(t.s[r], g, odd_tail);
    __m256i w[4];
    fixed_weights(b, d.i, w);
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j)
      _mm256_store_ps(acc[j], _mm256_fmadd_ps(token_dot<kMixed>(b, w, rows[j], g, d), sc, _mm256_load_ps(acc[j])));
  }
}

// 2..8 tokens (two or three without a kFloat group: fp4_few_tokens): each row alone, its weights decoded
// once per group for every token, and K in spans of kFp4SpanGroups groups, every row of a span before the
// next: the span's activations of all tokens (8 KiB of int16 at 8 tokens) then stay in L1 for both rows.
constexpr int64_t kFp4SpanGroups = 8;  // 512 columns

template <bool kMixed>
void fp4_tokens(Fp4Tile& t) {
  alignas(32) float acc[kTileRows][kTileTokens][8];
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) _mm256_store_ps(acc[r][j], _mm256_setzero_ps());
  const int64_t n_groups = (t.k / 32 + 1) / 2;
  for (int64_t g0 = 0; g0 < n_groups; g0 += kFp4SpanGroups) {
    const int64_t g1 = g0 + kFp4SpanGroups < n_groups ? g0 + kFp4SpanGroups : n_groups;
    for (int r = 0; r < t.n_rows; ++r) {
      switch (t.n_tokens) {
        case 2: fp4_row_tokens<2, kMixed>(t, r, g0, g1, acc[r]); break;
        case 3: fp4_row_tokens<3, kMixed>(t, r, g0, g1, acc[r]); break;
        case 4: fp4_row_tokens<4, kMixed>(t, r, g0, g1, acc[r]); break;
        case 5: fp4_row_tokens<5, kMixed>(t, r, g0, g1, acc[r]); break;
        case 6: fp4_row_tokens<6, kMixed>(t, r, g0, g1, acc[r]); break;
        case 7: fp4_row_tokens<7, kMixed>(t, r, g0, g1, acc[r]); break;
        default: fp4_row_tokens<8, kMixed>(t, r, g0, g1, acc[r]); break;
      }
    }
  }
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j]));
}

// One 32-block of activations (n ≤ 32 of them, zeros after) as fixed point: f[v] holds elements
// 8v .. 8v + 7 as x / q with q = 2^(e_max − 156) (quant_tiles.h). Returns the block's Fp4Avx2Mode and
// its unit 2^(e_max − 150) (f and unit unspecified for kFloat).
Fp4Avx2Mode fixed_block(const float* x, int64_t n, __m256i (&f)[4], float* unit) {
  __m256i bits[4];
  if (n == 32) {
    for (int v = 0; v < 4; ++v) bits[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * v));
  } else {
    alignas(32) float xb[32] = {};
    for (int64_t i = 0; i < n; ++i) xb[i] = x[i];
    for (int v = 0; v < 4; ++v) bits[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + 8 * v));
  }
  const __m256i exp_mask = _mm256_set1_epi32(0xFF), zero = _mm256_setzero_si256();
  __m256i e_max = zero, any = zero;
  for (int v = 0; v < 4; ++v) {
    e_max = _mm256_max_epi32(e_max, _mm256_and_si256(_mm256_srli_epi32(bits[v], 23), exp_mask));
    any = _mm256_or_si256(any, _mm256_slli_epi32(bits[v], 1));  // every bit but the sign
  }
  e_max = _mm256_max_epi32(e_max, _mm256_permute2x128_si256(e_max, e_max, 1));
  e_max = _mm256_max_epi32(e_max, _mm256_shuffle_epi32(e_max, _MM_SHUFFLE(1, 0, 3, 2)));
  e_max = _mm256_max_epi32(e_max, _mm256_shuffle_epi32(e_max, _MM_SHUFFLE(2, 3, 0, 1)));
  const int32_t e = _mm256_cvtsi256_si32(e_max);
  *unit = 1.0f;
  if (_mm256_testz_si256(any, any)) {  // all (signed) zeros
    for (int v = 0; v < 4; ++v) f[v] = zero;
    return Fp4Avx2Mode::kFixed;
  }
  if (e == 255 || e < 39) return Fp4Avx2Mode::kFloat;  // inf / NaN; a unit 2^-15 below 2^(e − 150) would not be normal
  *unit = _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128((e - 23) << 23)));  // 2^(e − 150), e ≥ 39
  // x = M · 2^(e_x − 150) (M with its implicit bit; denormals: e_x = 1), so f = M · 2^(e_x − e + 6): a left
  // shift of at most 6, or a right shift that must drop only zero bits.
  const __m256i one = _mm256_set1_epi32(1), implicit = _mm256_set1_epi32(0x800000);
  const __m256i mant_mask = _mm256_set1_epi32(0x7FFFFF), low15 = _mm256_set1_epi32(0x7FFF);
  const __m256i base = _mm256_set1_epi32(e - 6);
  __m256i lost = zero, residue = zero;
  for (int v = 0; v < 4; ++v) {
    const __m256i ex = _mm256_and_si256(_mm256_srli_epi32(bits[v], 23), exp_mask);
    const __m256i normal = _mm256_cmpgt_epi32(ex, zero);
    const __m256i m = _mm256_or_si256(_mm256_and_si256(bits[v], mant_mask), _mm256_and_si256(normal, implicit));
    const __m256i shift = _mm256_sub_epi32(_mm256_max_epi32(ex, one), base);  // e_x − e + 6 ≤ 6
    const __m256i left = _mm256_max_epi32(shift, zero), right = _mm256_max_epi32(_mm256_sub_epi32(zero, shift), zero);
    lost = _mm256_or_si256(lost, _mm256_and_si256(m, _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one)));
    const __m256i mag = _mm256_srlv_epi32(_mm256_sllv_epi32(m, left), right);
    f[v] = _mm256_sign_epi32(mag, _mm256_or_si256(bits[v], one));  // negative where the sign is set
    residue = _mm256_or_si256(residue, _mm256_and_si256(f[v], low15));
  }
  if (!_mm256_testz_si256(lost, lost)) return Fp4Avx2Mode::kFloat;
  return _mm256_testz_si256(residue, residue) ? Fp4Avx2Mode::kFixed : Fp4Avx2Mode::kFixedResidue;
}

// Two blocks' halves (h: f >> 15 or f & 0x7FFF of blocks 2g, 2g + 1, natural order, 8 per vector) → the
// group's 4 int16 vectors: vector v, lane L, word i ← element 4i + off[v] of block L, off = {0, 2, 1, 3}.
// Element 4i + o sits in vector i/2, lane i%2, dword o: a 4×4 transpose per lane gives, per o, lane 0 =
// i 0, 2, 4, 6 and lane 1 = i 1, 3, 5, 7; packing the blocks side by side and one qword permute + one
// byte shuffle put i in order.
void store_fixed_half(const __m256i (&a)[4], const __m256i (&b)[4], int16_t* out) {
  __m256i ta[4], tb[4];
  auto transpose = [](const __m256i (&x)[4], __m256i (&t)[4]) {
    const __m256i u0 = _mm256_unpacklo_epi32(x[0], x[1]), u1 = _mm256_unpackhi_epi32(x[0], x[1]);
    const __m256i u2 = _mm256_unpacklo_epi32(x[2], x[3]), u3 = _mm256_unpackhi_epi32(x[2], x[3]);
    t[0] = _mm256_unpacklo_epi64(u0, u2);
    t[1] = _mm256_unpackhi_epi64(u0, u2);
    t[2] = _mm256_unpacklo_epi64(u1, u3);
    t[3] = _mm256_unpackhi_epi64(u1, u3);
  };
  transpose(a, ta);
  transpose(b, tb);
  const __m256i order = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,  //
                                         0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  static constexpr int kOff[4] = {0, 2, 1, 3};
  for (int v = 0; v < 4; ++v) {
    // Words: lane 0 = a i0 i2 i4 i6, b i0 i2 i4 i6; lane 1 = a i1 i3 i5 i7, b i1 i3 i5 i7.
    const __m256i packed = _mm256_packs_epi32(ta[kOff[v]], tb[kOff[v]]);
    const __m256i lanes = _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0));  // a evens, a odds | b ...
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * v), _mm256_shuffle_epi8(lanes, order));
  }
}

}  // namespace

void fp4_tile_avx2(Fp4Tile& t) {
  // Whether any token has a kFloat group: without one the loops hold no float-decode constants.
  bool mixed = false;
  for (int j = 0; j < t.n_tokens && !mixed; ++j)
    mixed = std::memchr(fp4_avx2_row(t.x + j * t.ldx, t.k).mode, static_cast<int>(Fp4Avx2Mode::kFloat),
                        static_cast<size_t>(fp4_avx2_groups(t.k)));
  const bool two_rows = t.n_rows == 2;
  if (t.n_tokens == 1) {
    if (mixed) return two_rows ? fp4_few_tokens<2, 1, true>(t) : fp4_few_tokens<1, 1, true>(t);
    return two_rows ? fp4_few_tokens<2, 1, false>(t) : fp4_few_tokens<1, 1, false>(t);
  }
  if (!mixed && t.n_tokens == 2) return two_rows ? fp4_few_tokens<2, 2, false>(t) : fp4_few_tokens<1, 2, false>(t);
  if (!mixed && t.n_tokens == 3) return two_rows ? fp4_few_tokens<2, 3, false>(t) : fp4_few_tokens<1, 3, false>(t);
  return mixed ? fp4_tokens<true>(t) : fp4_tokens<false>(t);
}

void fp4_prepare_x_avx2(const float* x, int64_t n_tokens, int64_t k, float* out) {
  static constexpr int kFloatOff[8] = {0, 2, 16, 18, 1, 3, 17, 19};
  const int64_t n_groups = fp4_avx2_groups(k), stride = fp4_avx2_stride(k);
  const __m256i low15 = _mm256_set1_epi32(0x7FFF);
  uint64_t float_groups = 0;
  for (int64_t tk = 0; tk < n_tokens; ++tk) {
    const float* xr = x + tk * k;
    const Fp4Avx2Row row = fp4_avx2_row(out + tk * stride, k);
    for (int64_t g = 0; g < n_groups; ++g) {
      __m256i f[2][4];
      float unit[2];
      Fp4Avx2Mode mode = Fp4Avx2Mode::kFixed;
      for (int lane = 0; lane < 2; ++lane) {
        const int64_t e0 = 64 * g + 32 * lane, n = e0 < k ? (k - e0 < 32 ? k - e0 : 32) : 0;
        const Fp4Avx2Mode m = fixed_block(xr + e0, n, f[lane], unit + lane);
        mode = m > mode ? m : mode;
      }
      row.mode[g] = mode;
      _mm256_storeu_ps(row.unit + 8 * g, _mm256_setr_m128(_mm_set1_ps(unit[0]), _mm_set1_ps(unit[1])));
      if (mode == Fp4Avx2Mode::kFloat) {
        ++float_groups;
        float* o = row.xf + 64 * g;
        for (int v = 0; v < 8; ++v)
          for (int lane = 0; lane < 2; ++lane)
            for (int d = 0; d < 4; ++d) {
              const int64_t e = 64 * g + 32 * lane + kFloatOff[v] + 4 * d;
              o[8 * v + 4 * lane + d] = e < k ? xr[e] : 0.0f;
            }
        continue;
      }
      __m256i y[2][4];
      for (int lane = 0; lane < 2; ++lane)
        for (int v = 0; v < 4; ++v) y[lane][v] = _mm256_srai_epi32(f[lane][v], 15);
      store_fixed_half(y[0], y[1], row.y + 64 * g);
      if (mode == Fp4Avx2Mode::kFixedResidue) {
        for (int lane = 0; lane < 2; ++lane)
          for (int v = 0; v < 4; ++v) y[lane][v] = _mm256_and_si256(f[lane][v], low15);
        store_fixed_half(y[0], y[1], row.r + 64 * g);
      }
    }
  }
  if (float_groups != 0) note_fp4_float_groups(float_groups);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
