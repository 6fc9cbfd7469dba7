// unit: the compute probe (kernels/cpu/compute_probe.h). Its loops must issue exactly the instructions the
// flop count assumes: each loop's folded result is checked against a scalar model of its chains, which
// only matches when every chain ran `iters` instructions of the stated width (an FMA per lane; two bf16
// products per fp32 lane; four byte products per int32 lane; 32 products per AMX output element). Rates are checked for
// shape only (never against a wall-clock threshold).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/compute_probe.h"

namespace dsv4::kernels {
namespace {

// The loops' fold: h = h·31 + bits over every value, in order.
uint64_t fold(const std::vector<float>& values) {
  uint64_t h = 0;
  for (float v : values) h = h * 31 + std::bit_cast<uint32_t>(v);
  return h;
}

#if defined(__x86_64__)
TEST(KernelComputeProbe, Fp32FmaLoopMatchesScalarFmaChains) {
  if (!compute_insn_supported(ComputeInsn::kFp32Fma)) GTEST_SKIP() << "no AVX-512";
  for (int64_t iters : {0, 1, 7, 1000}) {
    std::vector<float> lanes;  // [16 chains, 16 lanes]
    for (int i = 0; i < 16; ++i) {
      float v = 0.001f * static_cast<float>(i + 1);
      for (int64_t it = 0; it < iters; ++it) v = std::fmaf(v, 0.9999999f, 1e-3f);
      lanes.insert(lanes.end(), 16, v);
    }
    EXPECT_EQ(detail::compute_loop_fp32_fma(iters), fold(lanes)) << "iters=" << iters;
  }
}

TEST(KernelComputeProbe, Fp32FmaYmmLoopMatchesScalarFmaChains) {
  if (!compute_insn_supported(ComputeInsn::kFp32FmaYmm)) GTEST_SKIP() << "no AVX2";
  for (int64_t iters : {0, 1, 7, 1000}) {
    std::vector<float> lanes;  // [12 chains, 8 lanes]
    for (int i = 0; i < 12; ++i) {
      float v = 0.001f * static_cast<float>(i + 1);
      for (int64_t it = 0; it < iters; ++it) v = std::fmaf(v, 0.9999999f, 1e-3f);
      lanes.insert(lanes.end(), 8, v);
    }
    EXPECT_EQ(detail::compute_loop_fp32_fma_ymm(iters), fold(lanes)) << "iters=" << iters;
  }
}

TEST(KernelComputeProbe, Bf16DotLoopAddsTwoProductsPerLanePerInstruction) {
  if (!compute_insn_supported(ComputeInsn::kBf16Dot)) GTEST_SKIP() << "no AVX512_BF16";
  for (int64_t iters : {0, 1, 5, 1000}) {
    std::vector<float> lanes;
    for (int i = 0; i < 16; ++i) {
      // Exact: every partial sum stays below 1 on the 2^-24 grid.
      const double v = i * 0x1p-10 + 2.0 * static_cast<double>(iters) * 0x1p-24;
      lanes.insert(lanes.end(), 16, static_cast<float>(v));
    }
    EXPECT_EQ(detail::compute_loop_bf16_dot(iters), fold(lanes)) << "iters=" << iters;
  }
}

TEST(KernelComputeProbe, Int8DotLoopAddsFourProductsPerLanePerInstruction) {
  if (!compute_insn_supported(ComputeInsn::kInt8Dot)) GTEST_SKIP() << "no AVX512_VNNI + VBMI";
  for (int64_t iters : {0, 1, 5, 1000}) {
    std::vector<float> lanes;  // the int32 lanes' bits, as the loop folds them
    for (int32_t i = 0; i < 16; ++i)
      lanes.insert(lanes.end(), 16, std::bit_cast<float>(i + static_cast<int32_t>(4 * iters)));
    EXPECT_EQ(detail::compute_loop_int8_dot(iters), fold(lanes)) << "iters=" << iters;
  }
}

TEST(KernelComputeProbe, AmxLoopAdds32ProductsPerElementPerInstruction) {
  if (!compute_insn_supported(ComputeInsn::kAmxBf16)) GTEST_SKIP() << "no AMX";
  for (int64_t iters : {0, 1, 3, 1000}) {
    // Four 16×16 accumulator tiles, each element iters · 32 · 2^-24 · 2^-24 (exact).
    const std::vector<float> c(4 * 256, static_cast<float>(static_cast<double>(iters) * 32.0 * 0x1p-48));
    EXPECT_EQ(detail::compute_loop_amx_bf16(iters), fold(c)) << "iters=" << iters;
  }
}
#endif

TEST(KernelComputeProbe, ReportsEverySupportedInstructionOnEveryThread) {
  ThreadPool pool(2);
  for (ComputeInsn insn : {ComputeInsn::kFp32Fma, ComputeInsn::kFp32FmaYmm, ComputeInsn::kBf16Dot,
                           ComputeInsn::kAmxBf16, ComputeInsn::kInt8Dot}) {
    const ComputePeak p = run_compute_probe(insn, 0.02, &pool);
    EXPECT_EQ(p.insn, insn);
    EXPECT_EQ(p.threads, 2);
    EXPECT_EQ(p.supported, compute_insn_supported(insn)) << compute_insn_name(insn);
    if (p.supported) {
      EXPECT_GT(p.core_gflops, 0.0) << compute_insn_name(insn);
      EXPECT_GT(p.threads_gflops, 0.0) << compute_insn_name(insn);
      EXPECT_GT(p.threads_cpu_gflops, 0.0) << compute_insn_name(insn);
    } else {
      EXPECT_EQ(p.core_gflops, 0.0);
      EXPECT_EQ(p.threads_gflops, 0.0);
    }
  }
  EXPECT_EQ(compute_insn_flops(ComputeInsn::kFp32Fma), 32);
  EXPECT_EQ(compute_insn_flops(ComputeInsn::kFp32FmaYmm), 16);
  EXPECT_EQ(compute_insn_flops(ComputeInsn::kBf16Dot), 64);
  EXPECT_EQ(compute_insn_flops(ComputeInsn::kAmxBf16), 16384);
  EXPECT_EQ(compute_insn_flops(ComputeInsn::kInt8Dot), 128);
}

}  // namespace
}  // namespace dsv4::kernels
