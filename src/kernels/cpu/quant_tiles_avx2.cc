// kernels: AVX2 + FMA + F16C tiles for FP8 / BF16 weights (CPUs without AVX-512, e.g. AMD Zen 2/3, Intel
// before Ice Lake). Weights are decoded in registers:
//   FP8: on prepared activations (fp8_operand on AMD cores), each code rebiased into the fp32 w·2^-120 by
//        integer shifts and masks; on raw ones (fp8_tile_for, and fp8_operand on Intel: fp8_avx2_rebias),
//        E4M3 → half w/256 by a shift and mask, then vcvtph2ps (RebiasDecode / HalfDecode below).
//   BF16: a zero-extended word shifted left by 16.
// 16 ymm registers bound the register blocking (the FP8 order: see fp8_step8 below).
// Each (row, token) sum follows one sequence of fp32 operations whatever the tile's rows and tokens, so
// results are batch- and thread-count invariant.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/hsum_avx2.inc"

// ---- FP8 ----

// Two decodes of 8 E4M3 codes into one exact fp32 vector, each with the block fold that undoes its scaling.
//
// HalfDecode (raw activations, fp8_tile_avx2): sign-extending a code b to 16 bits and shifting left by 7
// puts its magnitude bits at 7..13 and copies of its sign at 14..15; clearing bit 14 leaves exactly the
// half ((b & 0x7F) << 7) | ((b & 0x80) << 8) = w/256, which vcvtph2ps widens (2 uops on Zen 3's convert
// pipes, which the shifts share: ~4 weights per cycle).
struct HalfDecode {
  __m128i bit14_clear = _mm_set1_epi16(static_cast<short>(0xBFFF));
  __m256 one8(const uint8_t* p) const {
    return _mm256_cvtph_ps(_mm_and_si128(
        _mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 7), bit14_clear));
  }
  // acc += part · 256 · 2^(e−127) (exact: a power of two; from code 247 up that factor would overflow, so
  // there the part is multiplied by 256 first, also exact, which rounds the same).
  static __m256 fold(__m256 part, uint8_t e, __m256 acc) {
    if (e < 247) return _mm256_fmadd_ps(part, _mm256_set1_ps(kE8m0ToFloat[e] * 256.0f), acc);
    return _mm256_fmadd_ps(_mm256_mul_ps(part, _mm256_set1_ps(256.0f)), _mm256_set1_ps(kE8m0ToFloat[e]), acc);
  }
};

// RebiasDecode (activations prepared by fp8_prepare_x_avx2, fp8_tile_avx2_prepared): sign-extending a code
// to 32 bits and shifting it left by 20 puts its magnitude bits at 20..26 and copies of its sign at 27..31;
// keeping bits 31 and 20..26 leaves the float with the code's sign, exponent and mantissa under an exponent
// bias of 127 instead of 7: exactly w · 2^-120 (E4M3 subnormals land on fp32 subnormals). 3 uops per 8
// codes, no convert. The 2^120 is not multiplied back (an fp32 multiply of a subnormal takes a microcode
// assist on Zen 3, 2.2x slower on random codes; an FMA does not): the activations carry it instead, each
// token pre-multiplied by 2^c (c ≤ 120, the largest that keeps it finite), so each product is w·x·2^(c−120),
// and the token's sums are multiplied by 2^(120−c) at the end. Both factors are powers of two: where no
// partial sum leaves fp32's normal range the result is the unscaled computation's, bit for bit.
struct RebiasDecode {
  __m256i keep = _mm256_set1_epi32(static_cast<int>(0x87F00000u));
  __m256 one8(const uint8_t* p) const {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(v, 20), keep));
  }
  static __m256 fold(__m256 part, uint8_t e, __m256 acc) {
    return _mm256_fmadd_ps(part, _mm256_set1_ps(kE8m0ToFloat[e]), acc);
  }
};

// The order every FP8 tile here follows, per (row, token): for each 128-column block, one FMA chain over
// its 8-column steps in column order (the last step zero-padded past k), then acc = Decode::fold(chain,
// the block's scale code, acc); at the end hsum(acc). One token runs two blocks' chains at once (their
// arithmetic is independent until the folds, which stay in block order) so that 2 rows give 4 chains to
// cover the FMA latency; more tokens run 2 rows × up to 4 tokens (8 chains, each activation vector loaded
// once for both rows).

// One 8-column step at column c of rows [0, R) × tokens [0, T).
template <int R, int T, typename Decode>
inline void fp8_step8(const uint8_t* const* w, const float* x, int64_t ldx, int64_t c, const Decode& dec,
                      __m256 (&ch)[R][T]) {
  __m256 wv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wv[r] = dec.one8(w[r] + c);
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    if constexpr (R == 1) {
      ch[0][j] = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(x + j * ldx + c), ch[0][j]);
    } else {
      __m256 xv = _mm256_loadu_ps(x + j * ldx + c);
      // NOTE: one load per token for all rows (GCC would otherwise fold a load into every row's FMA).
      asm("" : "+x"(xv));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) ch[r][j] = _mm256_fmadd_ps(wv[r], xv, ch[r][j]);
    }
  }
}

// The chains of one block [kb, kend) (kend − kb ≤ 128) of rows [0, R) × tokens [0, T), from zero.
template <int R, int T, typename Decode>
inline void fp8_block(const Fp8Tile& t, const float* x, int64_t kb, int64_t kend, const Decode& dec,
                      __m256 (&ch)[R][T]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) ch[r][j] = _mm256_setzero_ps();
  int64_t c = kb;
  if (kend - kb == 128) {
    for (; c < kend; c += 64) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + c) + t.prefetch, _MM_HINT_T0);
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) fp8_step8<R, T>(t.w, x, t.ldx, c + 8 * s, dec, ch);
    }
    return;
  }
  for (; c + 8 <= kend; c += 8) fp8_step8<R, T>(t.w, x, t.ldx, c, dec, ch);
  if (c < kend) {
    // Under 8 columns left: zero-padded copies, so no load reads past a row.
    const int64_t len = kend - c;
    alignas(16) uint8_t codes[R][16] = {};
    alignas(32) float xs[T][8] = {};
    const uint8_t* wp[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      std::memcpy(codes[r], t.w[r] + c, static_cast<size_t>(len));
      wp[r] = codes[r];
    }
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) std::memcpy(xs[j], x + j * t.ldx + c, static_cast<size_t>(len) * sizeof(float));
    fp8_step8<R, T>(wp, xs[0], 8, 0, dec, ch);
  }
}

// One token, rows [0, R), all of K; sums into acc [rows][tokens][8 lanes].
template <int R, typename Decode>
void fp8_one_token(const Fp8Tile& t, float (*acc_mem)[kTileTokens][8]) {
  const Decode dec;
  __m256 acc[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t n_full = t.k / 128;
  int64_t b = 0;
  for (; b + 2 <= n_full; b += 2) {  // blocks b and b + 1 side by side
    const int64_t kb = 128 * b;
    __m256 c0[R], c1[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
    for (int64_t c = kb; c < kb + 128; c += 64) {
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + c) + t.prefetch, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + c + 128) + t.prefetch, _MM_HINT_T0);
      }
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const int64_t cc = c + 8 * s;
        __m256 x0 = _mm256_loadu_ps(t.x + cc), x1 = _mm256_loadu_ps(t.x + cc + 128);
        if constexpr (R > 1) asm("" : "+x"(x0), "+x"(x1));
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          c0[r] = _mm256_fmadd_ps(dec.one8(t.w[r] + cc), x0, c0[r]);
          c1[r] = _mm256_fmadd_ps(dec.one8(t.w[r] + cc + 128), x1, c1[r]);
        }
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      acc[r] = Decode::fold(c0[r], t.s[r][b], acc[r]);
      acc[r] = Decode::fold(c1[r], t.s[r][b + 1], acc[r]);
    }
  }
  for (int64_t kb = 128 * b; kb < t.k; kb += 128) {  // an odd last full block, a partial one
    __m256 ch[R][1];
    fp8_block<R, 1>(t, t.x, kb, kb + 128 < t.k ? kb + 128 : t.k, dec, ch);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r] = Decode::fold(ch[r][0], t.s[r][kb / 128], acc[r]);
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) _mm256_store_ps(acc_mem[r][0], acc[r]);
}

// Rows [0, R) × tokens [j0, j0 + T) over the blocks in [k0, k1) (k0 a multiple of 128), continuing acc_mem
// (touched once per block).
template <int R, int T, typename Decode>
void fp8_span(const Fp8Tile& t, int j0, int64_t k0, int64_t k1, float (*acc_mem)[kTileTokens][8]) {
  const Decode dec;
  const float* x = t.x + j0 * t.ldx;
  for (int64_t kb = k0; kb < k1; kb += 128) {
    __m256 ch[R][T];
    fp8_block<R, T>(t, x, kb, kb + 128 < t.k ? kb + 128 : t.k, dec, ch);
    const uint8_t* e[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) e[r] = t.s[r] + kb / 128;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < T; ++j)
        _mm256_store_ps(acc_mem[r][j0 + j], Decode::fold(ch[r][j], *e[r], _mm256_load_ps(acc_mem[r][j0 + j])));
  }
}

// 2..8 tokens: K in spans of kFp8SpanCols, every pass of a span before the next, so that the span's
// activations of all 8 tokens (16 KiB) stay in L1.
constexpr int64_t kFp8SpanCols = 512;

template <int R, typename Decode>
void fp8_tokens(const Fp8Tile& t, float (*acc)[kTileTokens][8]) {
  for (int64_t k0 = 0; k0 < t.k; k0 += kFp8SpanCols) {
    const int64_t k1 = k0 + kFp8SpanCols < t.k ? k0 + kFp8SpanCols : t.k;
    for (int j0 = 0; j0 < t.n_tokens; j0 += 4) {
      switch (t.n_tokens - j0) {
        case 1: fp8_span<R, 1, Decode>(t, j0, k0, k1, acc); break;
        case 2: fp8_span<R, 2, Decode>(t, j0, k0, k1, acc); break;
        case 3: fp8_span<R, 3, Decode>(t, j0, k0, k1, acc); break;
        default: fp8_span<R, 4, Decode>(t, j0, k0, k1, acc); break;
      }
    }
  }
}

// acc [rows][tokens][8 lanes]: written by one token, continued (from zeros set here) by 2..8. Only the
// tile's own rows and tokens are touched: a zeroed 512-byte array per call (rep stos) was ~9% of a
// one-token pass over 1 KiB rows (attn.wq_b).
template <typename Decode>
void fp8_tile_sums(const Fp8Tile& t, float (*acc)[kTileTokens][8]) {
  if (t.n_tokens == 1) return t.n_rows == 2 ? fp8_one_token<2, Decode>(t, acc) : fp8_one_token<1, Decode>(t, acc);
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) _mm256_store_ps(acc[r][j], _mm256_setzero_ps());
  return t.n_rows == 2 ? fp8_tokens<2, Decode>(t, acc) : fp8_tokens<1, Decode>(t, acc);
}

// ---- BF16 ----

inline __m256 bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

template <int R, int T>
inline void bf16_step(const uint16_t* const* w, const float* x, int64_t ldx, int64_t c, __m256 (&acc)[R][T]) {
  __m256 wv[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wv[r] = bf16x8(w[r] + c);
  #pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    __m256 xv = _mm256_loadu_ps(x + j * ldx + c);
    asm("" : "+x"(xv));  // one load per token for all rows
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
  }
}

// Rows [r0, r0 + R) × tokens [j0, j0 + T): one chain per (row, token) over 8-column steps in K order
// (the last one zero-padded past k), then hsum.
template <int R, int T>
void bf16_pass(Bf16Tile& t, int r0, int j0) {
  const uint16_t* w[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) w[r] = t.w[r0 + r];
  const float* x = t.x + j0 * t.ldx;
  __m256 acc[R][T];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_setzero_ps();
  const int64_t full = t.k & ~int64_t{7};
  int64_t c = 0;
  for (; c + 32 <= full; c += 32) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + c) + t.prefetch, _MM_HINT_T0);
    bf16_step<R, T>(w, x, t.ldx, c, acc);
    bf16_step<R, T>(w, x, t.ldx, c + 8, acc);
    bf16_step<R, T>(w, x, t.ldx, c + 16, acc);
    bf16_step<R, T>(w, x, t.ldx, c + 24, acc);
  }
  for (; c < full; c += 8) bf16_step<R, T>(w, x, t.ldx, c, acc);
  if (c < t.k) {
    const int64_t len = t.k - c;
    alignas(16) uint16_t ws[R][8] = {};
    alignas(32) float xs[T][8] = {};
    const uint16_t* wp[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      std::memcpy(ws[r], w[r] + c, static_cast<size_t>(len) * sizeof(uint16_t));
      wp[r] = ws[r];
    }
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) std::memcpy(xs[j], x + j * t.ldx + c, static_cast<size_t>(len) * sizeof(float));
    bf16_step<R, T>(wp, xs[0], 8, 0, acc);
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int j = 0; j < T; ++j) t.sums[r0 + r][j0 + j] = hsum(acc[r][j]);
}

template <int R>
void bf16_rows(Bf16Tile& t, int r0) {
  switch (t.n_tokens) {
    case 1: return bf16_pass<R, 1>(t, r0, 0);
    case 2: return bf16_pass<R, 2>(t, r0, 0);
    case 3: return bf16_pass<R, 3>(t, r0, 0);
    case 4: return bf16_pass<R, 4>(t, r0, 0);
    case 5: bf16_pass<R, 4>(t, r0, 0); return bf16_pass<R, 1>(t, r0, 4);
    case 6: bf16_pass<R, 4>(t, r0, 0); return bf16_pass<R, 2>(t, r0, 4);
    case 7: bf16_pass<R, 4>(t, r0, 0); return bf16_pass<R, 3>(t, r0, 4);
    default: bf16_pass<R, 4>(t, r0, 0); return bf16_pass<R, 4>(t, r0, 4);
  }
}

}  // namespace

void fp8_tile_avx2(Fp8Tile& t) {
  alignas(32) float acc[kTileRows][kTileTokens][8];
  fp8_tile_sums<HalfDecode>(t, acc);
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j]));
}

void fp8_tile_avx2_prepared(Fp8Tile& t) {
  alignas(32) float acc[kTileRows][kTileTokens][8];
  fp8_tile_sums<RebiasDecode>(t, acc);
  for (int j = 0; j < t.n_tokens; ++j) {
    const float unscale = t.x[j * t.ldx + t.k];  // 2^(120 − c) of the token (fp8_prepare_x_avx2)
    for (int r = 0; r < t.n_rows; ++r) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j])) * unscale;
  }
}

int64_t fp8_avx2_stride(int64_t k) { return (k + 1 + 7) / 8 * 8; }

void fp8_prepare_x_avx2(const float* x, int64_t n_tokens, int64_t k, float* out) {
  const int64_t stride = fp8_avx2_stride(k);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * k;
    float* o = out + t * stride;
    // The largest magnitude's biased exponent (NaN and inf: 255; all zeros: 0).
    uint32_t max_bits = 0;
    for (int64_t i = 0; i < k; ++i) {
      uint32_t b;
      std::memcpy(&b, xr + i, sizeof b);
      b &= 0x7FFFFFFFu;
      max_bits = b > max_bits ? b : max_bits;
    }
    const int e_max = static_cast<int>(max_bits >> 23);
    // |x| < 2^(e_max − 126), so |x · 2^c| < 2^127 with c = 253 − e_max; at most 120 (the decode's 2^-120).
    const int c = e_max <= 133 ? 120 : 253 - e_max;
    const float up = std::ldexp(1.0f, c);
    for (int64_t i = 0; i < k; ++i) o[i] = xr[i] * up;
    o[k] = std::ldexp(1.0f, 120 - c);
    for (int64_t i = k + 1; i < stride; ++i) o[i] = 0.0f;
  }
}

// BF16: up to 4 rows × 2 tokens per pass (8 accumulators, 4 weight vectors); from 3 tokens, rows in pairs
// × 4 tokens per pass.
void bf16_tile_avx2(Bf16Tile& t) {
  if (t.n_tokens <= 2) {
    switch (t.n_rows) {
      case 1: return bf16_rows<1>(t, 0);
      case 2: return bf16_rows<2>(t, 0);
      case 3: return bf16_rows<3>(t, 0);
      default: return bf16_rows<4>(t, 0);
    }
  }
  for (int r0 = 0; r0 < t.n_rows; r0 += 2) {
    if (t.n_rows - r0 >= 2) bf16_rows<2>(t, r0);
    else bf16_rows<1>(t, r0);
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
