// kernels: AVX2 + FMA + F16C tiles for FP8 / FP4 weights (the fallback for CPUs without AVX-512).
// Same register decoding as the AVX-512 tiles, 8 lanes wide: FP8 via the exact E4M3 → half bit move
// and vcvtph2ps; FP4 via vpermps on the 8 E2M1 magnitudes (scaled) plus the sign bit moved to bit 31.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// 8 E4M3 codes (low 8 bytes) → 8 floats holding w/256.
inline __m256 e4m3x8_div256(__m128i codes) {
  // Sign-extend, shift by 7, clear the duplicated sign at bit 14 (see the AVX-512 tile).
  const __m128i wd = _mm_cvtepi8_epi16(codes);
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(wd, 7), _mm_set1_epi16(static_cast<short>(0xBFFF))));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int R, int T>
void fp8_tile(Fp8Tile& t) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t kb = 0; kb < t.k; kb += 128) {
    const int64_t kend = kb + 128 < t.k ? kb + 128 : t.k;
    __m256 part[R][T];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < T; ++j) part[r][j] = _mm256_setzero_ps();
    for (int64_t k = kb; k < kend; k += 8) {
      const int64_t len = kend - k;
      __m256 w[R];
      if (len >= 8) {
        for (int r = 0; r < R; ++r) w[r] = e4m3x8_div256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.w[r] + k)));
        for (int j = 0; j < T; ++j) {
          const __m256 xv = _mm256_loadu_ps(t.x + j * t.ldx + k);
          for (int r = 0; r < R; ++r) part[r][j] = _mm256_fmadd_ps(w[r], xv, part[r][j]);
        }
      } else {
        // Tail of fewer than 8 columns: zero-padded copies, so no load reads past the row.
        for (int r = 0; r < R; ++r) {
          alignas(16) uint8_t codes[16] = {};
          std::memcpy(codes, t.w[r] + k, static_cast<size_t>(len));
          w[r] = e4m3x8_div256(_mm_load_si128(reinterpret_cast<const __m128i*>(codes)));
        }
        for (int j = 0; j < T; ++j) {
          alignas(32) float xs[8] = {};
          std::memcpy(xs, t.x + j * t.ldx + k, static_cast<size_t>(len) * sizeof(float));
          const __m256 xv = _mm256_load_ps(xs);
          for (int r = 0; r < R; ++r) part[r][j] = _mm256_fmadd_ps(w[r], xv, part[r][j]);
        }
      }
    }
    // The decode's 1/256 undone in the scale (exact: a power of two); from scale code 247 up that factor
    // would overflow, so there the part is multiplied by 256 first (also exact, the same rounding).
    for (int r = 0; r < R; ++r) {
      const uint8_t e = t.s[r][kb / 128];
      const __m256 s = _mm256_set1_ps(e < 247 ? kE8m0ToFloat[e] * 256.0f : kE8m0ToFloat[e]);
      for (int j = 0; j < T; ++j)
        acc[r][j] = _mm256_fmadd_ps(e < 247 ? part[r][j] : _mm256_mul_ps(part[r][j], _mm256_set1_ps(256.0f)), s,
                                    acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = hsum(acc[r][j]);
}

template <int R, int T>
void bf16_tile(Bf16Tile& t) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < t.k; k += 8) {
    const int64_t len = t.k - k;
    __m256 w[R];
    alignas(32) float xs[T][8] = {};
    const float* xp[T];
    if (len >= 8) {
      for (int r = 0; r < R; ++r)
        w[r] = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.w[r] + k))), 16));
      for (int j = 0; j < T; ++j) xp[j] = t.x + j * t.ldx + k;
    } else {
      // Tail below 8 columns: zero-padded copies.
      for (int r = 0; r < R; ++r) {
        alignas(16) uint16_t ws[8] = {};
        std::memcpy(ws, t.w[r] + k, static_cast<size_t>(len) * 2);
        w[r] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(ws))), 16));
      }
      for (int j = 0; j < T; ++j) {
        std::memcpy(xs[j], t.x + j * t.ldx + k, static_cast<size_t>(len) * sizeof(float));
        xp[j] = xs[j];
      }
    }
    for (int j = 0; j < T; ++j) {
      const __m256 xv = _mm256_loadu_ps(xp[j]);
      for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(w[r], xv, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = hsum(acc[r][j]);
}

// 8 packed-code dwords (one byte each, already shifted so the wanted nibble is in bits 0..3) → floats.
inline __m256 e2m1x8(__m256i nib, __m256 lut_mag) {
  const __m256 mag = _mm256_permutevar8x32_ps(lut_mag, nib);  // reads bits 0..2 only
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(nib, 28), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

template <int R, int T>
void fp4_tile(Fp4Tile& t) {
  const __m256 lut = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  __m256 acc_e[R][T], acc_o[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc_e[r][j] = acc_o[r][j] = _mm256_setzero_ps();
  const int64_t n_blocks = t.k / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int half = 0; half < 2; ++half) {
      __m256 we[R], wo[R];
      for (int r = 0; r < R; ++r) {
        const __m256i bytes =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.w[r] + b * 16 + half * 8)));
        const __m256 ls = _mm256_mul_ps(lut, _mm256_set1_ps(kE8m0ToFloat[t.s[r][b]]));
        we[r] = e2m1x8(bytes, ls);
        wo[r] = e2m1x8(_mm256_srli_epi32(bytes, 4), ls);
      }
      for (int j = 0; j < T; ++j) {
        // Block order: evens at [0, 16), odds at [16, 32); this half covers 8 of each.
        const float* xb = t.x + j * t.ldx + b * 32 + half * 8;
        const __m256 xe = _mm256_loadu_ps(xb), xo = _mm256_loadu_ps(xb + 16);
        for (int r = 0; r < R; ++r) {
          acc_e[r][j] = _mm256_fmadd_ps(we[r], xe, acc_e[r][j]);
          acc_o[r][j] = _mm256_fmadd_ps(wo[r], xo, acc_o[r][j]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) t.sums[r][j] = hsum(_mm256_add_ps(acc_e[r][j], acc_o[r][j]));
}

// 16 ymm registers hold at most 2 rows × 4 tokens: tokens 4..7 of a wider tile run as a second pass.
// Each (row, token) accumulates on its own, so its sum does not depend on the pass that computes it.
template <typename Tile>
void in_passes_of_4(Tile& t, void (*four)(Tile&)) {
  if (t.n_tokens <= 4) return four(t);
  Tile u = t;
  u.n_tokens = 4;
  four(u);
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < 4; ++j) t.sums[r][j] = u.sums[r][j];
  u.x = t.x + 4 * t.ldx;
  u.n_tokens = t.n_tokens - 4;
  four(u);
  for (int r = 0; r < t.n_rows; ++r)
    for (int j = 0; j < u.n_tokens; ++j) t.sums[r][4 + j] = u.sums[r][j];
}

}  // namespace

#define DSV4_TILE_SWITCH(fn, t)                     \
  switch ((t.n_rows - 1) * 4 + (t.n_tokens - 1)) { \
    case 0: return fn<1, 1>(t);                    \
    case 1: return fn<1, 2>(t);                    \
    case 2: return fn<1, 3>(t);                    \
    case 3: return fn<1, 4>(t);                    \
    case 4: return fn<2, 1>(t);                    \
    case 5: return fn<2, 2>(t);                    \
    case 6: return fn<2, 3>(t);                    \
    default: return fn<2, 4>(t);                   \
  }

namespace {
void bf16_tile_4(Bf16Tile& t) { DSV4_TILE_SWITCH(bf16_tile, t) }
void fp8_tile_4(Fp8Tile& t) { DSV4_TILE_SWITCH(fp8_tile, t) }
void fp4_tile_4(Fp4Tile& t) { DSV4_TILE_SWITCH(fp4_tile, t) }
}  // namespace

// A Bf16Tile carries up to kBf16TileRows rows (the AVX-512 tile's width); this one runs them in pairs.
void bf16_tile_avx2(Bf16Tile& t) {
  for (int r0 = 0; r0 < t.n_rows; r0 += 2) {
    Bf16Tile u = t;
    u.n_rows = t.n_rows - r0 < 2 ? t.n_rows - r0 : 2;
    for (int r = 0; r < u.n_rows; ++r) u.w[r] = t.w[r0 + r];
    in_passes_of_4(u, bf16_tile_4);
    for (int r = 0; r < u.n_rows; ++r)
      for (int j = 0; j < t.n_tokens; ++j) t.sums[r0 + r][j] = u.sums[r][j];
  }
}
void fp8_tile_avx2(Fp8Tile& t) { in_passes_of_4(t, fp8_tile_4); }
void fp4_tile_avx2(Fp4Tile& t) { in_passes_of_4(t, fp4_tile_4); }

#undef DSV4_TILE_SWITCH

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
