// kernels: AVX2 attention loops (compiled with -mavx2 -mfma -ffp-contract=off; called only after runtime
// detection). Same structure as the AVX-512 file at half the width: q·k in 8 fp32 lanes, P·V in 4 double
// lanes in list order, the indexer over 8 keys at a time.
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/attention_tiles.h"

namespace dsv4::kernels::detail {
namespace {

// Lane masks for a tail of len < 8 elements (maskload reads only the lanes whose sign bit is set).
inline __m256i tail_mask8(int64_t len) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len >= 8 ? 8 : len)), idx);
}

inline __m256 load8(const float* p, int64_t len) {
  return len >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask8(len));
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 round_bf16_ps(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  return _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Lane t = horizontal sum of v[t], for 8 vectors.
inline __m256 hsum8x8(__m256* v) {
  __m256 s[4], w[2];
  for (int i = 0; i < 4; ++i)
    s[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)
    w[i] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // w[0] = [v0 v1 v2 v3 | v0 v1 v2 v3] halves, w[1] the same for v4..v7.
  return _mm256_add_ps(_mm256_permute2f128_ps(w[0], w[1], 0x20), _mm256_permute2f128_ps(w[0], w[1], 0x31));
}

template <int NH, int NR>
void scores_tile(const float* q, int64_t d, const float* const* rows, float scale, float* out, int64_t ld) {
  __m256 acc[NH][NR];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < NR; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; i += 8) {
    const int64_t len = d - i;
    __m256 kv[NR];
    for (int r = 0; r < NR; ++r) kv[r] = load8(rows[r] + i, len);
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = load8(q + h * d + i, len);
      for (int r = 0; r < NR; ++r) acc[h][r] = _mm256_fmadd_ps(qv, kv[r], acc[h][r]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < NR; ++r) out[h * ld + r] = hsum8(acc[h][r]) * scale;
}

template <int NH>
void scores_heads(const float* q, int64_t d, const float* const* rows, int64_t n_rows, float scale, float* out) {
  int64_t j = 0;
  for (; j + 2 <= n_rows; j += 2) scores_tile<NH, 2>(q, d, rows + j, scale, out + j, n_rows);
  if (j < n_rows) scores_tile<NH, 1>(q, d, rows + j, scale, out + j, n_rows);
}

// NH heads × 8 dims per pass (two 4-double vectors per head), each row chunk widened once.
template <int NH>
void pv_heads(const float* probs, const float* const* rows, int64_t n_rows, int64_t d, double* blocks) {
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    __m256d acc[NH][2];
    for (int h = 0; h < NH; ++h)
      for (int c = 0; c < 2; ++c) acc[h][c] = _mm256_loadu_pd(blocks + h * d + i + 4 * c);
    for (int64_t j = 0; j < n_rows; ++j) {
      const float* r = rows[j] + i;
      const __m256d r0 = _mm256_cvtps_pd(_mm_loadu_ps(r)), r1 = _mm256_cvtps_pd(_mm_loadu_ps(r + 4));
      for (int h = 0; h < NH; ++h) {
        const __m256d p = _mm256_set1_pd(static_cast<double>(probs[h * n_rows + j]));
        acc[h][0] = _mm256_fmadd_pd(p, r0, acc[h][0]);
        acc[h][1] = _mm256_fmadd_pd(p, r1, acc[h][1]);
      }
    }
    for (int h = 0; h < NH; ++h)
      for (int c = 0; c < 2; ++c) _mm256_storeu_pd(blocks + h * d + i + 4 * c, acc[h][c]);
  }
  for (; i < d; ++i)  // < 8 dims left: the scalar loop (same operations, same order)
    for (int h = 0; h < NH; ++h) {
      double a = blocks[h * d + i];
      for (int64_t j = 0; j < n_rows; ++j)
        a = __builtin_fma(static_cast<double>(probs[h * n_rows + j]), static_cast<double>(rows[j][i]), a);
      blocks[h * d + i] = a;
    }
}

}  // namespace

void attn_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                      float scale, float* scores) {
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) scores_heads<4>(q + h * d, d, rows, n_rows, scale, scores + h * n_rows);
  for (; h < n_heads; ++h) scores_heads<1>(q + h * d, d, rows, n_rows, scale, scores + h * n_rows);
}

void attn_pv_avx2(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
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

void indexer_scores_avx2(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                         const float* w, float* scores) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t t0 = k0; t0 < k1; t0 += 8) {
    const int64_t nk = k1 - t0 < 8 ? k1 - t0 : 8;
    const float* kp[8];
    for (int64_t t = 0; t < 8; ++t) kp[t] = keys + (t0 + (t < nk ? t : 0)) * d;
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (int64_t h = 0; h < n_heads; ++h) {
      __m256 acc[8];
      for (int t = 0; t < 8; ++t) acc[t] = _mm256_setzero_ps();
      const float* qh = q + h * d;
      for (int64_t i = 0; i < d; i += 8) {
        const int64_t len = d - i;
        const __m256 qv = load8(qh + i, len);
        for (int t = 0; t < 8; ++t) acc[t] = _mm256_fmadd_ps(qv, load8(kp[t] + i, len), acc[t]);
      }
      const __m256 s = _mm256_max_ps(round_bf16_ps(hsum8x8(acc)), zero);
      const __m256 term = round_bf16_ps(_mm256_mul_ps(s, _mm256_set1_ps(w[h])));
      lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(term)));
      hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(term, 1)));
    }
    const __m256 sum = round_bf16_ps(_mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, sum);
    for (int64_t t = 0; t < nk; ++t) scores[t0 + t] = tmp[t];
  }
}

}  // namespace dsv4::kernels::detail
#endif
