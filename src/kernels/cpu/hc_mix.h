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

// The same mixes, bit for bit, with the mixes as the vector lanes: every (token, mix) sum of up to 8 tokens
// runs as an independent chain in one pass over fn (the token-lane kernel above reloads and broadcasts each
// fn element per mix, and at one token fills one lane of eight). Faster at every token count measured
// (bench/hc_mix_bench.cc); the model uses it wherever the weights carry the packed fn.
// fn_t: fn as panels of 4 mixes, [hc_fn_t_ld(n_mix) / 4, width, 4], the padding mixes zero (hc_transpose_fn;
// weights pack it once at load). A panel is one contiguous stream, so pool threads split the mixes by panel
// and each reads only its own share of fn (1.5 MB per call at V4-Flash's 24 mixes of width 16384, from DRAM
// at decode: a memory-bound read). No allocation once a thread has seen its largest (n_tokens, width).
int64_t hc_fn_t_ld(int64_t n_mix);
std::vector<float> hc_transpose_fn(const float* fn, int64_t n_mix, int64_t width);
void hc_mixes_by_token(const float* fn_t, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens,
                       float norm_eps, float* m, Isa isa, ThreadPool* pool);
// Tokens per pass of hc_mixes_by_token (more run as several passes).
inline constexpr int64_t kHcByTokenMaxTokens = 8;

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
// Mixes per panel of fn_t.
inline constexpr int kHcPanel = 4;
// Panels [p0, p1) of fn_t for the n_tok ≤ 8 tokens of x [n_tok, width]: sums[t·ld + k] =
// Σ_i f64(x[t][i])·f64(fn[k][i]) for the panels' mixes k, in index order (rows [n_tok, 8) of sums are
// scratch); when ss != nullptr also ss[t] = Σ_i f64(fp32(x[t][i]²)) in index order, in the same pass.
using HcMixPanelsFn = void (*)(const float* fn_t, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                               double* ss, double* sums, int64_t ld);
void hc_mix_panels_scalar(const float* fn_t, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld);
void hc_mix_panels_avx2(const float* fn_t, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                        double* ss, double* sums, int64_t ld);
void hc_mix_panels_avx512(const float* fn_t, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld);
}  // namespace detail

}  // namespace dsv4::kernels
