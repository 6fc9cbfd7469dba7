// kernels: a compute-throughput probe — the peak GFLOP/s of the instruction each GEMM tile family is built
// on, the ceiling the bench compares the compute-bound rows (prefill, batched decode) against, as the read
// probe is the ceiling of the bandwidth-bound ones. Each probe runs independent accumulator chains of one
// instruction with operands in registers (no loads), so the figure is the ports' issue rate.
#pragma once

#include <cstdint>

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

enum class ComputeInsn {
  kFp32Fma,     // vfmadd231ps zmm: 16 MACs = 32 flops (the fp32 tiles: bf16, fp8, fp4 and fp4 nibble planes)
  kFp32FmaYmm,  // vfmadd231ps ymm: 8 MACs = 16 flops (the AVX2 tiles: bf16, fp8, fp4)
  kBf16Dot,     // vdpbf16ps zmm: 32 MACs = 64 flops (the AVX512-BF16 tiles: FP8, FP4, BF16, on bf16-exact activations)
  kAmxBf16,     // tdpbf16ps on 16x16 fp32 tiles: 8192 MACs = 16384 flops (the AMX prefill GEMMs)
  kInt8Dot,     // vpdpbusd zmm: 64 u8 x s8 MACs = 128 ops (the lightning indexer's dots, indexer_int8_avx512.cc)
};

// "fma_f32_zmm", "fma_f32_ymm", "vdpbf16ps_zmm", "tdpbf16ps", "vpdpbusd_zmm"
const char* compute_insn_name(ComputeInsn insn);
// Flops one instruction performs (a multiply-add counts 2; integer multiply-adds count the same: the
// GFLOP/s figures of kInt8Dot are 1e9 integer operations per second).
int64_t compute_insn_flops(ComputeInsn insn);
// Whether this CPU and process can run the instruction (AMX also needs the XTILEDATA permission, which
// isa.cc requests).
bool compute_insn_supported(ComputeInsn insn);

struct ComputePeak {
  ComputeInsn insn = ComputeInsn::kFp32Fma;
  bool supported = false;
  // 1e9 flops per CPU-second of one thread (thread CPU time, best pass): a core's peak; time the thread
  // waited for a core on a shared machine does not count.
  double core_gflops = 0;
  int threads = 0;
  double threads_gflops = 0;      // all pool threads at once, wall clock (best pass)
  double threads_cpu_gflops = 0;  // the same flops per process CPU-second (best pass)
  uint64_t checksum = 0;          // keeps the results observable
};

// Runs the probe for `seconds` (split over a calibration run and five passes per mode) on the calling
// thread, then on every thread of `pool` (nullptr: the calling thread only). An unsupported instruction
// returns supported = false and zero rates.
ComputePeak run_compute_probe(ComputeInsn insn, double seconds, ThreadPool* pool);

namespace detail {
// The probe loops (compute_probe_loops.cc, compiled for their ISA): `iters` iterations of 16 independent
// chains (12 for ymm, whose 16 registers also hold the two operands; 4 tiles for AMX) of one instruction;
// returns a value derived from every accumulator.
#if defined(__x86_64__)
uint64_t compute_loop_fp32_fma(int64_t iters);
uint64_t compute_loop_fp32_fma_ymm(int64_t iters);
uint64_t compute_loop_bf16_dot(int64_t iters);
uint64_t compute_loop_amx_bf16(int64_t iters);
uint64_t compute_loop_int8_dot(int64_t iters);
#endif
// Instructions one iteration of the loop issues.
int64_t compute_loop_insns(ComputeInsn insn);
}  // namespace detail

}  // namespace dsv4::kernels
