// ops/reference: manifold-constrained hyper-connections (spec §2.2): hc_pre with the Sinkhorn
// projection, hc_post and hc_head, one token at a time. Streams are bf16 values held as float.
#pragma once

#include <cstdint>

namespace dsv4::ref {

struct HcParams {
  int64_t hc_mult = 4;
  int64_t dim = 0;
  int64_t sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  float norm_eps = 1e-6f;
};

// spec §2.2 step 3 mixes: m[n_mix] = (X·fnᵀ)·rsqrt(mean(X²)+eps) with X = x[hc_mult·dim] in fp32.
void hc_mixes(const HcParams& p, const float* fn /*[n_mix, hc·dim]*/, int64_t n_mix, const float* x, float* m);

// spec §2.2 step 4: in place on comb[hc, hc] (row j = input stream, column k = output stream):
// row softmax + eps, column normalize, then (iters−1)× (row normalize, column normalize).
void sinkhorn(float* comb, int64_t hc, int64_t iters, float eps);

// hc_pre: x [hc, dim] → y [dim] (bf16), post [hc], comb [hc, hc].
void hc_pre(const HcParams& p, const float* fn /*[(2+hc)·hc, hc·dim]*/, const float* scale /*[3]*/,
            const float* base /*[(2+hc)·hc]*/, const float* x, float* y, float* post, float* comb);

// hc_pre after its mixes (hc_pre = hc_mixes, then this): m [(2+hc)·hc] → y, post, comb. Fast paths
// that compute the mixes for many tokens at once finish each token here.
void hc_pre_apply(const HcParams& p, const float* m, const float* scale /*[3]*/, const float* base, const float* x,
                  float* y, float* post, float* comb);

// hc_post: out_k = bf16(post_k·x + Σ_j comb[j,k]·residual_j). x [dim], residual/out [hc, dim]; out may
// not alias residual.
void hc_post(const HcParams& p, const float* x, const float* residual, const float* post, const float* comb,
             float* out);

// hc_head: pre_j = sigmoid(m_j·scale + base_j) + eps, y = bf16(Σ pre_j X_j). x [hc, dim] → y [dim].
void hc_head(const HcParams& p, const float* fn /*[hc, hc·dim]*/, const float* scale /*[1]*/,
             const float* base /*[hc]*/, const float* x, float* y);

// hc_head after its mixes m [hc].
void hc_head_apply(const HcParams& p, const float* m, const float* scale /*[1]*/, const float* base, const float* x,
                   float* y);

}  // namespace dsv4::ref
