// kernels: AVX-512 attention loops (compiled with -mavx512f/bw/vl/dq -mfma -ffp-contract=off; called
// only after runtime detection): the loops of attention_tiles_simd.inc at 16 fp32 / 8 double lanes — q·k
// dots in 16 fp32 lanes with one K row load shared by up to four heads; P·V in 16 fp32 lanes over head_dim
// (two vectors per head, eight heads per pass), an FMA chain in list order per lane (attention_tiles.h
// AttnPvFn); the online-softmax block in 16 lanes (glibc's expf); the indexer reduces 16 keys' dots at
// once and applies the reference's per-head bf16 steps to all 16 in lanes.
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

#include "kernels/cpu/expf_avx512.inc"        // expf_x16
#include "kernels/cpu/reduce16_avx512.inc"    // reduce16, reduce16_x16
#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_x16, round_bf16_finite_x16

struct Avx512 {
  static constexpr int kWidth = 16;
  // P·V passes of 8 heads × 2 fp32 vectors (16 accumulators): each row chunk's load feeds 8 FMAs.
  static constexpr int kPvChunks = 2;
  static constexpr int kPvHeads = 8;
  using F = __m512;
  using D = __m512d;
  using Tail = __mmask16;

  static Tail tail(int64_t len) {
    return len >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << len) - 1u);
  }

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(Tail m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(Tail m, float* p, F v) { _mm512_mask_storeu_ps(p, m, v); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F load_or(Tail m, const float* p, F fill) { return _mm512_mask_loadu_ps(fill, m, p); }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }
  static F exp(F v) { return expf_x16(v); }
  static F round_bf16_any(F v) { return round_bf16_x16(v); }
  static float reduce_add(F v) { return reduce16(v); }
  // Lane t = reduce_add(v[t]), bit for bit (one transposed tree).
  static constexpr bool kReduceEach = true;
  static F reduce_add_each(const F (&v)[16]) { return reduce16_x16(v); }
  // Round-to-nearest-even to bf16, kept in fp32 lanes (finite inputs; matches core/formats.h round_bf16).
  static F round_bf16(F v) { return round_bf16_finite_x16(v); }
  // A transposing add tree.
  static F transpose_sum(F* v) {
    __m512 s[8], w[4], y[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      w[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i)
      y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }

  static D zero_pd() {
    return _mm512_setzero_pd();
  }
  static D add_pd(D a, D b) {
    return _mm512_add_pd(a, b);
  }
  static D widen_lo(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
  static D widen_hi(F v) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }
  static F narrow(D lo, D hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1); }
};

#include "kernels/cpu/attention_tiles_simd.inc"

}  // namespace

void attn_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                        float scale, float* scores) {
  attn_scores_simd<Avx512>(q, n_heads, d, rows, n_rows, scale, scores);
}

void attn_output_avx512(const float* acc, int64_t d, float l, float* out) {
  attn_output_simd<Avx512>(acc, d, l, out);
}

void attn_rescale_avx512(float* acc, const float* block, int64_t d, float rescale) {
  attn_rescale_simd<Avx512>(acc, block, d, rescale);
}

void attn_pv_avx512(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                    float* blocks) {
  attn_pv_simd<Avx512>(probs, n_heads, rows, n_rows, d, blocks);
}

void attn_softmax_avx512(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                         float* rescale, double* psum, float* probs) {
  attn_softmax_simd<Avx512>(scores, n_heads, n_rows, m, bmax, rescale, psum, probs);
}

void indexer_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                           const float* w, float* scores) {
  indexer_scores_simd<Avx512>(q, n_heads, d, keys, k0, k1, w, scores);
}

}  // namespace dsv4::kernels::detail
#endif
