// kernels: the compute probe's ymm FMA loop (see compute_probe.h), for CPUs with AVX2 + FMA only. 12
// independent chains (a 4-cycle FMA on 2 ports needs 8; the multiplier and addend take 2 of the 16
// registers). Compiled with the AVX2 flags (src/kernels/CMakeLists.txt); called only after runtime detection.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/compute_probe.h"

namespace dsv4::kernels::detail {

// acc = acc · m + c, as the zmm loop (compute_probe_loops.cc): the values converge and stay normal.
uint64_t compute_loop_fp32_fma_ymm(int64_t iters) {
  constexpr int kChains = 12;
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i + 1));
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  }
  // h = h·31 + bits over every lane of every chain (the zmm loop's fold).
  uint64_t h = 0;
  for (int i = 0; i < kChains; ++i) {
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_castps_si256(acc[i]));
    for (uint32_t v : lanes) h = h * 31 + v;
  }
  return h;
}

}  // namespace dsv4::kernels::detail
#endif  // __x86_64__
