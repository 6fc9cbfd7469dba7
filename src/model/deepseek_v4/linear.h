// model/deepseek_v4: the one linear dispatch of the model (spec §2.0, §3). Every projection goes through
// linear(): decoded fp32 weights run ref::linear (the reference backend's oracle path); packed FP8/FP4/BF16
// views run the kernels/cpu matmuls after the same 1×128 FP8 activation fake-quantization ref::linear
// applies, with the same output rounding (bf16, or fp32 for the fp32 GEMMs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4/execution.h"
#include "model/weights.h"

namespace dsv4::v4 {

// y [n, n_out] = w · act(x [n, n_in]). x and y may not alias. role picks the AMX threshold (ex.amx): every
// projection is dense but a routed expert run token by token (moe.cc's unfused path).
void linear(const Execution& ex, const LinearWeight& w, const float* x, int64_t n, float* y,
            kernels::WeightRole role = kernels::WeightRole::kDense);

// The grouped low-rank output projection (wo_a, spec §2.8): w holds n_groups stacked [rows_per_group, n_in]
// blocks; out[i, g, :] = w_g · x[i, g, :] for x [n, n_groups, n_in], out [n, n_groups, rows_per_group].
void grouped_linear(const Execution& ex, const LinearWeight& w, int64_t n_groups, const float* x, int64_t n,
                    float* out);

// One of several independent linears of the same rows: y [n, w.n_out] = w · act(x [n, w.n_in]).
struct LinearJob {
  const LinearWeight* w;
  const float* x;
  float* y;
};

// Every job's linear, bit-identical to calling linear() on each. A decode token (n == 1) on the cpu
// backend runs them in ONE pool dispatch: each job's rows cut into ~1 MiB chunks, every chunk a kernel call
// on the calling thread (the kernels give the same bits for any split), and an input shared by several
// FP8 jobs fake-quantized once. A decode layer's small projections (wq_a, wkv, the compressors', the
// indexer's) and wo_a's groups thus cost one fork/join each instead of one per matrix, and the threads
// move to the next matrix instead of idling at each one's tail. Other n, the reference backend and fp32
// weights: linear() per job.
void linear_jobs(const Execution& ex, std::span<const LinearJob> jobs, int64_t n);

}  // namespace dsv4::v4
