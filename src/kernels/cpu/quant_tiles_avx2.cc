// kernels: AVX2 + FMA + F16C tiles for FP8 / BF16 weights (CPUs without AVX-512, e.g. AMD Zen 2/3, Intel
// before Ice Lake). Weights are decoded in registers:
//   FP8: on prepared activations (fp8_operand), each code rebiased into the fp32 w·2^-120 by integer shifts
//        and masks; on raw ones (fp8_tile_for), E4M3 → half w/256 by a shift and mask, then vcvtph2ps
//        (RebiasDecode / HalfDecode below).
//   BF16: a zero-extended word shifted left by 16.
// 16 ymm registers bound the register blocking. The FP8 tiles run two FMA chains per (row, token), since a
// single chain would leave a 1-token pass waiting on the FMA latency (4 cycles) instead of on the decode;
// that fixes their order for every width, so 2..8 tokens run one row at a time in passes of up to 4 tokens.
// Each (row, token) sum follows one sequence of fp32 operations whatever the tile's rows and tokens, so
// results are batch- and thread-count invariant.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// The horizontal sum every AVX2 tile ends with: (lanes 0..3 + 4..7), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- FP8 ----

// Two decodes of 16 E4M3 codes into fp32 vectors lo (codes 0..7) and hi (8..15), each exact, with the
// block fold that undoes its scaling.
//
// HalfDecode (raw activations, fp8_tile_avx2): sign-extending a code b to 16 bits and shifting left by 7
// puts its magnitude bits at 7..13 and copies of its sign at 14..15; clearing bit 14 leaves exactly the
// half ((b & 0x7F) << 7) | ((b & 0x80) << 8) = w/256, which vcvtph2ps widens. ~5 uops per 8 codes, two of
// them the convert's (Zen 3 runs the tile at ~4 weights per cycle).
struct HalfDecode {
  __m256i bit14_clear = _mm256_set1_epi16(static_cast<short>(0xBFFF));
  void operator()(const uint8_t* p, __m256& lo, __m256& hi) const {
    const __m256i h = _mm256_and_si256(
        _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 7),
        bit14_clear);
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
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
  void operator()(const uint8_t* p, __m256& lo, __m256& hi) const {
    lo = one8(p);
    hi = one8(p + 8);
  }
  static __m256 fold(__m256 part, uint8_t e, __m256 acc) {
    return _mm256_fmadd_ps(part, _mm256_set1_ps(kE8m0ToFloat[e]), acc);
  }
};

// One 16-column step of rows [0, R) × tokens [0, T): chain 0 takes columns c..c+7, chain 1 c+8..c+15.
template <int R, int T, typename Decode>
inline void fp8_step(const uint8_t* const* w, const float* x, int64_t ldx, int64_t c, const Decode& dec,
                     __m256 (&c0)[R][T], __m256 (&c1)[R][T]) {
  __m256 lo[R], hi[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) dec(w[r] + c, lo[r], hi[r]);
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    const float* xj = x + j * ldx + c;
    if constexpr (R == 1) {
      // Folded into the FMA: with one row each activation vector is used once.
      c0[0][j] = _mm256_fmadd_ps(lo[0], _mm256_loadu_ps(xj), c0[0][j]);
      c1[0][j] = _mm256_fmadd_ps(hi[0], _mm256_loadu_ps(xj + 8), c1[0][j]);
    } else {
      __m256 xl = _mm256_loadu_ps(xj), xh = _mm256_loadu_ps(xj + 8);
      // NOTE: one load per token for all rows (GCC would otherwise fold a load into every row's FMA).
      asm("" : "+x"(xl), "+x"(xh));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        c0[r][j] = _mm256_fmadd_ps(lo[r], xl, c0[r][j]);
        c1[r][j] = _mm256_fmadd_ps(hi[r], xh, c1[r][j]);
      }
    }
  }
}

// Rows [0, R) of the tile × tokens [j0, j0 + T) over the 128-column blocks in [k0, k1) (k0 a multiple of 128),
// continuing the accumulators acc[r][j] (8 floats each). Per (row, token) and block: two chains over the
// block's 16-column steps (the last one zero-padded past k), then acc = Decode::fold(chain 0 + chain 1,
// the block's scale code, acc). The sequence of operations on each (row, token) does not depend on R, T,
// j0 or how [0, k) is cut.
template <int R, int T, typename Decode>
void fp8_span(const Fp8Tile& t, int j0, int64_t k0, int64_t k1, float (*acc_mem)[kTileTokens][8]) {
  const Decode dec;
  const float* x = t.x + j0 * t.ldx;
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_load_ps(acc_mem[r][j0 + j]);
  for (int64_t kb = k0; kb < k1; kb += 128) {
    const int64_t kend = kb + 128 < t.k ? kb + 128 : t.k;
    __m256 c0[R][T], c1[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) c0[r][j] = c1[r][j] = _mm256_setzero_ps();
    int64_t c = kb;
    if (kend - kb == 128) {
      for (; c < kend; c += 64) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.w[r] + c) + t.prefetch, _MM_HINT_T0);
        fp8_step<R, T>(t.w, x, t.ldx, c, dec, c0, c1);
        fp8_step<R, T>(t.w, x, t.ldx, c + 16, dec, c0, c1);
        fp8_step<R, T>(t.w, x, t.ldx, c + 32, dec, c0, c1);
        fp8_step<R, T>(t.w, x, t.ldx, c + 48, dec, c0, c1);
      }
    } else {
      // The row's last, partial block.
      for (; c + 16 <= kend; c += 16) fp8_step<R, T>(t.w, x, t.ldx, c, dec, c0, c1);
      if (c < kend) {
        // Under 16 columns left: zero-padded copies, so no load reads past a row.
        const int64_t len = kend - c;
        alignas(16) uint8_t codes[R][16] = {};
        alignas(32) float xs[T][16] = {};
        const uint8_t* wp[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          std::memcpy(codes[r], t.w[r] + c, static_cast<size_t>(len));
          wp[r] = codes[r];
        }
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) std::memcpy(xs[j], x + j * t.ldx + c, static_cast<size_t>(len) * sizeof(float));
        fp8_step<R, T>(wp, xs[0], 16, 0, dec, c0, c1);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t e = t.s[r][kb / 128];
#pragma GCC unroll 8
      for (int j = 0; j < T; ++j) acc[r][j] = Decode::fold(_mm256_add_ps(c0[r][j], c1[r][j]), e, acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) _mm256_store_ps(acc_mem[r][j0 + j], acc[r][j]);
}

// One token takes both rows at once (four FMA chains), over all of K. More tokens take each row alone, four
// tokens per pass (8 chains + 4 accumulators + 2 weight vectors of the 16 registers), and K in spans of
// kFp8SpanCols, every row and pass of a span before the next span, so that the span's activations of all
// 8 tokens (16 KiB) stay in L1. Sums into acc [rows][tokens][8 lanes].
constexpr int64_t kFp8SpanCols = 512;

template <typename Decode>
void fp8_tile_sums(const Fp8Tile& t, float (*acc)[kTileTokens][8]) {
  if (t.n_tokens == 1) {
    if (t.n_rows == 2) fp8_span<2, 1, Decode>(t, 0, 0, t.k, acc);
    else fp8_span<1, 1, Decode>(t, 0, 0, t.k, acc);
    return;
  }
  for (int64_t k0 = 0; k0 < t.k; k0 += kFp8SpanCols) {
    const int64_t k1 = k0 + kFp8SpanCols < t.k ? k0 + kFp8SpanCols : t.k;
    for (int r = 0; r < t.n_rows; ++r) {
      Fp8Tile u = t;
      u.w[0] = t.w[r];
      u.s[0] = t.s[r];
      for (int j0 = 0; j0 < t.n_tokens; j0 += 4) {
        switch (t.n_tokens - j0) {
          case 1: fp8_span<1, 1, Decode>(u, j0, k0, k1, acc + r); break;
          case 2: fp8_span<1, 2, Decode>(u, j0, k0, k1, acc + r); break;
          case 3: fp8_span<1, 3, Decode>(u, j0, k0, k1, acc + r); break;
          default: fp8_span<1, 4, Decode>(u, j0, k0, k1, acc + r); break;
        }
      }
    }
  }
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
  alignas(32) float acc[kTileRows][kTileTokens][8] = {};
  fp8_tile_sums<HalfDecode>(t, acc);
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < t.n_tokens; ++j) t.sums[r][j] = hsum(_mm256_load_ps(acc[r][j]));
}

void fp8_tile_avx2_prepared(Fp8Tile& t) {
  alignas(32) float acc[kTileRows][kTileTokens][8] = {};
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
