// ops/reference: Linear dispatch and exact weight decoding (spec §2.0, §3).
#include "ops/reference/linear.h"

#include <span>
#include <vector>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"
#include "ops/reference/common.h"

namespace dsv4::ref {

void linear(const LinearParams& p, const float* w, const float* x, int64_t n_tokens, float* y) {
  const bool quant = p.act_quant == ActQuant::kFp8Block128;
  DSV4_CHECK(!quant || p.n_in % 128 == 0, "linear: FP8 activation blocks need n_in % 128 == 0");
  std::vector<float> xq(static_cast<size_t>(p.n_in));  // [n_in] one (fake-quantized) activation row
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * p.n_in;
    if (quant) {
      std::copy(xr, xr + p.n_in, xq.begin());
      fake_quant_fp8(std::span<float>(xq), 128);  // spec §3: per token, 1×128 K-blocks
      xr = xq.data();
    }
    float* yr = y + t * p.n_out;
    for (int64_t o = 0; o < p.n_out; ++o) {
      const float v = dot_f64(xr, w + o * p.n_in, p.n_in);
      yr[o] = p.out_round == OutRound::kBf16 ? round_bf16(v) : v;
    }
  }
}

void dequantize_fp8_block128(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float* out) {
  const int64_t scale_cols = (cols + 127) / 128;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = e8m0_to_float(scales[(r / 128) * scale_cols + c / 128]);
      out[r * cols + c] = e4m3_to_float(codes[r * cols + c]) * s;  // exact: value × 2^(e−127)
    }
}

void dequantize_fp4_block32(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, float* out) {
  DSV4_CHECK(cols % 32 == 0, "dequantize_fp4_block32: cols % 32 != 0");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2) {
      const uint8_t b = packed[(r * cols + c) / 2];
      const float s = e8m0_to_float(scales[r * (cols / 32) + c / 32]);
      out[r * cols + c] = e2m1_unpack_lo(b) * s;  // low nibble = even (first) element
      out[r * cols + c + 1] = e2m1_unpack_hi(b) * s;
    }
}

}  // namespace dsv4::ref
