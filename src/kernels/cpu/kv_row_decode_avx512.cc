// kernels: FP8 KV row decode on AVX-512 + VBMI (flags in src/kernels/CMakeLists.txt; called on the tiers
// that imply VBMI, or on kAvx512 after has_avx512_vbmi()). Per 64-code block (one scale):
//   hi = vpermi2b(code, hi table) ∨ (code ∧ 0x80)   byte 3 of each value's fp32 bits: a 128-entry table on
//                                                 the magnitude (vpermi2b reads index bits 0..6), the sign
//                                                 merged by one vpternlog; code 0xFF then back to 0x7F
//                                                 (e4m3_to_float gives both NaN codes the same +qNaN)
//   lo = vpermi2b(code, lo table)                 byte 2 (bytes 0 and 1 of an E4M3 value's fp32 are zero)
//   4 × vpermi2b with zero-masking                 16 values' fp32 bits each, in code order
//   4 × vmulps by the block scale                  the scalar decode's one fp32 multiply: the same bits
// and the rope dims widen from bf16 by a 16-bit shift (see kv_row_decode.h). dsv4_bench
// decode_kv_rows/*/rows=639 (one CSA query's rows from a 9 MB store, Zen 5, one thread): 21-24 µs against
// the scalar tier's 151 (33 vs 237 ns per 512-dim row).
#include "kernels/cpu/kv_row_decode.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <bit>

#include "core/formats.h"
#include "kernels/cpu/quant_tiles.h"  // kE8m0ToFloat: e8m0_to_float of every code, without its ldexp

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/kv_row_decode_rows.inc"  // decode_rows

// [0, 128): byte 3 of e4m3_to_float(m)'s bits by magnitude m (sign clear), [128, 256): byte 2. Built from
// the scalar codec itself, whose E4M3 values (and NaN) all have zero low 16 bits.
struct Tables {
  alignas(64) std::array<uint8_t, 256> bytes;
};
const Tables& tables() {
  static const Tables t = [] {
    Tables v{};
    for (int m = 0; m < 128; ++m) {
      const uint32_t bits = std::bit_cast<uint32_t>(e4m3_to_float(static_cast<uint8_t>(m)));
      v.bytes[static_cast<size_t>(m)] = static_cast<uint8_t>(bits >> 24);
      v.bytes[static_cast<size_t>(128 + m)] = static_cast<uint8_t>(bits >> 16);
    }
    return v;
  }();
  return t;
}

// Byte b of output vector q (16 fp32 values): dword j = codes 16q + j; its byte 2 from lo (index
// 16q + j), byte 3 from hi (64 + 16q + j: vpermi2b's second source); bytes 0 and 1 are masked to zero.
constexpr std::array<uint8_t, 256> make_spread() {
  std::array<uint8_t, 256> ix{};
  for (int q = 0; q < 4; ++q)
    for (int j = 0; j < 16; ++j) {
      ix[static_cast<size_t>(64 * q + 4 * j + 2)] = static_cast<uint8_t>(16 * q + j);
      ix[static_cast<size_t>(64 * q + 4 * j + 3)] = static_cast<uint8_t>(64 + 16 * q + j);
    }
  return ix;
}
alignas(64) constexpr std::array<uint8_t, 256> kSpread = make_spread();
constexpr __mmask64 kHighHalves = 0xCCCCCCCCCCCCCCCCull;  // bytes 2 and 3 of every dword

}  // namespace

void decode_kv_rows_avx512_vbmi(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out) {
  const Tables& t = tables();
  const __m512i hi0 = _mm512_load_si512(t.bytes.data()), hi1 = _mm512_load_si512(t.bytes.data() + 64);
  const __m512i lo0 = _mm512_load_si512(t.bytes.data() + 128), lo1 = _mm512_load_si512(t.bytes.data() + 192);
  __m512i spread[4];
  for (int q = 0; q < 4; ++q) spread[q] = _mm512_load_si512(kSpread.data() + 64 * q);
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80)), ones = _mm512_set1_epi8(static_cast<char>(0xFF));
  const __m512i nan_hi = _mm512_set1_epi8(0x7F);
  auto block = [&](const uint8_t* codes, float scale, float* o) {
    const __m512 s = _mm512_set1_ps(scale);
    const __m512i c = _mm512_loadu_si512(codes);
    // imm 0xF8 = A | (B & C): the table's byte ORed with the code's sign bit.
    __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, c, hi1), c, sign, 0xF8);
    hi = _mm512_mask_mov_epi8(hi, _mm512_cmpeq_epi8_mask(c, ones), nan_hi);
    const __m512i lo = _mm512_permutex2var_epi8(lo0, c, lo1);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512 v = _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi8(kHighHalves, lo, spread[q], hi));
      _mm512_storeu_ps(o + 16 * q, _mm512_mul_ps(v, s));
    }
  };
  auto rope = [](const uint8_t* h, int64_t count, float* o) {
    for (int64_t i = 0; i < count; i += 16) {
      const __mmask16 m =
          count - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (count - i)) - 1u);
      const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + 2 * i));
      _mm512_mask_storeu_ps(o + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
  };
  decode_rows(layout, entries, n, out, block, rope);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
