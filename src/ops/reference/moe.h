// ops/reference: MoE routing and the clamped SwiGLU (spec §2.9).
#pragma once

#include <cstdint>

namespace dsv4::ref {

// σ = sqrt(softplus(z)), softplus with β=1, linear above 20 (torch's threshold).
float sqrt_softplus(float z);

struct GateParams {
  int64_t n_experts = 0;
  int64_t top_k = 0;
  float route_scale = 1.0f;
};

// Routing of one token from its affinities sigma[n_experts]. hash_row (hash layers: tid2eid[token],
// [top_k]) fixes the experts; otherwise top_k of sigma + bias (ties to the lower id). Weights
// w = sigma[idx] / Σ sigma[idx] · route_scale. idx/weights: [top_k].
void gate_route(const GateParams& p, const float* sigma, const float* bias, const int32_t* hash_row, int32_t* idx,
                float* weights);
// gate_route's weights for chosen experts idx[top_k] (fast paths that select the experts themselves).
void route_weights(const GateParams& p, const float* sigma, const int32_t* idx, float* weights);

// h[n] = bf16(route_weight · (silu(min(g, limit)) · clamp(u, ±limit))) from the bf16 gate/up outputs
// g = w1·x, u = w3·x. limit ≤ 0 disables the clamp.
void swiglu_clamped(const float* g, const float* u, int64_t n, float limit, float route_weight, float* h);

}  // namespace dsv4::ref
