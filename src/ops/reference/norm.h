// ops/reference: RMS norms (spec §2.0 RMSNorm; §2.3 step 2 per-head q norm in bf16 steps).
#pragma once

#include <cstdint>

namespace dsv4::ref {

// y[n_rows, dim] = bf16(weight · (x · rsqrt(mean(x²) + eps))), fp32 math, mean accumulated in float64.
// weight may be null (no weight). x and y may alias.
void rms_norm(const float* x, int64_t n_rows, int64_t dim, const float* weight, float eps, float* y);

// The per-head q norm as explicit bf16 steps (golden README): square→bf16, mean→bf16, +eps→bf16,
// rsqrt→bf16, product→bf16. In place on x[n_vectors, dim] (bf16 values).
void head_rms_norm_bf16(float* x, int64_t n_vectors, int64_t dim, float eps);

}  // namespace dsv4::ref
