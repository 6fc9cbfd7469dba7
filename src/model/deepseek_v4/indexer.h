// model/deepseek_v4: the lightning indexer of a CSA layer (spec §2.6): its compressor builds the keys,
// its queries reuse the rank-q_lora latent, and each query keeps the top-k visible compressed entries.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4::v4 {

// The indexer's row-independent projections, run once over a batch's rows: q [n, nh, hd] = wq_b·qr
// (before RoPE), head weights [n, nh] = bf16(bf16(weights_proj·x) · hd^-0.5 · nh^-0.5), and its
// compressor's projections of x. x: [n, dim] attention input; qr: [n, q_lora_rank].
struct IndexerProjection {
  ScratchVec<float> q, weights;  // [n, index_heads, index_head_dim], [n, index_heads]
  CompressorProjection keys;
};
void indexer_project(const ModelContext& ctx, const IndexerWeights& w, const float* x, const float* qr, int64_t n,
                     IndexerProjection* p);
// indexer_project in parts, so a caller runs its linears in one dispatch with its own: the jobs that read
// x (head weights, the compressor's kv and score) and the one that reads qr (queries), p sized for n
// rows; indexer_project_finish scales the head weights once those jobs ran.
void indexer_project_jobs(const ModelContext& ctx, const IndexerWeights& w, const float* x, const float* qr, int64_t n,
                          IndexerProjection* p, std::vector<LinearJob>* x_jobs, std::vector<LinearJob>* qr_jobs);
void indexer_project_finish(const ModelContext& ctx, IndexerProjection* p);

// One sequence's rows row0..row0+n−1 of p, at positions start..start+n−1: finishes their queries in p
// (RoPE with rope_cs [n, rope_head_dim], the rows' ref::rope_cos_sin tables the attention already made;
// Hadamard; FP4 simulation), feeds the keys to the indexer compressor, then selects for each query
// i the top min(index_topk, ⌊(pos+1)/4⌋) entries. selected[i] (i < n; *selected keeps any longer size
// and every list's capacity, so a caller's reused vector does not allocate): entry ids in descending score
// order (ties to the lower id). scores (optional): [i] the scores of all visible entries of query i (for the tie-rule
// self-check).
void indexer_select(const ModelContext& ctx, int64_t il, const IndexerWeights& w, LayerState* st, IndexerProjection* p,
                    int64_t row0, int64_t start, int64_t n, const float* rope_cs,
                    std::vector<std::vector<int32_t>>* selected, std::vector<std::vector<float>>* scores);

}  // namespace dsv4::v4
