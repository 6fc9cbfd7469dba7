// model/deepseek_v4: the April MTP module (spec §2.11): from the main model's final streams at position
// i and the embedding of token i+1, one SWA block with its own state and head → logits for token i+2.
#pragma once

#include <cstdint>
#include <span>

#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// H: [n, hc, dim] main final streams, the segments' rows back to back (each segment: one sequence's
// consecutive positions and its MTP LayerState); next_tokens: [n] the token after each position;
// logits: [n, vocab], or nullptr to skip the head (the caller runs it on the rows it wants).
// On return H holds the MTP block's output streams (the input of its hc_head).
void mtp_forward(const ModelContext& ctx, int64_t k, const ModelWeights& mw, std::span<const BlockSegment> segs,
                 float* H, const int32_t* next_tokens, int64_t n, float* logits);

}  // namespace dsv4::v4
