// model/deepseek_v4: MTP (spec §2.11).
#include "model/deepseek_v4/mtp.h"

#include <algorithm>
#include <vector>

#include "core/formats.h"
#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/linear.h"
#include "ops/reference/norm.h"

namespace dsv4::v4 {

void mtp_forward(const ModelContext& ctx, int64_t k, const ModelWeights& mw, std::span<const BlockSegment> segs,
                 float* H, const int32_t* next_tokens, int64_t n, float* logits) {
  const MtpWeights& w = mw.mtp[static_cast<size_t>(k)];
  const int64_t d = ctx.cfg.dim, hc = ctx.cfg.hc_mult;
  const float eps = static_cast<float>(ctx.cfg.norm_eps);
  const auto sz = [](int64_t v) { return static_cast<size_t>(v); };
  // e = e_proj(enorm(embed[t_{i+1}])) [n, d]; h_k = h_proj(hnorm(H_k)) [n, hc, d]; x_k = bf16(e + h_k).
  std::vector<float> e(sz(n * d)), ep(sz(n * d)), hn(sz(n * hc * d)), hp(sz(n * hc * d));
  for (int64_t i = 0; i < n; ++i)
    mw.embed.row(next_tokens[i], e.data() + i * d);
  ref::rms_norm(e.data(), n, d, w.enorm.data(), eps, e.data());
  linear(ctx.exec, w.e_proj, e.data(), n, ep.data());
  ref::rms_norm(H, n * hc, d, w.hnorm.data(), eps, hn.data());
  linear(ctx.exec, w.h_proj, hn.data(), n * hc, hp.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < hc; ++j)
      for (int64_t c = 0; c < d; ++c) {
        float& v = hp[sz((i * hc + j) * d + c)];
        v = round_bf16(ep[sz(i * d + c)] + v);
      }
  block_forward(ctx, ctx.cfg.n_layers + k, w.block, segs, hp.data(), next_tokens, n, nullptr);
  if (logits) head_logits(ctx, w.hc_head, w.norm, mw.head, hp.data(), n, logits);
  std::copy(hp.begin(), hp.end(), H);
}

}  // namespace dsv4::v4
