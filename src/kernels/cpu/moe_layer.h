// kernels: a whole MoE layer's experts (spec §2.9 after routing) in two thread-pool dispatches.
// Tokens are grouped by expert; stage 1 splits the gate/up rows of every active expert (and the shared
// expert) across all threads at once, so 2 or 64 cores are busy even when each expert has one token;
// stage 2 gives each thread a slice of output rows and sums that slice over the experts in expert-id order,
// then adds the shared expert and rounds to bf16 — the reference's combine, with no cross-thread reduction.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scratch.h"
#include "kernels/cpu/moe_expert.h"

namespace dsv4::kernels {

struct MoeLayerWeights {
  const Fp4Expert* experts = nullptr;  // [n_experts] routed experts (w1/w3 [n_inter, d_model], w2 [d_model, n_inter])
  int64_t n_experts = 0;
  const Fp8Expert* shared = nullptr;  // the shared expert (may be nullptr)
  float swiglu_limit = 10.0f;         // ≤ 0 disables the clamp
  // With AMX: the fewest tokens a call runs the shared expert on AMX (a dense weight: it sees every token,
  // AmxRouting::dense). The routed experts follow MatmulOptions::amx_min_tokens; when they take AMX the
  // shared expert does too.
  int64_t shared_amx_min_tokens = kAmxMinTokensDefault;
};

// Grow-only buffers reused across calls (allocation only when a larger batch than before arrives). The
// token-sized ones are ScratchVecs: once steps keep asking much less (decode after a long prefill),
// scratch_end_step gives the memory back. The expert-sized ones stay at their bound.
struct MoeLayerScratch {
  ScratchVec<float> xq, xperm, h, hperm;
  ScratchVec<float> shared_x, shared_h;  // the shared expert's stage-1 / stage-2 activations in its FP8 tile's layout
  ScratchVec<int32_t> assign_token;
  ScratchVec<float> assign_weight;
  std::vector<int32_t> slot_expert, slot_begin, slot_fill, slot_of, row_offset;
  // AMX: each slot's activations packed to bf16 tiles (stage 1: xg, stage 2: h), and where each slot's starts.
  ScratchVec<uint32_t> amx_x, amx_h;
  std::vector<int64_t> amx_x_off, amx_h_off;
  ScratchVec<uint16_t> amx_apack;  // per pool slot: the AMX decode buffer
  ScratchVec<float> amx_out;       // per pool slot: [2][n_tokens][64] GEMM results before their epilogue
};

// x: [n_tokens, d_model] bf16 values (the ffn_norm output; fake-quantized here, once per token);
// expert_ids / route_weights: [n_tokens, top_k] (an expert listed twice for a token runs once, with its
// first weight — as the reference does). y: [n_tokens, d_model] = bf16(Σ_e routed (expert-id order) +
// shared). Scalar ISA, and AMX with opt.amx_min_tokens = 1: bit-identical to running moe_expert_fp4/fp8
// per token and summing (on AMX from opt.amx_min_tokens tokens). Each expert's part of a row depends only
// on that row and on which path the expert took (the vector tiles, or AMX from the thresholds above), so
// a row's result is independent of the batch while every expert stays on one path.
void moe_layer(const MoeLayerWeights& w, const float* x, int64_t n_tokens, const int32_t* expert_ids,
               const float* route_weights, int64_t top_k, float* y, MoeLayerScratch& scratch,
               const MatmulOptions& opt);

}  // namespace dsv4::kernels
