// kernels: the lightning-indexer scores on VDPBF16PS (AVX512_BF16 without AMX, e.g. AMD Zen 5), register
// blocked: 32 keys (two vectors, keys in lanes) × 8 heads = 16 accumulators per pass over head_dim, each
// step loading two key vectors and broadcasting 8 q pairs for 16 VDPBF16PS (32 products each).
//
// Why this shape: the indexer's q and keys are FP4-simulated (E2M1 × a power of two per 32-block), exact
// in bf16, so VDPBF16PS forms exactly the fp32 FMA's products at twice the products per instruction. Keys
// go in lanes so that the reference's per-head steps (bf16, ReLU, · w_h, bf16, double sum in head order)
// run on 16 keys per vector with no transpose of the results; the keys are transposed instead, once per
// 32-key group, into pair-major bf16 ([pair][key], 16 KiB at head_dim 128), which then feeds every head.
// The fp32 loop this replaces (attention_tiles_simd.inc) kept its 16 accumulators in memory (GCC left
// the per-key loop rolled): ~14 GMAC/s on one Zen 5 core.
//
// Order and exactness. Each (key, head) dot is one fp32 lane of one VDPBF16PS chain: for pair p = 0, 1, ...
//   acc = (acc + q[2p+1]·k[2p+1]) + q[2p]·k[2p]          (odd element first; each addition rounded to
// fp32, RNE: the instruction's documented order, measured on Zen 5), the same for every key at every
// position in a group, any group split and any thread count. Products of two bf16 values are exact in
// fp32, so this is an fp32 sum in that order, and on FP4-simulated inputs every partial sum is exact
// (indexer.h), so the scores are bit-identical to the reference there. VDPBF16PS reads bf16 denormals as
// zero and flushes denormal results (DAZ/FTZ). The guard: every nonzero |q| and |k| ≥ 2^-56, so every
// nonzero product is a multiple of ≥ 2^-126 and so is every partial sum (nonzero ones are then normal):
// nothing is flushed and the chain equals the fp32 sum above exactly (tests emulate it bit for bit).
// A q that fails the guard or is not exact in bf16 sends the call to the AVX-512 fp32 loop, a failing key
// its 32-key group; both count as bf16 refusals (bf16_refusals.h).
//
// Compiled for its ISA with a target pragma; called only after runtime detection of AVX512_BF16.
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,avx2")
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on its _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/bf16_refusals.h"

namespace dsv4::kernels::detail {
namespace {

constexpr int kGroupKeys = 32;  // two 16-lane key vectors per pass
constexpr int kBlockHeads = 8;  // heads per pass: 2 × 8 accumulators, 2 + 8 loads per 16 VDPBF16PS
// |x| ≥ 2^-56 (or x = 0) for every q and key value: fp32 bits of |x| − 1 as unsigned ≥ this (0 wraps up).
constexpr uint32_t kMinMagnitudeM1 = 0x23800000u - 1u;

// Accumulates the guard over 16 floats: any low-half bit (not exact in bf16) into `low`, the unsigned
// minimum of |x| − 1 (zeros wrap to the top) into `min_m1`.
inline void guard16(__m512 v, __m512i& low, __m512i& min_m1) {
  const __m512i u = _mm512_castps_si512(v);
  low = _mm512_ternarylogic_epi32(low, u, _mm512_set1_epi32(0xFFFF), 0xF8);  // low | (u & 0xFFFF)
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  min_m1 = _mm512_min_epu32(min_m1, _mm512_sub_epi32(mag, _mm512_set1_epi32(1)));
}

inline bool guard_ok(__m512i low, __m512i min_m1) {
  return _mm512_test_epi32_mask(low, low) == 0 && _mm512_reduce_min_epu32(min_m1) >= kMinMagnitudeM1;
}

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_finite_x16

// r[i] (row i, 16 dwords) → r[j] holding column j: 64 shuffles in four stages.
inline void transpose16(__m512i* r) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // u[4k + c], 128-bit lane L: rows 4k .. 4k+3 of column 4L + c.
  for (int k = 0; k < 4; ++k) {
    u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88),
                  w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    r[4 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh>(v); }

// NH heads (h0 ..) × 32 keys over n_pairs pairs; then, per head in order, the reference's steps on the
// 32 keys in lanes, added to the double head sums sums[0..3], whose lanes hold the keys (by position in
// the group) 0-3 8-11 | 16-19 24-27 | 4-7 12-15 | 20-23 28-31 (the interleave below).
template <int NH>
void heads_pass(const uint32_t* qpair, int64_t n_pairs, const __m512i* kt, const float* w, __m512d* sums) {
  __m512 acc[2 * NH];
#pragma GCC unroll 16
  for (int k = 0; k < 2 * NH; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t p = 0; p < n_pairs; ++p) {
    const __m512bh k0 = as_bh(_mm512_load_si512(kt + 2 * p)), k1 = as_bh(_mm512_load_si512(kt + 2 * p + 1));
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512bh qv = as_bh(_mm512_set1_epi32(static_cast<int>(qpair[h * n_pairs + p])));
      acc[2 * h] = _mm512_dpbf16_ps(acc[2 * h], qv, k0);
      acc[2 * h + 1] = _mm512_dpbf16_ps(acc[2 * h + 1], qv, k1);
    }
  }
  const __m512i zero = _mm512_setzero_si512(), inf16 = _mm512_set1_epi16(0x7F80);
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    const __m512 wh = _mm512_set1_ps(w[h]);
    // bf16(q·k) for both key vectors in one VCVTNE2PS2BF16 (RNE; its DAZ never acts: under the guard a
    // nonzero dot is ≥ 2^-126), ReLU as a signed 16-bit max (bf16 orders like int16 for sign-magnitude
    // values; −0 → +0) that also zeroes a positive NaN (above +inf's 0x7F80: the reference's s > 0 ? s : 0
    // gives 0 for any NaN; a NaN key is exact in bf16, so the guard keeps it), back to fp32 by interleaving
    // with zero words — which leaves the keys in the order kPermuted below —, then bf16(· w_h) (integer
    // rounding: the product may be denormal) and the double head sums, all in that order.
    const __m512i b16 = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(acc[2 * h + 1], acc[2 * h]));
    const __m512i s16 = _mm512_maskz_max_epi16(_mm512_cmple_epi16_mask(b16, inf16), b16, zero);
    const __m512 t0 = round_bf16_finite_x16(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, s16)), wh));
    const __m512 t1 = round_bf16_finite_x16(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, s16)), wh));
    sums[0] = _mm512_add_pd(sums[0], _mm512_cvtps_pd(_mm512_castps512_ps256(t0)));
    sums[1] = _mm512_add_pd(sums[1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t0), 1))));
    sums[2] = _mm512_add_pd(sums[2], _mm512_cvtps_pd(_mm512_castps512_ps256(t1)));
    sums[3] = _mm512_add_pd(sums[3], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t1), 1))));
  }
}

template <int NH>
void heads_pass_n(int nh, const uint32_t* qpair, int64_t n_pairs, const __m512i* kt, const float* w, __m512d* sums) {
  if constexpr (NH > 0) {
    if (nh == NH) return heads_pass<NH>(qpair, n_pairs, kt, w, sums);
    heads_pass_n<NH - 1>(nh, qpair, n_pairs, kt, w, sums);
  }
}

}  // namespace

void indexer_scores_avx512bf16(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                               const float* w, float* scores) {
  const int64_t n_chunks = (d + 31) / 32;  // 32-dim chunks = 16-pair transpose blocks
  const int64_t n_pairs = (d + 1) / 2;
  // q as bf16 pairs [n_heads][n_pairs] (pair p: element 2p in the low half, 2p+1 in the high), padded with
  // zeros; grow-only per thread (kernels allocate nothing once warm).
  thread_local std::vector<uint32_t> qpair_buf;
  struct alignas(64) Line {
    uint32_t v[16];
  };
  thread_local std::vector<Line> kt_buf;  // [n_chunks·16 pairs][2 key vectors] of 16 bf16 pairs
  if (qpair_buf.size() < static_cast<size_t>(n_heads * n_pairs)) qpair_buf.resize(static_cast<size_t>(n_heads * n_pairs));
  if (kt_buf.size() < static_cast<size_t>(n_chunks * 32)) kt_buf.resize(static_cast<size_t>(n_chunks * 32));
  uint32_t* qpair = qpair_buf.data();
  auto* kt = reinterpret_cast<__m512i*>(kt_buf.data());

  __m512i low = _mm512_setzero_si512(), min_m1 = _mm512_set1_epi32(-1);
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t rem = d - c * 32;
      const __mmask16 m0 = rem >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << rem) - 1u);
      const __mmask16 m1 = rem >= 32 ? 0xFFFF : rem <= 16 ? 0 : static_cast<__mmask16>((1u << (rem - 16)) - 1u);
      const __m512 a = _mm512_maskz_loadu_ps(m0, q + h * d + c * 32), b = _mm512_maskz_loadu_ps(m1, q + h * d + c * 32 + 16);
      guard16(a, low, min_m1);
      guard16(b, low, min_m1);
      const __m512i pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
      const int64_t np = n_pairs - c * 16 < 16 ? n_pairs - c * 16 : 16;
      _mm512_mask_storeu_epi32(qpair + h * n_pairs + c * 16, static_cast<__mmask16>((1u << np) - 1u), pairs);
    }
  if (!guard_ok(low, min_m1)) {
    note_bf16_refusal();
    indexer_scores_avx512(q, n_heads, d, keys, k0, k1, w, scores);
    return;
  }

  for (int64_t t0 = k0; t0 < k1; t0 += kGroupKeys) {
    const int64_t nk = k1 - t0 < kGroupKeys ? k1 - t0 : kGroupKeys;
    // Transpose the group's keys into kt[pair][key vector] (bf16 pairs, keys past nk zero), checking the
    // guard on the way.
    low = _mm512_setzero_si512();
    min_m1 = _mm512_set1_epi32(-1);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t rem = d - c * 32;
      const __mmask16 m0 = rem >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << rem) - 1u);
      const __mmask16 m1 = rem >= 32 ? 0xFFFF : rem <= 16 ? 0 : static_cast<__mmask16>((1u << (rem - 16)) - 1u);
      for (int v = 0; v < 2; ++v) {
        __m512i r[16];
        for (int t = 0; t < 16; ++t) {
          const int64_t key = v * 16 + t;
          if (key >= nk) {
            r[t] = _mm512_setzero_si512();
            continue;
          }
          const float* kp = keys + (t0 + key) * d + c * 32;
          const __m512 a = _mm512_maskz_loadu_ps(m0, kp), b = _mm512_maskz_loadu_ps(m1, kp + 16);
          guard16(a, low, min_m1);
          guard16(b, low, min_m1);
          r[t] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
        }
        transpose16(r);
        for (int p = 0; p < 16; ++p) _mm512_store_si512(kt + 2 * (c * 16 + p) + v, r[p]);
      }
    }
    if (!guard_ok(low, min_m1)) {
      note_bf16_refusal();
      indexer_scores_avx512(q, n_heads, d, keys, t0, t0 + nk, w, scores);
      continue;
    }
    __m512d sums[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    int64_t h = 0;
    for (; h + kBlockHeads <= n_heads; h += kBlockHeads)
      heads_pass<kBlockHeads>(qpair + h * n_pairs, n_pairs, kt, w + h, sums);
    if (h < n_heads)
      heads_pass_n<kBlockHeads - 1>(static_cast<int>(n_heads - h), qpair + h * n_pairs, n_pairs, kt, w + h, sums);
    // fp32 sums, keys 0-3 8-11 16-19 24-27 / 4-7 12-15 20-23 28-31, back into key order.
    const __m512 lo = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(sums[0])), _mm512_cvtpd_ps(sums[1]), 1);
    const __m512 hi = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(sums[2])), _mm512_cvtpd_ps(sums[3]), 1);
    const __m512 by_key[2] = {
        _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23), hi),
        _mm512_permutex2var_ps(lo, _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31), hi)};
    for (int v = 0; v < 2 && v * 16 < nk; ++v) {
      const int64_t n = nk - v * 16 < 16 ? nk - v * 16 : 16;
      _mm512_mask_storeu_ps(scores + t0 + v * 16, static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u),
                            round_bf16_finite_x16(by_key[v]));
    }
  }
}

}  // namespace dsv4::kernels::detail
#endif
