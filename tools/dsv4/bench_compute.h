// tools: the compute-probe section of `dsv4 bench` — peak GFLOP/s of each instruction the GEMM tiles are
// built on (kernels/cpu/compute_probe.h), and which of them a given GEMM runs on, so that the prefill and
// batched-decode rows can report their fraction of the compute peak next to their bandwidth fraction.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "kernels/cpu/compute_probe.h"
#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::cli::bench {

struct ComputePeaks {
  kernels::ComputePeak fp32_fma, fp32_fma_ymm, bf16_dot, amx_bf16, int8_dot;
  // The peak of `insn`, or nullptr where the CPU lacks it.
  const kernels::ComputePeak* get(kernels::ComputeInsn insn) const;
};

// Runs the five probes (about `seconds` each) on `pool`; prints a table unless `quiet`.
ComputePeaks run_compute_probes(ThreadPool* pool, double seconds, bool quiet);
nlohmann::json compute_peaks_json(const ComputePeaks& p);

enum class WeightFamily { kFp4, kFp8, kBf16 };

// The instruction fp4_gemm / fp8_gemm / bf16_gemm spends its multiplies on for n_tokens activation rows
// (quant_matmul.cc's dispatch): AMX tdpbf16ps from amx_min_tokens tokens (bf16-exact activations; the
// model's AmxRouting gives it per weight role), else the AVX512-BF16 tiles on VDPBF16PS (kAvx512Bf16,
// bf16-exact activations: FP8, FP4 and BF16 weights alike), the AVX-512 tiles on fp32 FMA, or the AVX2
// tiles on ymm FMA. nullopt for the scalar ISA.
std::optional<kernels::ComputeInsn> gemm_insn(kernels::Isa resolved_isa, int64_t n_tokens, int64_t n_cols,
                                              bool x_bf16_exact, int64_t amx_min_tokens);

}  // namespace dsv4::cli::bench
