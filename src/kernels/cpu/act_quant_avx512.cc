// kernels: FP8 activation fake-quantization compiled for avx512 (flags in src/kernels/CMakeLists.txt).
// Each step is core/quant.cc's scalar expression on 16 lanes (see act_quant.h for why it is bit-exact).
#include "kernels/cpu/act_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <limits>

#include "core/formats.h"
#include "core/quant.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_x16

}  // namespace

void act_quant_fp8_avx512(const float* x, float* out, int64_t n, int64_t block, bool bf16_first) {
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 lo = _mm512_set1_ps(-kE4M3Max), hi = _mm512_set1_ps(kE4M3Max);
  const __m512 sub_min = _mm512_set1_ps(0x1p-6f), shift = _mm512_set1_ps(0x1p14f);
  const __m512i rnd = _mm512_set1_epi32(0x7FFFF), one = _mm512_set1_epi32(1);
  const __m512i keep = _mm512_set1_epi32(static_cast<int>(0xFFF00000u));
  // The reference sends a NaN quotient through the codec: code 0x7F, decoded to its canonical NaN.
  const __m512 nan_q = _mm512_set1_ps(e4m3_to_float(float_to_e4m3(std::numeric_limits<float>::quiet_NaN())));
  const int64_t tail = block % 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (int64_t b = 0; b < n; b += block) {
    const float* xb = x + b;
    float* ob = out + b;
    // Pass 1: (bf16-rounded) copy into out and |v| max. max(|v|, m) keeps m when |v| is NaN (std::max).
    __m512 am = _mm512_setzero_ps();
    for (int64_t i = 0; i < block; i += 16) {
      const __mmask16 m = block - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask;
      __m512 v = _mm512_maskz_loadu_ps(m, xb + i);
      if (bf16_first) v = round_bf16_x16(v);
      if (bf16_first || ob != xb) _mm512_mask_storeu_ps(ob + i, m, v);
      am = _mm512_max_ps(_mm512_andnot_ps(sign, v), am);
    }
    const float s = fp8_block_scale(_mm512_reduce_max_ps(am));
    const __m512 sv = _mm512_set1_ps(s);
    const __m512 inv = _mm512_set1_ps(1.0f / s);  // exact: s is 2^k, k in [-22, 120], or +inf (1/s = 0)
    // Pass 2: q = clamp(v / s, ±448); r = round_to_e4m3(q); out = r · s.
    for (int64_t i = 0; i < block; i += 16) {
      const __mmask16 m = block - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask;
      __m512 q = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ob + i), inv);
      const __mmask16 nan = _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q);
      q = _mm512_min_ps(_mm512_max_ps(q, lo), hi);  // NaN lanes are replaced below
      const __m512 a = _mm512_andnot_ps(sign, q);
      // Subnormal range: e4m3's quantum is 2^-9 = ulp(2^14); the add and subtract round to it (RNE).
      const __m512 small = _mm512_sub_ps(_mm512_add_ps(a, shift), shift);
      // Normal range: round the 23-bit mantissa to 3 bits, ties to even, on the bits.
      const __m512i u = _mm512_castps_si512(a);
      const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 20), one);
      const __m512 normal =
          _mm512_castsi512_ps(_mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(rnd, odd)), keep));
      __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, sub_min, _CMP_LT_OQ), normal, small);
      r = _mm512_or_ps(r, _mm512_and_ps(q, sign));  // copysign(r, q)
      r = _mm512_mask_mov_ps(r, nan, nan_q);
      _mm512_mask_storeu_ps(ob + i, m, _mm512_mul_ps(r, sv));
    }
  }
}

}  // namespace dsv4::kernels::detail
#endif
