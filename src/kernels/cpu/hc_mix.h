// kernels: the mHC mixes (spec §2.2 step 3) for a batch of tokens — m[t, k] = (x_t·fn_k)·rsqrt(mean(x_t²)+eps)
// over the token's hc·dim stream values — the one part of mHC whose cost grows with the model width.
// The reference (ops/reference/mhc.h) runs one token and one mix at a time, each a dependent chain of
// double adds (latency-bound, and fn is re-read for every token). Here tokens are the vector lanes (up
// to 8 per group) and several mixes accumulate side by side, so every fn element loaded serves the whole
// group and the chains run in parallel.
//
// Numerics: every (token, mix) sum is still Σ_i f64(x_i)·f64(fn_i) added in index order from 0.0 (the
// product of two floats is exact in double, so a fused multiply-add rounds exactly as the reference's
// multiply-then-add), and Σ_i f64(fp32(x_i²)) likewise: bit-identical to ref::hc_mixes for every ISA.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

// fn: [n_mix, width]; x: [n_tokens, width]; m: [n_tokens, n_mix]. pool splits the mixes (nullptr: the
// calling thread). No allocation once a thread has seen its largest (n_tokens, width).
void hc_mixes(const float* fn, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens, float norm_eps, float* m,
              Isa isa, ThreadPool* pool);

// The same mixes, bit for bit, one token at a time with the mixes as the vector lanes: for a handful of
// tokens (decode) the token-lane kernel above fills one lane of eight and transposes x first, while this
// reads x in place and runs all mixes of a token as independent chains in one pass.
// fn_t: fn transposed and zero-padded, [width, hc_fn_t_ld(n_mix)] (hc_transpose_fn; weights transpose once
// at load). pool splits the tokens (nullptr, or one token: the calling thread). No allocation.
int64_t hc_fn_t_ld(int64_t n_mix);
std::vector<float> hc_transpose_fn(const float* fn, int64_t n_mix, int64_t width);
void hc_mixes_by_token(const float* fn_t, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens,
                       float norm_eps, float* m, Isa isa, ThreadPool* pool);

namespace detail {
// Token lanes per group.
inline constexpr int kHcLanes = 8;
// One ISA's body: mixes [k0, k1) of one group of ≤ kHcLanes tokens; xt: [width, kHcLanes] the group's x
// transposed (unused lanes zero); rs: [kHcLanes] the group's rsqrt factors; m rows of the group's tokens.
using HcMixFn = void (*)(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs,
                         int n_lanes, float* m, int64_t ldm);
// Σ_i f64(fp32(x²)) per lane, in index order: ss[kHcLanes].
using HcSumSqFn = void (*)(const float* xt, int64_t width, double* ss);
void hc_mix_scalar(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs,
                   int n_lanes, float* m, int64_t ldm);
void hc_sumsq_scalar(const float* xt, int64_t width, double* ss);
void hc_mix_avx2(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs, int n_lanes,
                 float* m, int64_t ldm);
void hc_sumsq_avx2(const float* xt, int64_t width, double* ss);
void hc_mix_avx512(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs,
                   int n_lanes, float* m, int64_t ldm);
void hc_sumsq_avx512(const float* xt, int64_t width, double* ss);
// One token: sums[k] = Σ_i f64(x_i)·f64(fn_t[i][k]) for k < ld, and *ss = Σ_i f64(fp32(x_i²)).
using HcMixTokenFn = void (*)(const float* fn_t, int64_t ld, int64_t width, const float* x, double* ss, double* sums);
void hc_mix_token_scalar(const float* fn_t, int64_t ld, int64_t width, const float* x, double* ss, double* sums);
void hc_mix_token_avx2(const float* fn_t, int64_t ld, int64_t width, const float* x, double* ss, double* sums);
void hc_mix_token_avx512(const float* fn_t, int64_t ld, int64_t width, const float* x, double* ss, double* sums);
}  // namespace detail

}  // namespace dsv4::kernels
