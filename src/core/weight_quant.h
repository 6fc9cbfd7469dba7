// core: weight quantizers for writing checkpoints in the official format (spec §3): FP8 E4M3 with one
// ue8m0 scale per 128x128 block, and MXFP4-style packed E2M1 with one ue8m0 scale per 32 K-elements.
// Bit exact and deterministic; used by make-tiny and by tests that need real quantized weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4 {

inline constexpr size_t kFp8WeightBlock = 128;
inline constexpr size_t kFp4WeightBlock = 32;

// w: row-major [rows, cols]. codes: [rows, cols] E4M3; scales: [ceil(rows/128), ceil(cols/128)] E8M0.
// Each (possibly partial, at the edges) 128x128 block gets s = 2^ceil(log2(amax/448)) from the fp32 bits
// (the same rule as the activation quantizer, so |w/s| <= 448 and no code saturates); codes are RNE.
// A block of zeros gets the floor scale and zero codes. Calling it on consecutive 128-row slices gives
// the same bytes as one call on the whole matrix, so large weights can be quantized in streaming chunks.
void quantize_fp8_weight_blocks(std::span<const float> w, size_t rows, size_t cols, std::span<uint8_t> codes,
                                std::span<uint8_t> scales_e8m0);

// w: row-major [rows, cols], cols a multiple of 32. packed: [rows, cols/2], low nibble = even element;
// scales: [rows, cols/32] E8M0 with s = 2^ceil(log2(amax/6)).
void quantize_fp4_weight_rows(std::span<const float> w, size_t rows, size_t cols, std::span<uint8_t> packed,
                              std::span<uint8_t> scales_e8m0);

}  // namespace dsv4
