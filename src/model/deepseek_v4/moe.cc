// model/deepseek_v4: MoE (spec §2.9).
#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <vector>

#include "core/formats.h"
#include "core/scratch.h"
#include "core/thread_pool.h"
#include "kernels/cpu/indexer.h"
#include "kernels/cpu/moe_layer.h"
#include "model/deepseek_v4/dispatch_profile.h"
#include "model/deepseek_v4/linear.h"
#include "ops/reference/moe.h"

namespace dsv4::v4 {
namespace {

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}
template <typename T>
void grow(ScratchVec<T>& v, int64_t n) {
  v.grow(n);
}

// One SwiGLU expert on one token: w2·bf16(route_weight·silu(min(w1x, L))·clamp(w3x, ±L)) → bf16 [dim].
// role: the routed experts' or the shared expert's AMX threshold (Execution::amx).
void run_expert(const Execution& ex, const ExpertWeights& e, kernels::WeightRole role, float limit, float route_weight,
                const float* x, float* y) {
  const int64_t inter = e.w1.params.n_out;
  std::vector<float> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter)), h(static_cast<size_t>(inter));
  linear(ex, e.w1, x, 1, g.data(), role);  // bf16 GEMM outputs (golden README item 8)
  linear(ex, e.w3, x, 1, u.data(), role);
  ref::swiglu_clamped(g.data(), u.data(), inter, limit, route_weight, h.data());
  linear(ex, e.w2, h.data(), 1, y, role);
}

// Tokens [t0, t1) expert by expert, the reference's combine: routed outputs summed in fp32 in expert-id
// order (an expert listed twice runs once, README item 13), plus the shared expert, rounded to bf16.
void experts_per_token(const Execution& ex, const MoeWeights& w, float limit, int64_t E, int64_t K, int64_t d,
                       const float* x, const int32_t* idx, const float* wk, int64_t t0, int64_t t1, float* out) {
  std::vector<float> y(static_cast<size_t>(d)), ye(static_cast<size_t>(d));
  for (int64_t i = t0; i < t1; ++i) {
    const float* xi = x + i * d;
    const int32_t* ii = idx + i * K;
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t e = 0; e < E; ++e) {
      const int32_t* it = std::find(ii, ii + K, static_cast<int32_t>(e));
      if (it == ii + K) continue;
      run_expert(ex, w.experts[static_cast<size_t>(e)], kernels::WeightRole::kRoutedExpert, limit, wk[i * K + (it - ii)],
                 xi, ye.data());
      for (int64_t j = 0; j < d; ++j) y[static_cast<size_t>(j)] += ye[static_cast<size_t>(j)];
    }
    run_expert(ex, w.shared, kernels::WeightRole::kDense, limit, 1.0f, xi, ye.data());
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = round_bf16(y[static_cast<size_t>(j)] + ye[static_cast<size_t>(j)]);
  }
}

// Weight bytes one moe_layer call streams: every distinct routed expert of the batch once, and the
// shared expert (the dispatch profile's bytes; bench only).
int64_t expert_bytes(const MoeWeights& w, const int32_t* idx, int64_t n_idx) {
  thread_local std::vector<int32_t> ids;
  ids.assign(idx, idx + n_idx);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  int64_t bytes = 0;
  for (const int32_t e : ids) {
    const kernels::Fp4Expert& x = w.fp4_experts[static_cast<size_t>(e)];
    bytes += kernels::fp4_weight_bytes(x.w1) + kernels::fp4_weight_bytes(x.w3) + kernels::fp4_weight_bytes(x.w2);
  }
  const kernels::Fp8Expert& s = w.fp8_shared;
  return bytes + kernels::fp8_weight_bytes(s.w1) + kernels::fp8_weight_bytes(s.w3) + kernels::fp8_weight_bytes(s.w2);
}

}  // namespace

void moe_forward(const ModelContext& ctx, int64_t il, const MoeWeights& w, const float* x, const int32_t* tokens,
                 int64_t n, float* out, int32_t* gate_idx, float* gate_w) {
  const DispatchProfile::Scope timed(Phase::kMoeRoute);  // the gate linear inside charges kMoeGate
  const ModelConfig& c = ctx.cfg;
  const Execution& ex = ctx.exec;
  const int64_t E = c.n_routed_experts, K = c.n_activated_experts, d = c.dim;
  const float limit = static_cast<float>(c.swiglu_limit);
  ref::GateParams gp{E, K, static_cast<float>(c.route_scale)};
  const bool hash = c.is_hash_layer(il);
  // Routing for every token: z = gate·x (fp32 GEMM), σ = sqrt-softplus, top-k (hash: the token's table row).
  // Grow-only per-thread buffers: no allocation in a steady decode loop.
  thread_local ScratchVec<float> z, wk;  // [n, E], [n, K]: trimmed at the end of a forward
  thread_local std::vector<float> sigma;
  thread_local ScratchVec<int32_t> idx;
  grow(z, n * E);
  grow(sigma, E);
  grow(wk, n * K);
  grow(idx, n * K);
  linear(ex, w.gate, x, n, z.data());  // [n, E]
  // cpu backend: the score-biased top-k by the radix select (kernels/cpu/indexer.h: the reference's
  // stable descending order, ties to the lower id), with no allocation; the reference sorts.
  const bool fast = ex.backend == Backend::kCpu;
  thread_local std::vector<float> biased;
  thread_local kernels::TopkScratch topk;
  grow(biased, E);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t e = 0; e < E; ++e) sigma[static_cast<size_t>(e)] = ref::sqrt_softplus(z[static_cast<size_t>(i * E + e)]);
    const int32_t* hash_row = hash ? w.tid2eid.data() + static_cast<int64_t>(tokens[i]) * K : nullptr;
    if (fast && !hash && !w.bias.empty()) {
      for (int64_t e = 0; e < E; ++e) biased[static_cast<size_t>(e)] = sigma[static_cast<size_t>(e)] + w.bias[static_cast<size_t>(e)];
      kernels::topk_desc(biased.data(), E, K, idx.data() + i * K, topk);
      ref::route_weights(gp, sigma.data(), idx.data() + i * K, wk.data() + i * K);
    } else {
      ref::gate_route(gp, sigma.data(), hash ? nullptr : w.bias.data(), hash_row, idx.data() + i * K, wk.data() + i * K);
    }
  }
  if (gate_idx) std::copy_n(idx.begin(), n * K, gate_idx);
  if (gate_w) std::copy_n(wk.begin(), n * K, gate_w);

  // Plain pointers from here on: the thread_local buffers above belong to this thread, and the lambdas
  // below may run on pool workers.
  const int32_t* idx_p = idx.data();
  const float* wk_p = wk.data();
  if (ex.backend == Backend::kCpu && w.fused) {
    // The whole batch at once: tokens grouped by expert, gate/up rows of every active expert split
    // across the pool (kernels/cpu/moe_layer.h); same combine order as experts_per_token.
    thread_local kernels::MoeLayerScratch scratch;
    const kernels::MoeLayerWeights mw{w.fp4_experts.data(), E, &w.fp8_shared, limit,
                                      ex.amx.min_tokens(kernels::WeightRole::kDense)};
    kernels::MatmulOptions opt;
    opt.isa = ex.isa;
    opt.pool = ex.pool;
    opt.amx_min_tokens = ex.amx.min_tokens(kernels::WeightRole::kRoutedExpert);
    const DispatchProfile::Scope experts(Phase::kMoeExperts, DispatchProfile::active() ? expert_bytes(w, idx_p, n * K) : 0);
    kernels::moe_layer(mw, x, n, idx_p, wk_p, K, out, scratch, opt);
    return;
  }
  if (ex.backend == Backend::kReference && ex.pool != nullptr) {
    // Tokens are independent: static chunks over the pool, each token's arithmetic unchanged.
    ex.pool->parallel_for(n, 1, [&](int64_t t0, int64_t t1, int) {
      experts_per_token(ex, w, limit, E, K, d, x, idx_p, wk_p, t0, t1, out);
    });
    return;
  }
  experts_per_token(ex, w, limit, E, K, d, x, idx_p, wk_p, 0, n, out);
}

}  // namespace dsv4::v4
