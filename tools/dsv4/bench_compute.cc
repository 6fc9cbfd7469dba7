// tools: `dsv4 bench` compute-probe section (see bench_compute.h).
#include "bench_compute.h"

#include <cstdio>

#include "kernels/cpu/quant_matmul.h"

namespace dsv4::cli::bench {

using kernels::ComputeInsn;

const kernels::ComputePeak* ComputePeaks::get(ComputeInsn insn) const {
  const kernels::ComputePeak* p = insn == ComputeInsn::kFp32Fma      ? &fp32_fma
                                  : insn == ComputeInsn::kFp32FmaYmm ? &fp32_fma_ymm
                                  : insn == ComputeInsn::kBf16Dot    ? &bf16_dot
                                  : insn == ComputeInsn::kInt8Dot    ? &int8_dot
                                                                     : &amx_bf16;
  return p->supported && p->core_gflops > 0 ? p : nullptr;
}

ComputePeaks run_compute_probes(ThreadPool* pool, double seconds, bool quiet) {
  ComputePeaks p;
  p.fp32_fma = kernels::run_compute_probe(ComputeInsn::kFp32Fma, seconds, pool);
  p.fp32_fma_ymm = kernels::run_compute_probe(ComputeInsn::kFp32FmaYmm, seconds, pool);
  p.bf16_dot = kernels::run_compute_probe(ComputeInsn::kBf16Dot, seconds, pool);
  p.amx_bf16 = kernels::run_compute_probe(ComputeInsn::kAmxBf16, seconds, pool);
  p.int8_dot = kernels::run_compute_probe(ComputeInsn::kInt8Dot, seconds, pool);
  if (!quiet) {
    std::printf("compute probe (peak of each tile family's instruction; per core = flops per thread CPU-second):\n");
    std::printf("  %-14s %-44s %12s %16s %14s\n", "instruction", "used by", "GFLOP/s/core", "GFLOP/s threads",
                "per CPU-s");
    for (const kernels::ComputePeak* c : {&p.fp32_fma, &p.fp32_fma_ymm, &p.bf16_dot, &p.amx_bf16, &p.int8_dot}) {
      const char* users = c->insn == ComputeInsn::kFp32Fma      ? "AVX-512 tiles; sparse attention q.k, P.V"
                          : c->insn == ComputeInsn::kFp32FmaYmm ? "AVX2 bf16, fp8 and fp4 tiles"
                          : c->insn == ComputeInsn::kBf16Dot    ? "AVX512-BF16 bf16, fp8 and fp4 tiles"
                          : c->insn == ComputeInsn::kInt8Dot    ? "lightning indexer dots (int8 ops, not flops)"
                                                                : "AMX GEMMs (dense; experts >= 16 tok)";
      if (!c->supported) {
        std::printf("  %-14s %-44s %12s\n", kernels::compute_insn_name(c->insn), users, "n/a");
        continue;
      }
      std::printf("  %-14s %-44s %12.1f %9.1f (x%-2d) %14.1f\n", kernels::compute_insn_name(c->insn), users,
                  c->core_gflops, c->threads_gflops, c->threads, c->threads_cpu_gflops);
    }
    std::printf("\n");
  }
  return p;
}

nlohmann::json compute_peaks_json(const ComputePeaks& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const kernels::ComputePeak* c : {&p.fp32_fma, &p.fp32_fma_ymm, &p.bf16_dot, &p.amx_bf16, &p.int8_dot}) {
    nlohmann::json e = {{"supported", c->supported}, {"flops_per_insn", kernels::compute_insn_flops(c->insn)}};
    if (c->supported) {
      e["core_gflops"] = c->core_gflops;
      e["threads"] = c->threads;
      e["threads_gflops"] = c->threads_gflops;
      e["threads_cpu_gflops"] = c->threads_cpu_gflops;
    }
    j[kernels::compute_insn_name(c->insn)] = e;
  }
  return j;
}

std::optional<ComputeInsn> gemm_insn(kernels::Isa resolved_isa, int64_t n_tokens, int64_t n_cols, bool x_bf16_exact,
                                     int64_t amx_min_tokens) {
  const kernels::Isa path = kernels::gemm_path_isa(resolved_isa, n_tokens, n_cols, amx_min_tokens);
  if (path == kernels::Isa::kAmx && x_bf16_exact) return ComputeInsn::kAmxBf16;
  if (path == kernels::Isa::kAvx2) return ComputeInsn::kFp32FmaYmm;
  // The kAvx512Bf16 tiles (FP8, FP4 and BF16 weights) multiply bf16-exact activations on VDPBF16PS.
  if (path == kernels::Isa::kAvx512Bf16 && x_bf16_exact) return ComputeInsn::kBf16Dot;
  if (path != kernels::Isa::kAvx512 && path != kernels::Isa::kAvx512Bf16 && path != kernels::Isa::kAmx) return std::nullopt;
  return ComputeInsn::kFp32Fma;
}

}  // namespace dsv4::cli::bench
