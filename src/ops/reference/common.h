// ops/reference: small numeric helpers shared by the scalar reference ops. The numerics contract of
// golden/README.md: every dot product, GEMM and mean accumulates in float64 and is rounded to fp32 once.
#pragma once

#include <cstdint>

#include "core/formats.h"

namespace dsv4::ref {

// Σ a_i·b_i over fp32 inputs, accumulated in float64 (products are exact in double), rounded to fp32.
inline float dot_f64(const float* a, const float* b, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return static_cast<float>(acc);
}

// Rounds every element to its bf16 value in place (a bf16 rounding point of the reference).
inline void round_bf16_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}

}  // namespace dsv4::ref
