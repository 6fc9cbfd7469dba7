// core: the FP8 storage layout of one compressed KV row (spec §4; FlashMLA "MODEL1 FP8 sparse"),
// generalised to a row of `dims` values whose last `rope_dims` are the RoPE dims:
//   bytes [0, nope)                    nope = dims − rope_dims E4M3 codes, blocks of 64
//   bytes [nope, nope + 2·rope_dims)   BF16 rope dims, little-endian
//   then nope/64 ue8m0 scales, padded with zeros to a multiple of 8 bytes.
// The official row (512 dims, 64 rope) is 448 + 128 + 7 + 1 = 584 bytes. A row that already carries the
// reference's QAT rounding (fake_quant_fp8 with block 64 on the nope dims, bf16 rope dims) decodes back
// to exactly the same floats, so storing it this way loses nothing.
#pragma once

#include <cstdint>
#include <span>

namespace dsv4 {

inline constexpr int64_t kKvQuantBlock = 64;

struct KvRowLayout {
  int64_t dims = 0;
  int64_t rope_dims = 0;

  int64_t nope_dims() const { return dims - rope_dims; }
  int64_t n_scales() const { return nope_dims() / kKvQuantBlock; }
  int64_t scales_offset() const { return nope_dims() + 2 * rope_dims; }
  int64_t bytes() const { return scales_offset() + (n_scales() + 7) / 8 * 8; }
  // rope_dims <= dims, nope dims a multiple of 64, rope part starting 8-aligned.
  bool valid() const { return dims > 0 && rope_dims >= 0 && rope_dims <= dims && nope_dims() % kKvQuantBlock == 0; }
};

// Indexer keys (spec §2.5 step 3, §4): Hadamard-rotated and FP4-simulated in blocks of 32 over all
// dims, so they are stored as dims/2 packed E2M1 bytes (low nibble first) + dims/32 ue8m0 scales:
// 64 + 4 = 68 bytes for the 128-dim keys. Lossless on the reference's FP4 grid like the FP8 rows.
inline constexpr int64_t kIndexKeyBlock = 32;
inline int64_t index_key_bytes(int64_t dims) {
  return dims / 2 + dims / kIndexKeyBlock;
}
// key: [dims] floats (dims a multiple of 32) <-> entry: [index_key_bytes(dims)] bytes.
void encode_index_key(std::span<const float> key, std::span<uint8_t> entry);
void decode_index_key(std::span<const uint8_t> entry, std::span<float> key);
// The scale codes of n index keys (rows[j]: index_key_bytes(dims) bytes), four to a dword for the integer
// indexers' one-key-per-lane tests: quads[c·n + j] holds the codes of blocks 4c .. 4c + 3 of key j (block
// 4c + i in byte i), c < ceil(dims / 128). A last partial quad is read byte by byte (zeros above), so no read
// passes a row's end.
void index_key_scale_quads(const uint8_t* const* rows, int64_t n, int64_t dims, uint32_t* quads);

// row: [dims] floats -> entry: [layout.bytes()] bytes (padding written as 0).
void encode_kv_row(const KvRowLayout& layout, std::span<const float> row, std::span<uint8_t> entry);
// entry: [layout.bytes()] bytes -> row: [dims] floats.
void decode_kv_row(const KvRowLayout& layout, std::span<const uint8_t> entry, std::span<float> row);

}  // namespace dsv4
