// unit: the scalar reference ops (src/ops/reference) against independent oracles: the spec's formulas
// computed directly in double, algebraic identities, and hand-worked cases for the tricky rules.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "ops/reference/compressor.h"
#include "ops/reference/hadamard.h"
#include "ops/reference/indexer.h"
#include "ops/reference/linear.h"
#include "ops/reference/mhc.h"
#include "ops/reference/moe.h"
#include "ops/reference/norm.h"
#include "ops/reference/rope.h"
#include "ops/reference/sparse_attention.h"

namespace dsv4::ref {
namespace {

std::vector<float> random_bf16(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = round_bf16(d(rng));
  return v;
}

TEST(RefRope, YarnCorrectionRangeMatchesSpec) {
  RopeParams p{64, 160000.0, true, 65536, 16.0, 32.0, 1.0};
  int64_t low = 0, high = 0;
  yarn_correction_range(p, &low, &high);
  EXPECT_EQ(low, 15);  // spec §2.0: "For base 160000 this gives low=15 and high=25"
  EXPECT_EQ(high, 25);
}

TEST(RefRope, FrequenciesFollowSpecFormula) {
  RopeParams plain{64, 10000.0, false, 0, 1.0, 32.0, 1.0};
  const auto f = rope_frequencies(plain);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64), 1e-6 * std::pow(10000.0, -2.0 * i / 64));
  RopeParams yarn{64, 160000.0, true, 65536, 16.0, 32.0, 1.0};
  const auto g = rope_frequencies(yarn);
  for (int i = 0; i < 32; ++i) {
    const double fi = std::pow(160000.0, -2.0 * i / 64);
    const double ramp = std::clamp((i - 15.0) / (25.0 - 15.0), 0.0, 1.0);
    const double want = fi / 16.0 * ramp + fi * (1.0 - ramp);  // spec: f/16·ramp + f·(1−ramp)
    EXPECT_NEAR(g[i], want, 1e-6 * want) << i;
  }
  EXPECT_FLOAT_EQ(g[0], rope_frequencies({64, 160000.0, false, 0, 1.0, 32.0, 1.0})[0]);  // below low: unscaled
}

TEST(RefRope, InterleavedPairsAndInverse) {
  std::vector<float> f = {0.5f, 0.25f};
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f};
  apply_rope(x.data(), 4, f.data(), 2, false);
  // pair 0 = (1, 0) rotated by angle 1.0; pair 1 = (0, 1) rotated by 0.5 (GPT-J interleaved pairs)
  EXPECT_NEAR(x[0], std::cos(1.0), 4e-3);
  EXPECT_NEAR(x[1], std::sin(1.0), 4e-3);
  EXPECT_NEAR(x[2], -std::sin(0.5), 4e-3);
  EXPECT_NEAR(x[3], std::cos(0.5), 4e-3);
  apply_rope(x.data(), 4, f.data(), 2, true);
  EXPECT_NEAR(x[0], 1.0f, 8e-3);
  EXPECT_NEAR(x[1], 0.0f, 8e-3);
  EXPECT_NEAR(x[3], 1.0f, 8e-3);
}

TEST(RefRope, PrecomputedCosSinGiveApplyRopesBits) {
  // The model computes a row's cos / sin once for its heads (rope_cos_sin) and rotates each head with them
  // (apply_rope_cs): the values must be fp32(cos / sin(double(fp32(pos) · f_i))), and the rotation
  // apply_rope's bits, forward and inverse, at positions up to and past YaRN's original 64K.
  for (const RopeParams& p :
       {RopeParams{64, 10000.0, false, 0, 1.0, 32.0, 1.0}, RopeParams{64, 160000.0, true, 65536, 16.0, 32.0, 1.0}}) {
    const auto f = rope_frequencies(p);
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{127}, int64_t{4097}, int64_t{65535}, int64_t{65536},
                        int64_t{1048575}}) {
      std::vector<float> cs(64);
      rope_cos_sin(64, f.data(), pos, cs.data());
      for (int i = 0; i < 32; ++i) {
        const double angle = static_cast<double>(static_cast<float>(pos) * f[static_cast<size_t>(i)]);
        ASSERT_EQ(cs[2 * i], static_cast<float>(std::cos(angle))) << "pos " << pos << " pair " << i;
        ASSERT_EQ(cs[2 * i + 1], static_cast<float>(std::sin(angle))) << "pos " << pos << " pair " << i;
      }
      for (bool inverse : {false, true}) {
        std::vector<float> a(64), b;
        for (float& v : a) v = round_bf16(d(rng));
        b = a;
        apply_rope(a.data(), 64, f.data(), pos, inverse);
        apply_rope_cs(b.data(), 64, cs.data(), inverse);
        for (int i = 0; i < 64; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
              << "pos " << pos << " inverse " << inverse << " dim " << i;
      }
    }
  }
}

TEST(RefMhc, SinkhornIsNearlyDoublyStochasticWithColumnsLast) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> c(16);
  for (float& v : c) v = d(rng);
  sinkhorn(c.data(), 4, 20, 1e-6f);
  for (int k = 0; k < 4; ++k) {
    double col = 0, row = 0;
    for (int j = 0; j < 4; ++j) col += c[j * 4 + k], row += c[k * 4 + j];
    EXPECT_NEAR(col, 1.0, 2e-6) << "column " << k;  // normalized last: exact up to eps
    EXPECT_NEAR(row, 1.0, 2e-2) << "row " << k;  // rows converge, columns exact
  }
  for (float v : c) EXPECT_GT(v, 0.0f);
}

TEST(RefMhc, OneSinkhornIterationIsSoftmaxThenColumnNormalize) {
  std::vector<float> c = {0, 1, 2, 3, 1, 1, 1, 1, -1, 0, 1, 0, 2, 2, 0, 0};
  std::vector<double> want(16);
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int k = 0; k < 4; ++k) s += std::exp(static_cast<double>(c[j * 4 + k]));
    for (int k = 0; k < 4; ++k) want[j * 4 + k] = std::exp(static_cast<double>(c[j * 4 + k])) / s + 1e-6;
  }
  for (int k = 0; k < 4; ++k) {
    double s = 1e-6;
    for (int j = 0; j < 4; ++j) s += want[j * 4 + k];
    for (int j = 0; j < 4; ++j) want[j * 4 + k] /= s;
  }
  sinkhorn(c.data(), 4, 1, 1e-6f);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(c[i], want[i], 1e-6);
}

TEST(RefMhc, HcPostMixesColumnsPlusPost) {
  HcParams p{4, 2, 20, 1e-6f, 1e-6f};
  const std::vector<float> x = {1.0f, -2.0f};
  const std::vector<float> res = {1, 2, 3, 4, 5, 6, 7, 8};  // [hc=4, dim=2]
  const std::vector<float> post = {0.5f, 1.0f, 1.5f, 2.0f};
  std::vector<float> comb(16, 0.0f);
  comb[0 * 4 + 1] = 1.0f;  // stream 0 → output 1
  comb[3 * 4 + 0] = 0.5f;  // stream 3 → output 0, halved
  std::vector<float> out(8);
  hc_post(p, x.data(), res.data(), post.data(), comb.data(), out.data());
  EXPECT_FLOAT_EQ(out[0], 0.5f * 1 + 0.5f * 7);
  EXPECT_FLOAT_EQ(out[1], 0.5f * -2 + 0.5f * 8);
  EXPECT_FLOAT_EQ(out[2], 1.0f * 1 + 1);
  EXPECT_FLOAT_EQ(out[3], 1.0f * -2 + 2);
  EXPECT_FLOAT_EQ(out[4], 1.5f);
  EXPECT_FLOAT_EQ(out[7], 2.0f * -2);
}

TEST(RefCompressor, PoolIsPerChannelSoftmaxAndSkipsAbsentCandidates) {
  // 3 candidates, 2 channels; candidate 0 absent (−inf) in channel 0 only.
  const std::vector<float> kv = {100.0f, 1.0f, 2.0f, 2.0f, 4.0f, 3.0f};
  const std::vector<float> sc = {-INFINITY, 0.0f, 0.0f, 1.0f, std::log(3.0f), 2.0f};
  std::vector<float> out(2);
  compress_pool(kv.data(), sc.data(), 3, 2, out.data());
  EXPECT_NEAR(out[0], (2.0 * 1 + 4.0 * 3) / 4.0, 1e-5);  // softmax over {0 (absent), ln 1, ln 3}
  const double e0 = 1, e1 = std::exp(1.0), e2 = std::exp(2.0);
  EXPECT_NEAR(out[1], (1 * e0 + 2 * e1 + 3 * e2) / (e0 + e1 + e2), 1e-5);
}

TEST(RefIndexer, TopkTiesGoToTheLowerIndex) {
  const std::vector<float> s = {0.0f, 1.0f, 0.5f, 1.0f, 0.0f, 1.0f, 0.0f};
  std::vector<int32_t> out(4);
  topk_desc(s.data(), 7, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 3, 5, 2}));
  std::vector<int32_t> out5(5);
  topk_desc(s.data(), 7, 5, out5.data());
  EXPECT_EQ(out5[4], 0);  // among the tied zeros {0, 4, 6}, the lowest id
}

TEST(RefIndexer, ScoresAreReluWeightedHeadSums) {
  const int H = 2, D = 4;
  const std::vector<float> q = {1, 0, 0, 0, 0, 1, 0, 0};
  const std::vector<float> k = {2, -1, 0, 0, -3, 4, 0, 0};  // 2 keys
  const std::vector<float> w = {0.5f, -1.0f};                // negative head weights are allowed
  std::vector<float> s(2);
  indexer_scores(q.data(), H, D, k.data(), 2, w.data(), s.data());
  EXPECT_FLOAT_EQ(s[0], 0.5f * 2 + -1.0f * 0);   // head 1: ReLU(−1) = 0
  EXPECT_FLOAT_EQ(s[1], 0.5f * 0 + -1.0f * 4);   // head 0: ReLU(−3) = 0
}

TEST(RefMoe, SwigluClampsUpBothSidesAndGateAboveOnly) {
  const std::vector<float> g = {20.0f, -20.0f, 1.0f};
  const std::vector<float> u = {30.0f, 2.0f, -50.0f};
  std::vector<float> h(3);
  swiglu_clamped(g.data(), u.data(), 3, 10.0f, 0.5f, h.data());
  auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  EXPECT_NEAR(h[0], round_bf16(static_cast<float>(0.5 * silu(10.0) * 10.0)), 1e-6);
  EXPECT_NEAR(h[1], round_bf16(static_cast<float>(0.5 * silu(-20.0) * 2.0)), 1e-9);  // no lower clamp on g
  EXPECT_NEAR(h[2], round_bf16(static_cast<float>(0.5 * silu(1.0) * -10.0)), 1e-6);
}

TEST(RefMoe, HashRoutingUsesTheTableAndNormalizesWeights) {
  GateParams p{8, 2, 1.5f};
  std::vector<float> sigma(8);
  for (int e = 0; e < 8; ++e) sigma[e] = sqrt_softplus(static_cast<float>(e) - 3.0f);
  const int32_t row[2] = {6, 1};
  int32_t idx[2];
  float w[2];
  gate_route(p, sigma.data(), nullptr, row, idx, w);
  EXPECT_EQ(idx[0], 6);
  EXPECT_EQ(idx[1], 1);
  EXPECT_NEAR(w[0], sigma[6] / (sigma[6] + sigma[1]) * 1.5, 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.5, 1e-6);
  // Bias changes the selection but not the weights.
  std::vector<float> bias(8, 0.0f);
  bias[0] = 100.0f;
  gate_route(p, sigma.data(), bias.data(), nullptr, idx, w);
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 7);
  EXPECT_NEAR(w[0], sigma[0] / (sigma[0] + sigma[7]) * 1.5, 1e-6);
  EXPECT_NEAR(sqrt_softplus(30.0f), std::sqrt(30.0f), 1e-6);  // linear above 20
  EXPECT_NEAR(sqrt_softplus(0.0f), std::sqrt(std::log(2.0f)), 1e-6);
}

TEST(RefHadamard, SylvesterOrderAndInvolution) {
  std::vector<float> e1(8, 0.0f);
  e1[1] = 1.0f;
  hadamard_rotate(e1.data(), 8);
  // column 1 of the natural-order H_8: (−1)^popcount(i & 1)
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(e1[i], ((i & 1) ? -1.0 : 1.0) / std::sqrt(8.0), 2e-3);
  auto x = random_bf16(128, 3);
  auto y = x;
  hadamard_rotate(y.data(), 128);
  hadamard_rotate(y.data(), 128);
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(y[i], x[i], 2e-2 * (std::fabs(x[i]) + 0.05));
}

TEST(RefSparseAttention, MatchesDirectSoftmaxWithSinkOverManyBlocks) {
  const int H = 2, D = 64, N = 150;  // 3 blocks of 64
  auto q = random_bf16(H * D, 11, 0.5f);
  auto kv = random_bf16(N * D, 12);
  std::vector<const float*> rows(N);
  for (int j = 0; j < N; ++j) rows[j] = (j % 5 == 3) ? nullptr : kv.data() + j * D;  // some masked
  const std::vector<float> sink = {0.3f, -2.0f};
  std::vector<float> out(H * D);
  SparseAttentionParams p{H, D, 1.0f / 8.0f};
  sparse_attention(p, q.data(), rows.data(), N, sink.data(), out.data());
  for (int h = 0; h < H; ++h) {
    std::vector<double> s(N, -INFINITY);
    double m = -INFINITY;
    for (int j = 0; j < N; ++j)
      if (rows[j]) {
        double d = 0;
        for (int c = 0; c < D; ++c) d += static_cast<double>(q[h * D + c]) * rows[j][c];
        s[j] = d / 8.0;
        m = std::max(m, s[j]);
      }
    double den = std::exp(sink[h] - m);
    for (int j = 0; j < N; ++j) den += rows[j] ? std::exp(s[j] - m) : 0.0;
    for (int c = 0; c < D; ++c) {
      double o = 0;
      for (int j = 0; j < N; ++j)
        if (rows[j]) o += std::exp(s[j] - m) * rows[j][c];
      // bf16 probabilities and output: a few bf16 ulps of the largest terms
      EXPECT_NEAR(out[h * D + c], o / den, 0.02 * std::fabs(o / den) + 4e-3) << h << "," << c;
    }
  }
}

TEST(RefNorm, RmsNormAndBf16HeadNorm) {
  auto x = random_bf16(256, 5);
  std::vector<float> w(256, 2.0f), y(256);
  rms_norm(x.data(), 1, 256, w.data(), 1e-6f, y.data());
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double r = 1.0 / std::sqrt(ss / 256 + 1e-6);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(y[i], 2.0 * x[i] * r, 8e-3 * std::fabs(2.0 * x[i] * r) + 1e-6);
  auto z = x;
  head_rms_norm_bf16(z.data(), 2, 128, 1e-6f);
  for (float v : z) EXPECT_EQ(v, round_bf16(v));  // every step lands on bf16
  double s2 = 0;
  for (int i = 0; i < 128; ++i) s2 += static_cast<double>(z[i]) * z[i];
  EXPECT_NEAR(s2 / 128, 1.0, 0.02);
}

TEST(RefLinear, Fp8ActivationQuantAndBf16Output) {
  const int64_t n_in = 256, n_out = 3;
  auto w = random_bf16(n_out * n_in, 21);
  auto x = random_bf16(n_in, 22);
  std::vector<float> y(n_out), yq(n_out);
  linear({n_in, n_out, ActQuant::kNone, OutRound::kF32}, w.data(), x.data(), 1, y.data());
  for (int64_t o = 0; o < n_out; ++o) {
    double d = 0;
    for (int64_t i = 0; i < n_in; ++i) d += static_cast<double>(w[o * n_in + i]) * x[i];
    EXPECT_EQ(y[o], static_cast<float>(d));  // float64 accumulation, one rounding
  }
  linear({n_in, n_out, ActQuant::kFp8Block128, OutRound::kBf16}, w.data(), x.data(), 1, yq.data());
  auto xq = x;
  fake_quant_fp8(std::span<float>(xq), 128);  // spec §3: the activation row in 1×128 blocks
  for (int64_t o = 0; o < n_out; ++o) {
    double d = 0;
    for (int64_t i = 0; i < n_in; ++i) d += static_cast<double>(w[o * n_in + i]) * xq[i];
    EXPECT_EQ(yq[o], round_bf16(static_cast<float>(d)));
  }
}

}  // namespace
}  // namespace dsv4::ref
