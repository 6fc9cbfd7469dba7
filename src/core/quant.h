// core: the reference's activation quantizers (spec §3), bit exact. Per row and per K-block:
//   a = max(absmax, floor);  s = 2^ceil(log2(fl32(a · fl32(1/qmax))))  (from the fp32 bits);
//   q = cast(clamp(x / s, ±qmax)) with RNE;  dequantized value = q · s.
// FP8: qmax 448, floor 1e-4, blocks of 128 (GEMM inputs) or 64 (KV simulation).
// FP4: qmax 6, floor 6·2^-126, blocks of 32 (indexer simulation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4 {

// Power-of-two ue8m0 scale for a block whose absolute maximum is `amax`.
float fp8_block_scale(float amax);
float fp4_block_scale(float amax);

// Rounds x to 2^ceil(log2(x)) using x's fp32 bits (x > 0 and normal).
float pow2_ceil_from_bits(float x);

// In-place fake quantization ("QAT simulation"): every element becomes its dequantized value.
// `x.size()` must be a multiple of `block`.
void fake_quant_fp8(std::span<float> x, size_t block);
void fake_quant_fp4(std::span<float> x, size_t block);

// Real quantization for storage (KV cache rows, test checkpoints): codes + one ue8m0 scale per block.
// codes.size() == x.size(); scales.size() == x.size() / block.
void quantize_fp8(std::span<const float> x, size_t block, std::span<uint8_t> codes,
                  std::span<uint8_t> scales_e8m0);
// FP4 codes are packed two per byte (low nibble first): packed.size() == x.size() / 2.
void quantize_fp4(std::span<const float> x, size_t block, std::span<uint8_t> packed,
                  std::span<uint8_t> scales_e8m0);

}  // namespace dsv4
