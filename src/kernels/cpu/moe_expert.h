// kernels: one MoE expert (spec §2.9) on quantized weights, fused and unfused. For every token t:
//   g = bf16(w1·x_t), u = bf16(w3·x_t)            (the linears output bf16; spec §2.0)
//   u ← clamp(u, −limit, limit), g ← min(g, limit)  (no lower clamp on g)
//   h = route_weight[t]·(silu(g)·u)               (fp32; the routing weight is applied before w2)
//   out_t = bf16(w2 · fake_quant_fp8(bf16(h)))    (w2's own 1×128 activation quantization)
// x must already be fake-quantized per 1×128 (the FP8 linear's activation quantization of w1/w3 input).
// The fused path computes gate and up rows in one tile (shared activation loads, one pool dispatch, no
// g/u buffers) and applies the SwiGLU before the tile's results leave registers; it is bit-identical to
// the unfused composition of fp4_gemm/fp8_gemm calls, which is kept as its reference.
#pragma once

#include <cstdint>

#include "kernels/cpu/quant_matmul.h"

namespace dsv4::kernels {

// Routed experts: w1, w3 [n_inter, d_model]; w2 [d_model, n_inter] (FP4, spec §3).
struct Fp4Expert {
  Fp4Matrix w1, w3, w2;
};
// The shared expert: the same shapes in FP8.
struct Fp8Expert {
  Fp8Matrix w1, w3, w2;
};

// The activation above for one element, on the bf16-rounded linear outputs; limit ≤ 0 disables the
// clamp (the shared expert before the 2026-04-27 fix).
float swiglu_clamped(float g, float u, float route_weight, float limit);

// Scratch floats the expert functions need for n_tokens (the caller owns it; no allocation inside).
int64_t moe_expert_scratch_floats(int64_t n_inter, int64_t d_model, int64_t n_tokens);

// x: [n_tokens, d_model] fake-quantized; route_weight: [n_tokens] (nullptr = 1, the shared expert);
// out: [n_tokens, d_model] bf16 values. opt.round_bf16 is ignored (the rounding points are fixed above).
void moe_expert_fp4(const Fp4Expert& e, const float* x, int64_t n_tokens, const float* route_weight, float limit,
                    float* out, float* scratch, const MatmulOptions& opt);
void moe_expert_fp8(const Fp8Expert& e, const float* x, int64_t n_tokens, const float* route_weight, float limit,
                    float* out, float* scratch, const MatmulOptions& opt);

// The unfused reference composition: w1 and w3 through fp4_gemm/fp8_gemm into g/u buffers, the SwiGLU as
// a separate pass, then w2.
void moe_expert_fp4_unfused(const Fp4Expert& e, const float* x, int64_t n_tokens, const float* route_weight,
                            float limit, float* out, float* scratch, const MatmulOptions& opt);
void moe_expert_fp8_unfused(const Fp8Expert& e, const float* x, int64_t n_tokens, const float* route_weight,
                            float limit, float* out, float* scratch, const MatmulOptions& opt);

}  // namespace dsv4::kernels
