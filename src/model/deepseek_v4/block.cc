// model/deepseek_v4: block forward (spec §2.2).
#include "model/deepseek_v4/block.h"

#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"
#include "ops/reference/norm.h"

namespace dsv4::v4 {

void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                        const float* y, int64_t n_rows, float* out, IndexerSelection* selection) {
  const int64_t d = ctx.cfg.dim;
  std::vector<float> x(static_cast<size_t>(n_rows * d));
  ref::rms_norm(y, n_rows, d, w.attn_norm.data(), static_cast<float>(ctx.cfg.norm_eps), x.data());
  attention_forward(ctx, il, w.attn, segs, x.data(), n_rows, out, selection);
}

void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, LayerState* st, const float* y,
                        int64_t start, int64_t n, float* out, IndexerSelection* selection) {
  const BlockSegment seg{st, 0, n, start};
  attention_sublayer(ctx, il, w, std::span<const BlockSegment>(&seg, 1), y, n, out, selection);
}

void moe_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, const float* y, const int32_t* tokens,
                  int64_t n, float* out, int32_t* gate_idx, float* gate_w) {
  const int64_t d = ctx.cfg.dim;
  std::vector<float> x(static_cast<size_t>(n * d));
  ref::rms_norm(y, n, d, w.ffn_norm.data(), static_cast<float>(ctx.cfg.norm_eps), x.data());
  moe_forward(ctx, il, w.moe, x.data(), tokens, n, out, gate_idx, gate_w);
}

void block_forward(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                   float* H, const int32_t* tokens, int64_t n, BlockTrace* trace) {
  const int64_t d = ctx.cfg.dim, hc = ctx.cfg.hc_mult, K = ctx.cfg.n_activated_experts;
  const auto sz = [](int64_t v) { return static_cast<size_t>(v); };
  std::vector<float> y(sz(n * d)), post(sz(n * hc)), comb(sz(n * hc * hc)), sub(sz(n * d)), H2(sz(n * hc * d));

  hc_pre_tokens(ctx, w.hc_attn, H, n, y.data(), post.data(), comb.data());
  if (trace) trace->hc_pre_attn_y = y, trace->hc_attn_post = post, trace->hc_attn_comb = comb;
  attention_sublayer(ctx, il, w, segs, y.data(), n, sub.data(), trace ? &trace->indexer : nullptr);
  if (trace) trace->attn_out = sub;
  hc_post_tokens(ctx, sub.data(), H, post.data(), comb.data(), n, H2.data());

  hc_pre_tokens(ctx, w.hc_ffn, H2.data(), n, y.data(), post.data(), comb.data());
  if (trace) trace->hc_pre_ffn_y = y, trace->hc_ffn_post = post, trace->hc_ffn_comb = comb;
  std::vector<int32_t> gi(trace ? sz(n * K) : 0);
  std::vector<float> gw(trace ? sz(n * K) : 0);
  moe_sublayer(ctx, il, w, y.data(), tokens, n, sub.data(), trace ? gi.data() : nullptr, trace ? gw.data() : nullptr);
  if (trace) trace->moe_out = sub, trace->gate_indices = gi, trace->gate_weights = gw;
  hc_post_tokens(ctx, sub.data(), H2.data(), post.data(), comb.data(), n, H);
  if (trace) trace->block_out.assign(H, H + n * hc * d);
}

}  // namespace dsv4::v4
