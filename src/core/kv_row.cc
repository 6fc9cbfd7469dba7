// core: FP8 KV row encode/decode (see kv_row.h).
#include "core/kv_row.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"

namespace dsv4 {
namespace {

// Every E4M3 code's value, built from e4m3_to_float once: reading a window (up to window_size rows per
// layer per decoded token) decodes far more codes than anything else, and a lookup is exact.
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

void encode_kv_row(const KvRowLayout& l, std::span<const float> row, std::span<uint8_t> entry) {
  DSV4_CHECK(l.valid() && static_cast<int64_t>(row.size()) == l.dims && static_cast<int64_t>(entry.size()) == l.bytes(),
             "encode_kv_row: bad sizes");
  const auto nope = static_cast<size_t>(l.nope_dims());
  const auto scales = static_cast<size_t>(l.scales_offset());
  quantize_fp8(row.first(nope), kKvQuantBlock, entry.first(nope),
               entry.subspan(scales, static_cast<size_t>(l.n_scales())));
  for (size_t i = 0; i < static_cast<size_t>(l.rope_dims); ++i) {
    const uint16_t h = float_to_bf16(row[nope + i]);
    entry[nope + 2 * i] = static_cast<uint8_t>(h & 0xFF);
    entry[nope + 2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::fill(entry.begin() + static_cast<ptrdiff_t>(scales) + l.n_scales(), entry.end(), uint8_t{0});
}

void decode_kv_row(const KvRowLayout& l, std::span<const uint8_t> entry, std::span<float> row) {
  DSV4_CHECK(l.valid() && static_cast<int64_t>(row.size()) == l.dims && static_cast<int64_t>(entry.size()) == l.bytes(),
             "decode_kv_row: bad sizes");
  const auto nope = static_cast<size_t>(l.nope_dims());
  const uint8_t* scales = entry.data() + l.scales_offset();
  const std::array<float, 256>& e4m3 = e4m3_table();
  for (size_t b = 0; b < static_cast<size_t>(l.n_scales()); ++b) {
    const float s = e8m0_to_float(scales[b]);
    for (size_t j = 0; j < static_cast<size_t>(kKvQuantBlock); ++j) {
      const size_t i = b * kKvQuantBlock + j;
      row[i] = e4m3[entry[i]] * s;
    }
  }
  for (size_t i = 0; i < static_cast<size_t>(l.rope_dims); ++i) {
    const auto h = static_cast<uint16_t>(entry[nope + 2 * i] | entry[nope + 2 * i + 1] << 8);
    row[nope + i] = bf16_to_float(h);
  }
}

void encode_index_key(std::span<const float> key, std::span<uint8_t> entry) {
  const auto d = static_cast<int64_t>(key.size());
  DSV4_CHECK(d > 0 && d % kIndexKeyBlock == 0 && static_cast<int64_t>(entry.size()) == index_key_bytes(d),
             "encode_index_key: bad sizes");
  quantize_fp4(key, kIndexKeyBlock, entry.first(key.size() / 2), entry.subspan(key.size() / 2));
}

void decode_index_key(std::span<const uint8_t> entry, std::span<float> key) {
  const auto d = static_cast<int64_t>(key.size());
  DSV4_CHECK(d > 0 && d % kIndexKeyBlock == 0 && static_cast<int64_t>(entry.size()) == index_key_bytes(d),
             "decode_index_key: bad sizes");
  const uint8_t* scales = entry.data() + d / 2;
  // The scale once per block, codes through plain pointers: the indexer decodes every stored key at every
  // step (model/deepseek_v4/indexer.cc), and an ldexp per element pair made that 233 ns per 128-dim key
  // (3.8 ms per CSA layer and token at a 64K context, 16K keys); now ~45 ns. Same products, same bits.
  for (int64_t b = 0; b < d; b += kIndexKeyBlock) {
    const float s = e8m0_to_float(scales[b / kIndexKeyBlock]);
    const uint8_t* codes = entry.data() + b / 2;
    float* out = key.data() + b;
    for (int64_t i = 0; i < kIndexKeyBlock / 2; ++i) {
      out[2 * i] = e2m1_unpack_lo(codes[i]) * s;
      out[2 * i + 1] = e2m1_unpack_hi(codes[i]) * s;
    }
  }
}

void index_key_scale_quads(const uint8_t* const* rows, int64_t n, int64_t dims, uint32_t* quads) {
  const int64_t nb = dims / kIndexKeyBlock, full_quads = nb / 4;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* sc = rows[j] + dims / 2;
    for (int64_t c = 0; c < full_quads; ++c) std::memcpy(&quads[c * n + j], sc + 4 * c, 4);
    if (nb % 4 != 0) {
      uint32_t v = 0;
      for (int64_t b = 4 * full_quads; b < nb; ++b) v |= static_cast<uint32_t>(sc[b]) << (8 * (b % 4));
      quads[full_quads * n + j] = v;
    }
  }
}

}  // namespace dsv4
