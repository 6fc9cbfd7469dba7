// model/deepseek_v4: the April MTP module (spec §2.11): from the main model's final streams at position
// i and the embedding of token i+1, one SWA block with its own state and head → logits for token i+2.
#pragma once

#include <cstdint>

#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// H: [n, hc, dim] main final streams at positions start..start+n−1; next_tokens: [n] the token after each
// position; logits: [n, vocab]. On return H holds the MTP block's output streams (the input of its hc_head).
void mtp_forward(const ModelContext& ctx, int64_t k, const ModelWeights& mw, LayerState* st, float* H,
                 const int32_t* next_tokens, int64_t start, int64_t n, float* logits);

}  // namespace dsv4::v4
