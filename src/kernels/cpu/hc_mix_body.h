// kernels: the body of the mHC mix kernel (hc_mix.h), written once with GCC vector types and compiled
// per ISA by hc_mix_{scalar,avx2,avx512}.cc (each with its own instruction-set flags). mix: vector lanes
// are tokens; mix_token: vector lanes are mixes of one token. Either way each lane's arithmetic is exactly
// the reference's sequence for that (token, mix).
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

// One token, NV·8 mixes [kb, kb + 8·NV) as the lanes of NV accumulators: each step i loads the mixes'
// row of fn_t and adds f64(x_i)·f64(fn_t[i][k]) to every chain; the token's Σ f64(fp32(x_i²)) is one more
// chain in the same loop (kb == 0 only), so the loop is bound by the add latency of a step, not of a mix.
template <int NV>
void mix_token_block(const float* fn_t, int64_t ld, int64_t width, int64_t kb, const float* x, double* ss,
                     double* out) {
  V8d acc[NV] = {};
  double sq = 0.0;
  for (int64_t i = 0; i < width; ++i) {
    const float xi = x[i];
    const double xd = static_cast<double>(xi);
    const float* row = fn_t + i * ld + kb;
    // Unrolled so the accumulators stay in registers (a loop here keeps them in memory: store-forward chains).
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      V8f f;
      __builtin_memcpy(&f, row + 8 * j, sizeof(f));
      acc[j] += __builtin_convertvector(f, V8d) * xd;  // exact product
    }
    if (ss != nullptr) sq += static_cast<double>(xi * xi);  // fp32 square, then the double sum
  }
  for (int j = 0; j < NV; ++j)
    for (int l = 0; l < 8; ++l) out[8 * j + l] = acc[j][l];
  if (ss != nullptr) *ss = sq;
}

void mix_token(const float* fn_t, int64_t ld, int64_t width, const float* x, double* ss, double* sums) {
  for (int64_t kb = 0; kb < ld; kb += 32) {
    double* ssp = kb == 0 ? ss : nullptr;
    switch ((ld - kb) / 8) {
      case 1: mix_token_block<1>(fn_t, ld, width, kb, x, ssp, sums + kb); break;
      case 2: mix_token_block<2>(fn_t, ld, width, kb, x, ssp, sums + kb); break;
      case 3: mix_token_block<3>(fn_t, ld, width, kb, x, ssp, sums + kb); break;
      default: mix_token_block<4>(fn_t, ld, width, kb, x, ssp, sums + kb); break;
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels::detail::hc_body
