// unit: kernels::head_rms_norm_bf16 (the attention's per-head query norm) against ref::head_rms_norm_bf16,
// bit for bit on every ISA: vector counts around the AVX-512 tier's groups of 8, dims off its 8- and
// 16-lane blocks, the model's 512, values across the float range (squares that overflow to infinity or
// vanish, subnormals, ±0), NaN (with payloads) and infinities in single vectors, all-zero vectors, and eps
// from 0 up.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_isas.h"
#include "kernels/cpu/head_norm.h"
#include "ops/reference/norm.h"

namespace dsv4::kernels {
namespace {

// Values spread over the float range: most near 1, some huge (squares overflow), tiny (squares vanish or
// go subnormal), subnormal, and signed zeros.
float value(std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 19);
  std::normal_distribution<float> n(0.0f, 1.0f);
  switch (kind(rng)) {
    case 0:
      return n(rng) * 3e19f;  // x² past the float range: +inf
    case 1:
      return n(rng) * 1e-22f;  // x² below the smallest subnormal
    case 2:
      return n(rng) * 1e-40f;  // subnormal x
    case 3:
      return std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : -0.0f;
    case 4:
      return n(rng) * 1e-19f;  // x² subnormal
    default:
      return n(rng) * 4.0f;
  }
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << what << " at " << i;
}

TEST(KernelHeadNorm, MatchesTheReferenceBitForBitOnEveryIsa) {
  std::mt19937 rng(17);
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (Isa isa : isas())
    for (int64_t dim : {1, 7, 8, 9, 16, 24, 33, 128, 512, 520})
      for (int64_t n : {1, 3, 8, 9, 17, 64})
        for (float eps : {1e-6f, 0.0f, 0.5f}) {
          std::vector<float> x(static_cast<size_t>(n * dim));
          for (float& v : x) v = value(rng);
          // Special vectors: a NaN with a payload, an infinity, all zeros (mean 0: rs from eps alone).
          if (n > 1) x[static_cast<size_t>(dim + dim / 2)] = std::bit_cast<float>(0x7FA00123u);  // signalling payload
          if (n > 2) x[static_cast<size_t>(2 * dim)] = -kInf;
          if (n > 3) std::fill(x.begin() + 3 * dim, x.begin() + 4 * dim, 0.0f);
          if (n > 8) x[static_cast<size_t>(8 * dim + dim - 1)] = kNaN;  // in the second group of 8, at the end
          std::vector<float> want = x, got = x;
          ref::head_rms_norm_bf16(want.data(), n, dim, eps);
          head_rms_norm_bf16(got.data(), n, dim, eps, isa);
          const std::string what = std::string(isa_name(isa)) + " dim=" + std::to_string(dim) +
                                   " n=" + std::to_string(n) + " eps=" + std::to_string(eps);
          expect_same_bits(got, want, what.c_str());
        }
}

// Misaligned vectors (the model's are 64-byte aligned; the kernel must not rely on it), and nothing written
// outside them.
TEST(KernelHeadNorm, MisalignedAndBounded) {
  std::mt19937 rng(5);
  const int64_t dim = 40, n = 11;
  for (Isa isa : isas())
    for (int off = 0; off < 16; ++off) {
      std::vector<float> buf(static_cast<size_t>(n * dim + 32), 12345.0f);
      for (int64_t i = 0; i < n * dim; ++i) buf[static_cast<size_t>(off + i)] = value(rng);
      std::vector<float> want = buf, got = buf;
      ref::head_rms_norm_bf16(want.data() + off, n, dim, 1e-6f);
      head_rms_norm_bf16(got.data() + off, n, dim, 1e-6f, isa);
      expect_same_bits(got, want, isa_name(isa));
    }
}

TEST(KernelHeadNorm, BadShapeIsAnInvariantFailure) {
  float x[4] = {};
  EXPECT_DEATH(head_rms_norm_bf16(x, 1, 0, 1e-6f, Isa::kScalar), "bad shape");
  EXPECT_DEATH(head_rms_norm_bf16(x, -1, 4, 1e-6f, Isa::kScalar), "bad shape");
}

}  // namespace
}  // namespace dsv4::kernels
