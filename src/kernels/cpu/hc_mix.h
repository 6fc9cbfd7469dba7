// kernels: the mHC mixes (spec §2.2 step 3) for a batch of tokens — m[t, k] = (x_t·fn_k)·rsqrt(mean(x_t²)+eps)
// over the token's hc·dim stream values — the one part of mHC whose cost grows with the model width.
// The reference (ops/reference/mhc.h) runs one token and one mix at a time, each a dependent chain of
// double adds (latency-bound, and fn is re-read for every token). Here the mixes are the vector lanes:
// every (token, mix) sum of up to 8 tokens runs as an independent chain in one pass over fn, which is held
// as panels of 4 mixes, each one contiguous stream, so pool threads split the mixes by panel and each reads
// only its own share of fn (1.5 MB per call at V4-Flash's 24 mixes of width 16384, from DRAM at decode: a
// memory-bound read). bench/hc_mix_bench.cc: one thread, 1 token 33 µs, 8 tokens 174 µs. (A kernel with
// the tokens as lanes, removed, took 392 and 364 µs.)
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

// fn_packed: fn [n_mix, width] as panels of 4 mixes, [hc_packed_fn_ld(n_mix) / 4, width, 4], the padding
// mixes zero (hc_pack_fn; the weights pack it once at load). x: [n_tokens, width]; m: [n_tokens, n_mix].
// pool splits the mixes by panel (nullptr: the calling thread). No allocation once a thread has seen its
// largest n_mix.
int64_t hc_packed_fn_ld(int64_t n_mix);
std::vector<float> hc_pack_fn(const float* fn, int64_t n_mix, int64_t width);
void hc_mixes(const float* fn_packed, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens, float norm_eps,
              float* m, Isa isa, ThreadPool* pool);
// Tokens per pass of hc_mixes (more run as several passes).
inline constexpr int64_t kHcMixMaxTokens = 8;

namespace detail {
// Mixes per panel of fn_packed.
inline constexpr int kHcPanel = 4;
// Panels [p0, p1) of fn_packed for the n_tok ≤ 8 tokens of x [n_tok, width]: sums[t·ld + k] =
// Σ_i f64(x[t][i])·f64(fn[k][i]) for the panels' mixes k, in index order (rows [n_tok, 8) of sums are
// scratch); when ss != nullptr also ss[t] = Σ_i f64(fp32(x[t][i]²)) in index order, in the same pass.
using HcMixPanelsFn = void (*)(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                               double* ss, double* sums, int64_t ld);
void hc_mix_panels_scalar(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld);
void hc_mix_panels_avx2(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                        double* ss, double* sums, int64_t ld);
void hc_mix_panels_avx512(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld);
}  // namespace detail

}  // namespace dsv4::kernels
