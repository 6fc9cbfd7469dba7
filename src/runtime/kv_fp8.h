// runtime: the 584-byte FP8 KV entry of spec §4 (FlashMLA "MODEL1 FP8 sparse" layout):
//   bytes [0, 448)   448 E4M3 nope dims, 7 blocks of 64
//   bytes [448, 576) 64 BF16 rope dims (little-endian)
//   bytes [576, 583) 7 ue8m0 scales, one per nope block
//   byte  583        pad (0)
// A row that already carries the reference's QAT rounding (fake_quant_fp8 with block 64 on the nope
// dims, bf16 rope dims) decodes back to exactly the same floats, so storing FP8 loses nothing.
#pragma once

#include <cstdint>
#include <span>

namespace dsv4 {

inline constexpr int kKvNopeDims = 448;
inline constexpr int kKvRopeDims = 64;
inline constexpr int kKvDims = kKvNopeDims + kKvRopeDims;  // 512
inline constexpr int kKvBlock = 64;
inline constexpr int kKvBlocks = kKvNopeDims / kKvBlock;  // 7
inline constexpr int kKvEntryBytes = kKvNopeDims + 2 * kKvRopeDims + kKvBlocks + 1;  // 584
static_assert(kKvEntryBytes == 584);

// row: [512] floats -> entry: [584] bytes.
void encode_kv_fp8(std::span<const float> row, std::span<uint8_t> entry);
// entry: [584] bytes -> row: [512] floats.
void decode_kv_fp8(std::span<const uint8_t> entry, std::span<float> row);

}  // namespace dsv4
