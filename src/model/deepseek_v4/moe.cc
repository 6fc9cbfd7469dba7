// model/deepseek_v4: MoE (spec §2.9).
#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <vector>

#include "core/formats.h"
#include "ops/reference/linear.h"
#include "ops/reference/moe.h"

namespace dsv4::v4 {
namespace {

// One SwiGLU expert on one token: w2·bf16(route_weight·silu(min(w1x, L))·clamp(w3x, ±L)) → bf16 [dim].
void run_expert(const ExpertWeights& e, float limit, float route_weight, const float* x, float* y) {
  const int64_t inter = e.w1.params.n_out;
  std::vector<float> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter)), h(static_cast<size_t>(inter));
  ref::linear(e.w1.params, e.w1.w.data(), x, 1, g.data());  // bf16 GEMM outputs (golden README item 8)
  ref::linear(e.w3.params, e.w3.w.data(), x, 1, u.data());
  ref::swiglu_clamped(g.data(), u.data(), inter, limit, route_weight, h.data());
  ref::linear(e.w2.params, e.w2.w.data(), h.data(), 1, y);
}

}  // namespace

void moe_forward(const ModelContext& ctx, int64_t il, const MoeWeights& w, const float* x, const int32_t* tokens,
                 int64_t n, float* out, int32_t* gate_idx, float* gate_w) {
  const ModelConfig& c = ctx.cfg;
  const int64_t E = c.n_routed_experts, K = c.n_activated_experts, d = c.dim;
  const float limit = static_cast<float>(c.swiglu_limit);
  ref::GateParams gp{E, K, static_cast<float>(c.route_scale)};
  const bool hash = c.is_hash_layer(il);
  std::vector<float> z(static_cast<size_t>(E)), sigma(static_cast<size_t>(E)), w_k(static_cast<size_t>(K));
  std::vector<int32_t> idx(static_cast<size_t>(K));
  std::vector<float> y(static_cast<size_t>(d)), ye(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * d;
    ref::linear(w.gate.params, w.gate.w.data(), xi, 1, z.data());  // fp32 GEMM
    for (int64_t e = 0; e < E; ++e) sigma[static_cast<size_t>(e)] = ref::sqrt_softplus(z[static_cast<size_t>(e)]);
    ref::gate_route(gp, sigma.data(), hash ? nullptr : w.bias.data(),
                    hash ? w.tid2eid.data() + static_cast<int64_t>(tokens[i]) * K : nullptr, idx.data(), w_k.data());
    if (gate_idx) std::copy(idx.begin(), idx.end(), gate_idx + i * K);
    if (gate_w) std::copy(w_k.begin(), w_k.end(), gate_w + i * K);
    // Routed outputs summed in fp32 in expert-id order; an expert listed twice runs once (README item 13).
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t e = 0; e < E; ++e) {
      const auto it = std::find(idx.begin(), idx.end(), static_cast<int32_t>(e));
      if (it == idx.end()) continue;
      run_expert(w.experts[static_cast<size_t>(e)], limit, w_k[static_cast<size_t>(it - idx.begin())], xi, ye.data());
      for (int64_t j = 0; j < d; ++j) y[static_cast<size_t>(j)] += ye[static_cast<size_t>(j)];
    }
    run_expert(w.shared, limit, 1.0f, xi, ye.data());
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = round_bf16(y[static_cast<size_t>(j)] + ye[static_cast<size_t>(j)]);
  }
}

}  // namespace dsv4::v4
