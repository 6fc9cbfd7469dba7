// unit: the checkpoint weight quantizers against the activation quantizers of core/quant.h (the spec §3
// rule, already tested bit-exact) and formats.h's scalar encoders, including every E2M1 rounding tie.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "core/weight_quant.h"

namespace dsv4 {
namespace {

TEST(WeightQuant, Fp4RowsEqualTheReferenceFp4Quantizer) {
  const size_t rows = 7, cols = 96;
  std::vector<float> w(rows * cols);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.03f);
  for (auto& x : w) x = nd(rng);
  // Row 0: every E2M1 grid point and midpoint (ties) at scale 1, both signs, plus ±0 and a 6 to pin amax.
  const float special[] = {0.0f, -0.0f, 0.25f, -0.25f, 0.75f, -0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -5.0f,
                           0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, 0.2499f, 0.2501f, 4.99f, 5.01f, -3.5f};
  for (size_t i = 0; i < std::size(special); ++i) w[i] = special[i];
  for (size_t i = std::size(special); i < 32; ++i) w[i] = 0.1f;
  w[cols] = 0.0f;  // an all-zero block in row 1
  for (size_t i = 1; i < 32; ++i) w[cols + i] = 0.0f;
  std::vector<uint8_t> packed(rows * cols / 2), scales(rows * cols / 32), ref_packed(packed.size()), ref_scales(scales.size());
  quantize_fp4_weight_rows(w, rows, cols, packed, scales);
  quantize_fp4(w, 32, ref_packed, ref_scales);
  EXPECT_EQ(packed, ref_packed);
  EXPECT_EQ(scales, ref_scales);
  EXPECT_EQ(scales[0], 127);  // amax 6 -> scale 2^0
  for (size_t i = 0; i < std::size(special); ++i) {
    const uint8_t code = i % 2 == 0 ? packed[i / 2] & 0xF : packed[i / 2] >> 4;
    EXPECT_EQ(code, float_to_e2m1(special[i])) << special[i];
  }
}

TEST(WeightQuant, Fp8BlocksUseOneScalePer128x128Block) {
  const size_t rows = 200, cols = 300;  // partial edge blocks in both directions
  std::vector<float> w(rows * cols);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto& x : w) x = nd(rng);
  w[5 * cols + 7] = 3.0f;       // block (0,0) amax 3 -> 2^ceil(log2(3/448)) = 2^-7
  w[150 * cols + 290] = -0.5f;  // block (1,2)
  std::vector<uint8_t> codes(rows * cols), scales(2 * 3);
  quantize_fp8_weight_blocks(w, rows, cols, codes, scales);
  EXPECT_EQ(scales[0], 127 - 7);
  for (size_t br = 0; br < 2; ++br)
    for (size_t bc = 0; bc < 3; ++bc) {
      float amax = 0.0f;
      for (size_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
        for (size_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float s = fp8_block_scale(amax);
      ASSERT_EQ(scales[br * 3 + bc], float_to_e8m0(s));
      for (size_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
        for (size_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c)
          ASSERT_EQ(codes[r * cols + c], float_to_e4m3(w[r * cols + c] / s)) << r << "," << c;
    }
  // Quantizing 128-row slices separately gives the same bytes (streaming generation relies on it).
  std::vector<uint8_t> c2(codes.size()), s2(scales.size());
  quantize_fp8_weight_blocks(std::span(w).first(128 * cols), 128, cols, std::span(c2).first(128 * cols), std::span(s2).first(3));
  quantize_fp8_weight_blocks(std::span(w).subspan(128 * cols), rows - 128, cols, std::span(c2).subspan(128 * cols),
                             std::span(s2).subspan(3));
  EXPECT_EQ(c2, codes);
  EXPECT_EQ(s2, scales);
}

}  // namespace
}  // namespace dsv4
