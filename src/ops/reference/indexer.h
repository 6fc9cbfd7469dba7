// ops/reference: the lightning indexer's scores and the top-k with the tie rule (spec §2.6,
// golden/README.md "numerics contract" 2).
#pragma once

#include <cstdint>

namespace dsv4::ref {

// scores[t] = bf16(Σ_h bf16(ReLU(bf16(q_h·k_t)) · w_h)) for t < n_keys: the reference's bf16 einsum,
// ReLU, multiply and head sum. q [n_heads, head_dim], keys [n_keys, head_dim], w [n_heads] (bf16 values,
// already scaled by head_dim^-0.5·n_heads^-0.5).
void indexer_scores(const float* q, int64_t n_heads, int64_t head_dim, const float* keys, int64_t n_keys,
                    const float* w, float* scores);

// The k largest of scores[n] in descending order; equal scores go to the lower index (a stable
// descending sort). Writes k indices to out; k ≤ n.
void topk_desc(const float* scores, int64_t n, int64_t k, int32_t* out);

}  // namespace dsv4::ref
