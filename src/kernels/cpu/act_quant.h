// kernels: the FP8 activation fake-quantization of spec §3 ("Activation quantization") on the hot path —
// every FP8/FP4 linear's input, per token in 1×block K-blocks (block 128; 64 for the KV simulation):
//   s = fp8_block_scale(absmax of the block);  x ← round_e4m3(clamp(x / s, ±448)) · s
// optionally after rounding every element to bf16 (w2's input: bf16 between modules, then quantized).
//
// Numerics: bit-identical to core/quant.cc's dsv4::fake_quant_fp8 (which stays the reference) for every
// input on every ISA: s is a power of two in [2^-22, 2^120] or +inf, so 1/s is exact and x · (1/s) is the
// same correctly rounded value as x / s (subnormal results included); NaN lanes take the reference's
// codec NaN; absmax ignores NaN as std::max does (tests/unit/kernel_act_quant_test.cc).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4::kernels {

// x, out: [n] with n % block == 0 (out may equal x). bf16_first: out = fake_quant(round_bf16(x)).
// Runs on the calling thread; no allocation.
void act_quant_fp8(const float* x, float* out, int64_t n, int64_t block, bool bf16_first, Isa isa);

namespace detail {
using ActQuantFn = void (*)(const float* x, float* out, int64_t n, int64_t block, bool bf16_first);
void act_quant_fp8_scalar(const float* x, float* out, int64_t n, int64_t block, bool bf16_first);
void act_quant_fp8_avx512(const float* x, float* out, int64_t n, int64_t block, bool bf16_first);
}  // namespace detail

}  // namespace dsv4::kernels
