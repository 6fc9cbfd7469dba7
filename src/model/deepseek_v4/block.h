// model/deepseek_v4: one transformer block with its two mHC sites (spec §2.2 "Block(L)"):
// H ← hc_post(Attn(attn_norm(hc_pre_attn(H))), H); H ← hc_post(MoE(ffn_norm(hc_pre_ffn(H))), H).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// Everything the goldens record for one layer (golden/README.md "Per-layer intermediates").
struct BlockTrace {
  std::vector<float> hc_pre_attn_y, hc_attn_post, hc_attn_comb, attn_out;
  IndexerSelection indexer;
  std::vector<float> hc_pre_ffn_y, hc_ffn_post, hc_ffn_comb, moe_out, gate_weights;
  std::vector<int32_t> gate_indices;
  std::vector<float> block_out;
};

// The attention sublayer including attn_norm: y [n_rows, dim] (hc_pre output) → out [n_rows, dim].
void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                        const float* y, int64_t n_rows, float* out, IndexerSelection* selection);
// The same for one sequence's n tokens at positions start.. .
void attention_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, LayerState* st, const float* y,
                        int64_t start, int64_t n, float* out, IndexerSelection* selection);
// The MoE sublayer including ffn_norm: y [n, dim] → out [n, dim]; gate outputs optional ([n, top_k]).
void moe_sublayer(const ModelContext& ctx, int64_t il, const BlockWeights& w, const float* y, const int32_t* tokens,
                  int64_t n, float* out, int32_t* gate_idx, float* gate_w);

// H: [n_rows, hc, dim] in/out, the segments' rows back to back. tokens: [n_rows] (hash routing).
// Sequences never interact: attention keeps its per-sequence parts per segment; projections, mHC and
// MoE run over all rows at once.
// trace: optional, single segment only.
void block_forward(const ModelContext& ctx, int64_t il, const BlockWeights& w, std::span<const BlockSegment> segs,
                   float* H, const int32_t* tokens, int64_t n_rows, BlockTrace* trace);

}  // namespace dsv4::v4
