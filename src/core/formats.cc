// core: exact format conversions. Encoders work on the binary exponent so every step is exact:
// dividing by a power of two is exact, and std::nearbyint rounds ties to even.
#include "core/formats.h"

#include <limits>

namespace dsv4 {
namespace {

// Encodes |f| (finite, >= 0) to a sign-less minifloat code with `mbits` mantissa bits, exponent bias
// `bias`, minimum normal exponent 1-bias, saturating at code `max_code` (whose value is `max_value`).
// Codes are laid out as (exp << mbits) | mantissa, subnormals at exp 0, so the code grows monotonically.
uint32_t encode_minifloat(float a, int mbits, int bias, uint32_t max_code, float max_value) {
  if (!(a < max_value)) return max_code;  // also catches +inf
  const int min_exp = 1 - bias;           // exponent of the smallest normal
  int e;
  std::frexp(a, &e);  // a = frac * 2^e with frac in [0.5, 1): binary exponent is e-1
  int exp = e - 1;
  if (a == 0.0f || exp < min_exp) exp = min_exp;  // subnormal range shares the min-normal quantum
  const float quantum = std::ldexp(1.0f, exp - mbits);
  const uint32_t q = static_cast<uint32_t>(std::nearbyint(a / quantum));  // RNE, exact division
  // q in [0, 2^(mbits+1)]; q == 2^(mbits+1) carries into the next binade, which the layout absorbs.
  uint32_t code;
  if (exp == min_exp && q < (1u << mbits)) {
    code = q;  // subnormal (or zero)
  } else {
    code = (static_cast<uint32_t>(exp + bias) << mbits) + (q - (1u << mbits));
  }
  return code > max_code ? max_code : code;
}

}  // namespace

float f16_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t float_to_f16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7E00;
  const float a = std::fabs(f);
  // F16 overflows to inf (no saturation) like an IEEE cast; 65520 is the rounding boundary.
  if (a >= 65520.0f) return sign | 0x7C00;
  return sign | static_cast<uint16_t>(encode_minifloat(a, 10, 15, 0x7BFF, 65520.0f));
}

float e4m3_to_float(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xFu, man = b & 7u;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                     : std::ldexp(static_cast<float>(man | 8u), static_cast<int>(exp) - 10);
  return sign ? -v : v;
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  // 0x7E = 448 is the largest finite code; saturating cast.
  return sign | static_cast<uint8_t>(encode_minifloat(std::fabs(f), 3, 7, 0x7E, kE4M3Max));
}

float e4m3fnuz_to_float(uint8_t b) {
  if (b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xFu, man = b & 7u;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -10)
                     : std::ldexp(static_cast<float>(man | 8u), static_cast<int>(exp) - 11);
  return sign ? -v : v;
}

uint8_t float_to_e4m3fnuz(float f) {
  if (std::isnan(f)) return 0x80;
  const uint8_t code = static_cast<uint8_t>(encode_minifloat(std::fabs(f), 3, 8, 0x7F, kE4M3FnuzMax));
  if (code == 0) return 0;  // no negative zero in FNUZ: 0x80 is NaN
  return (std::signbit(f) ? 0x80 : 0) | code;
}

uint8_t float_to_e8m0(float pow2) {
  if (!(pow2 > 0.0f) || std::isinf(pow2)) return 0xFF;
  int e;
  const float frac = std::frexp(pow2, &e);  // pow2 = 0.5 * 2^e for an exact power of two
  if (frac != 0.5f) return 0xFF;
  const int biased = e - 1 + 127;
  if (biased < 0 || biased > 254) return 0xFF;
  return static_cast<uint8_t>(biased);
}

uint8_t float_to_e2m1(float f) {
  if (std::isnan(f)) return 0;  // E2M1 has no NaN; callers never pass one (inputs are clamped first)
  const uint8_t sign = std::signbit(f) ? 0x8 : 0;
  return sign | static_cast<uint8_t>(encode_minifloat(std::fabs(f), 1, 1, 7, kE2M1Max));
}

}  // namespace dsv4
