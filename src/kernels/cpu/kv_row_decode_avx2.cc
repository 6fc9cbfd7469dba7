// kernels: FP8 KV row decode on AVX2 (flags in src/kernels/CMakeLists.txt), eight codes per vector, each
// code's e4m3_to_float value built from its bits (a VPGATHERDD from the codec's table measured slower
// than the scalar loop on Zen 5: 221 vs 203 ns per 512-dim row; this: 50-58 µs against the scalar tier's
// 149-195 in dsv4_bench decode_kv_rows/*/rows=639, Zen 5 running the AVX2 code):
//   normal (magnitude ≥ 8)   fp32 bits = (magnitude << 20) + (120 << 23): exponent e − 7 + 127, mantissa m
//   subnormal (< 8)          float(magnitude) · 2^-9, exact
//   sign                     bit 7 moved to bit 31; both NaN codes (magnitude 0x7F) → +qNaN, as the codec
// then the scalar decode's one fp32 multiply by the block scale; the rope dims widen from bf16 by a 16-bit
// shift (see kv_row_decode.h).
#include "kernels/cpu/kv_row_decode.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <bit>

#include "core/formats.h"
#include "kernels/cpu/quant_tiles.h"  // kE8m0ToFloat: e8m0_to_float of every code, without its ldexp

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/kv_row_decode_rows.inc"  // decode_rows

// e4m3_to_float of eight codes (zero-extended to dwords), bit for bit; nan: the codec's NaN bits in every lane.
inline __m256 e4m3_x8(__m256i c, __m256i nan) {
  const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(0x1p-9f));
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag);
  __m256i bits = _mm256_blendv_epi8(normal, _mm256_castps_si256(subnormal), is_sub);
  bits = _mm256_or_si256(bits, _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(bits, nan, _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F))));
}

}  // namespace

void decode_kv_rows_avx2(const KvRowLayout& layout, const uint8_t* const* entries, int64_t n, float* out) {
  const __m256i nan = _mm256_set1_epi32(std::bit_cast<int32_t>(e4m3_to_float(0x7F)));  // a call: hoisted
  auto block = [nan](const uint8_t* codes, float scale, float* o) {
    const __m256 s = _mm256_set1_ps(scale);
    for (int64_t i = 0; i < kKvQuantBlock; i += 8) {
      const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
      _mm256_storeu_ps(o + i, _mm256_mul_ps(e4m3_x8(c, nan), s));
    }
  };
  auto rope = [](const uint8_t* h, int64_t count, float* o) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 2 * i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < count; ++i) o[i] = bf16_to_float(static_cast<uint16_t>(h[2 * i] | h[2 * i + 1] << 8));
  };
  decode_rows(layout, entries, n, out, block, rope);
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
