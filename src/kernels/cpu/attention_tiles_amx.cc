// kernels: AMX-BF16 lightning-indexer scores (compiled with -mamx-tile -mamx-bf16 and AVX-512 flags; used
// only when kernels/cpu/isa.cc found AMX and got the tile permission). The indexer's q and keys are
// FP4-simulated — E2M1 values (≤ 2 significant bits) times a power of two — so bf16 holds them exactly
// and TDPBF16PS forms the same products as fp32 FMAs. Per 16-key group: the keys are narrowed to bf16 rows
// (the A tile, [16 keys × 32 K] per step), q was packed once per call into the VNNI B layout
// ([16 pairs × 16 heads] per head group and step), four C tiles accumulate [16 keys × 64 heads] in fp32,
// and the reference's per-head bf16 / ReLU / weight / double-sum steps then run with the 16 keys in lanes,
// exactly as in the AVX-512 loop. Groups holding a key that bf16 cannot represent exactly go to the
// AVX-512 loop, as do calls with head_dim % 32 != 0 or more than 64 heads.
//
// As with fp32 lanes, each q·k sum is exact (and the scores bit-identical to the reference) whenever its
// partial sums are exact in fp32 (indexer.h); TDPBF16PS also flushes denormal inputs and results, which
// FP4-simulated values of ordinary magnitude never produce.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/bf16_refusals.h"

namespace dsv4::kernels::detail {
namespace {

constexpr int64_t kMaxHeads = 64;  // four 16-head C tiles
constexpr int64_t kMaxDim = 256;   // the key scratch below: 16 keys × kMaxDim bf16

// Tiles 0-3: C (16 keys × 16 heads fp32), 4: A (16 keys × 32 bf16), 5: B (16 pairs × 16 heads).
constexpr int kTilesUsed = 6;

// 32 floats → 32 bf16 (their top halves; exact when the low halves are zero), in order.
inline __m512i narrow32(const float* x) {
  const __m512i a = _mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(x)), 16);
  const __m512i b = _mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(x + 16)), 16);
  // packus interleaves 128-bit lanes: qwords [a0 b0 a1 b1 a2 b2 a3 b3] → [a0 a1 a2 a3 b0 b1 b2 b3].
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi32(a, b));
}

// True when every float of x[0, n) (n % 16 == 0) is exactly a bf16 value.
inline bool bf16_exact(const float* x, int64_t n) {
  __m512i low = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16)
    low = _mm512_or_si512(low, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + i)), _mm512_set1_epi32(0xFFFF)));
  return _mm512_test_epi32_mask(low, low) == 0;
}

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_finite_x16

}  // namespace

void indexer_scores_amx(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                        const float* w, float* scores) {
  // A shape AMX does not take is no refusal; a q bf16 cannot hold is one (bf16_refusals.h).
  const bool amx_shape = d % 32 == 0 && d <= kMaxDim && n_heads <= kMaxHeads;
  if (!amx_shape || !bf16_exact(q, n_heads * d)) {
    if (amx_shape) detail::note_bf16_refusal();
    indexer_scores_avx512(q, n_heads, d, keys, k0, k1, w, scores);
    return;
  }
  const int64_t steps = d / 32, head_tiles = (n_heads + 15) / 16;
  // q in the B layout: [head tile][step][16 pairs][16 heads] u32 = bf16(q[h][2p]) | bf16(q[h][2p+1]) << 16,
  // heads past n_heads zero.
  alignas(64) uint32_t qpack[kMaxHeads / 16][kMaxDim / 32][16][16];
  std::memset(qpack, 0, sizeof(qpack));
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t k = 0; k < d; k += 2) {
      uint32_t lo, hi;
      std::memcpy(&lo, q + h * d + k, 4);
      std::memcpy(&hi, q + h * d + k + 1, 4);
      qpack[h / 16][k / 32][(k % 32) / 2][h % 16] = (lo >> 16) | (hi & 0xFFFF0000u);
    }
  alignas(64) uint16_t kbf[16 * kMaxDim];  // A rows: 16 keys × d bf16
  alignas(64) float c[16][kMaxHeads];      // [key][head] fp32 dots of the group
  const __m512i gather_idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                _mm512_set1_epi32(static_cast<int>(kMaxHeads)));
  const __m512 zero = _mm512_setzero_ps();
  amx_configure_tiles(kTilesUsed);
  for (int64_t t0 = k0; t0 < k1; t0 += 16) {
    const int64_t nk = k1 - t0 < 16 ? k1 - t0 : 16;
    if (!bf16_exact(keys + t0 * d, nk * d)) {
      detail::note_bf16_refusal();
      indexer_scores_avx512(q, n_heads, d, keys, t0, t0 + nk, w, scores);
      continue;
    }
    for (int64_t t = 0; t < 16; ++t)
      for (int64_t k = 0; k < d; k += 32) {
        const __m512i v = t < nk ? narrow32(keys + (t0 + t) * d + k) : _mm512_setzero_si512();
        _mm512_store_si512(kbf + t * d + k, v);
      }
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t s = 0; s < steps; ++s) {
      _tile_loadd(4, kbf + s * 32, static_cast<int>(d * 2));
      // Tile numbers are immediates: one unrolled statement per C tile.
      _tile_loadd(5, &qpack[0][s][0][0], 64);
      _tile_dpbf16ps(0, 4, 5);
      if (head_tiles > 1) {
        _tile_loadd(5, &qpack[1][s][0][0], 64);
        _tile_dpbf16ps(1, 4, 5);
      }
      if (head_tiles > 2) {
        _tile_loadd(5, &qpack[2][s][0][0], 64);
        _tile_dpbf16ps(2, 4, 5);
      }
      if (head_tiles > 3) {
        _tile_loadd(5, &qpack[3][s][0][0], 64);
        _tile_dpbf16ps(3, 4, 5);
      }
    }
    _tile_stored(0, &c[0][0], static_cast<int>(kMaxHeads * 4));
    if (head_tiles > 1) _tile_stored(1, &c[0][16], static_cast<int>(kMaxHeads * 4));
    if (head_tiles > 2) _tile_stored(2, &c[0][32], static_cast<int>(kMaxHeads * 4));
    if (head_tiles > 3) _tile_stored(3, &c[0][48], static_cast<int>(kMaxHeads * 4));
    // Per head, the 16 keys' dots in lanes: bf16 → ReLU → bf16(· w_h) → double sum in head order.
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t h = 0; h < n_heads; ++h) {
      const __m512 dot = _mm512_i32gather_ps(gather_idx, &c[0][h], 4);
      const __m512 sv = _mm512_max_ps(round_bf16_finite_x16(dot), zero);
      const __m512 term = round_bf16_finite_x16(_mm512_mul_ps(sv, _mm512_set1_ps(w[h])));
      lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(term)));
      hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(term), 1))));
    }
    const __m512 sum = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    const __mmask16 m = nk >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << nk) - 1u);
    _mm512_mask_storeu_ps(scores + t0, m, round_bf16_finite_x16(sum));
  }
  _tile_release();
}

}  // namespace dsv4::kernels::detail
#endif
