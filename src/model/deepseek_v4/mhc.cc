// model/deepseek_v4: mHC over tokens and the LM head (spec §2.2, §2.10).
#include "model/deepseek_v4/mhc.h"

#include <vector>

#include "core/check.h"
#include "core/scratch.h"
#include "core/thread_pool.h"
#include "kernels/cpu/hc_mix.h"
#include "kernels/cpu/hc_mix_post.h"
#include "model/deepseek_v4/dispatch_profile.h"
#include "model/deepseek_v4/linear.h"
#include "ops/reference/mhc.h"
#include "ops/reference/norm.h"

namespace dsv4::v4 {
namespace {

// fn(i) for every token i in [0, n), one token per pool chunk.
template <typename Fn>
void for_tokens(const ModelContext& ctx, int64_t n, Fn&& fn) {
  for_each_item(ctx.exec, n, 1, fn);
}

// The mixes of all n tokens at once on the cpu backend (kernels/cpu/hc_mix.h, bit-identical to the
// reference's per-token mixes): [n, n_mix] in a grow-only per-thread buffer, one pass over the packed fn
// per 8 tokens, split by mix over the pool. nullptr on the reference backend.
const float* batch_mixes(const ModelContext& ctx, const HcWeights& w, int64_t n_mix, const float* H, int64_t n) {
  if (ctx.exec.backend != Backend::kCpu) return nullptr;
  DSV4_CHECK(!w.fn_packed.empty(), "mHC: cpu-backend weights without the packed fn");
  const auto p = ctx.hc_params();
  thread_local ScratchVec<float> m;
  m.grow(n * n_mix);
  kernels::hc_mixes(w.fn_packed.data(), n_mix, p.hc_mult * p.dim, H, n, p.norm_eps, m.data(), ctx.exec.isa,
                    ctx.exec.pool);
  return m.data();
}

// The fn bytes the mixes of n tokens read, for the dispatch profile: the cpu kernel streams the packed fn
// (padded to whole 4-mix panels) once per group of 8 tokens, the reference fn once per token. Counted as
// fp32, as held.
int64_t mix_weight_bytes(const ModelContext& ctx, const HcWeights& w, int64_t n) {
  if (ctx.exec.backend != Backend::kCpu) return n * static_cast<int64_t>(w.fn.size() * sizeof(float));
  return (n + kernels::kHcMixMaxTokens - 1) / kernels::kHcMixMaxTokens *
         static_cast<int64_t>(w.fn_packed.size() * sizeof(float));
}

}  // namespace

void hc_pre_tokens(const ModelContext& ctx, const HcWeights& w, const float* H, int64_t n, float* y, float* post,
                   float* comb) {
  const auto p = ctx.hc_params();
  const int64_t hc = p.hc_mult, n_mix = (2 + hc) * hc;
  const DispatchProfile::Scope timed(Phase::kMhc, mix_weight_bytes(ctx, w, n));
  const float* m = batch_mixes(ctx, w, n_mix, H, n);
  for_tokens(ctx, n, [&](int64_t i) {
    const float* x = H + i * hc * p.dim;
    if (m) {
      ref::hc_pre_apply(p, m + i * n_mix, w.scale.data(), w.base.data(), x, y + i * p.dim, post + i * hc,
                        comb + i * hc * hc);
    } else {
      ref::hc_pre(p, w.fn.data(), w.scale.data(), w.base.data(), x, y + i * p.dim, post + i * hc, comb + i * hc * hc);
    }
  });
}

void hc_post_tokens(const ModelContext& ctx, const float* x, const float* residual, const float* post,
                    const float* comb, int64_t n, float* out) {
  const DispatchProfile::Scope timed(Phase::kMhc);
  const auto p = ctx.hc_params();
  const int64_t hc = p.hc_mult;
  if (ctx.exec.backend == Backend::kCpu) {  // bit-identical to ref::hc_post, split within a token too
    kernels::hc_post(hc, p.dim, x, residual, post, comb, n, out, ctx.exec.isa, ctx.exec.pool);
    return;
  }
  for_tokens(ctx, n, [&](int64_t i) {
    ref::hc_post(p, x + i * p.dim, residual + i * hc * p.dim, post + i * hc, comb + i * hc * hc, out + i * hc * p.dim);
  });
}

void head_logits(const ModelContext& ctx, const HcWeights& hc_head, const std::vector<float>& norm,
                 const LinearWeight& head, const float* H, int64_t n, float* logits) {
  // The head linear inside charges kHeadLinear; this phase its mixes' fn.
  const DispatchProfile::Scope timed(Phase::kHeadMix, mix_weight_bytes(ctx, hc_head, n));
  const auto p = ctx.hc_params();
  thread_local ScratchVec<float> h;  // [n, dim], grow-only (trimmed at the end of a forward)
  h.grow(n * p.dim);
  float* hbuf = h.data();  // this thread's buffer: the lambda may run on pool workers
  const float* m = batch_mixes(ctx, hc_head, p.hc_mult, H, n);
  for_tokens(ctx, n, [&](int64_t i) {
    float* hi = hbuf + i * p.dim;
    const float* x = H + i * p.hc_mult * p.dim;
    if (m) {
      ref::hc_head_apply(p, m + i * p.hc_mult, hc_head.scale.data(), hc_head.base.data(), x, hi);
    } else {
      ref::hc_head(p, hc_head.fn.data(), hc_head.scale.data(), hc_head.base.data(), x, hi);
    }
    ref::rms_norm(hi, 1, p.dim, norm.data(), p.norm_eps, hi);
  });
  linear(ctx.exec, head, hbuf, n, logits);
}

}  // namespace dsv4::v4
