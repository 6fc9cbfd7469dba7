// kernels: the compute probe's driver — instruction support, calibration, the single-thread and
// all-threads passes, best-of-five rates (see compute_probe.h; the loops live in compute_probe_loops.cc).
#include "kernels/cpu/compute_probe.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"

namespace dsv4::kernels {
namespace {

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

uint64_t run_loop(ComputeInsn insn, int64_t iters) {
#if defined(__x86_64__)
  switch (insn) {
    case ComputeInsn::kFp32Fma:
      return detail::compute_loop_fp32_fma(iters);
    case ComputeInsn::kFp32FmaYmm:
      return detail::compute_loop_fp32_fma_ymm(iters);
    case ComputeInsn::kBf16Dot:
      return detail::compute_loop_bf16_dot(iters);
    case ComputeInsn::kAmxBf16:
      return detail::compute_loop_amx_bf16(iters);
    case ComputeInsn::kInt8Dot:
      return detail::compute_loop_int8_dot(iters);
  }
#endif
  (void)insn;
  (void)iters;
  return 0;
}

constexpr int kPasses = 5;

}  // namespace

const char* compute_insn_name(ComputeInsn insn) {
  switch (insn) {
    case ComputeInsn::kFp32Fma:
      return "fma_f32_zmm";
    case ComputeInsn::kFp32FmaYmm:
      return "fma_f32_ymm";
    case ComputeInsn::kBf16Dot:
      return "vdpbf16ps_zmm";
    case ComputeInsn::kAmxBf16:
      return "tdpbf16ps";
    case ComputeInsn::kInt8Dot:
      return "vpdpbusd_zmm";
  }
  return "?";
}

int64_t compute_insn_flops(ComputeInsn insn) {
  switch (insn) {
    case ComputeInsn::kFp32Fma:
      return 2 * 16;
    case ComputeInsn::kFp32FmaYmm:
      return 2 * 8;
    case ComputeInsn::kBf16Dot:
      return 2 * 32;
    case ComputeInsn::kAmxBf16:
      return 2 * 16 * 16 * 32;
    case ComputeInsn::kInt8Dot:
      return 2 * 64;
  }
  return 0;
}

bool compute_insn_supported(ComputeInsn insn) {
  switch (insn) {
    case ComputeInsn::kFp32Fma:
      return isa_supported(Isa::kAvx512);
    case ComputeInsn::kFp32FmaYmm:
      return isa_supported(Isa::kAvx2);
    case ComputeInsn::kBf16Dot:
      return isa_supported(Isa::kAvx512) && has_avx512_bf16();
    case ComputeInsn::kAmxBf16:
      return isa_supported(Isa::kAmx);
    case ComputeInsn::kInt8Dot:
      return isa_supported(Isa::kAvx512) && has_avx512_vnni_vbmi();
  }
  return false;
}

namespace detail {
int64_t compute_loop_insns(ComputeInsn insn) {
  return insn == ComputeInsn::kAmxBf16 ? 4 : insn == ComputeInsn::kFp32FmaYmm ? 12 : 16;
}
}  // namespace detail

ComputePeak run_compute_probe(ComputeInsn insn, double seconds, ThreadPool* pool) {
  DSV4_CHECK(seconds > 0, "compute probe needs a positive duration");
  ComputePeak p;
  p.insn = insn;
  p.threads = pool != nullptr ? pool->n_threads() : 1;
  p.supported = compute_insn_supported(insn);
  if (!p.supported) return p;
  const double flops_per_iter = static_cast<double>(detail::compute_loop_insns(insn) * compute_insn_flops(insn));

  // Calibration (also the warm-up that lets the core reach its AVX-512 / AMX frequency): grow the
  // iteration count until one call takes 10 ms of thread CPU time, then size a pass to its share of
  // `seconds` (half for the single-thread passes, half for the all-threads ones).
  int64_t iters = 1024;
  double t = 0;
  for (;;) {
    const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    p.checksum ^= run_loop(insn, iters);
    t = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    if (t >= 0.01 || iters >= (int64_t{1} << 40)) break;
    iters *= 2;
  }
  const double per_pass = seconds / (2.0 * kPasses);
  iters = std::max<int64_t>(1024, static_cast<int64_t>(static_cast<double>(iters) * per_pass / std::max(t, 1e-6)));

  for (int pass = 0; pass < kPasses; ++pass) {
    const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    p.checksum ^= run_loop(insn, iters);
    const double cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    if (cpu > 0) p.core_gflops = std::max(p.core_gflops, flops_per_iter * static_cast<double>(iters) / cpu / 1e9);
  }

  // Every thread runs the same count; the pass ends when the last one does.
  const int n = p.threads;
  std::vector<uint64_t> sums(static_cast<size_t>(n), 0);
  auto body = [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; ++c) sums[static_cast<size_t>(c)] ^= run_loop(insn, iters);
  };
  for (int pass = 0; pass < kPasses; ++pass) {
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (pool != nullptr) {
      pool->parallel_for(n, 1, body);
    } else {
      body(0, 1, 0);
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    const double cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    const double flops = flops_per_iter * static_cast<double>(iters) * n;
    if (wall > 0) p.threads_gflops = std::max(p.threads_gflops, flops / wall / 1e9);
    if (cpu > 0) p.threads_cpu_gflops = std::max(p.threads_cpu_gflops, flops / cpu / 1e9);
  }
  for (uint64_t s : sums) p.checksum ^= s;
  return p;
}

}  // namespace dsv4::kernels
