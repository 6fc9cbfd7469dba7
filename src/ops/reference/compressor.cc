// ops/reference: gated pooling (spec §2.5).
#include "ops/reference/compressor.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsv4::ref {

void compress_pool(const float* kv, const float* score, int64_t n_cand, int64_t dc, float* out) {
  std::vector<float> e(static_cast<size_t>(n_cand));
  for (int64_t ch = 0; ch < dc; ++ch) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < n_cand; ++c) mx = std::max(mx, score[c * dc + ch]);
    double sum = 0.0;
    for (int64_t c = 0; c < n_cand; ++c) {
      e[static_cast<size_t>(c)] = std::exp(score[c * dc + ch] - mx);  // −inf candidates give exactly 0
      sum += e[static_cast<size_t>(c)];
    }
    const float s = static_cast<float>(sum);
    double acc = 0.0;
    for (int64_t c = 0; c < n_cand; ++c) acc += static_cast<double>(kv[c * dc + ch] * (e[static_cast<size_t>(c)] / s));
    out[ch] = static_cast<float>(acc);
  }
}

}  // namespace dsv4::ref
