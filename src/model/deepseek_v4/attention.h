// model/deepseek_v4: the attention module of one layer (spec §2.3–2.8): query/KV projections, window,
// compressor, indexer, sparse core and grouped output projection, for a batch of sequences, each with n
// consecutive tokens continuing its LayerState. The same code serves one-shot prefill, chunks and decode.
// The projections run once over all rows of the batch (each weight is read once per step, not once per
// sequence); RoPE, the window ring, the compressors, the indexer and the sparse core run per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// Binds st's page tables to `pools` (the model's; nullptr: private unbudgeted fp32 pools, for the teacher).
void attention_state_init(const ModelContext& ctx, const AttentionWeights& w, StatePools* pools, LayerState* st);

// Optional output of the CSA indexer: [n, width] selected compressed-entry ids in list order (descending
// score, ties to the lower id), −1 where fewer entries are visible; width = min(index_topk, (start+n)/4).
struct IndexerSelection {
  int64_t width = 0;
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> scores;  // [n][visible]: every visible entry's index score
};

// One sequence's rows of a batch: rows [row0, row0 + n) are its positions start.. start+n−1.
struct BlockSegment {
  LayerState* state = nullptr;
  int64_t row0 = 0, n = 0, start = 0;
};

// x: [n_rows, dim] attention input after attn_norm (bf16 values), the segments' rows back to back;
// out: [n_rows, dim] (bf16 values). selection: optional, single segment only.
void attention_forward(const ModelContext& ctx, int64_t il, const AttentionWeights& w, std::span<const BlockSegment> segs,
                       const float* x, int64_t n_rows, float* out, IndexerSelection* selection);

}  // namespace dsv4::v4
