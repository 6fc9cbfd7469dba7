// ops/reference: indexer scores and top-k.
#include "ops/reference/indexer.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/formats.h"
#include "ops/reference/common.h"

namespace dsv4::ref {

void indexer_scores(const float* q, int64_t n_heads, int64_t head_dim, const float* keys, int64_t n_keys,
                    const float* w, float* scores) {
  for (int64_t t = 0; t < n_keys; ++t) {
    double acc = 0.0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float s = round_bf16(dot_f64(q + h * head_dim, keys + t * head_dim, head_dim));
      const float r = s > 0.0f ? s : 0.0f;
      acc += static_cast<double>(round_bf16(r * w[h]));
    }
    scores[t] = round_bf16(static_cast<float>(acc));
  }
}

void topk_desc(const float* scores, int64_t n, int64_t k, int32_t* out) {
  DSV4_CHECK(k >= 0 && k <= n, "topk_desc: k out of range");
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  std::copy(idx.begin(), idx.begin() + k, out);
}

}  // namespace dsv4::ref
