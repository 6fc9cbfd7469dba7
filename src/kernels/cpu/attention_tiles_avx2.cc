// kernels: AVX2 attention loops (compiled with -mavx2 -mfma -ffp-contract=off; called only after runtime
// detection): the loops of attention_tiles_simd.inc at 8 fp32 / 4 double lanes — q·k in 8 fp32 lanes,
// P·V in 8 fp32 lanes, an FMA chain in list order (two vectors per head, four heads per pass), the
// indexer over 8 keys at a time
// (the fp32 loop behind indexer_int8_avx2.cc).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/expf_glibc_data.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/expf_avx2.inc"  // expf_x8
#include "kernels/cpu/hsum_avx2.inc"  // hsum

// Lane mask for the first min(len, 8) of 8 fp32 lanes (maskload/maskstore use the lanes whose sign bit is set).
inline __m256i tail_mask8(int64_t len) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len >= 8 ? 8 : len)), idx);
}

// round_bf16 (core/formats.h) on 8 fp32 lanes, NaNs included (a softmax probability is NaN where its score is).
inline __m256 round_bf16_x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v), top = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), top);
  const __m256i quiet = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), top);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quiet, nan));
}

struct Avx2 {
  static constexpr int kWidth = 8;
  static constexpr int kPvChunks = 2;
  static constexpr int kPvHeads = 4;
  using F = __m256;
  using D = __m256d;
  using Tail = int64_t;  // the length: full loads stay unmasked

  static Tail tail(int64_t len) { return len; }

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(Tail len, const float* p) { return len >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask8(len)); }
  static void store(Tail len, float* p, F v) {
    if (len >= 8) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, tail_mask8(len), v);
    }
  }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F load_or(Tail len, const float* p, F fill) {
    if (len >= 8) return _mm256_loadu_ps(p);
    const __m256i t = tail_mask8(len);
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, t), _mm256_castsi256_ps(t));
  }
  static float reduce_max(F v) {  // no NaN lane: any order gives the maximum
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  static F exp(F v) { return expf_x8(v); }
  static F round_bf16_any(F v) { return round_bf16_x8(v); }
  // No reduce_add_each: an 8-vector transposed tree (vperm2f128 + vshufps) measured no faster than eight
  // hsum at the 4 × 2 scores tile on Zen 5 (sparse_attention/avx2 rows=160 319-323 vs 321-350 us).
  static constexpr bool kReduceEach = false;
  static float reduce_add(F v) { return hsum(v); }
  static F round_bf16(F v) {
    __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    return _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static F transpose_sum(F* v) {
    __m256 s[4], w[2];
    for (int i = 0; i < 4; ++i)
      s[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; ++i)
      w[i] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // w[0] = [v0 v1 v2 v3 | v0 v1 v2 v3] halves, w[1] the same for v4..v7.
    return _mm256_add_ps(_mm256_permute2f128_ps(w[0], w[1], 0x20), _mm256_permute2f128_ps(w[0], w[1], 0x31));
  }

  static D zero_pd() { return _mm256_setzero_pd(); }
  static D add_pd(D a, D b) { return _mm256_add_pd(a, b); }
  static D widen_lo(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
  static D widen_hi(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
  static F narrow(D lo, D hi) { return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)); }
};

#include "kernels/cpu/attention_tiles_simd.inc"

}  // namespace

void attn_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                      float scale, float* scores) {
  attn_scores_simd<Avx2>(q, n_heads, d, rows, n_rows, scale, scores);
}

void attn_output_avx2(const float* acc, int64_t d, float l, float* out) {
  attn_output_simd<Avx2>(acc, d, l, out);
}

void attn_rescale_avx2(float* acc, const float* block, int64_t d, float rescale) {
  attn_rescale_simd<Avx2>(acc, block, d, rescale);
}

void attn_pv_avx2(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                  float* blocks) {
  attn_pv_simd<Avx2>(probs, n_heads, rows, n_rows, d, blocks);
}

void indexer_scores_avx2_fp32(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                              const float* w, float* scores) {
  indexer_scores_simd<Avx2>(q, n_heads, d, keys, k0, k1, w, scores);
}

void attn_softmax_avx2(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                       float* rescale, double* psum, float* probs) {
  attn_softmax_simd<Avx2>(scores, n_heads, n_rows, m, bmax, rescale, psum, probs);
}

void exp_f32_avx2(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i t = tail_mask8(n - i);
    _mm256_maskstore_ps(out + i, t, expf_x8(_mm256_maskload_ps(x + i, t)));
  }
}

}  // namespace dsv4::kernels::detail
#endif
