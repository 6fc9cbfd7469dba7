// unit: the fast kernels against the engine's own reference ops (ops/reference: ref::linear on weights
// decoded by ref::dequantize_*, ref::swiglu_clamped). The scalar ISA reproduces the reference bit for bit
// (same double accumulation, same rounding points); the vector ISAs stay within the fp32-summation bound
// (K + 8)·2^-24·Σ|x·w| of the reference's unrounded output.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "kernels/cpu/moe_expert.h"
#include "kernels/cpu/quant_matmul.h"
#include "ops/reference/linear.h"
#include "ops/reference/moe.h"

namespace dsv4::kernels {
namespace {

std::vector<uint8_t> bytes(std::mt19937& rng, size_t n, int lo, int hi, bool no_nan = false) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    b = static_cast<uint8_t>(d(rng));
    if (no_nan && (b & 0x7F) == 0x7F) b = 0x7E;
  }
  return v;
}

std::vector<float> bf16_rows(std::mt19937& rng, int64_t m, int64_t k) {
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = round_bf16(nd(rng));
  return x;
}

std::vector<float> fake_quantized(std::vector<float> x, int64_t k) {
  for (size_t r = 0; r < x.size() / static_cast<size_t>(k); ++r)
    fake_quant_fp8(std::span<float>(x.data() + r * static_cast<size_t>(k), static_cast<size_t>(k)), 128);
  return x;
}

// Σ|x·w| per output, for the fast-ISA bound.
std::vector<double> abs_dots(const std::vector<float>& xq, const std::vector<float>& w, int64_t m, int64_t n, int64_t k) {
  std::vector<double> a(static_cast<size_t>(m * n));
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < n; ++o) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += std::fabs(static_cast<double>(xq[t * k + i]) * w[o * k + i]);
      a[static_cast<size_t>(t * n + o)] = s;
    }
  return a;
}

template <typename Gemm, typename Matrix>
void compare(const char* what, const Matrix& mat, const std::vector<float>& wdeq, const std::vector<float>& x,
             const std::vector<float>& xk, int64_t m, ref::ActQuant aq, Gemm gemm) {
  const int64_t n = mat.n_rows, k = mat.n_cols;
  std::vector<float> ref_bf16(static_cast<size_t>(m * n)), ref_f32(ref_bf16.size()), got(ref_bf16.size());
  ref::linear({k, n, aq, ref::OutRound::kBf16}, wdeq.data(), x.data(), m, ref_bf16.data());
  ref::linear({k, n, aq, ref::OutRound::kF32}, wdeq.data(), x.data(), m, ref_f32.data());
  gemm(mat, xk.data(), m, got.data(), MatmulOptions{true, Isa::kScalar, nullptr});
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], ref_bf16[i]) << what << " scalar " << i;
  const auto a = abs_dots(xk, wdeq, m, n, k);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (!isa_supported(isa)) continue;
    gemm(mat, xk.data(), m, got.data(), MatmulOptions{false, isa, nullptr});
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(static_cast<double>(got[i]) - ref_f32[i]),
                (static_cast<double>(k) + 8) * std::ldexp(1.0, -24) * a[i] + std::ldexp(1.0, -24) * std::fabs(ref_f32[i]))
          << what << " " << isa_name(isa) << " " << i;
  }
}

TEST(KernelVsReference, Fp8LinearMatchesRefLinear) {
  std::mt19937 rng(21);
  for (int64_t m : {1, 5, 20}) {
    const int64_t n = 200, k = 384;
    const auto codes = bytes(rng, n * k, 0, 255, true), scales = bytes(rng, 2 * 3, 117, 122);
    std::vector<float> w(static_cast<size_t>(n * k));
    ref::dequantize_fp8_block128(codes.data(), scales.data(), n, k, w.data());
    const auto x = bf16_rows(rng, m, k);
    compare("fp8", Fp8Matrix{codes.data(), scales.data(), n, k}, w, x, fake_quantized(x, k), m,
            ref::ActQuant::kFp8Block128, fp8_gemm);
  }
}

TEST(KernelVsReference, Fp4LinearMatchesRefLinear) {
  std::mt19937 rng(22);
  for (int64_t m : {1, 3, 17}) {
    const int64_t n = 130, k = 512;
    const auto packed = bytes(rng, n * k / 2, 0, 255), scales = bytes(rng, n * k / 32, 121, 127);
    std::vector<float> w(static_cast<size_t>(n * k));
    ref::dequantize_fp4_block32(packed.data(), scales.data(), n, k, w.data());
    const auto x = bf16_rows(rng, m, k);
    compare("fp4", Fp4Matrix{packed.data(), scales.data(), n, k}, w, x, fake_quantized(x, k), m,
            ref::ActQuant::kFp8Block128, fp4_gemm);
  }
}

TEST(KernelVsReference, Bf16LinearMatchesRefFp32Linear) {
  std::mt19937 rng(23);
  for (int64_t m : {1, 4, 16}) {
    const int64_t n = 96, k = 256;
    std::vector<uint16_t> raw(static_cast<size_t>(n * k));
    std::vector<float> w(raw.size());
    std::normal_distribution<float> nd(0.0f, 0.1f);
    for (size_t i = 0; i < raw.size(); ++i) {
      raw[i] = float_to_bf16(nd(rng));
      w[i] = bf16_to_float(raw[i]);
    }
    const auto x = bf16_rows(rng, m, k);
    // The reference's bf16-weight linears (gate, compressor, head) are fp32 GEMMs: no activation quant.
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
    ref::linear({k, n, ref::ActQuant::kNone, ref::OutRound::kF32}, w.data(), x.data(), m, want.data());
    bf16_gemm(Bf16Matrix{raw.data(), n, k}, x.data(), m, got.data(), MatmulOptions{false, Isa::kScalar, nullptr});
    EXPECT_EQ(got, want);
    compare("bf16", Bf16Matrix{raw.data(), n, k}, w, x, x, m, ref::ActQuant::kNone,
            [](const Bf16Matrix& mat, const float* xx, int64_t mm, float* out, const MatmulOptions& opt) {
              // compare() checks the bf16-rounded output for the scalar ISA; bf16 outputs are an option here.
              bf16_gemm(mat, xx, mm, out, opt);
            });
  }
}

TEST(KernelVsReference, Fp4ExpertMatchesRefLinearSwigluComposition) {
  std::mt19937 rng(24);
  const int64_t d = 256, inter = 256;
  const auto p1 = bytes(rng, inter * d / 2, 0, 255), s1 = bytes(rng, inter * d / 32, 124, 128);
  const auto p3 = bytes(rng, inter * d / 2, 0, 255), s3 = bytes(rng, inter * d / 32, 124, 128);
  const auto p2 = bytes(rng, d * inter / 2, 0, 255), s2 = bytes(rng, d * inter / 32, 119, 123);
  std::vector<float> w1(static_cast<size_t>(inter * d)), w3(w1.size()), w2(w1.size());
  ref::dequantize_fp4_block32(p1.data(), s1.data(), inter, d, w1.data());
  ref::dequantize_fp4_block32(p3.data(), s3.data(), inter, d, w3.data());
  ref::dequantize_fp4_block32(p2.data(), s2.data(), d, inter, w2.data());
  const Fp4Expert e{{p1.data(), s1.data(), inter, d}, {p3.data(), s3.data(), inter, d}, {p2.data(), s2.data(), d, inter}};
  const auto x = bf16_rows(rng, 1, d);
  const float rw = 0.37f, limit = 10.0f;
  // The model's reference expert: three ref::linear calls around ref::swiglu_clamped.
  std::vector<float> g(static_cast<size_t>(inter)), u(g.size()), h(g.size()), want(static_cast<size_t>(d));
  const ref::LinearParams up{d, inter, ref::ActQuant::kFp8Block128, ref::OutRound::kBf16};
  ref::linear(up, w1.data(), x.data(), 1, g.data());
  ref::linear(up, w3.data(), x.data(), 1, u.data());
  ref::swiglu_clamped(g.data(), u.data(), inter, limit, rw, h.data());
  ref::linear({inter, d, ref::ActQuant::kFp8Block128, ref::OutRound::kBf16}, w2.data(), h.data(), 1, want.data());
  std::vector<float> got(static_cast<size_t>(d)), scratch(static_cast<size_t>(moe_expert_scratch_floats(inter, d, 1)));
  const auto xq = fake_quantized(x, d);
  moe_expert_fp4(e, xq.data(), 1, &rw, limit, got.data(), scratch.data(), MatmulOptions{true, Isa::kScalar, nullptr});
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace dsv4::kernels
