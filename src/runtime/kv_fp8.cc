// runtime: 584-byte FP8 KV entry encode/decode (see kv_fp8.h).
#include "runtime/kv_fp8.h"

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"

namespace dsv4 {

void encode_kv_fp8(std::span<const float> row, std::span<uint8_t> entry) {
  DSV4_CHECK(row.size() == kKvDims && entry.size() == kKvEntryBytes, "encode_kv_fp8: bad sizes");
  quantize_fp8(row.first(kKvNopeDims), kKvBlock, entry.first(kKvNopeDims),
               entry.subspan(kKvNopeDims + 2 * kKvRopeDims, kKvBlocks));
  for (int i = 0; i < kKvRopeDims; ++i) {
    const uint16_t h = float_to_bf16(row[static_cast<size_t>(kKvNopeDims + i)]);
    entry[static_cast<size_t>(kKvNopeDims + 2 * i)] = static_cast<uint8_t>(h & 0xFF);
    entry[static_cast<size_t>(kKvNopeDims + 2 * i + 1)] = static_cast<uint8_t>(h >> 8);
  }
  entry[kKvEntryBytes - 1] = 0;
}

void decode_kv_fp8(std::span<const uint8_t> entry, std::span<float> row) {
  DSV4_CHECK(row.size() == kKvDims && entry.size() == kKvEntryBytes, "decode_kv_fp8: bad sizes");
  const uint8_t* scales = entry.data() + kKvNopeDims + 2 * kKvRopeDims;
  for (int b = 0; b < kKvBlocks; ++b) {
    const float s = e8m0_to_float(scales[b]);
    for (int j = 0; j < kKvBlock; ++j) {
      const size_t i = static_cast<size_t>(b * kKvBlock + j);
      row[i] = e4m3_to_float(entry[i]) * s;
    }
  }
  for (int i = 0; i < kKvRopeDims; ++i) {
    const uint16_t h = static_cast<uint16_t>(entry[static_cast<size_t>(kKvNopeDims + 2 * i)] |
                                             entry[static_cast<size_t>(kKvNopeDims + 2 * i + 1)] << 8);
    row[static_cast<size_t>(kKvNopeDims + i)] = bf16_to_float(h);
  }
}

}  // namespace dsv4
