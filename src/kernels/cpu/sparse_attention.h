// kernels: the sparse attention core on the CPU (spec §2.8): one query, all heads, over an ordered list
// of selected K = V latent rows with a learned sink. It follows ref::sparse_attention's structure exactly
// — online softmax over blocks of 64 list entries (golden README item 12), fp32 exp of each score, the
// block's probability sum in double, probabilities rounded to bf16 for P·V, fp32 rescaling, sink in the
// denominator only, bf16 output — and vectorises the q·k dots (fp32 lanes, one K row loaded once for a
// group of heads) and P·V (fp32 lanes over head_dim, one row chunk loaded once for a group of heads).
//
// Numerics against the reference (tests/unit/kernel_attention_test.cc checks both):
//  * Isa::kScalar accumulates the dots and each block's P·V in double in the reference's order:
//    bit-identical always.
//  * Vector ISAs sum each q·k in fp32 lanes and each block's P·V as an fp32 fused multiply-add chain in list
//    order — the accumulation spec §2.8 describes for the kernel (bf16 probabilities, fp32 accumulation;
//    the reference accumulates in double only to be order-independent), at half the work of double lanes.
//    Every other step is the reference's own, so the output is bit-identical to the reference with its
//    block P·V taken as that fp32 chain whenever every q·k is exact in fp32 (the test's emulation), and
//    within
//        |out − ref| ≤ 2^-6 · max_j |row_j[d]|      (per element d of every head)
//    of the reference always — one bf16 ulp of a probability (2^-8 relative, fed through the convex P·V
//    combination) plus one bf16 ulp of the output (≤ 2^-7 relative to |out| ≤ max_j |row_j[d]|), with room
//    for the fp32 score error (γ_D·Σ|q·k|) and the fp32 P·V error (γ_64·Σ_j p_j|row_j[d]| per block: at
//    most ~2^-18·max_j |row_j[d]| once divided by the denominator Σ_j p_j), far below either.
//
// Masked entries (nullptr rows) are skipped: in the reference they add exp(−inf) = +0 to the sum and
// nothing to P·V, so skipping them changes no bit; they still count for the 64-block partition.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

struct SparseAttentionShape {
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;  // head_dim^-0.5
};

struct AttentionOptions {
  Isa isa = Isa::kAuto;        // forced ISA (tests, bench); unsupported requests fall back to the best
  ThreadPool* pool = nullptr;  // heads are split across the pool; nullptr runs on the calling thread
};

// Per-thread working memory, grown on first use and reused by later calls (no allocation in the step
// loop once warm). One scratch must not be shared by concurrent calls.
struct SparseAttentionScratch {
  struct Slot {
    std::vector<const float*> visible;  // non-masked rows of the current block
    std::vector<float> scores;          // [heads of the chunk, 64]
    std::vector<float> probs;           // [heads of the chunk, 64] bf16 probabilities
    std::vector<float> block;           // [heads of the chunk, head_dim] the block's P·V (attention_tiles.h)
    std::vector<float> acc;             // [heads of the chunk, head_dim]
    std::vector<float> m, l;            // [heads of the chunk] running max / denominator
    std::vector<float> bmax, rescale;   // [heads of the chunk] this block's max and rescale factor
    std::vector<double> psum;           // [heads of the chunk] this block's probability sum
  };
  std::vector<Slot> slots;  // one per pool chunk
};

// q [n_heads, head_dim]; rows[n_idx]: KV rows [head_dim], nullptr = masked; sink [n_heads];
// out [n_heads, head_dim] (bf16 values). The list order fixes the 64-block partition.
void sparse_attention(const SparseAttentionShape& shape, const float* q, const float* const* rows, int64_t n_idx,
                      const float* sink, float* out, SparseAttentionScratch& scratch, const AttentionOptions& opt);

}  // namespace dsv4::kernels
