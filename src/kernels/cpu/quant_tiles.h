// kernels (internal): the per-ISA inner tiles behind fp8_gemm / fp4_gemm and the fused MoE expert.
// A tile computes up to kTileRows weight rows × kTileTokens activation rows in full, so a row's result
// never depends on which rows or tokens share its tile (batch- and thread-count invariance).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels::detail {

inline constexpr int kTileRows = 2;
inline constexpr int kTileTokens = 4;

// E8M0 → float for every code (255 → NaN, 0 → 2^-127), so scale decoding is one table load.
extern const float kE8m0ToFloat[256];

// sums[r][t] = Σ_k x_t[k] · w_r[k] for r < n_rows, t < n_tokens.
struct Fp8Tile {
  const uint8_t* w[kTileRows];  // E4M3 codes of each row, [k]
  const uint8_t* s[kTileRows];  // E8M0 scales of each row's 128-row block, [ceil(k/128)]
  int n_rows;                   // 1..kTileRows
  const float* x;               // [n_tokens, ldx]
  int64_t ldx;
  int n_tokens;  // 1..kTileTokens
  int64_t k;
  float sums[kTileRows][kTileTokens];
};

// Same for FP4. Vector tiles read x in "FP4 block order" (see fp4_permute_x), the scalar tile in
// natural order.
struct Fp4Tile {
  const uint8_t* w[kTileRows];  // packed codes of each row, [k/2]
  const uint8_t* s[kTileRows];  // E8M0 scale per 32 of each row, [k/32]
  int n_rows;
  const float* x;
  int64_t ldx;
  int n_tokens;
  int64_t k;  // multiple of 32
  float sums[kTileRows][kTileTokens];
};

using Fp8TileFn = void (*)(Fp8Tile& t);
using Fp4TileFn = void (*)(Fp4Tile& t);

void fp8_tile_scalar(Fp8Tile& t);
void fp4_tile_scalar(Fp4Tile& t);
#if defined(__x86_64__)
void fp8_tile_avx2(Fp8Tile& t);
void fp4_tile_avx2(Fp4Tile& t);
void fp8_tile_avx512(Fp8Tile& t);
void fp4_tile_avx512(Fp4Tile& t);
#endif

Fp8TileFn fp8_tile_for(Isa isa);  // isa already resolved
Fp4TileFn fp4_tile_for(Isa isa);

// The vector FP4 tiles decode a packed 32-block into its 16 low nibbles (elements 0,2,..,30) and its
// 16 high nibbles (1,3,..,31); instead of re-interleaving weights per row we permute the activation
// once per call: within each 32-block, out = [x0, x2, .., x30, x1, x3, .., x31]. [n_tokens, k] → same.
void fp4_permute_x(const float* x, int64_t n_tokens, int64_t k, float* out);
bool fp4_tile_wants_permuted_x(Isa isa);

}  // namespace dsv4::kernels::detail
