// model/deepseek_v4: the one linear dispatch of the model (spec §2.0, §3). Every projection goes through
// linear(): decoded fp32 weights run ref::linear (the reference backend's oracle path); packed FP8/FP4/BF16
// views run the kernels/cpu matmuls after the same 1×128 FP8 activation fake-quantization ref::linear
// applies, with the same output rounding (bf16, or fp32 for the fp32 GEMMs).
#pragma once

#include <cstdint>

#include "model/deepseek_v4/execution.h"
#include "model/weights.h"

namespace dsv4::v4 {

// y [n, n_out] = w · act(x [n, n_in]). x and y may not alias.
void linear(const Execution& ex, const LinearWeight& w, const float* x, int64_t n, float* y);

// The grouped low-rank output projection (wo_a, spec §2.8): w holds n_groups stacked [rows_per_group, n_in]
// blocks; out[i, g, :] = w_g · x[i, g, :] for x [n, n_groups, n_in], out [n, n_groups, rows_per_group].
void grouped_linear(const Execution& ex, const LinearWeight& w, int64_t n_groups, const float* x, int64_t n,
                    float* out);

}  // namespace dsv4::v4
