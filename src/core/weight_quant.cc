// core: FP8 128x128 block and FP4 per-32 weight quantizers (spec §3).
#include "core/weight_quant.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"

namespace dsv4 {

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
  // Rows are whole multiples of the block, so the flat per-32 quantizer is exactly per-row blocking.
  quantize_fp4(w, kFp4WeightBlock, packed, scales_e8m0);
}

}  // namespace dsv4
