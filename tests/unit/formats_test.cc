// unit: exact numeric formats, exhaustively over every code, against independent definitions
// (value formulas written from the format specs, and IEEE arithmetic for the rounding boundaries).
#include "core/formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace dsv4 {
namespace {

// Independent E4M3FN value formula from the OCP spec.
double ocp_e4m3_value(int b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

TEST(Bf16, RoundTripEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(float_to_bf16(f), h) << h;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1+2^-7: ties to even (1.0).
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even).
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isinf(round_bf16(std::numeric_limits<float>::max())));
}

TEST(F16, RoundTripEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_f16(f), h) << h;
  }
}

TEST(E4M3, DecodeMatchesOcpFormula) {
  for (int b = 0; b < 256; ++b) {
    const double want = ocp_e4m3_value(b);
    const float got = e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << b;
    }
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(E4M3, EncodeRoundTripsEveryFiniteCode) {
  for (int b = 0; b < 256; ++b) {
    const float f = e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_e4m3(f), b) << b;
  }
}

// Every midpoint between adjacent codes rounds to the even code; just off the midpoint rounds to nearest.
TEST(E4M3, RoundsToNearestEvenAtEveryMidpoint) {
  std::vector<float> pos;
  for (int b = 0; b <= 0x7E; ++b) pos.push_back(e4m3_to_float(static_cast<uint8_t>(b)));
  for (size_t i = 0; i + 1 < pos.size(); ++i) {
    const float lo = pos[i], hi = pos[i + 1];
    const float mid = (lo + hi) / 2;  // exact in fp32
    const uint8_t even = (i % 2 == 0) ? static_cast<uint8_t>(i) : static_cast<uint8_t>(i + 1);
    EXPECT_EQ(float_to_e4m3(mid), even) << "midpoint " << mid;
    EXPECT_EQ(float_to_e4m3(-mid), even | 0x80) << "midpoint " << -mid;
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 0.0f)), i) << mid;
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 1e9f)), i + 1) << mid;
  }
}

TEST(E4M3, SaturatesAndHandlesSpecials) {
  EXPECT_EQ(float_to_e4m3(1000.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-1000.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3(465.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
}

TEST(E4M3Fnuz, EveryCodeIsHalfTheOcpValue) {
  for (int b = 0; b < 256; ++b) {
    if (b == 0x80) {
      EXPECT_TRUE(std::isnan(e4m3fnuz_to_float(0x80)));
      continue;
    }
    const float ocp = e4m3_to_float(static_cast<uint8_t>(b));
    const float fnuz = e4m3fnuz_to_float(static_cast<uint8_t>(b));
    if (std::isnan(ocp)) {  // 0x7F / 0xFF are NaN in OCP but ±240 in FNUZ
      EXPECT_EQ(std::fabs(fnuz), 240.0f);
      continue;
    }
    EXPECT_EQ(ocp, 2.0f * fnuz) << b;
  }
}

TEST(E4M3Fnuz, EncodeRoundTripsAndHasNoNegativeZero) {
  for (int b = 0; b < 256; ++b) {
    if (b == 0x80) continue;
    EXPECT_EQ(float_to_e4m3fnuz(e4m3fnuz_to_float(static_cast<uint8_t>(b))), b) << b;
  }
  EXPECT_EQ(float_to_e4m3fnuz(-0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3fnuz(-std::ldexp(1.0f, -20)), 0x00);
  EXPECT_EQ(float_to_e4m3fnuz(1e6f), 0x7F);
  EXPECT_EQ(float_to_e4m3fnuz(std::nanf("")), 0x80);
}

TEST(E8M0, EveryCode) {
  for (int e = 0; e < 255; ++e) {
    const float v = e8m0_to_float(static_cast<uint8_t>(e));
    EXPECT_EQ(static_cast<double>(v), std::pow(2.0, e - 127)) << e;
    EXPECT_EQ(float_to_e8m0(v), e);
  }
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xFF)));
  EXPECT_EQ(float_to_e8m0(3.0f), 0xFF);  // not a power of two
  EXPECT_EQ(float_to_e8m0(0.0f), 0xFF);
}

TEST(E2M1, EveryNibbleAndRne) {
  const float kValues[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n) {
    const float want = (n & 8) ? -kValues[n & 7] : kValues[n & 7];
    EXPECT_EQ(e2m1_to_float(static_cast<uint8_t>(n)), want);
    EXPECT_EQ(float_to_e2m1(want), (n == 8) ? 8 : n);
  }
  // Midpoints go to the even code.
  EXPECT_EQ(float_to_e2m1(0.25f), 0);
  EXPECT_EQ(float_to_e2m1(0.75f), 2);
  EXPECT_EQ(float_to_e2m1(1.25f), 2);
  EXPECT_EQ(float_to_e2m1(1.75f), 4);
  EXPECT_EQ(float_to_e2m1(2.5f), 4);
  EXPECT_EQ(float_to_e2m1(3.5f), 6);
  EXPECT_EQ(float_to_e2m1(5.0f), 6);
  EXPECT_EQ(float_to_e2m1(5.01f), 7);
  EXPECT_EQ(float_to_e2m1(100.0f), 7);
  EXPECT_EQ(float_to_e2m1(-5.0f), 14);
}

TEST(E2M1, PackingIsLowNibbleFirst) {
  const uint8_t b = e2m1_pack(float_to_e2m1(1.0f), float_to_e2m1(-6.0f));
  EXPECT_EQ(b, 0xF2);
  EXPECT_EQ(e2m1_unpack_lo(b), 1.0f);
  EXPECT_EQ(e2m1_unpack_hi(b), -6.0f);
}

}  // namespace
}  // namespace dsv4
