// kernels: the FP8 tile of Isa::kAvx512Bf16 — E4M3 weights decoded to bf16 by byte table lookups and
// multiplied with VDPBF16PS (32 products per instruction) against activations prepared once per call as
// bf16 pairs in the decode's order. Compiled for its ISA with a target pragma; called only after runtime
// detection of AVX512_BF16 + VBMI (isa.cc).
//
// Why this tier exists: on AMD Zen 5 VDPBF16PS issues ~1.9 per cycle (an fp32 FMA 2), so it does twice
// the products per instruction, and a 64-byte VBMI byte permute costs what a shuffle does. The fp32 tile
// (quant_tiles_avx512.cc) spends ~7 uops decoding 32 codes and one FMA per 16 products; here 64 codes
// cost 5 decode uops and 2 VDPBF16PS per token. (On Intel cores VDPBF16PS takes two cycles of both
// vector ports and vpermi2b 3 uops: AMX CPUs never take this tile.)
//
// Decode, 64 codes c[0..63] in one zmm (E4M3 → bf16 is exact for every code, subnormals included; the
// NaN codes give a bf16 NaN):
//   hi = vpermi2b(c, kHi)  ∨ (c ∧ 0x80)   bf16 high byte: the table on the 7 magnitude bits (vpermi2b
//                                         reads only index bits 0..6), the sign merged by one vpternlog
//   lo = vpermi2b(c, kLo)                 bf16 low byte
//   A = vpunpcklbw(lo, hi), B = vpunpckhbw(lo, hi)
// Word w of A is code 16·(w/8) + w%8, of B that + 8 (the unpacks work per 128-bit lane). Dword lane p of
// A therefore holds codes 16·(p/4) + 2·(p%4) + {0, 1}: fp8_prepare_x_bf16pairs lays each token's
// activations out as the same pairs, so one VDPBF16PS multiplies 32 matching pairs.
//
// Summation order, one per (row, token), the same at every tile width (batch invariance) — and, since
// VDPBF16PS rounds each addition to fp32 like a plain sum, exactly what the unit test's scalar emulation
// computes (KernelQuantMatmul.Fp8Bf16TileBitExactAgainstEmulation):
//   per 128-K chunk c, lane p (16 lanes): s = +0; for half h = 0, 1 (64 codes), for v = A, B:
//     s = (s + w[o]·x[o]) + w[e]·x[e],  e / o the even / odd code of pair p of v (VDPBF16PS: odd first)
//   acc_p = fma(s, 2^(scale_c − 127), acc_p)          (the block scale: exact power of two, one rounding)
//   result = ((acc_p + acc_{p+8}) over p < 8, then + 4, + 2, + 1 lanes)   (reduce16_avx512.inc)
// VDPBF16PS treats bf16 denormal inputs as zero and flushes denormal results; products of bf16 values are
// exact in fp32. The caller guarantees (fp8_prepare_x_bf16pairs refuses anything else) every activation
// is bf16-exact with each nonzero |x| ≥ 2^-100, and every E4M3 value is a multiple of 2^-9, so every
// product and partial sum is a multiple of 2^-116: never denormal, so the flushes never fire.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma,f16c,avx2")
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// bf16 bits of the E4M3 magnitude m (7 bits): normals 2^(e−7)·(1 + f/8) → exponent e + 120, mantissa f << 4;
// subnormals f·2^-9 normalized (bf16 holds them as normals); 0x7F (NaN) → a quiet NaN.
constexpr uint16_t e4m3_mag_bf16(int m) {
  if (m == 0x7F) return 0x7FC0;
  const int e = m >> 3, f = m & 7;
  if (e > 0) return static_cast<uint16_t>((e + 120) << 7 | f << 4);
  if (f == 0) return 0;
  int p = 2;  // the top set bit of f
  while ((f >> p) == 0) --p;
  return static_cast<uint16_t>((p - 9 + 127) << 7 | ((f - (1 << p)) << (7 - p)));
}

// [0, 128): high bytes (no sign), [128, 256): low bytes, by magnitude.
constexpr std::array<uint8_t, 256> make_tables() {
  std::array<uint8_t, 256> t{};
  for (int m = 0; m < 128; ++m) {
    t[static_cast<size_t>(m)] = static_cast<uint8_t>(e4m3_mag_bf16(m) >> 8);
    t[static_cast<size_t>(128 + m)] = static_cast<uint8_t>(e4m3_mag_bf16(m) & 0xFF);
  }
  return t;
}
alignas(64) constexpr std::array<uint8_t, 256> kTables = make_tables();

struct Luts {
  __m512i hi0, hi1, lo0, lo1, sign;
  Luts()
      : hi0(_mm512_load_si512(kTables.data())),
        hi1(_mm512_load_si512(kTables.data() + 64)),
        lo0(_mm512_load_si512(kTables.data() + 128)),
        lo1(_mm512_load_si512(kTables.data() + 192)),
        sign(_mm512_set1_epi8(static_cast<char>(0x80))) {}
};

// 64 codes → A, B (bf16 words in the order above).
inline void decode64(const Luts& l, __m512i c, __m512i& a, __m512i& b) {
  // imm 0xF8 = A | (B & C): the table's high byte ORed with the code's sign bit.
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(l.hi0, c, l.hi1), c, l.sign, 0xF8);
  const __m512i lo = _mm512_permutex2var_epi8(l.lo0, c, l.lo1);
  a = _mm512_unpacklo_epi8(lo, hi);
  b = _mm512_unpackhi_epi8(lo, hi);
}

inline __m512 dp(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(w), reinterpret_cast<__m512bh&>(x));
}

#include "kernels/cpu/reduce16_avx512.inc"  // reduce16_into: the documented lane tree

// One 128-K chunk of every (row, token) into part[r][j], half by half (kTail: the row's last, partial
// chunk; codes past k load as 0 → +0 bf16 and the prepared activations are zero there, so the skipped or
// zero terms change no sum). Every (row, token) keeps its own part across the halves, so this suits the
// small tiles only (R · T ≤ 8: 8 parts + 8 accumulators in registers); chunk_whole below serves the rest.
template <int R, int T, bool kTail>
inline void chunk_halves(const Fp8Tile& t, const Luts& l, int64_t kb, __m512 (&part)[R][T]) {
  const int64_t len = t.k - kb;
  const auto* x = reinterpret_cast<const uint32_t*>(t.x) + kb / 2;  // this chunk's 64 pairs of token 0
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    if (kTail && len <= 64 * h) break;
    __m512i wa[R], wb[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = t.w[r] + kb + 64 * h;
      _mm_prefetch(reinterpret_cast<const char*>(wr + t.prefetch), _MM_HINT_T0);
      const int64_t n = len - 64 * h;
      const __m512i c = kTail && n < 64 ? _mm512_maskz_loadu_epi8((__mmask64{1} << n) - 1, wr)
                                        : _mm512_loadu_si512(wr);
      decode64(l, c, wa[r], wb[r]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const uint32_t* xj = x + j * t.ldx + 32 * h;
      __m512i xa = _mm512_loadu_si512(xj), xb = _mm512_loadu_si512(xj + 16);
      // One load per token, not one folded into each row's VDPBF16PS.
      asm("" : "+v"(xa), "+v"(xb));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r][j] = dp(part[r][j], wa[r], xa);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r][j] = dp(part[r][j], wb[r], xb);
    }
  }
}

// acc + part · 2^(e−127), e row r's scale of this chunk: a fused multiply-add on purpose — the scale is a power of two, so the
// product is exact (or an fp32 overflow / underflow, rounded once with the sum), as the emulation's
// std::fma.
inline __m512 scale_add(const Fp8Tile& t, int r, int64_t kb, __m512 part, __m512 acc) {
  return _mm512_fmadd_ps(part, _mm512_set1_ps(kE8m0ToFloat[t.s[r][kb / 128]]), acc);
}

// The same chunk for the wide tiles (R · T > 8), in the same order: the chunk's codes of every row decoded
// first (both halves' A and B: 4 vectors a row), then token by token its four VDPBF16PS a row into a
// fresh part and the scale FMA. Only R parts are live, so 2 × 8 accumulators fit in registers: with
// chunk_halves' 16 parts they went through memory every chunk (dsv4_bench fp8_gemm/avx512bf16 m=8 256x4096
// 84.6-86.7 → 78.3-79.2 µs). chunk_halves stays for the small tiles: decoding the whole chunk first made m=1
// slower (17.8 → 22.5 µs).
template <int R, int T, bool kTail>
inline void chunk_whole(const Fp8Tile& t, const Luts& l, int64_t kb, __m512 (&acc)[R][T]) {
  const int64_t len = t.k - kb;
  __m512i w[R][4];  // [row][2 · half + (0: A, 1: B)]
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const uint8_t* wr = t.w[r] + kb + 64 * h;
      _mm_prefetch(reinterpret_cast<const char*>(wr + t.prefetch), _MM_HINT_T0);
      const int64_t n = len - 64 * h;
      const __m512i c = !kTail || n >= 64 ? _mm512_loadu_si512(wr)
                        : n > 0           ? _mm512_maskz_loadu_epi8((__mmask64{1} << n) - 1, wr)
                                          : _mm512_setzero_si512();
      decode64(l, c, w[r][2 * h], w[r][2 * h + 1]);
    }
  }
  const auto* x = reinterpret_cast<const uint32_t*>(t.x) + kb / 2;
#pragma GCC unroll 8
  for (int j = 0; j < T; ++j) {
    __m512 part[R];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m512i xv = _mm512_loadu_si512(x + j * t.ldx + 16 * v);
      asm("" : "+v"(xv));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) part[r] = dp(v == 0 ? _mm512_setzero_ps() : part[r], w[r][v], xv);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r][j] = scale_add(t, r, kb, part[r], acc[r][j]);
  }
}

// Rows × tokens, the accumulators in registers.
template <int R, int T>
void fp8_bf16_tile(Fp8Tile& t) {
  const Luts l;
  __m512 acc[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) acc[r][j] = _mm512_setzero_ps();
  const int64_t full = t.k & ~int64_t{127};
  for (int64_t kb = 0; kb < t.k; kb += 128) {
    if constexpr (R * T > 8) {
      if (kb < full)
        chunk_whole<R, T, false>(t, l, kb, acc);
      else
        chunk_whole<R, T, true>(t, l, kb, acc);
    } else {
      __m512 part[R][T];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) part[r][j] = _mm512_setzero_ps();
      if (kb < full)
        chunk_halves<R, T, false>(t, l, kb, part);
      else
        chunk_halves<R, T, true>(t, l, kb, part);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int j = 0; j < T; ++j) acc[r][j] = scale_add(t, r, kb, part[r][j], acc[r][j]);
    }
  }
  reduce16_into(acc, t.sums);
}

// Word w of a prepared 64-element block ← element idx[w] of the block (bit 5 picks the second source of
// vpermt2w, which holds elements 32..63).
constexpr std::array<uint16_t, 64> make_pair_index() {
  std::array<uint16_t, 64> ix{};
  for (int w = 0; w < 32; ++w) {
    ix[static_cast<size_t>(w)] = static_cast<uint16_t>(16 * (w / 8) + w % 8);  // A
    ix[static_cast<size_t>(32 + w)] = static_cast<uint16_t>(16 * (w / 8) + w % 8 + 8);  // B
  }
  return ix;
}
alignas(64) constexpr std::array<uint16_t, 64> kPairIndex = make_pair_index();
// The high word of each of 32 floats, in order (bit 5: the second source).
constexpr std::array<uint16_t, 32> make_high_words() {
  std::array<uint16_t, 32> ix{};
  for (int i = 0; i < 32; ++i) ix[static_cast<size_t>(i)] = static_cast<uint16_t>(2 * i + 1);
  return ix;
}
alignas(64) constexpr std::array<uint16_t, 32> kHighWords = make_high_words();

}  // namespace

bool fp8_prepare_x_bf16pairs(const float* x, int64_t n_tokens, int64_t k, float* out) {
  const int64_t stride = (k + 127) / 128 * 64;  // u32 pairs per token
  const __m512i high = _mm512_load_si512(kHighWords.data());
  const __m512i ia = _mm512_load_si512(kPairIndex.data()), ib = _mm512_load_si512(kPairIndex.data() + 32);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF), abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i min_m1 = _mm512_set1_epi32((27 << 23) - 1);  // 2^-100's bits − 1
  __mmask16 bad = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * k;
    auto* o = reinterpret_cast<uint32_t*>(out) + t * stride;
    for (int64_t b = 0; b < 2 * stride; b += 64) {  // 64-element blocks, zero past k
      __m512i v[4];
      for (int q = 0; q < 4; ++q) {
        const int64_t n = k - b - 16 * q;
        v[q] = n >= 16 ? _mm512_loadu_si512(xr + b + 16 * q)
                       : _mm512_maskz_loadu_epi32(n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u), xr + b + 16 * q);
        // Refused: low 16 bits set (not bf16), or 0 < |x| < 2^-100 (|x| − 1 below 2^-100's bits − 1,
        // unsigned: 0 wraps to the top).
        bad |= _mm512_test_epi32_mask(v[q], low16);
        bad |= _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_and_si512(v[q], abs_mask), _mm512_set1_epi32(1)), min_m1);
      }
      const __m512i n0 = _mm512_permutex2var_epi16(v[0], high, v[1]);  // bf16 of elements 0..31
      const __m512i n1 = _mm512_permutex2var_epi16(v[2], high, v[3]);  // 32..63
      _mm512_storeu_si512(o + b / 2, _mm512_permutex2var_epi16(n0, ia, n1));
      _mm512_storeu_si512(o + b / 2 + 16, _mm512_permutex2var_epi16(n0, ib, n1));
    }
  }
  return bad == 0;
}

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

void fp8_tile_avx512bf16(Fp8Tile& t) { DSV4_TILE_SWITCH(fp8_bf16_tile, t) }

#undef DSV4_TILE_SWITCH

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
