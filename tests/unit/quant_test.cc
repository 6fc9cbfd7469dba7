// unit: the spec §3 activation quantizers, bit exact against an independent formulation written here:
// the scale exponent is an exact ceil(log2) from frexp in double (not the fp32 exponent-bits trick the
// code uses), and the E4M3 / E2M1 value grids are enumerated from the format definitions (OCP FP8, OCP MX
// FP4) with round-to-nearest-even done by comparing distances. Random and edge blocks, block sizes 128/64/32.
#include "core/quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/formats.h"

namespace dsv4 {
namespace {

// ---- the independent formulation ----

struct Format {
  std::vector<double> grid;  // non-negative finite values, index == code (sign bit excluded)
  double qmax;
  float amax_floor;
  float inv_qmax;  // fl32(1/qmax), spec §3 step 2
  uint8_t sign_bit;
};

// OCP E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa; e=0 subnormal; S.1111.111 is NaN (excluded).
Format e4m3_format() {
  Format f;
  for (int e = 0; e < 16; ++e)
    for (int m = 0; m < 8; ++m) {
      if (e == 15 && m == 7) continue;
      f.grid.push_back(e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7));
    }
  f.qmax = 448.0;
  f.amax_floor = 1e-4f;
  f.inv_qmax = 1.0f / 448.0f;
  f.sign_bit = 0x80;
  return f;
}

// E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa; e=0 subnormal; no NaN or inf.
Format e2m1_format() {
  Format f;
  for (int e = 0; e < 4; ++e)
    for (int m = 0; m < 2; ++m) f.grid.push_back(e == 0 ? m / 2.0 : std::ldexp(1.0 + m / 2.0, e - 1));
  f.qmax = 6.0;
  f.amax_floor = static_cast<float>(std::ldexp(6.0, -126));
  f.inv_qmax = 1.0f / 6.0f;
  f.sign_bit = 0x8;
  return f;
}

// ceil(log2(x)) exactly, for finite x > 0: x = m·2^e with m in [0.5, 1); log2 x is an integer only when
// m == 0.5.
int ceil_log2(double x) {
  int e;
  const double m = std::frexp(x, &e);
  return m == 0.5 ? e - 1 : e;
}

// Nearest grid code to y in [0, qmax], ties to the even code.
int nearest_code(const std::vector<double>& grid, double y) {
  size_t i = 0;
  while (i + 1 < grid.size() && grid[i + 1] <= y) ++i;
  if (i + 1 == grid.size() || y == grid[i]) return static_cast<int>(i);
  const double dl = y - grid[i], dh = grid[i + 1] - y;  // exact: small dyadic numbers in double
  if (dl < dh) return static_cast<int>(i);
  if (dh < dl) return static_cast<int>(i + 1);
  return static_cast<int>(i % 2 == 0 ? i : i + 1);
}

struct Quantized {
  std::vector<uint8_t> codes;  // sign | grid index, one per element
  std::vector<int> scale_exp;  // log2 of each block's scale
  std::vector<float> dequant;  // code value · scale
};

Quantized oracle(const Format& f, const std::vector<float>& x, size_t block) {
  Quantized out;
  for (size_t b = 0; b < x.size(); b += block) {
    double amax = 0;
    for (size_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b + j])));
    const float a = std::max(static_cast<float>(amax), f.amax_floor);
    const float prod = a * f.inv_qmax;  // spec: fl32(a · fl32(1/qmax))
    const int k = ceil_log2(prod);
    out.scale_exp.push_back(k);
    for (size_t j = 0; j < block; ++j) {
      const double y = std::ldexp(static_cast<double>(x[b + j]), -k);  // exact in double
      const double clamped = std::min(std::fabs(y), f.qmax);
      const int code = nearest_code(f.grid, clamped);
      const bool neg = std::signbit(y);
      out.codes.push_back(static_cast<uint8_t>(code | (neg ? f.sign_bit : 0)));
      const double v = std::ldexp(f.grid[static_cast<size_t>(code)], k);
      out.dequant.push_back(static_cast<float>(neg ? -v : v));
    }
  }
  return out;
}

// ---- inputs ----

float ulps(float x, int n) {
  for (; n > 0; --n) x = std::nextafter(x, std::numeric_limits<float>::infinity());
  for (; n < 0; ++n) x = std::nextafter(x, 0.0f);
  return x;
}

// Edge blocks of length `block` for a format with maximum qmax and amax floor `floor`.
std::vector<std::vector<float>> edge_blocks(size_t block, float qmax, float floor, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> out;
  auto filled = [&](float amax_value, float spread) {
    std::vector<float> v(block);
    for (auto& e : v) e = u(rng) * spread;
    v[rng() % block] = (rng() & 1) ? amax_value : -amax_value;
    return v;
  };
  out.push_back(std::vector<float>(block, 0.0f));  // all zeros: scale from the floor
  std::vector<float> neg_zero(block, -0.0f);
  neg_zero[0] = 0.0f;
  out.push_back(neg_zero);                                                     // signed zeros keep their sign
  for (int n = -3; n <= 3; ++n) out.push_back(filled(ulps(floor, n), floor));  // around the floor
  out.push_back(filled(floor / 1024, floor / 1024));
  for (int k = -20; k <= 20; k += 4)
    for (int n = -4; n <= 4; ++n) {
      out.push_back(filled(ulps(std::ldexp(qmax, k), n), std::ldexp(qmax, k)));  // at the ±qmax clamp
      out.push_back(filled(ulps(std::ldexp(1.0f, k), n), std::ldexp(1.0f, k)));  // powers of two
    }
  // Subnormal inputs, alone and next to a normal amax.
  std::vector<float> sub(block);
  for (size_t i = 0; i < block; ++i) sub[i] = std::ldexp(static_cast<float>(i + 1), -149 + static_cast<int>(i % 20));
  out.push_back(sub);
  sub[0] = 3.0f;
  out.push_back(sub);
  sub[0] = std::numeric_limits<float>::denorm_min();
  sub[1] = -std::numeric_limits<float>::min();
  out.push_back(sub);
  // Every grid midpoint (ties) and its neighbours, at a known scale.
  for (int k : {-10, 0, 7}) {
    const Format f = qmax == 448.0f ? e4m3_format() : e2m1_format();
    std::vector<float> mids;
    for (size_t i = 0; i + 1 < f.grid.size(); ++i) {
      const float mid = static_cast<float>(std::ldexp((f.grid[i] + f.grid[i + 1]) / 2, k));
      for (float m : {mid, ulps(mid, -1), ulps(mid, 1)}) mids.push_back((mids.size() % 2) ? -m : m);
    }
    for (size_t at = 0; at < mids.size(); at += block - 1) {
      std::vector<float> v(block, 0.0f);
      v[0] = static_cast<float>(std::ldexp(0.75 * qmax, k));  // above every midpoint, below the clamp: s = 2^k
      for (size_t j = 1; j < block && at + j - 1 < mids.size(); ++j) v[j] = mids[at + j - 1];
      out.push_back(v);
    }
  }
  return out;
}

std::vector<std::vector<float>> random_blocks(size_t block, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-60, 60);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> v(block);
    const int mode = i % 3;
    const float scale = std::ldexp(1.0f, exp(rng));
    for (auto& e : v) {
      if (mode == 0)
        e = normal(rng) * scale;  // one magnitude
      else if (mode == 1)
        e = normal(rng) * std::ldexp(1.0f, exp(rng) / 3);  // wide dynamic range
      else {
        do e = std::bit_cast<float>(static_cast<uint32_t>(rng()));
        while (!std::isfinite(e) || std::fabs(e) > 1e36f);
      }
    }
    out.push_back(v);
  }
  return out;
}

std::vector<float> concat(const std::vector<std::vector<float>>& blocks) {
  std::vector<float> x;
  for (const auto& b : blocks) x.insert(x.end(), b.begin(), b.end());
  return x;
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// Checks fake_quant and quantize (+ decode) of one format against the oracle on `x`.
void check_fp8(const std::vector<float>& x, size_t block) {
  const Quantized want = oracle(e4m3_format(), x, block);
  std::vector<float> fake = x;
  fake_quant_fp8(fake, block);
  std::vector<uint8_t> codes(x.size()), scales(x.size() / block);
  quantize_fp8(x, block, codes, scales);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t b = i / block;
    ASSERT_EQ(bits(fake[i]), bits(want.dequant[i])) << "fake_quant_fp8 x=" << x[i] << " at " << i << " block " << block;
    ASSERT_EQ(codes[i], want.codes[i]) << "quantize_fp8 code, x=" << x[i] << " at " << i;
    ASSERT_EQ(scales[b], want.scale_exp[b] + 127) << "block " << b;
    // Decoding the stored codes reproduces the fake-quantized value bit for bit.
    ASSERT_EQ(bits(e4m3_to_float(codes[i]) * e8m0_to_float(scales[b])), bits(fake[i])) << i;
  }
}

void check_fp4(const std::vector<float>& x, size_t block) {
  const Quantized want = oracle(e2m1_format(), x, block);
  std::vector<float> fake = x;
  fake_quant_fp4(fake, block);
  std::vector<uint8_t> packed(x.size() / 2), scales(x.size() / block);
  quantize_fp4(x, block, packed, scales);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t b = i / block;
    const uint8_t code = i % 2 == 0 ? packed[i / 2] & 0xF : packed[i / 2] >> 4;  // low nibble first
    ASSERT_EQ(bits(fake[i]), bits(want.dequant[i])) << "fake_quant_fp4 x=" << x[i] << " at " << i << " block " << block;
    ASSERT_EQ(code, want.codes[i]) << "quantize_fp4 code, x=" << x[i] << " at " << i;
    ASSERT_EQ(scales[b], want.scale_exp[b] + 127) << "block " << b;
    ASSERT_EQ(bits(e2m1_to_float(code) * e8m0_to_float(scales[b])), bits(fake[i])) << i;
  }
}

// ---- tests ----

TEST(QuantOracle, GridsMatchTheFormatDefinitions) {
  // Sanity of the oracle itself against values everyone knows.
  const Format f8 = e4m3_format(), f4 = e2m1_format();
  ASSERT_EQ(f8.grid.size(), 127u);
  EXPECT_EQ(f8.grid.back(), 448.0);
  EXPECT_EQ(f8.grid[1], std::ldexp(1.0, -9));
  EXPECT_EQ(f4.grid, (std::vector<double>{0, 0.5, 1, 1.5, 2, 3, 4, 6}));
  EXPECT_EQ(ceil_log2(1.0), 0);
  EXPECT_EQ(ceil_log2(std::nextafter(1.0, 2.0)), 1);
  EXPECT_EQ(ceil_log2(0.75), 0);
  EXPECT_EQ(ceil_log2(std::ldexp(1.0, -140)), -140);
}

TEST(Quant, Pow2CeilFromBitsIsExactCeilLog2ForNormals) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float x;
    do x = std::bit_cast<float>(static_cast<uint32_t>(rng()) & 0x7FFFFFFFu);
    while (!std::isnormal(x) || x > 1e38f);
    ASSERT_EQ(pow2_ceil_from_bits(x), static_cast<float>(std::ldexp(1.0, ceil_log2(x)))) << x;
  }
  for (int k = -126; k <= 126; ++k) {
    const float p = std::ldexp(1.0f, k);
    EXPECT_EQ(pow2_ceil_from_bits(p), p) << "an exact power of two must not round up: 2^" << k;
    EXPECT_EQ(pow2_ceil_from_bits(ulps(p, 1)), 2 * p) << k;
    if (k > -126) {
      EXPECT_EQ(pow2_ceil_from_bits(ulps(p, -1)), p) << k;
    }
  }
}

TEST(Quant, BlockScalesMatchTheOracle) {
  for (float amax : {0.0f, 1e-5f, 1e-4f, ulps(1e-4f, 1), 1.0f, 447.0f, 448.0f, ulps(448.0f, 1), 449.0f, 896.0f, 6.0f,
                     ulps(6.0f, 1), 12.0f, 3.0e30f, std::numeric_limits<float>::denorm_min()}) {
    const Quantized q8 = oracle(e4m3_format(), {amax}, 1);
    EXPECT_EQ(fp8_block_scale(amax), static_cast<float>(std::ldexp(1.0, q8.scale_exp[0]))) << amax;
    const Quantized q4 = oracle(e2m1_format(), {amax}, 1);
    EXPECT_EQ(fp4_block_scale(amax), static_cast<float>(std::ldexp(1.0, q4.scale_exp[0]))) << amax;
  }
}

TEST(Quant, Fp8EdgeBlocks) {
  for (size_t block : {128u, 64u, 32u}) {
    SCOPED_TRACE("block " + std::to_string(block));
    check_fp8(concat(edge_blocks(block, 448.0f, 1e-4f, 11)), block);
  }
}

TEST(Quant, Fp4EdgeBlocks) {
  const float floor4 = std::ldexp(6.0f, -126);
  for (size_t block : {32u, 64u, 128u}) {
    SCOPED_TRACE("block " + std::to_string(block));
    check_fp4(concat(edge_blocks(block, 6.0f, floor4, 12)), block);
  }
}

TEST(Quant, Fp8RandomBlocks) {
  for (size_t block : {128u, 64u, 32u}) {
    SCOPED_TRACE("block " + std::to_string(block));
    check_fp8(concat(random_blocks(block, 300, 21 + static_cast<uint32_t>(block))), block);
  }
}

// fake_quant_fp8 rounds to the E4M3 grid on the float's bits (core/quant.cc), not through the codec: every
// rounding case against the oracle — a sweep over float bit patterns from 0 up to the block maximum (both
// signs, every binade including E4M3's subnormal range and below it), every grid value, every midpoint
// between neighbours (the ties) and the floats one ulp either side of it, at scale 1 and at scale 2 (block
// maxima 300 and 890 anchor each block's scale, so the elements cover |v / s| up to 445).
TEST(Quant, Fp8EveryRoundingCaseMatchesTheOracle) {
  const Format f = e4m3_format();
  for (const float anchor : {300.0f, 890.0f}) {
    const double s = anchor < 448.0f ? 1.0 : 2.0;
    std::vector<float> vals;
    for (uint32_t u = 0; u <= std::bit_cast<uint32_t>(anchor); u += 1117) vals.push_back(std::bit_cast<float>(u));
    for (size_t i = 0; i < f.grid.size(); ++i) {
      const auto g = static_cast<float>(f.grid[i] * s);
      vals.push_back(g);
      if (i + 1 == f.grid.size()) break;
      const auto mid = static_cast<float>((f.grid[i] + f.grid[i + 1]) / 2 * s);  // exact: a short dyadic
      for (int n : {-1, 0, 1}) vals.push_back(ulps(mid, n));
    }
    std::vector<float> x;
    size_t k = 0;
    for (size_t j = 0; j < vals.size(); ++j) {
      if (x.size() % 128 == 0) x.push_back(anchor);
      if (std::fabs(vals[j]) > anchor) continue;
      x.push_back(k++ % 2 ? -vals[j] : vals[j]);
    }
    while (x.size() % 128 != 0) x.push_back(0.0f);
    SCOPED_TRACE("anchor " + std::to_string(anchor));
    check_fp8(x, 128);
  }
}

TEST(Quant, Fp4RandomBlocks) {
  for (size_t block : {32u, 64u, 128u}) {
    SCOPED_TRACE("block " + std::to_string(block));
    check_fp4(concat(random_blocks(block, 300, 31 + static_cast<uint32_t>(block))), block);
  }
}

TEST(Quant, BlockMaximumAtTheClampSurvivesExactly) {
  // amax = qmax·2^k: whether fl32(qmax·fl32(1/qmax)) rounds to 1 (s = 2^k, code qmax) or above it
  // (s = 2^(k+1), code qmax/2, also on the grid), the block maximum dequantizes to itself.
  for (int k = -10; k <= 10; ++k) {
    std::vector<float> v(128, 0.0f);
    v[5] = std::ldexp(448.0f, k);
    v[6] = -v[5];
    fake_quant_fp8(v, 128);
    EXPECT_EQ(v[5], std::ldexp(448.0f, k)) << k;
    EXPECT_EQ(v[6], -std::ldexp(448.0f, k)) << k;
    std::vector<float> w(32, 0.0f);
    w[0] = std::ldexp(6.0f, k);
    w[31] = -w[0];
    fake_quant_fp4(w, 32);
    EXPECT_EQ(w[0], std::ldexp(6.0f, k)) << k;
    EXPECT_EQ(w[31], -std::ldexp(6.0f, k)) << k;
  }
}

}  // namespace
}  // namespace dsv4
