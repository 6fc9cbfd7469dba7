// kernels: the MoE expert's SwiGLU epilogue (spec §2.9) over a run of intermediate rows of one token:
//   h[i] = swiglu_clamped(bf16(g[i]), bf16(u[i]), route_weight, limit)
// on the gate/up linears' fp32 sums (rounded to bf16 here: the linears output bf16, spec §2.0).
//
// Numerics: bit-identical to the scalar swiglu_clamped (moe_expert.h) on every ISA. The AVX-512 tier
// computes exp with glibc's expf algorithm (expf_avx512.inc), which gives std::exp's bits on glibc
// (checked over a sweep of floats in tests/unit/kernel_swiglu_test.cc), and every other step is the
// same IEEE fp32 operation as the scalar expression (no contraction: the build has -ffp-contract=off).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels {

// g, u, h: [n]. Runs on the calling thread; no allocation.
void swiglu_bf16(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h, Isa isa);

namespace detail {
using SwigluFn = void (*)(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h);
void swiglu_bf16_scalar(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h);
void swiglu_bf16_avx512(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h);
// Resolve once, outside the loop that calls it.
SwigluFn swiglu_fn(Isa isa);
// out[i] = expf(x[i]) with the vector exp the AVX-512 SwiGLU uses (its test hook).
void exp_f32_avx512(const float* x, float* out, int64_t n);

// The fused experts' epilogue: the gate/up tiles' sums of up to kSwigluRows consecutive rows for up to
// kTileTokens tokens, gathered so that the SwiGLU runs along rows (h is row-major [token, n_inter]) on
// whole vectors instead of one element per tile. Which order the elements take changes no bit.
inline constexpr int kSwigluRows = 16;
struct GateUpBlock {
  float g[kTileTokens][kSwigluRows];  // [token, row in the block]
  float u[kTileTokens][kSwigluRows];
  // A two-row tile's sums (row 0 = w1, row 1 = w3) for row b of the block.
  void put(const float (&sums)[kTileRows][kTileTokens], int n_tokens, int b) {
    for (int j = 0; j < n_tokens; ++j) {
      g[j][b] = sums[0][j];
      u[j][b] = sums[1][j];
    }
  }
};
}  // namespace detail

}  // namespace dsv4::kernels
