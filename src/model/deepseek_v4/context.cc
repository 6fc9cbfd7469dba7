// model/deepseek_v4: module context (RoPE tables, mHC params) built once per model.
#include "model/deepseek_v4/context.h"

#include "ops/reference/rope.h"

namespace dsv4::v4 {

ModelContext ModelContext::make(const ModelConfig& cfg) {
  ModelContext ctx;
  ctx.cfg = cfg;
  ref::RopeParams p;
  p.rope_dim = cfg.rope_head_dim;
  p.base = cfg.rope_theta;
  p.yarn = false;
  ctx.rope_window = ref::rope_frequencies(p);
  p.base = cfg.compress_rope_theta;
  p.yarn = cfg.original_seq_len > 0;
  p.original_seq_len = cfg.original_seq_len;
  p.factor = cfg.rope_factor;
  p.beta_fast = cfg.beta_fast;
  p.beta_slow = cfg.beta_slow;
  ctx.rope_compressed = ref::rope_frequencies(p);
  return ctx;
}

ref::HcParams ModelContext::hc_params() const {
  ref::HcParams p;
  p.hc_mult = cfg.hc_mult;
  p.dim = cfg.dim;
  p.sinkhorn_iters = cfg.hc_sinkhorn_iters;
  p.hc_eps = static_cast<float>(cfg.hc_eps);
  p.norm_eps = static_cast<float>(cfg.norm_eps);
  return p;
}

}  // namespace dsv4::v4
