// kernels: the body of the mHC mix kernel (hc_mix.h), written once with GCC vector types and compiled
// per ISA by hc_mix_{scalar,avx2,avx512}.cc (each with its own instruction-set flags). The vector lanes are
// the 4 mixes of a panel, for each of up to 8 tokens; each lane's arithmetic is exactly the reference's
// sequence for that (token, mix).
#pragma once

#include <type_traits>

#include <cstdint>

#include "kernels/cpu/hc_mix.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace dsv4::kernels::detail::hc_body {
// Internal linkage on purpose: each including file compiles its own copy with its own ISA flags, and an
// inline function with external linkage would let the linker keep one copy (maybe AVX-512) for all.
namespace {

using V8f = float __attribute__((vector_size(32)));
using V8d = double __attribute__((vector_size(64)));

using V4f = float __attribute__((vector_size(16)));
using V4d = double __attribute__((vector_size(32)));
using V2d = double __attribute__((vector_size(16)));
static_assert(kHcPanel == 4);

// Four floats widened to double (exact). GCC splits a generic V4f → V4d conversion into two halves plus
// an insert, all on the shuffle port the loop below is short of; one VCVTPS2PD does it where AVX exists.
// (Written through a pointer: a V4d return value is an ABI change GCC warns about where AVX is off.)
inline void load_v4d(const float* p, V4d* out) {
#if defined(__AVX__)
  *out = reinterpret_cast<V4d>(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#else
  V4f v;
  __builtin_memcpy(&v, p, sizeof(v));
  *out = __builtin_convertvector(v, V4d);
#endif
}

// Eight floats widened to double (exact) and stored: one VCVTPS2PD on AVX-512 (GCC splits the generic
// conversion into halves and inserts).
inline void store_v8d(V8f v, double* out) {
#if defined(__AVX512F__)
  _mm512_storeu_pd(out, _mm512_cvtps_pd(reinterpret_cast<__m256>(v)));
#else
  const V8d d = __builtin_convertvector(v, V8d);
  __builtin_memcpy(out, &d, sizeof(d));
#endif
}

// Positions [0, nb) of n_tok token rows x (row stride ldx) as interleaved doubles: xd[i·lanes + t] = f64(x[t][i])
// and, unless xq is null, xq[i·lanes + t] = f64(fp32(x[t][i]²)); the padding tokens t ≥ n_tok zero.
void to_double_block(const float* x, int64_t ldx, int64_t nb, int n_tok, int lanes, double* xd, double* xq) {
  if (lanes == 1) {  // one token: a plain widening, 8 at a time
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
      V8f v;
      __builtin_memcpy(&v, x + i, sizeof(v));
      store_v8d(v, xd + i);
      if (xq) store_v8d(v * v, xq + i);  // fp32 square, then exact widening
    }
    for (; i < nb; ++i) {
      xd[i] = static_cast<double>(x[i]);
      if (xq) xq[i] = static_cast<double>(x[i] * x[i]);
    }
    return;
  }
  int64_t i0 = 0;
  if (lanes == 8) {  // 8×8 blocks: load 8 positions of each token, transpose in registers, widen
    static constexpr float kZeros[8] = {};
    const float* row[8];
    int64_t step[8];  // 0 for the padding tokens: they read kZeros at every block
    for (int t = 0; t < 8; ++t) {
      row[t] = t < n_tok ? x + t * ldx : kZeros;
      step[t] = t < n_tok ? 1 : 0;
    }
    for (; i0 + 8 <= nb; i0 += 8) {
      V8f r[8], a[8], b[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) __builtin_memcpy(&r[t], row[t] + step[t] * i0, sizeof(V8f));
#pragma GCC unroll 4
      for (int t = 0; t < 8; t += 2) {  // a[t], a[t+1]: r[t] and r[t+1] interleaved per 128-bit half
        a[t] = __builtin_shufflevector(r[t], r[t + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        a[t + 1] = __builtin_shufflevector(r[t], r[t + 1], 2, 10, 3, 11, 6, 14, 7, 15);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 8; h += 4) {  // b[h + j]: positions j and j + 4 of tokens h..h+3
        b[h + 0] = __builtin_shufflevector(a[h], a[h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        b[h + 1] = __builtin_shufflevector(a[h], a[h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        b[h + 2] = __builtin_shufflevector(a[h + 1], a[h + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        b[h + 3] = __builtin_shufflevector(a[h + 1], a[h + 3], 2, 3, 10, 11, 6, 7, 14, 15);
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const V8f lo = __builtin_shufflevector(b[j], b[4 + j], 0, 1, 2, 3, 8, 9, 10, 11);     // position j
        const V8f hi = __builtin_shufflevector(b[j], b[4 + j], 4, 5, 6, 7, 12, 13, 14, 15);  // position j + 4
        store_v8d(lo, xd + (i0 + j) * 8);
        store_v8d(hi, xd + (i0 + j + 4) * 8);
        if (xq) {
          store_v8d(lo * lo, xq + (i0 + j) * 8);  // fp32 square, then exact widening
          store_v8d(hi * hi, xq + (i0 + j + 4) * 8);
        }
      }
    }
  }
  for (int64_t i = i0; i < nb; ++i)
    for (int t = 0; t < lanes; ++t) {
      const float v = t < n_tok ? x[t * ldx + i] : 0.0f;
      xd[i * lanes + t] = static_cast<double>(v);
      if (xq) xq[i * lanes + t] = static_cast<double>(v * v);  // fp32 square, then exact widening
    }
}

// acc + f·x, fused where the ISA has FMA. Each product f64(fn)·f64(x) of two floats is exact in double
// (24 + 24 significant bits), so one rounding or two give the same bits: the fusion only saves the
// multiply's uop in the loop below, which is bound by these. Written out because the build compiles
// without floating-point contraction (CMakeLists.txt). (By reference: a V4d passed or returned by value
// is an ABI change GCC warns about where AVX is off.)
inline void mul_add(const V4d& f, double x, V4d& acc) {
#if defined(__FMA__)
  acc = reinterpret_cast<V4d>(
      _mm256_fmadd_pd(reinterpret_cast<__m256d>(f), _mm256_set1_pd(x), reinterpret_cast<__m256d>(acc)));
#else
  acc += f * x;
#endif
}

// Positions per block of panels_pass: the block's x as doubles (and squares) stays in L1.
inline constexpr int64_t kHcBlock = 256;

// T tokens × G panels of 4 mixes in one pass over fn: each step i converts the G panels' 4 floats to
// double once and adds f64(fn)·f64(x[t][i]) to T·G independent chains (the double x is a broadcast load
// from the block buffer, no shuffle), so the loop is bound by the multiply-adds, not by the latency of one
// chain; SS adds the tokens' Σ f64(fp32(x²)) as T more chains. Every thread widens the x blocks it needs
// itself (a shared widened copy of 8 tokens would be 2 MB, written and read back through memory), block
// by block, so the chains run in index order across blocks. Unrolled so the accumulators stay in registers
// within a block (T·G ≤ 24).
template <int T, int G, bool SS>
void panels_pass(const float* fn_packed, int64_t width, int64_t p0, const float* x, int n_tok, double* ss, double* sums,
                 int64_t ld) {
  V4d acc[T][G] = {};
  // Σ x² per token, lanes = tokens (xq holds them interleaved): vector accumulators, because GCC kept a
  // double[2] it had paired into one xmm in memory, stored and reloaded every step (2 tokens then took
  // 3.2x one token's time). Each lane is still one chain in index order.
  using SqVec = std::conditional_t<(T >= 4), V4d, std::conditional_t<T == 2, V2d, double>>;
  constexpr int kSqLanes = T >= 4 ? 4 : T;
  SqVec sq[T / kSqLanes] = {};
  const float* pan[G];
  for (int g = 0; g < G; ++g) pan[g] = fn_packed + (p0 + g) * width * kHcPanel;
  alignas(64) double xd[kHcBlock * T];
  alignas(64) double xq[SS ? kHcBlock * T : 1];
  for (int64_t i0 = 0; i0 < width; i0 += kHcBlock) {
    const int64_t nb = width - i0 < kHcBlock ? width - i0 : kHcBlock;
    to_double_block(x + i0, width, nb, n_tok, T, xd, SS ? xq : nullptr);
    for (int64_t i = 0; i < nb; ++i) {
      V4d f[G];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) load_v4d(pan[g] + (i0 + i) * kHcPanel, &f[g]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const double xv = xd[i * T + t];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) mul_add(f[g], xv, acc[t][g]);  // exact product
      }
      if constexpr (SS) {
#pragma GCC unroll 2
        for (int v = 0; v < T / kSqLanes; ++v) {
          SqVec q;
          __builtin_memcpy(&q, xq + i * T + v * kSqLanes, sizeof(q));
          sq[v] += q;
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int g = 0; g < G; ++g)
      for (int l = 0; l < kHcPanel; ++l) sums[t * ld + (p0 + g) * kHcPanel + l] = acc[t][g][l];
    if constexpr (SS) {
      if constexpr (kSqLanes == 1) {
        ss[t] = sq[t];
      } else {
        ss[t] = sq[t / kSqLanes][t % kSqLanes];
      }
    }
  }
}

// Panels per pass for T tokens. AVX-512 (32 registers): at most 24 accumulators. AVX2 (16): measured
// (hc_mixes/avx2/mixes=24): 2 tokens × 3 panels (6 accumulators + 3 panel vectors) 85 us against 115 for
// 2 × 6 (18 registers: the chains spilled); 4 × 2 190 against 221 (4 × 3: 248); 8 tokens keep 3 panels
// (1 panel: 688 against 476, the passes re-read x).
#if defined(__AVX512F__)
template <int T>
constexpr int64_t kPanelsPerPass = T <= 4 ? 6 : 24 / T;
#else
template <int T>
constexpr int64_t kPanelsPerPass = T == 1 ? 6 : T == 2 ? 3 : T == 4 ? 2 : 3;
#endif

template <int T>
void panels_tokens(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok, double* ss,
                   double* sums, int64_t ld) {
  for (int64_t pb = p0; pb < p1; pb += kPanelsPerPass<T>) {
    const int64_t np = p1 - pb < kPanelsPerPass<T> ? p1 - pb : kPanelsPerPass<T>;
    // Σ x² rides along with the first pass over panel 0 only.
    const bool with_ss = ss != nullptr && pb == 0;
    auto run = [&]<int G>() {
      if (with_ss) {
        panels_pass<T, G, true>(fn_packed, width, pb, x, n_tok, ss, sums, ld);
      } else {
        panels_pass<T, G, false>(fn_packed, width, pb, x, n_tok, ss, sums, ld);
      }
    };
    switch (np) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      case 4: if constexpr (kPanelsPerPass<T> >= 4) run.template operator()<4>(); break;
      case 5: if constexpr (kPanelsPerPass<T> >= 5) run.template operator()<5>(); break;
      default: if constexpr (kPanelsPerPass<T> >= 6) run.template operator()<6>(); break;
    }
  }
}

// n_tok ≤ 8 tokens run as T = 1, 2, 4 or 8 chains per mix; the padding tokens read zeros and their sums
// land in rows [n_tok, T) of sums, which the caller discards.
void mix_panels(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok, double* ss,
                double* sums, int64_t ld) {
  if (n_tok <= 1) {
    panels_tokens<1>(fn_packed, width, p0, p1, x, n_tok, ss, sums, ld);
  } else if (n_tok <= 2) {
    panels_tokens<2>(fn_packed, width, p0, p1, x, n_tok, ss, sums, ld);
  } else if (n_tok <= 4) {
    panels_tokens<4>(fn_packed, width, p0, p1, x, n_tok, ss, sums, ld);
  } else {
    panels_tokens<8>(fn_packed, width, p0, p1, x, n_tok, ss, sums, ld);
  }
}

}  // namespace
}  // namespace dsv4::kernels::detail::hc_body
