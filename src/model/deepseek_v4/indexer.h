// model/deepseek_v4: the lightning indexer of a CSA layer (spec §2.6): its compressor builds the keys,
// its queries reuse the rank-q_lora latent, and each query keeps the top-k visible compressed entries.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// Feeds the tokens to the indexer compressor, then selects for each query i (position start+i) the
// top min(index_topk, ⌊(pos+1)/4⌋) entries. x: [n, dim] attention input; qr: [n, q_lora_rank].
// selected[i]: entry ids in descending score order (ties to the lower id). scores (optional): [i] the
// scores of all visible entries of query i (for the tie-rule self-check).
void indexer_select(const ModelContext& ctx, int64_t il, const IndexerWeights& w, LayerState* st, const float* x,
                    const float* qr, int64_t start, int64_t n, std::vector<std::vector<int32_t>>* selected,
                    std::vector<std::vector<float>>* scores);

}  // namespace dsv4::v4
