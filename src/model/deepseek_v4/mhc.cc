// model/deepseek_v4: mHC over tokens and the LM head (spec §2.2, §2.10).
#include "model/deepseek_v4/mhc.h"

#include <vector>

#include "model/deepseek_v4/linear.h"
#include "ops/reference/mhc.h"
#include "ops/reference/norm.h"

namespace dsv4::v4 {

void hc_pre_tokens(const ModelContext& ctx, const HcWeights& w, const float* H, int64_t n, float* y, float* post,
                   float* comb) {
  const auto p = ctx.hc_params();
  const int64_t hc = p.hc_mult;
  for (int64_t i = 0; i < n; ++i)
    ref::hc_pre(p, w.fn.data(), w.scale.data(), w.base.data(), H + i * hc * p.dim, y + i * p.dim, post + i * hc,
                comb + i * hc * hc);
}

void hc_post_tokens(const ModelContext& ctx, const float* x, const float* residual, const float* post,
                    const float* comb, int64_t n, float* out) {
  const auto p = ctx.hc_params();
  const int64_t hc = p.hc_mult;
  for (int64_t i = 0; i < n; ++i)
    ref::hc_post(p, x + i * p.dim, residual + i * hc * p.dim, post + i * hc, comb + i * hc * hc, out + i * hc * p.dim);
}

void head_logits(const ModelContext& ctx, const HcWeights& hc_head, const std::vector<float>& norm,
                 const LinearWeight& head, const float* H, int64_t n, float* logits) {
  const auto p = ctx.hc_params();
  std::vector<float> h(static_cast<size_t>(n * p.dim));  // [n, dim]
  for (int64_t i = 0; i < n; ++i) {
    float* hi = h.data() + i * p.dim;
    ref::hc_head(p, hc_head.fn.data(), hc_head.scale.data(), hc_head.base.data(), H + i * p.hc_mult * p.dim, hi);
    ref::rms_norm(hi, 1, p.dim, norm.data(), p.norm_eps, hi);
  }
  linear(ctx.exec, head, h.data(), n, logits);
}

}  // namespace dsv4::v4
