// kernels: mHC post-mix (spec §2.2 step 5) for a batch of tokens — the sublayer output x [dim] and the
// hc residual streams [hc, dim] of a token mixed back into hc streams:
//   out[k][d] = bf16(post[k]·x[d] + Σ_j comb[j][k]·residual[j][d])   (the sum over j in fp32, in order)
// vectorised across d and split over the pool by (token, block of d), so a decode token's 16K outputs
// (V4-Flash: hc 4 × dim 4096) no longer run on one thread.
//
// Numerics: every output runs ref::hc_post's exact fp32 sequence (separate multiplies and adds — the
// per-ISA files build without FMA contraction — then round-to-nearest-even to bf16, NaN kept quiet), so
// it is bit-identical to the reference on every ISA and thread count (tests/unit/kernel_hc_mix_test.cc).
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

// x: [n_tokens, dim]; residual, out: [n_tokens, hc, dim]; post: [n_tokens, hc]; comb: [n_tokens, hc, hc]
// (comb[j·hc + k] weighs stream j into output stream k). pool nullptr: the calling thread. No allocation.
void hc_post(int64_t hc, int64_t dim, const float* x, const float* residual, const float* post, const float* comb,
             int64_t n_tokens, float* out, Isa isa, ThreadPool* pool);

namespace detail {
// One ISA's body: outputs d in [d0, d1) of every stream k of one token.
using HcPostFn = void (*)(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual,
                          const float* post, const float* comb, float* out);
void hc_post_scalar(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual,
                    const float* post, const float* comb, float* out);
void hc_post_avx2(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual,
                  const float* post, const float* comb, float* out);
void hc_post_avx512(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual,
                    const float* post, const float* comb, float* out);
}  // namespace detail

}  // namespace dsv4::kernels
