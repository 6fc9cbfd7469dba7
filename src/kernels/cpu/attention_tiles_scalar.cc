// kernels: portable attention loops (the kScalar ISA) and the per-ISA dispatch of attention_tiles.h.
// The scalar dots accumulate in double in index order, exactly as ref::dot_f64, so the scalar kernels
// are bit-identical to the reference for every input.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/formats.h"
#include "kernels/cpu/attention_tiles.h"
#include "ops/reference/common.h"

namespace dsv4::kernels::detail {

void attn_scores_scalar(const float* q, int64_t n_heads, int64_t d, const float* const* rows, int64_t n_rows,
                        float scale, float* scores) {
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < n_rows; ++j) scores[h * n_rows + j] = ref::dot_f64(q + h * d, rows[j], d) * scale;
}

void attn_pv_scalar(const float* probs, int64_t n_heads, const float* const* rows, int64_t n_rows, int64_t d,
                    float* blocks) {
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < d; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < n_rows; ++j)
        s += static_cast<double>(probs[h * n_rows + j]) * static_cast<double>(rows[j][i]);
      blocks[h * d + i] = static_cast<float>(s);
    }
}

void attn_rescale_scalar(float* acc, const float* block, int64_t d, float rescale) {
  for (int64_t i = 0; i < d; ++i) acc[i] = acc[i] * rescale + block[i];
}

void attn_output_scalar(const float* acc, int64_t d, float l, float* out) {
  for (int64_t i = 0; i < d; ++i) out[i] = round_bf16(acc[i] / l);
}

void attn_softmax_scalar(const float* scores, int64_t n_heads, int64_t n_rows, const float* m, float* bmax,
                         float* rescale, double* psum, float* probs) {
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* sc = scores + h * n_rows;
    float* pb = probs + h * n_rows;
    float mx = m[h];
    for (int64_t j = 0; j < n_rows; ++j) mx = std::max(mx, sc[j]);
    bmax[h] = mx;
    if (mx == -INFINITY) {
      std::fill(pb, pb + n_rows, 0.0f);
      continue;
    }
    rescale[h] = std::exp(m[h] - mx);
    double sum = 0.0;
    for (int64_t j = 0; j < n_rows; ++j) {
      const float pj = std::exp(sc[j] - mx);
      sum += pj;
      pb[j] = round_bf16(pj);
    }
    psum[h] = sum;
  }
}

void indexer_scores_scalar(const float* q, int64_t n_heads, int64_t d, const float* keys, int64_t k0, int64_t k1,
                           const float* w, float* scores) {
  for (int64_t t = k0; t < k1; ++t) {
    double acc = 0.0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float s = round_bf16(ref::dot_f64(q + h * d, keys + t * d, d));
      const float r = s > 0.0f ? s : 0.0f;
      acc += static_cast<double>(round_bf16(r * w[h]));
    }
    scores[t] = round_bf16(static_cast<float>(acc));
  }
}

AttnTiles attn_tiles_for(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16 || isa == Isa::kAmx)
    return {attn_scores_avx512, attn_pv_avx512, attn_rescale_avx512, attn_softmax_avx512, attn_output_avx512};
  if (isa == Isa::kAvx2)
    return {attn_scores_avx2, attn_pv_avx2, attn_rescale_avx2, attn_softmax_avx2, attn_output_avx2};
#endif
  (void)isa;
  return {attn_scores_scalar, attn_pv_scalar, attn_rescale_scalar, attn_softmax_scalar, attn_output_scalar};
}

IndexerScoresFn indexer_scores_for(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAmx) return indexer_scores_amx;
  if (isa == Isa::kAvx512Bf16) return indexer_scores_avx512bf16;
  if (isa == Isa::kAvx512) return indexer_scores_avx512;
  if (isa == Isa::kAvx2) return indexer_scores_avx2;
#endif
  (void)isa;
  return indexer_scores_scalar;
}

}  // namespace dsv4::kernels::detail
