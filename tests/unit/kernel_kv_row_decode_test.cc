// unit: kernels::decode_kv_rows against core's decode_kv_row (the reference decode of the FP8 KV row
// layout, core/kv_row.h), bit for bit on every ISA: every E4M3 code in every lane of a 64-code block (NaN
// codes 0x7F and 0xFF, ±0, subnormals), every scale code (2^-127, whose products are subnormal, and 0xFF =
// NaN), rope dims of every bf16 class (NaN, ±inf, subnormal, ±0) and counts off the vector width, layouts
// from one block to the official 512/64 row and beyond, entries at every byte misalignment and in any order,
// outputs misaligned; and rows the model's own encoder wrote (encode_kv_row) decode to what it stored.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/kv_row.h"
#include "kernel_isas.h"
#include "kernels/cpu/kv_row_decode.h"

namespace dsv4::kernels {
namespace {

// Rows of `layout` held back to back at `misalign` bytes past a 64-byte boundary, and the pointers the
// kernel reads them through (in `order`).
struct Rows {
  std::vector<uint8_t> storage;
  std::vector<const uint8_t*> ptrs;
};
Rows place(const KvRowLayout& layout, const std::vector<std::vector<uint8_t>>& rows, int misalign,
           const std::vector<int>& order) {
  Rows r;
  const auto bytes = static_cast<size_t>(layout.bytes());
  r.storage.assign(128 + rows.size() * (bytes + 3), 0xA5);  // room for the alignment and misalign (< 64 each)
  auto base = reinterpret_cast<uintptr_t>(r.storage.data());
  const size_t start = (64 - base % 64) % 64 + static_cast<size_t>(misalign);
  std::vector<const uint8_t*> at(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    uint8_t* p = r.storage.data() + start + i * (bytes + 3);  // + 3: every row at another alignment
    std::copy(rows[i].begin(), rows[i].end(), p);
    at[i] = p;
  }
  for (int i : order) r.ptrs.push_back(at[static_cast<size_t>(i)]);
  return r;
}

// Every ISA (out at `out_misalign` floats past a 64-byte boundary) must give decode_kv_row's bits.
void expect_reference_bits(const KvRowLayout& layout, const std::vector<std::vector<uint8_t>>& rows,
                           const std::string& label) {
  const auto dims = static_cast<size_t>(layout.dims), bytes = static_cast<size_t>(layout.bytes());
  std::vector<int> order;
  for (int i = static_cast<int>(rows.size()) - 1; i >= 0; --i) order.push_back(i);  // reversed: any order
  if (!rows.empty()) order.push_back(0);                                            // and a repeat
  for (int misalign : {0, 1, 7, 33}) {
    const Rows in = place(layout, rows, misalign, order);
    std::vector<float> want(order.size() * dims);
    for (size_t i = 0; i < order.size(); ++i)
      decode_kv_row(layout, {in.ptrs[i], bytes}, {want.data() + i * dims, dims});
    for (Isa isa : isas()) {
      for (int out_misalign : {0, 3}) {
        std::vector<float> got(order.size() * dims + 32, -7.0f);
        float* out = got.data() + out_misalign;
        decode_kv_rows(layout, in.ptrs.data(), static_cast<int64_t>(order.size()), out, isa);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want[i]))
              << label << " isa " << isa_name(isa) << " entry misalign " << misalign << " out misalign " << out_misalign
              << " row " << i / dims << " dim " << i % dims << ": got " << out[i] << " want " << want[i];
        for (size_t i = want.size(); i + out_misalign < got.size(); ++i)
          ASSERT_EQ(out[i], -7.0f) << label << " isa " << isa_name(isa) << ": wrote past the rows at " << i;
      }
    }
  }
}

// Row bytes with the nope codes, rope bf16s and scale codes given by the generators.
template <typename Code, typename Rope, typename Scale>
std::vector<uint8_t> make_row(const KvRowLayout& layout, Code code, Rope rope, Scale scale) {
  std::vector<uint8_t> row(static_cast<size_t>(layout.bytes()), 0);
  for (int64_t i = 0; i < layout.nope_dims(); ++i) row[static_cast<size_t>(i)] = code(i);
  for (int64_t i = 0; i < layout.rope_dims; ++i) {
    const uint16_t h = rope(i);
    row[static_cast<size_t>(layout.nope_dims() + 2 * i)] = static_cast<uint8_t>(h & 0xFF);
    row[static_cast<size_t>(layout.nope_dims() + 2 * i + 1)] = static_cast<uint8_t>(h >> 8);
  }
  for (int64_t b = 0; b < layout.n_scales(); ++b) row[static_cast<size_t>(layout.scales_offset() + b)] = scale(b);
  return row;
}

TEST(KernelKvRowDecode, EveryCodeInEveryLaneUnderEveryScale) {
  // 256 rows of the official layout: row r holds code (r + i) mod 256 at nope dim i, so every code visits
  // every lane of a block; block b's scale is code (7r + b) mod 256, so every scale code occurs (0: 2^-127,
  // subnormal products; 254 with code 448: +inf; 255: NaN).
  const KvRowLayout layout{512, 64};
  std::vector<std::vector<uint8_t>> rows;
  for (int r = 0; r < 256; ++r)
    rows.push_back(make_row(
        layout, [&](int64_t i) { return static_cast<uint8_t>((r + i) % 256); },
        [&](int64_t i) { return static_cast<uint16_t>(0x3F80 + 37 * r + i); },
        [&](int64_t b) { return static_cast<uint8_t>((7 * r + b) % 256); }));
  expect_reference_bits(layout, rows, "all codes");
}

TEST(KernelKvRowDecode, RopeDimsOfEveryBf16Class) {
  const std::vector<uint16_t> specials = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001,
                                          0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x4049};
  std::mt19937 rng(5);
  for (int64_t rope : {0, 1, 3, 8, 15, 16, 17, 31, 33, 64, 72}) {
    const KvRowLayout layout{64 + rope, rope};
    std::vector<std::vector<uint8_t>> rows;
    for (int r = 0; r < 5; ++r)
      rows.push_back(make_row(
          layout, [&](int64_t) { return static_cast<uint8_t>(rng()); },
          [&](int64_t i) {
            return r == 0 ? specials[static_cast<size_t>(i) % specials.size()] : static_cast<uint16_t>(rng());
          },
          [&](int64_t) { return static_cast<uint8_t>(110 + rng() % 30); }));
    expect_reference_bits(layout, rows, "rope " + std::to_string(rope));
  }
}

TEST(KernelKvRowDecode, LayoutsAndCounts) {
  std::mt19937 rng(9);
  for (const KvRowLayout layout : {KvRowLayout{64, 0}, KvRowLayout{128, 0}, KvRowLayout{200, 8}, KvRowLayout{512, 64},
                                   KvRowLayout{1024 + 64, 64}, KvRowLayout{64, 64}}) {
    ASSERT_TRUE(layout.valid());
    for (int n : {0, 1, 2, 5}) {
      std::vector<std::vector<uint8_t>> rows;
      for (int r = 0; r < n; ++r)
        rows.push_back(make_row(
            layout, [&](int64_t) { return static_cast<uint8_t>(rng()); },
            [&](int64_t) { return static_cast<uint16_t>(rng()); },
            [&](int64_t) { return static_cast<uint8_t>(rng()); }));
      expect_reference_bits(layout, rows, "dims " + std::to_string(layout.dims) + " n " + std::to_string(n));
    }
  }
}

TEST(KernelKvRowDecode, RowsTheEncoderWroteDecodeToWhatItStored) {
  // The model's rows: FP8-simulated nope dims and bf16 rope dims (attention.cc), encoded by encode_kv_row;
  // every ISA must give back exactly those floats (the reference decode does, core/kv_row.h).
  const KvRowLayout layout{512, 64};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<uint8_t>> rows;
  for (int r = 0; r < 16; ++r) {
    std::vector<float> x(512);
    const float magnitude = std::ldexp(1.0f, r - 8);
    for (float& v : x) v = normal(rng) * magnitude;
    std::vector<uint8_t> entry(static_cast<size_t>(layout.bytes()));
    encode_kv_row(layout, x, entry);
    std::vector<float> stored(512);
    decode_kv_row(layout, entry, stored);
    for (Isa isa : isas()) {
      std::vector<float> got(512);
      const uint8_t* p = entry.data();
      decode_kv_rows(layout, &p, 1, got.data(), isa);
      for (size_t i = 0; i < 512; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(stored[i]))
            << "isa " << isa_name(isa) << " dim " << i;
    }
    rows.push_back(entry);
  }
  expect_reference_bits(layout, rows, "encoded rows");
}

}  // namespace
}  // namespace dsv4::kernels
