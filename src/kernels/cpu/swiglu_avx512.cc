// kernels: SwiGLU epilogue compiled for avx512 (flags in src/kernels/CMakeLists.txt). Each step is
// swiglu_clamped's scalar expression on 16 lanes (swiglu.h says why the bits are the same).
#include "kernels/cpu/swiglu.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/expf_glibc_data.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/expf_avx512.inc"       // expf_x16
#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_x16

}  // namespace

void swiglu_bf16_avx512(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h) {
  const __m512 rw = _mm512_set1_ps(route_weight), one = _mm512_set1_ps(1.0f);
  const __m512 hi = _mm512_set1_ps(limit), lo = _mm512_set1_ps(-limit);
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const bool clamp = limit > 0.0f;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    __m512 gv = round_bf16_x16(_mm512_maskz_loadu_ps(m, g + i));
    __m512 uv = round_bf16_x16(_mm512_maskz_loadu_ps(m, u + i));
    if (clamp) {
      // std::clamp(u, −limit, limit) and std::min(g, limit) keep a NaN operand: max/min return their
      // second operand when either is NaN, so the limit goes first.
      uv = _mm512_min_ps(hi, _mm512_max_ps(lo, uv));
      gv = _mm512_min_ps(hi, gv);
    }
    const __m512 e = expf_x16(_mm512_xor_ps(gv, sign));  // exp(−g)
    const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(rw, _mm512_mul_ps(silu, uv)));
  }
}

void exp_f32_avx512(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, expf_x16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace dsv4::kernels::detail
#endif
