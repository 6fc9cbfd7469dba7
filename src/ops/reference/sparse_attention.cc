// ops/reference: blocked online-softmax sparse attention with a sink (spec §2.8).
#include "ops/reference/sparse_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/formats.h"
#include "ops/reference/common.h"

namespace dsv4::ref {

void sparse_attention(const SparseAttentionParams& p, const float* q, const float* const* rows, int64_t n_idx,
                      const float* sink, float* out) {
  constexpr int64_t kBlock = 64;
  const int64_t D = p.head_dim;
  std::vector<float> s(kBlock), acc(static_cast<size_t>(D));
  std::vector<double> blk(static_cast<size_t>(D));
  for (int64_t h = 0; h < p.n_heads; ++h) {
    const float* qh = q + h * D;
    float m = -INFINITY, l = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b0 = 0; b0 < n_idx; b0 += kBlock) {
      const int64_t nb = std::min(kBlock, n_idx - b0);
      float bmax = m;
      for (int64_t j = 0; j < nb; ++j) {
        const float* r = rows[b0 + j];
        s[static_cast<size_t>(j)] = r ? dot_f64(qh, r, D) * p.scale : -INFINITY;
        bmax = std::max(bmax, s[static_cast<size_t>(j)]);
      }
      if (bmax == -INFINITY) continue;  // nothing visible yet: the block adds exactly nothing
      const float rescale = std::exp(m - bmax);
      double psum = 0.0;
      std::fill(blk.begin(), blk.end(), 0.0);
      for (int64_t j = 0; j < nb; ++j) {
        const float pj = std::exp(s[static_cast<size_t>(j)] - bmax);
        psum += pj;
        const float* r = rows[b0 + j];
        if (!r) continue;
        const double pb = round_bf16(pj);  // bf16 probabilities for P·V
        for (int64_t d = 0; d < D; ++d) blk[static_cast<size_t>(d)] += pb * r[d];
      }
      l = l * rescale + static_cast<float>(psum);
      for (int64_t d = 0; d < D; ++d)
        acc[static_cast<size_t>(d)] = acc[static_cast<size_t>(d)] * rescale + static_cast<float>(blk[static_cast<size_t>(d)]);
      m = bmax;
    }
    l += std::exp(sink[h] - m);
    for (int64_t d = 0; d < D; ++d) out[h * D + d] = round_bf16(acc[static_cast<size_t>(d)] / l);
  }
}

}  // namespace dsv4::ref
