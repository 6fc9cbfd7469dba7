// model/deepseek_v4: the mHC sites of a block and the final collapse (spec §2.2, §2.10) over n tokens.
#pragma once

#include <cstdint>

#include "model/deepseek_v4/context.h"
#include "model/weights.h"

namespace dsv4::v4 {

// H: [n, hc, dim] → y [n, dim], post [n, hc], comb [n, hc, hc].
void hc_pre_tokens(const ModelContext& ctx, const HcWeights& w, const float* H, int64_t n, float* y, float* post,
                   float* comb);
// out [n, hc, dim] = hc_post(x [n, dim], residual [n, hc, dim], post, comb); out may not alias residual.
void hc_post_tokens(const ModelContext& ctx, const float* x, const float* residual, const float* post,
                    const float* comb, int64_t n, float* out);
// logits [n, vocab] = head · RMSNorm(hc_head(H)) (fp32 GEMM).
void head_logits(const ModelContext& ctx, const HcWeights& hc_head, const std::vector<float>& norm,
                 const LinearWeight& head, const float* H, int64_t n, float* logits);

}  // namespace dsv4::v4
