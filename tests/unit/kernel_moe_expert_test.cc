// unit: the MoE expert kernels (spec §2.9). The scalar ISA must equal an independent composition of the
// spec's rounding points (dequantized weights, double dots, bf16(g), bf16(u), clamp, silu, route weight,
// bf16(h), FP8 1×128 fake quantization, w2, bf16) bit for bit; the fused path must equal the unfused one
// bit for bit on every ISA and thread count; the vector ISAs must stay within a bf16-level error of the
// scalar result.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/moe_expert.h"

namespace dsv4::kernels {
namespace {

constexpr float kLimit = 10.0f;

struct Fp4Store {
  std::vector<uint8_t> p1, s1, p3, s3, p2, s2;
  Fp4Expert e;
};

void fill(std::mt19937& rng, std::vector<uint8_t>& v, size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  v.resize(n);
  for (auto& b : v) b = static_cast<uint8_t>(d(rng));
}

Fp4Store make_fp4_expert(std::mt19937& rng, int64_t n_inter, int64_t d) {
  Fp4Store s;
  // Scales up to 2^1 on w1/w3 push some |g|, |u| past the clamp limit of 10.
  fill(rng, s.p1, static_cast<size_t>(n_inter * d / 2), 0, 255);
  fill(rng, s.s1, static_cast<size_t>(n_inter * d / 32), 124, 128);
  fill(rng, s.p3, static_cast<size_t>(n_inter * d / 2), 0, 255);
  fill(rng, s.s3, static_cast<size_t>(n_inter * d / 32), 124, 128);
  fill(rng, s.p2, static_cast<size_t>(d * n_inter / 2), 0, 255);
  fill(rng, s.s2, static_cast<size_t>(d * n_inter / 32), 120, 124);
  s.e.w1 = {s.p1.data(), s.s1.data(), n_inter, d};
  s.e.w3 = {s.p3.data(), s.s3.data(), n_inter, d};
  s.e.w2 = {s.p2.data(), s.s2.data(), d, n_inter};
  return s;
}

struct Fp8Store {
  std::vector<uint8_t> c1, s1, c3, s3, c2, s2;
  Fp8Expert e;
};

void no_nan(std::vector<uint8_t>& v) {
  for (auto& b : v)
    if ((b & 0x7F) == 0x7F) b = 0x7E;
}

Fp8Store make_fp8_expert(std::mt19937& rng, int64_t n_inter, int64_t d) {
  Fp8Store s;
  const auto sb = [](int64_t a, int64_t b) { return static_cast<size_t>(((a + 127) / 128) * ((b + 127) / 128)); };
  fill(rng, s.c1, static_cast<size_t>(n_inter * d), 0, 255);
  fill(rng, s.c3, static_cast<size_t>(n_inter * d), 0, 255);
  fill(rng, s.c2, static_cast<size_t>(d * n_inter), 0, 255);
  no_nan(s.c1);
  no_nan(s.c3);
  no_nan(s.c2);
  fill(rng, s.s1, sb(n_inter, d), 118, 121);
  fill(rng, s.s3, sb(n_inter, d), 118, 121);
  fill(rng, s.s2, sb(d, n_inter), 116, 118);
  s.e.w1 = {s.c1.data(), s.s1.data(), n_inter, d};
  s.e.w3 = {s.c3.data(), s.s3.data(), n_inter, d};
  s.e.w2 = {s.c2.data(), s.s2.data(), d, n_inter};
  return s;
}

float deq(const Fp4Matrix& w, int64_t n, int64_t k) {
  const uint8_t byte = w.packed[n * (w.n_cols / 2) + k / 2];
  return e2m1_to_float((k % 2 == 0) ? (byte & 0xF) : (byte >> 4)) *
         std::ldexp(1.0f, w.scales[n * (w.n_cols / 32) + k / 32] - 127);
}
float deq(const Fp8Matrix& w, int64_t n, int64_t k) {
  return e4m3_to_float(w.codes[n * w.n_cols + k]) *
         std::ldexp(1.0f, w.scales[(n / 128) * ((w.n_cols + 127) / 128) + k / 128] - 127);
}

// y = bf16(fp32(Σ double)), the reference linear with its bf16 output.
template <typename M>
std::vector<float> linear(const M& w, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(w.n_rows));
  for (int64_t n = 0; n < w.n_rows; ++n) {
    double s = 0;
    for (int64_t k = 0; k < w.n_cols; ++k) s += static_cast<double>(x[static_cast<size_t>(k)]) * deq(w, n, k);
    y[static_cast<size_t>(n)] = round_bf16(static_cast<float>(s));
  }
  return y;
}

// The spec §2.9 expert for one token, written out step by step.
template <typename E>
std::vector<float> spec_expert(const E& e, const std::vector<float>& xq, float rw) {
  const std::vector<float> g = linear(e.w1, xq), u = linear(e.w3, xq);
  std::vector<float> h(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float uc = std::fmin(std::fmax(u[i], -kLimit), kLimit);
    const float gc = std::fmin(g[i], kLimit);
    const float silu = gc / (1.0f + std::exp(-gc));  // torch's silu for float
    h[i] = round_bf16(rw * (silu * uc));
  }
  fake_quant_fp8(h, 128);
  return linear(e.w2, h);
}

std::vector<float> make_x(std::mt19937& rng, int64_t n_tokens, int64_t d) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * d));
  for (auto& v : x) v = round_bf16(nd(rng));
  fake_quant_fp8(x, 128);
  return x;
}

template <typename E, typename Fused, typename Unfused>
void check_expert(const E& e, int64_t n_tokens, std::mt19937& rng, Fused fused, Unfused unfused, bool shared) {
  const int64_t n_inter = e.w1.n_rows, d = e.w1.n_cols;
  const std::vector<float> x = make_x(rng, n_tokens, d);
  std::vector<float> rw(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) rw[static_cast<size_t>(t)] = 0.25f + 0.3f * static_cast<float>(t);
  const float* rwp = shared ? nullptr : rw.data();
  std::vector<float> scratch(static_cast<size_t>(moe_expert_scratch_floats(n_inter, d, n_tokens)));

  // Scalar fused == the spec composition, bit for bit.
  std::vector<float> ref(static_cast<size_t>(n_tokens * d)), got(ref.size());
  int clamped = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<float> xt(x.begin() + t * d, x.begin() + (t + 1) * d);
    const auto y = spec_expert(e, xt, shared ? 1.0f : rw[static_cast<size_t>(t)]);
    std::copy(y.begin(), y.end(), ref.begin() + t * d);
    for (float v : linear(e.w3, xt)) clamped += std::fabs(v) > kLimit;
  }
  EXPECT_GT(clamped, 0) << "the data should exercise the clamp";
  fused(e, x.data(), n_tokens, rwp, kLimit, got.data(), scratch.data(), MatmulOptions{true, Isa::kScalar, nullptr});
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "scalar output " << i;

  ThreadPool pool(3);
  // AMX: below the threshold the fused vector tiles, from it (amx_min_tokens 1: at every count) the AMX GEMMs.
  struct Path {
    Isa isa;
    int64_t amx_min;
  };
  for (const Path path : {Path{Isa::kScalar, kAmxMinTokensDefault}, Path{Isa::kAvx2, kAmxMinTokensDefault},
                          Path{Isa::kAvx512, kAmxMinTokensDefault}, Path{Isa::kAvx512Bf16, kAmxMinTokensDefault},
                          Path{Isa::kAmx, kAmxMinTokensDefault},
                          Path{Isa::kAmx, 1}}) {
    const Isa isa = path.isa;
    if (!isa_supported(isa)) continue;
    const std::string tag = std::string(isa_name(isa)) + " amx_min " + std::to_string(path.amx_min);
    std::vector<float> f1(ref.size()), f3(ref.size()), u1(ref.size());
    fused(e, x.data(), n_tokens, rwp, kLimit, f1.data(), scratch.data(), MatmulOptions{true, isa, nullptr, path.amx_min});
    fused(e, x.data(), n_tokens, rwp, kLimit, f3.data(), scratch.data(), MatmulOptions{true, isa, &pool, path.amx_min});
    unfused(e, x.data(), n_tokens, rwp, kLimit, u1.data(), scratch.data(), MatmulOptions{true, isa, &pool, path.amx_min});
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(f1[i], u1[i]) << tag << " fused vs unfused " << i;
      ASSERT_EQ(f1[i], f3[i]) << tag << " 1 vs 3 threads " << i;
      err2 += (f1[i] - ref[i]) * static_cast<double>(f1[i] - ref[i]);
      ref2 += static_cast<double>(ref[i]) * ref[i];
    }
    // fp32 accumulation can flip a bf16 rounding of g/u/h (and then an E4M3 rounding of h): a few
    // elements move by ≤ one E4M3 step (2^-3 relative), so the output error stays ~1e-3 of its norm.
    EXPECT_LE(std::sqrt(err2), 1e-2 * std::sqrt(ref2)) << tag;
    // Batch invariance: every token alone gives the bits it had in the batch (one path for both: the
    // fused tiles below the AMX threshold, AMX at every count with amx_min_tokens 1). The scalar ISA
    // already equals the per-token spec composition above.
    if (isa != Isa::kScalar && (path.amx_min == 1 || n_tokens < kAmxMinTokensDefault || isa != Isa::kAmx)) {
      std::vector<float> one(static_cast<size_t>(d));
      for (int64_t t = 0; t < n_tokens; ++t) {
        fused(e, x.data() + t * d, 1, rwp ? rwp + t : nullptr, kLimit, one.data(), scratch.data(),
              MatmulOptions{true, isa, nullptr, path.amx_min});
        for (int64_t i = 0; i < d; ++i)
          ASSERT_EQ(one[static_cast<size_t>(i)], f1[static_cast<size_t>(t * d + i)]) << tag << " token " << t << " alone";
      }
    }
  }
}

TEST(KernelMoeExpert, SwigluClampsLikeTheSpec) {
  const auto silu = [](double g) { return g / (1.0 + std::exp(-g)); };
  EXPECT_NEAR(swiglu_clamped(20.0f, 20.0f, 1.0f, 10.0f), silu(10.0) * 10.0, 1e-5);    // both clamped above
  EXPECT_NEAR(swiglu_clamped(-20.0f, -20.0f, 0.5f, 10.0f), silu(-20.0) * -10.0 * 0.5, 1e-12);  // g not clamped below
  EXPECT_NEAR(swiglu_clamped(1.5f, -3.0f, 2.0f, 10.0f), silu(1.5) * -3.0 * 2.0, 1e-5);
  EXPECT_EQ(swiglu_clamped(0.0f, 5.0f, 1.0f, 10.0f), 0.0f);
  EXPECT_NEAR(swiglu_clamped(20.0f, -30.0f, 1.0f, 0.0f), silu(20.0) * -30.0, 1e-4);  // limit 0: no clamp
}

TEST(KernelMoeExpert, Fp4RoutedExpertMatchesSpecAndUnfused) {
  std::mt19937 rng(11);
  const Fp4Store s = make_fp4_expert(rng, 256, 256);
  for (int64_t n_tokens : {1, 3, 6, 8, 13, 17})
    check_expert(s.e, n_tokens, rng, moe_expert_fp4, moe_expert_fp4_unfused, /*shared=*/false);
}

TEST(KernelMoeExpert, Fp8SharedExpertMatchesSpecAndUnfused) {
  std::mt19937 rng(12);
  const Fp8Store s = make_fp8_expert(rng, 256, 384);
  for (int64_t n_tokens : {1, 5, 8, 11})
    check_expert(s.e, n_tokens, rng, moe_expert_fp8, moe_expert_fp8_unfused, /*shared=*/true);
}

}  // namespace
}  // namespace dsv4::kernels
