// core: exact scalar encode/decode of every numeric format the checkpoints and the reference use:
// BF16, F16, OCP E4M3FN, AMD E4M3FNUZ, E8M0 (ue8m0) scales and E2M1 (FP4) nibbles. All encoders round
// to nearest, ties to even (the reference's cast semantics); FP8/FP4 encoders saturate.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace dsv4 {

// ---- BF16 ----
inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (overflows to inf like a real cast)
  return static_cast<uint16_t>(u >> 16);
}

// The value a bf16 rounding point leaves: fl_bf16(f), returned as float.
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// ---- F16 (IEEE binary16) ----
float f16_to_float(uint16_t h);
uint16_t float_to_f16(float f);

// ---- FP8 E4M3FN (OCP): bias 7, subnormals 2^-9 step, max 448, 0x7F/0xFF = NaN, no inf ----
inline constexpr float kE4M3Max = 448.0f;
float e4m3_to_float(uint8_t b);
// Saturating RNE: |f| beyond 448 (and ±inf) becomes ±448; NaN becomes 0x7F.
uint8_t float_to_e4m3(float f);

// ---- FP8 E4M3FNUZ (AMD gfx942): bias 8, max 240, 0x80 = NaN, no negative zero, no inf.
// For the same bits (other than 0x80), the OCP value is exactly 2x the FNUZ value.
inline constexpr float kE4M3FnuzMax = 240.0f;
float e4m3fnuz_to_float(uint8_t b);
uint8_t float_to_e4m3fnuz(float f);

// ---- E8M0 (ue8m0) scale: 2^(e-127); 0xFF = NaN ----
inline float e8m0_to_float(uint8_t e) {
  if (e == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(e) - 127);
}
// Exact for powers of two in [2^-127, 2^127]; other inputs are rejected by returning 0xFF.
uint8_t float_to_e8m0(float pow2);

// ---- E2M1 (FP4): codes 0..7 = {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign ----
inline constexpr float kE2M1Max = 6.0f;
inline float e2m1_to_float(uint8_t nibble) {
  static constexpr float kLut[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kLut[nibble & 0xF];
}
// Saturating RNE to the nearest E2M1 code (ties to the even code).
uint8_t float_to_e2m1(float f);

// Packed FP4 byte: the low nibble is the even (first) element, the high nibble the next one.
inline float e2m1_unpack_lo(uint8_t byte) { return e2m1_to_float(byte & 0xF); }
inline float e2m1_unpack_hi(uint8_t byte) { return e2m1_to_float(byte >> 4); }
inline uint8_t e2m1_pack(uint8_t lo, uint8_t hi) { return static_cast<uint8_t>((lo & 0xF) | (hi << 4)); }

}  // namespace dsv4
