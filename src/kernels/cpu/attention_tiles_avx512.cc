// kernels: AVX-512 attention loops (compiled with -mavx512f/bw/vl/dq -mfma -ffp-contract=off; called
// only after runtime detection). q·k dots run in 16 fp32 lanes with one K row load shared by up to four
// heads; P·V runs in 8 double lanes over head_dim with the list order kept per lane (bit-identical to
// the scalar loop); the indexer reduces 16 keys' dots at once and applies the reference's per-head bf16
// steps to all 16 in lanes.
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/attention_tiles.h"

namespace dsv4::kernels::detail {
namespace {

inline __mmask16 tail_mask(int64_t len) {
  return len >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << len) - 1u);
}

// Round-to-nearest-even to bf16, kept in fp32 lanes (finite inputs; matches core/formats.h round_bf16).
inline __m512 round_bf16_ps(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  return _mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Lane t of the result = horizontal sum of v[t], for 16 vectors (a transposing add tree).
inline __m512 hsum16(__m512* v) {
  __m512 s[8], w[4], y[2];
  for (int i = 0; i < 8; ++i)
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    w[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 2; ++i)
    y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// NH heads × NR rows per pass: NH·NR accumulators, NH + NR loads per NH·NR FMAs.
template <int NH, int NR>
void scores_tile(const float* q, int64_t d, const float* const* rows, float scale, float* out, int64_t ld) {
  __m512 acc[NH][NR];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < NR; ++r) acc[h][r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = tail_mask(d - i);
    __m512 kv[NR];
    for (int r = 0; r < NR; ++r) kv[r] = _mm512_maskz_loadu_ps(m, rows[r] + i);
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * d + i);
      for (int r = 0; r < NR; ++r) acc[h][r] = _mm512_fmadd_ps(qv, kv[r], acc[h][r]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < NR; ++r) out[h * ld + r] = _mm512_reduce_add_ps(acc[h][r]) * scale;
}

template <int NH>
void scores_heads(const float* q, int64_t d, const float* const* rows, int64_t n_rows, float scale, float* out) {
  int64_t j = 0;
  for (; j + 2 <= n_rows; j += 2) scores_tile<NH, 2>(q, d, rows + j, scale, out + j, n_rows);
  if (j < n_rows) scores_tile<NH, 1>(q, d, rows + j, scale, out + j, n_rows);
}

// NH heads × 32 dims per pass: each row chunk is widened to double once and feeds NH·4 accumulators.
template <int NH>
void pv_heads(const float* probs, const float* const* rows, int64_t n_rows, int64_t d, double* blocks) {
  int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    __m512d acc[NH][4];
    for (int h = 0; h < NH; ++h)
      for (int c = 0; c < 4; ++c) acc[h][c] = _mm512_loadu_pd(blocks + h * d + i + 8 * c);
    for (int64_t j = 0; j < n_rows; ++j) {
      const float* r = rows[j] + i;
      __m512d rv[4];
      for (int c = 0; c < 4; ++c) rv[c] = _mm512_cvtps_pd(_mm256_loadu_ps(r + 8 * c));
      for (int h = 0; h < NH; ++h) {
        const __m512d p = _mm512_set1_pd(static_cast<double>(probs[h * n_rows + j]));
        for (int c = 0; c < 4; ++c) acc[h][c] = _mm512_fmadd_pd(p, rv[c], acc[h][c]);
      }
    }
    for (int h = 0; h < NH; ++h)
      for (int c = 0; c < 4; ++c) _mm512_storeu_pd(blocks + h * d + i + 8 * c, acc[h][c]);
  }
  for (; i < d; i += 8) {
    const int64_t len = d - i;
    const __mmask8 m = len >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << len) - 1u);
    __m512d acc[NH];
    for (int h = 0; h < NH; ++h) acc[h] = _mm512_maskz_loadu_pd(m, blocks + h * d + i);
    for (int64_t j = 0; j < n_rows; ++j) {
      const __m512d rv = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, rows[j] + i));
      for (int h = 0; h < NH; ++h)
        acc[h] = _mm512_fmadd_pd(_mm512_set1_pd(static_cast<double>(probs[h * n_rows + j])), rv, acc[h]);
    }
    for (int h = 0; h < NH; ++h) _mm512_mask_storeu_pd(blocks + h * d + i, m, acc[h]);
  }
}

}  // namespace

void attn_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                        float scale, float* scores) {
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) scores_heads<4>(q + h * d, d, rows, n_rows, scale, scores + h * n_rows);
  for (; h < n_heads; ++h) scores_heads<1>(q + h * d, d, rows, n_rows, scale, scores + h * n_rows);
}

void attn_pv_avx512(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                    double* blocks) {
  for (int64_t h0 = 0; h0 < n_heads; h0 += 4) {
    const int64_t nh = n_heads - h0 < 4 ? n_heads - h0 : 4;
    const float* p = probs + h0 * n_rows;
    double* out = blocks + h0 * d;
    if (nh == 4) {
      pv_heads<4>(p, rows, n_rows, d, out);
    } else {
      for (int64_t h = 0; h < nh; ++h) pv_heads<1>(p + h * n_rows, rows, n_rows, d, out + h * d);
    }
  }
}

void indexer_scores_avx512(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                           const float* w, float* scores) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t t0 = k0; t0 < k1; t0 += 16) {
    const int64_t nk = k1 - t0 < 16 ? k1 - t0 : 16;
    const float* kp[16];
    for (int64_t t = 0; t < 16; ++t) kp[t] = keys + (t0 + (t < nk ? t : 0)) * d;  // tail lanes repeat key t0
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();  // Σ_h per key, keys 0-7 / 8-15
    for (int64_t h = 0; h < n_heads; ++h) {
      __m512 acc[16];
      for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
      const float* qh = q + h * d;
      for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = tail_mask(d - i);
        const __m512 qv = _mm512_maskz_loadu_ps(m, qh + i);
        for (int t = 0; t < 16; ++t) acc[t] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kp[t] + i), acc[t]);
      }
      // bf16(q·k) → ReLU → bf16(· w_h), then the double head sum in head order.
      const __m512 s = _mm512_max_ps(round_bf16_ps(hsum16(acc)), zero);
      const __m512 term = round_bf16_ps(_mm512_mul_ps(s, _mm512_set1_ps(w[h])));
      lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(term)));
      hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(term), 1))));
    }
    const __m512 sum = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    _mm512_mask_storeu_ps(scores + t0, tail_mask(nk), round_bf16_ps(sum));
  }
}

}  // namespace dsv4::kernels::detail
#endif
