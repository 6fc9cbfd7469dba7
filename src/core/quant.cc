// core: activation quantizers of spec §3.
#include "core/quant.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"
#include "core/formats.h"

namespace dsv4 {
namespace {

constexpr float kFp8InvMax = 1.0f / 448.0f;  // fl32(1/448)
constexpr float kFp4InvMax = 1.0f / 6.0f;    // fl32(1/6)
constexpr float kFp8AmaxFloor = 1e-4f;
const float kFp4AmaxFloor = 6.0f * std::ldexp(1.0f, -126);

// e4m3_to_float(float_to_e4m3(q)) for |q| <= 448, computed without the codec (frexp/ldexp/nearbyint
// per element made the quantizer ~20 ns an element, a few ms of every decode token): the nearest e4m3
// value, ties to even. Normal range (|q| >= 2^-6): round the float's 23-bit mantissa to e4m3's 3 bits on
// the bit pattern (a carry moves into the exponent, as the codec's does). Subnormal range: e4m3's quantum
// there is 2^-9, and adding then subtracting 2^14 (whose ulp is 2^-9) rounds to it with the FPU's
// round-to-nearest-even, both steps exact otherwise. NaN goes through the codec (its NaN is canonical).
float round_to_e4m3(float q) {
  if (std::isnan(q)) return e4m3_to_float(float_to_e4m3(q));
  const float a = std::fabs(q);
  float r;
  if (a < 0x1p-6f) {
    r = (a + 0x1p14f) - 0x1p14f;
  } else {
    uint32_t u = std::bit_cast<uint32_t>(a);
    u += 0x7FFFFu + ((u >> 20) & 1u);
    r = std::bit_cast<float>(u & 0xFFF00000u);
  }
  return std::copysign(r, q);
}

float block_absmax(std::span<const float> x) {
  float m = 0.0f;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace

float pow2_ceil_from_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  int exp = static_cast<int>((u >> 23) & 0xFF);
  if ((u & 0x7FFFFF) != 0) ++exp;  // not already a power of two: round the exponent up
  return std::ldexp(1.0f, exp - 127);
}

float fp8_block_scale(float amax) {
  const float a = std::max(amax, kFp8AmaxFloor);
  return pow2_ceil_from_bits(a * kFp8InvMax);
}

float fp4_block_scale(float amax) {
  const float a = std::max(amax, kFp4AmaxFloor);
  return pow2_ceil_from_bits(a * kFp4InvMax);
}

void fake_quant_fp8(std::span<float> x, size_t block) {
  DSV4_CHECK(block > 0 && x.size() % block == 0, "fake_quant_fp8: size not a multiple of block");
  for (size_t b = 0; b < x.size(); b += block) {
    auto blk = x.subspan(b, block);
    const float s = fp8_block_scale(block_absmax(blk));
    for (float& v : blk) {
      const float q = std::clamp(v / s, -kE4M3Max, kE4M3Max);
      v = round_to_e4m3(q) * s;
    }
  }
}

void fake_quant_fp4(std::span<float> x, size_t block) {
  DSV4_CHECK(block > 0 && x.size() % block == 0, "fake_quant_fp4: size not a multiple of block");
  for (size_t b = 0; b < x.size(); b += block) {
    auto blk = x.subspan(b, block);
    const float s = fp4_block_scale(block_absmax(blk));
    for (float& v : blk) {
      const float q = std::clamp(v / s, -kE2M1Max, kE2M1Max);
      v = e2m1_to_float(float_to_e2m1(q)) * s;
    }
  }
}

void quantize_fp8(std::span<const float> x, size_t block, std::span<uint8_t> codes,
                  std::span<uint8_t> scales_e8m0) {
  DSV4_CHECK(block > 0 && x.size() % block == 0 && codes.size() == x.size() &&
                 scales_e8m0.size() == x.size() / block,
             "quantize_fp8: bad sizes");
  for (size_t b = 0, i = 0; b < x.size(); b += block, ++i) {
    auto blk = x.subspan(b, block);
    const float s = fp8_block_scale(block_absmax(blk));
    scales_e8m0[i] = float_to_e8m0(s);
    for (size_t j = 0; j < block; ++j)
      codes[b + j] = float_to_e4m3(std::clamp(blk[j] / s, -kE4M3Max, kE4M3Max));
  }
}

void quantize_fp4(std::span<const float> x, size_t block, std::span<uint8_t> packed,
                  std::span<uint8_t> scales_e8m0) {
  DSV4_CHECK(block > 0 && block % 2 == 0 && x.size() % block == 0 && packed.size() == x.size() / 2 &&
                 scales_e8m0.size() == x.size() / block,
             "quantize_fp4: bad sizes");
  for (size_t b = 0, i = 0; b < x.size(); b += block, ++i) {
    auto blk = x.subspan(b, block);
    const float s = fp4_block_scale(block_absmax(blk));
    scales_e8m0[i] = float_to_e8m0(s);
    for (size_t j = 0; j < block; j += 2) {
      const uint8_t lo = float_to_e2m1(std::clamp(blk[j] / s, -kE2M1Max, kE2M1Max));
      const uint8_t hi = float_to_e2m1(std::clamp(blk[j + 1] / s, -kE2M1Max, kE2M1Max));
      packed[(b + j) / 2] = e2m1_pack(lo, hi);
    }
  }
}

}  // namespace dsv4
