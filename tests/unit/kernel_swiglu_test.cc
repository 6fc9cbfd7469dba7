// unit: kernels::swiglu_bf16 (the fused experts' SwiGLU epilogue) against the scalar swiglu_clamped on
// the bf16-rounded inputs, bit for bit on every ISA: limits on and off, routing weights, gates and ups
// around the clamp and across exp's whole range (overflow, underflow, subnormals, ±0, ±inf, NaN), lengths
// off the 16-lane vector, misaligned pointers; and the AVX-512 vector exp against std::exp itself over a
// sweep of float bit patterns (it reproduces glibc's expf). A sweep of every float is DISABLED_ (about a
// minute on one core; run with --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/formats.h"
#include "kernel_isas.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/moe_expert.h"
#include "kernels/cpu/swiglu.h"

namespace dsv4::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using VectorExp = void (*)(const float* x, float* out, int64_t n);

// Bits of a vector exp against std::exp for the floats bits = first, first + stride, ... (wrapping).
void expect_exp_bits(VectorExp vexp, uint64_t first, uint64_t stride, uint64_t count) {
  constexpr int64_t kChunk = 4096;
  std::vector<float> x(kChunk), got(kChunk);
  uint64_t bits = first, mismatches = 0;
  for (uint64_t done = 0; done < count; done += kChunk) {
    const int64_t n = static_cast<int64_t>(std::min<uint64_t>(kChunk, count - done));
    for (int64_t i = 0; i < n; ++i, bits += stride) x[static_cast<size_t>(i)] = std::bit_cast<float>(static_cast<uint32_t>(bits));
    vexp(x.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = std::exp(x[static_cast<size_t>(i)]);
      if (std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]) != std::bit_cast<uint32_t>(want) && ++mismatches <= 5)
        ADD_FAILURE() << "exp(" << x[static_cast<size_t>(i)] << " = 0x" << std::hex
                      << std::bit_cast<uint32_t>(x[static_cast<size_t>(i)]) << ") got 0x"
                      << std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]) << " want 0x"
                      << std::bit_cast<uint32_t>(want);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

// Every 61st bit pattern (70M floats: every exponent, both signs, NaN payloads), then every float around the
// slow-path boundary |x| = 88 and the overflow / underflow thresholds, then lanes mixing the slow path and the
// fast one in the same vector.
void expect_std_exp_on_a_sweep(VectorExp vexp) {
  expect_exp_bits(vexp, 0, 61, (uint64_t{1} << 32) / 61);
  for (float edge : {88.0f, -88.0f, 0x1.62e42ep6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f, 0.0f, -0.0f, 1.0f, -1.0f})
    expect_exp_bits(vexp, std::bit_cast<uint32_t>(edge) - 2048, 1, 4096);
  std::vector<float> x = {1.0f, kInf, -kInf, kNaN, -kNaN, 100.0f, -100.0f, -104.0f, 3.5f, 88.5f, -87.9f,
                          0x1p-149f, -0x1p-149f, 1e-30f, -50.0f, 89.0f, 2.0f};
  std::vector<float> got(x.size());
  vexp(x.data(), got.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(std::exp(x[i]))) << "lane " << i << " x " << x[i];
}

TEST(KernelSwiglu, VectorExpIsStdExpOnASweep) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
  expect_std_exp_on_a_sweep(detail::exp_f32_avx512);
}

// The AVX2 attention softmax's exp (expf_avx2.inc: the same algorithm on 8 lanes, the table by a gather).
TEST(KernelSwiglu, Avx2VectorExpIsStdExpOnASweep) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  expect_std_exp_on_a_sweep(detail::exp_f32_avx2);
}

TEST(KernelSwiglu, DISABLED_VectorExpIsStdExpOnEveryFloat) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
  expect_exp_bits(detail::exp_f32_avx512, 0, 1, uint64_t{1} << 32);
}

// Every ISA, at `misalign` floats past the vectors' start, must give swiglu_clamped's bits.
void expect_scalar_bits(const std::vector<float>& g, const std::vector<float>& u, float rw, float limit,
                        int misalign) {
  const auto n = static_cast<int64_t>(g.size());
  for (Isa isa : isas()) {
    std::vector<float> gb(g.size() + 16), ub(u.size() + 16), hb(g.size() + 16, kNaN);
    std::copy(g.begin(), g.end(), gb.begin() + misalign);
    std::copy(u.begin(), u.end(), ub.begin() + (misalign + 3) % 16);
    float* h = hb.data() + (misalign + 7) % 16;
    swiglu_bf16(gb.data() + misalign, ub.data() + (misalign + 3) % 16, n, rw, limit, h, isa);
    for (int64_t i = 0; i < n; ++i) {
      const float want = swiglu_clamped(round_bf16(g[static_cast<size_t>(i)]), round_bf16(u[static_cast<size_t>(i)]), rw, limit);
      ASSERT_EQ(std::bit_cast<uint32_t>(h[i]), std::bit_cast<uint32_t>(want))
          << "isa " << isa_name(isa) << " n " << n << " element " << i << " g " << g[static_cast<size_t>(i)] << " u "
          << u[static_cast<size_t>(i)] << " rw " << rw << " limit " << limit << ": got " << h[i] << " want " << want;
    }
    // Nothing past the end is written.
    for (int64_t i = n; i < n + 16 - (misalign + 7) % 16; ++i) ASSERT_TRUE(std::isnan(h[i])) << "wrote past n at " << i;
  }
}

TEST(KernelSwiglu, MatchesScalarBitExactly) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<uint32_t> any_bits;
  const std::vector<float> specials = {0.0f, -0.0f, kInf, -kInf, kNaN, -kNaN, 0x1p-149f, -0x1p-140f, 7.0f, -7.0f,
                                       7.0001f, -7.0001f, 10.0f, 88.0f, -88.0f, -88.8f, -104.0f, 89.0f, 1e30f, -1e30f};
  for (int64_t n : {0, 1, 2, 15, 16, 17, 31, 33, 64, 100}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        switch (kind) {
          case 0: g[k] = 4.0f * normal(rng), u[k] = 4.0f * normal(rng); break;         // typical
          case 1: g[k] = 40.0f * normal(rng), u[k] = 40.0f * normal(rng); break;       // past the clamp, exp's tails
          case 2: g[k] = std::bit_cast<float>(any_bits(rng)), u[k] = std::bit_cast<float>(any_bits(rng)); break;
          default: g[k] = specials[k % specials.size()], u[k] = specials[(k * 7 + 3) % specials.size()]; break;
        }
      }
      for (float limit : {7.0f, 0.0f, -1.0f})
        for (float rw : {1.0f, 0.3f, -2.5f, 0.0f})
          for (int misalign : {0, 5}) expect_scalar_bits(g, u, rw, limit, misalign);
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels
