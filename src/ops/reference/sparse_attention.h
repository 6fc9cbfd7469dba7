// ops/reference: the sparse attention core (spec §2.8, golden README): one query, all heads, over an
// ordered index list of KV rows (K = V). Online softmax in blocks of 64 list entries; probabilities
// cast to bf16 for P·V; the learned sink joins the denominator only; output rounded to bf16.
#pragma once

#include <cstdint>

namespace dsv4::ref {

struct SparseAttentionParams {
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;  // head_dim^-0.5
};

// q [n_heads, head_dim]; rows[n_idx]: pointers to KV rows [head_dim], nullptr = masked (−1); the list
// order fixes the 64-block partition. sink [n_heads]. out [n_heads, head_dim].
void sparse_attention(const SparseAttentionParams& p, const float* q, const float* const* rows, int64_t n_idx,
                      const float* sink, float* out);

}  // namespace dsv4::ref
