// ops/reference: the gated pooling of one compressed entry (spec §2.5). The caller lays out the
// candidates: non-overlap — the r tokens of the block; overlap (r=4) — the 4 tokens of block b−1 (their
// first-half channels) then the 4 tokens of block b (second-half channels), absent ones with score −inf.
#pragma once

#include <cstdint>

namespace dsv4::ref {

// out[dc] = Σ_c softmax_c(score[c, :]) ⊙ kv[c, :], softmax per channel over n_cand candidates.
// kv, score: [n_cand, dc] fp32 (score already includes ape). out: fp32 (the caller rounds to bf16).
void compress_pool(const float* kv, const float* score, int64_t n_cand, int64_t dc, float* out);

}  // namespace dsv4::ref
