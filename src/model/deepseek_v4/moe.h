// model/deepseek_v4: the MoE feed-forward of one layer (spec §2.9): gate (hash or sqrt-softplus + bias),
// routed FP4 experts with clamped SwiGLU, the shared expert, combined in expert-id order.
#pragma once

#include <cstdint>

#include "model/deepseek_v4/context.h"
#include "model/weights.h"

namespace dsv4::v4 {

// x: [n, dim] after ffn_norm (bf16 values); tokens: [n] ids (hash routing). out: [n, dim] (bf16 values).
// gate_idx / gate_w (optional): [n, top_k] the routing as the gate returns it.
void moe_forward(const ModelContext& ctx, int64_t il, const MoeWeights& w, const float* x, const int32_t* tokens,
                 int64_t n, float* out, int32_t* gate_idx, float* gate_w);

}  // namespace dsv4::v4
