// kernels: the body of the mHC mix kernel (hc_mix.h), written once with GCC vector types and compiled
// per ISA by hc_mix_{scalar,avx2,avx512}.cc (each with its own instruction-set flags). Vector lanes are
// tokens; each lane's arithmetic is exactly the reference's sequence for that token.
#pragma once

#include <cstdint>

#include "kernels/cpu/hc_mix.h"

namespace dsv4::kernels::detail::hc_body {
// Internal linkage on purpose: each including file compiles its own copy with its own ISA flags, and an
// inline function with external linkage would let the linker keep one copy (maybe AVX-512) for all.
namespace {

using V8f = float __attribute__((vector_size(32)));
using V8d = double __attribute__((vector_size(64)));
static_assert(kHcLanes == 8);

// Mixes accumulated side by side: independent chains, each fn element broadcast to all lanes.
inline constexpr int kMixBlock = 4;

void mix(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs, int n_lanes,
         float* m, int64_t ldm) {
  for (int64_t kb = k0; kb < k1; kb += kMixBlock) {
    const int nk = static_cast<int>(k1 - kb < kMixBlock ? k1 - kb : kMixBlock);
    V8d acc[kMixBlock] = {};
    const float* row[kMixBlock];
    for (int j = 0; j < kMixBlock; ++j) row[j] = fn + (kb + (j < nk ? j : 0)) * width;
    for (int64_t i = 0; i < width; ++i) {
      V8f xf;
      __builtin_memcpy(&xf, xt + i * kHcLanes, sizeof(xf));
      const V8d xv = __builtin_convertvector(xf, V8d);
      for (int j = 0; j < kMixBlock; ++j) acc[j] += xv * static_cast<double>(row[j][i]);  // exact product
    }
    for (int j = 0; j < nk; ++j)
      for (int t = 0; t < n_lanes; ++t) m[t * ldm + kb + j] = static_cast<float>(acc[j][t]) * rs[t];
  }
}

void sumsq(const float* xt, int64_t width, double* ss) {
  V8d acc = {};
  for (int64_t i = 0; i < width; ++i) {
    V8f v;
    __builtin_memcpy(&v, xt + i * kHcLanes, sizeof(v));
    acc += __builtin_convertvector(v * v, V8d);  // fp32 square, then the double sum
  }
  for (int t = 0; t < kHcLanes; ++t) ss[t] = acc[t];
}

}  // namespace
}  // namespace dsv4::kernels::detail::hc_body
