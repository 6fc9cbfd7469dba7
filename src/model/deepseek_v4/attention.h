// model/deepseek_v4: the attention module of one layer (spec §2.3–2.8): query/KV projections, window,
// compressor, indexer, sparse core and grouped output projection, for n consecutive tokens of one
// sequence continuing its LayerState. The same code serves one-shot prefill, chunks and decode.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

void attention_state_init(const ModelContext& ctx, const AttentionWeights& w, LayerState* st);

// Optional output of the CSA indexer: [n, width] selected compressed-entry ids in list order (descending
// score, ties to the lower id), −1 where fewer entries are visible; width = min(index_topk, (start+n)/4).
struct IndexerSelection {
  int64_t width = 0;
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> scores;  // [n][visible]: every visible entry's index score
};

// x: [n, dim] attention input after attn_norm (bf16 values); out: [n, dim] (bf16 values).
void attention_forward(const ModelContext& ctx, int64_t il, const AttentionWeights& w, LayerState* st, const float* x,
                       int64_t start, int64_t n, float* out, IndexerSelection* selection);

}  // namespace dsv4::v4
