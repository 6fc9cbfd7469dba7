// ops/reference: the reference's Linear dispatch (spec §2.0, §3) on weights already dequantized to fp32.
// FP8/FP4 weights: the activation row is fake-quantized to E4M3 in 1×128 blocks first; the dot products
// accumulate in float64, round to fp32, then to the op's output dtype (bf16 for quantized and bf16
// linears, fp32 for the fp32 linears: compressor, gate, head).
#pragma once

#include <cstdint>

namespace dsv4::ref {

enum class ActQuant : uint8_t { kNone, kFp8Block128 };
enum class OutRound : uint8_t { kF32, kBf16 };

struct LinearParams {
  int64_t n_in = 0;
  int64_t n_out = 0;
  ActQuant act_quant = ActQuant::kNone;
  OutRound out_round = OutRound::kBf16;
};

// y[n_tokens, n_out] = act(x)[n_tokens, n_in] · w[n_out, n_in]^T. x and y may not alias.
void linear(const LinearParams& p, const float* w, const float* x, int64_t n_tokens, float* y);

// Exact weight decoding at load (spec §3). FP8: codes [rows, cols] E4M3 with one E8M0 scale per
// 128×128 block, scales [ceil(rows/128), ceil(cols/128)]. FP4: packed [rows, cols/2] E2M1 (low nibble
// first) with one E8M0 scale per 32 elements along a row, scales [rows, cols/32]. out: [rows, cols].
void dequantize_fp8_block128(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, float* out);
void dequantize_fp4_block32(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, float* out);

}  // namespace dsv4::ref
