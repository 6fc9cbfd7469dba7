// model/deepseek_v4: block forward (spec §2.2).
#include "model/deepseek_v4/block.h"

#include "core/scratch.h"

#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/moe.h"
#include "ops/reference/norm.h"

namespace dsv4::v4 {
namespace {

// Grow-only per-thread buffer: allocates only when a larger batch than before arrives, never in a steady
// decode loop. `slot` keeps the buffers a call holds at the same time apart.
float* scratch(int slot, int64_t n) {
  thread_local ScratchVec<float> bufs[7];  // trimmed at the end of a forward (core/scratch.h)
  return bufs[slot].grow(n);
}
enum Slot { kAttnNorm, kFfnNorm, kY, kPost, kComb, kSub, kH2 };

}  // namespace

void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                        const float* y, int64_t n_rows, float* out, IndexerSelection* selection) {
  const int64_t d = ctx.cfg.dim;
  float* x = scratch(kAttnNorm, n_rows * d);  // [n_rows, d]
  ref::rms_norm(y, n_rows, d, w.attn_norm.data(), static_cast<float>(ctx.cfg.norm_eps), x);
  attention_forward(ctx, il, w.attn, segs, x, n_rows, out, selection);
}

void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, LayerState* st, const float* y,
                        int64_t start, int64_t n, float* out, IndexerSelection* selection) {
  const BlockSegment seg{st, 0, n, start};
  attention_sublayer(ctx, il, w, std::span<const BlockSegment>(&seg, 1), y, n, out, selection);
}

void moe_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, const float* y, const int32_t* tokens,
                  int64_t n, float* out, int32_t* gate_idx, float* gate_w) {
  const int64_t d = ctx.cfg.dim;
  float* x = scratch(kFfnNorm, n * d);  // [n, d]
  ref::rms_norm(y, n, d, w.ffn_norm.data(), static_cast<float>(ctx.cfg.norm_eps), x);
  moe_forward(ctx, il, w.moe, x, tokens, n, out, gate_idx, gate_w);
}

void block_forward(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                   float* H, const int32_t* tokens, int64_t n, BlockTrace* trace) {
  const int64_t d = ctx.cfg.dim, hc = ctx.cfg.hc_mult, K = ctx.cfg.n_activated_experts;
  const auto sz = [](int64_t v) { return static_cast<size_t>(v); };
  float* y = scratch(kY, n * d);              // [n, d]
  float* post = scratch(kPost, n * hc);       // [n, hc]
  float* comb = scratch(kComb, n * hc * hc);  // [n, hc, hc]
  float* sub = scratch(kSub, n * d);          // [n, d]
  float* H2 = scratch(kH2, n * hc * d);       // [n, hc, d]
  const auto copy = [](const float* p, int64_t len) { return std::vector<float>(p, p + len); };

  hc_pre_tokens(ctx, w.hc_attn, H, n, y, post, comb);
  if (trace) trace->hc_pre_attn_y = copy(y, n * d), trace->hc_attn_post = copy(post, n * hc), trace->hc_attn_comb = copy(comb, n * hc * hc);
  attention_sublayer(ctx, il, w, segs, y, n, sub, trace ? &trace->indexer : nullptr);
  if (trace) trace->attn_out = copy(sub, n * d);
  hc_post_tokens(ctx, sub, H, post, comb, n, H2);

  hc_pre_tokens(ctx, w.hc_ffn, H2, n, y, post, comb);
  if (trace) trace->hc_pre_ffn_y = copy(y, n * d), trace->hc_ffn_post = copy(post, n * hc), trace->hc_ffn_comb = copy(comb, n * hc * hc);
  std::vector<int32_t> gi(trace ? sz(n * K) : 0);
  std::vector<float> gw(trace ? sz(n * K) : 0);
  moe_sublayer(ctx, il, w, y, tokens, n, sub, trace ? gi.data() : nullptr, trace ? gw.data() : nullptr);
  if (trace) trace->moe_out = copy(sub, n * d), trace->gate_indices = gi, trace->gate_weights = gw;
  hc_post_tokens(ctx, sub, H2, post, comb, n, H);
  if (trace) trace->block_out.assign(H, H + n * hc * d);
}

}  // namespace dsv4::v4
