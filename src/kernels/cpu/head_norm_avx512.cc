// kernels: per-head query RMS norm compiled for avx512 (flags in src/kernels/CMakeLists.txt); head_norm.h
// says what it computes and why the bits are the reference's.
#include "kernels/cpu/head_norm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#include "core/formats.h"

namespace dsv4::kernels::detail {
namespace {

#include "kernels/cpu/round_bf16_avx512.inc"  // round_bf16_x16 (NaN-aware: core's round_bf16 bits)

// r[h] (8 floats of vector h) → r[j] (float h = vector h's element j).
inline void transpose8x8(__m256 (&r)[8]) {
  __m256 a[8], b[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm256_shuffle_ps(a[i], a[i + 2], 0x44);
    b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], 0xEE);
    b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0x44);
    b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x31);
  }
}

}  // namespace

void head_rms_norm_bf16_avx512(float* x, int64_t n_vectors, int64_t dim, float eps) {
  // Sums: lane h is vector h's chain. Vectors past n_vectors read zeros (their lanes are never used); the
  // last block's positions past dim load as +0.0, whose square adds +0.0 to a sum that is never −0.0 (it
  // starts at +0.0 and every term is a square): the same bits, NaN payloads included.
  static constexpr float kZeros[8] = {};
  const float* row[8];
  for (int h = 0; h < 8; ++h) row[h] = h < n_vectors ? x + h * dim : kZeros;
  __m512d ss = _mm512_setzero_pd();
  for (int64_t i = 0; i < dim; i += 8) {
    const int64_t left = dim - i;
    const __mmask8 m = left >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << left) - 1u);
    __m256 r[8];  // unrolled loops throughout: else GCC keeps r in memory (a store and a load per use)
#pragma GCC unroll 8
    for (int h = 0; h < 8; ++h) r[h] = _mm256_maskz_loadu_ps(m, row[h] == kZeros ? kZeros : row[h] + i);
    transpose8x8(r);
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
      // bf16(x·x) in fp32 (positions j and j + 1 rounded in one register), widened exactly, added in index
      // order.
      const __m512 sq = round_bf16_x16(
          _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_mul_ps(r[j], r[j])), _mm256_mul_ps(r[j + 1], r[j + 1]), 1));
      ss = _mm512_add_pd(ss, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
      ss = _mm512_add_pd(ss, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
    }
  }
  alignas(64) double sums[8];
  _mm512_store_pd(sums, ss);
  for (int64_t h = 0; h < n_vectors; ++h) {
    // The reference's scalar steps, verbatim.
    const float mean = round_bf16(static_cast<float>(sums[h] / static_cast<double>(dim)));
    const float var = round_bf16(mean + eps);
    const __m512 rs = _mm512_set1_ps(round_bf16(1.0f / std::sqrt(var)));
    float* xr = x + h * dim;
    for (int64_t i = 0; i < dim; i += 16) {
      const int64_t left = dim - i;
      const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
      _mm512_mask_storeu_ps(xr + i, m, round_bf16_x16(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), rs)));
    }
  }
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
