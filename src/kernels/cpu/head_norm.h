// kernels: the attention's per-head query RMS norm in bf16 steps (ref::head_rms_norm_bf16, spec §2.3 step 2)
// for several head vectors at once:
//   ss = Σ_i f64(bf16(x_i · x_i)) from 0.0 in index order, mean = bf16(f32(ss / dim)),
//   var = bf16(mean + eps), rs = bf16(1 / sqrt(var)), x_i = bf16(x_i · rs)
// Bit-identical to the reference on every ISA, NaN and infinity included. What the reference pays for is
// the chain of `dim` dependent double adds per vector (~0.9 µs per 512-dim head on Zen 5, 64 heads per
// token and layer); the AVX-512 tier runs 8 vectors' chains in the 8 lanes of one register (an 8×8
// transpose per 8 positions feeds them), each lane adding in the reference's order, and scales 16 at once.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels {

// x: [n_vectors, dim], normalized in place. Runs on the calling thread; no allocation.
void head_rms_norm_bf16(float* x, int64_t n_vectors, int64_t dim, float eps, Isa isa);

namespace detail {
// Up to 8 vectors (n_vectors ≤ 8) on AVX-512.
void head_rms_norm_bf16_avx512(float* x, int64_t n_vectors, int64_t dim, float eps);
}  // namespace detail

}  // namespace dsv4::kernels
