// core: FP8 128x128 block and FP4 per-32 weight quantizers (spec §3).
#include "core/weight_quant.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"

namespace dsv4 {
namespace {

// E2M1 with round-to-nearest-even, same codes as float_to_e2m1 for |q| <= 6 (sign kept for zero too):
// the magnitude code is the number of grid midpoints below |q|, where a tie goes to the even code
// (0.25->0, 0.75->2, 1.25->2, 1.75->4, 2.5->4, 3.5->6, 5->6). Branch-free, so experts quantize at
// memory speed rather than through the generic minifloat encoder.
inline uint8_t e2m1_rne(float q) {
  const float a = std::fabs(q);
  const int mag = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>((std::signbit(q) ? 0x8 : 0) | mag);
}

}  // namespace

void quantize_fp8_weight_blocks(std::span<const float> w, size_t rows, size_t cols, std::span<uint8_t> codes,
                                std::span<uint8_t> scales_e8m0) {
  const size_t block_rows = (rows + kFp8WeightBlock - 1) / kFp8WeightBlock;
  const size_t block_cols = (cols + kFp8WeightBlock - 1) / kFp8WeightBlock;
  DSV4_CHECK(w.size() == rows * cols && codes.size() == rows * cols && scales_e8m0.size() == block_rows * block_cols,
             "quantize_fp8_weight_blocks: bad sizes");
  for (size_t br = 0; br < block_rows; ++br) {
    const size_t r0 = br * kFp8WeightBlock, r1 = std::min(rows, r0 + kFp8WeightBlock);
    for (size_t bc = 0; bc < block_cols; ++bc) {
      const size_t c0 = bc * kFp8WeightBlock, c1 = std::min(cols, c0 + kFp8WeightBlock);
      float amax = 0.0f;
      for (size_t r = r0; r < r1; ++r)
        for (size_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float s = fp8_block_scale(amax);
      scales_e8m0[br * block_cols + bc] = float_to_e8m0(s);
      for (size_t r = r0; r < r1; ++r)
        for (size_t c = c0; c < c1; ++c)
          codes[r * cols + c] = float_to_e4m3(std::clamp(w[r * cols + c] / s, -kE4M3Max, kE4M3Max));
    }
  }
}

void quantize_fp4_weight_rows(std::span<const float> w, size_t rows, size_t cols, std::span<uint8_t> packed,
                              std::span<uint8_t> scales_e8m0) {
  DSV4_CHECK(cols % kFp4WeightBlock == 0 && w.size() == rows * cols && packed.size() == rows * cols / 2 &&
                 scales_e8m0.size() == rows * cols / kFp4WeightBlock,
             "quantize_fp4_weight_rows: bad sizes");
  // Rows are whole multiples of the block, so flat per-32 blocks are exactly per-row blocks. Same
  // result as quantize_fp4 (tested); x * (1/s) equals x / s because s is a power of two.
  for (size_t b = 0, i = 0; b < w.size(); b += kFp4WeightBlock, ++i) {
    float amax = 0.0f;
    for (size_t j = 0; j < kFp4WeightBlock; ++j) amax = std::max(amax, std::fabs(w[b + j]));
    const float s = fp4_block_scale(amax);
    const float inv = 1.0f / s;
    scales_e8m0[i] = float_to_e8m0(s);
    for (size_t j = 0; j < kFp4WeightBlock; j += 2) {
      const uint8_t lo = e2m1_rne(std::clamp(w[b + j] * inv, -kE2M1Max, kE2M1Max));
      const uint8_t hi = e2m1_rne(std::clamp(w[b + j + 1] * inv, -kE2M1Max, kE2M1Max));
      packed[(b + j) / 2] = e2m1_pack(lo, hi);
    }
  }
}

}  // namespace dsv4
