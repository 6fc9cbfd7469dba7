// ops/reference: gate and SwiGLU (spec §2.9).
#include "ops/reference/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/formats.h"
#include "ops/reference/indexer.h"

namespace dsv4::ref {

float sqrt_softplus(float z) {
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
  return std::sqrt(sp);
}

void gate_route(const GateParams& p, const float* sigma, const float* bias, const int32_t* hash_row, int32_t* idx,
                float* weights) {
  if (hash_row) {
    std::copy(hash_row, hash_row + p.top_k, idx);
  } else {
    std::vector<float> biased(sigma, sigma + p.n_experts);
    if (bias)
      for (int64_t e = 0; e < p.n_experts; ++e) biased[static_cast<size_t>(e)] += bias[e];
    topk_desc(biased.data(), p.n_experts, p.top_k, idx);
  }
  route_weights(p, sigma, idx, weights);
}

void route_weights(const GateParams& p, const float* sigma, const int32_t* idx, float* weights) {
  double sum = 0.0;
  for (int64_t k = 0; k < p.top_k; ++k) sum += sigma[idx[k]];
  const float s = static_cast<float>(sum);
  for (int64_t k = 0; k < p.top_k; ++k) weights[k] = sigma[idx[k]] / s * p.route_scale;
}

void swiglu_clamped(const float* g, const float* u, int64_t n, float limit, float route_weight, float* h) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i], ui = u[i];
    if (limit > 0.0f) {
      ui = std::clamp(ui, -limit, limit);
      gi = std::min(gi, limit);  // the gate has no lower clamp
    }
    const float silu = gi / (1.0f + std::exp(-gi));
    h[i] = round_bf16(route_weight * (silu * ui));
  }
}

}  // namespace dsv4::ref
