// ops/reference: mHC (spec §2.2), fp32 math with float64 accumulation of every sum.
#include "ops/reference/mhc.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/formats.h"
#include "ops/reference/common.h"

namespace dsv4::ref {
namespace {

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// y[d] = bf16(Σ_j pre_j · x_j[d]): fp32 products summed in fp32 in stream order (a torch.sum over the
// stream dim, which the golden contract leaves in fp32, unlike dot products and means).
void weighted_stream_sum(const HcParams& p, const float* pre, const float* x, float* y) {
  for (int64_t d = 0; d < p.dim; ++d) {
    float acc = pre[0] * x[d];
    for (int64_t j = 1; j < p.hc_mult; ++j) acc += pre[j] * x[j * p.dim + d];
    y[d] = round_bf16(acc);
  }
}

}  // namespace

void hc_mixes(const HcParams& p, const float* fn, int64_t n_mix, const float* x, float* m) {
  const int64_t n = p.hc_mult * p.dim;
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i] * x[i]);
  const float rs = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + p.norm_eps);
  for (int64_t k = 0; k < n_mix; ++k) m[k] = dot_f64(x, fn + k * n, n) * rs;
}

void sinkhorn(float* c, int64_t hc, int64_t iters, float eps) {
  auto row_sum = [&](int64_t j) {
    double s = 0.0;
    for (int64_t k = 0; k < hc; ++k) s += c[j * hc + k];
    return static_cast<float>(s);
  };
  auto col_sum = [&](int64_t k) {
    double s = 0.0;
    for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
    return static_cast<float>(s);
  };
  auto normalize_cols = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      const float s = col_sum(k) + eps;
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= s;
    }
  };
  for (int64_t j = 0; j < hc; ++j) {  // softmax over k for each row, then + eps
    float mx = -INFINITY;
    for (int64_t k = 0; k < hc; ++k) mx = std::max(mx, c[j * hc + k]);
    for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = std::exp(c[j * hc + k] - mx);
    const float s = row_sum(j);
    for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / s + eps;
  }
  normalize_cols();
  for (int64_t it = 1; it < iters; ++it) {
    for (int64_t j = 0; j < hc; ++j) {
      const float s = row_sum(j) + eps;
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= s;
    }
    normalize_cols();
  }
}

void hc_pre_apply(const HcParams& p, const float* m, const float* scale, const float* base, const float* x, float* y,
                  float* post, float* comb) {
  const int64_t hc = p.hc_mult;
  float pre[64];
  DSV4_CHECK(hc <= 64, "hc_pre: hc_mult above 64");
  for (int64_t j = 0; j < hc; ++j) {
    pre[j] = sigmoid(m[j] * scale[0] + base[j]) + p.hc_eps;
    post[j] = 2.0f * sigmoid(m[hc + j] * scale[1] + base[hc + j]);
  }
  for (int64_t i = 0; i < hc * hc; ++i) comb[i] = m[2 * hc + i] * scale[2] + base[2 * hc + i];
  sinkhorn(comb, hc, p.sinkhorn_iters, p.hc_eps);
  weighted_stream_sum(p, pre, x, y);
}

void hc_pre(const HcParams& p, const float* fn, const float* scale, const float* base, const float* x, float* y,
            float* post, float* comb) {
  const int64_t n_mix = (2 + p.hc_mult) * p.hc_mult;
  std::vector<float> m(static_cast<size_t>(n_mix));
  hc_mixes(p, fn, n_mix, x, m.data());
  hc_pre_apply(p, m.data(), scale, base, x, y, post, comb);
}

void hc_post(const HcParams& p, const float* x, const float* residual, const float* post, const float* comb,
             float* out) {
  const int64_t hc = p.hc_mult;
  for (int64_t k = 0; k < hc; ++k)
    for (int64_t d = 0; d < p.dim; ++d) {
      float acc = comb[k] * residual[d];  // fp32 torch.sum over j, in order
      for (int64_t j = 1; j < hc; ++j) acc += comb[j * hc + k] * residual[j * p.dim + d];
      out[k * p.dim + d] = round_bf16(post[k] * x[d] + acc);
    }
}

void hc_head_apply(const HcParams& p, const float* m, const float* scale, const float* base, const float* x,
                   float* y) {
  const int64_t hc = p.hc_mult;
  float pre[64];
  DSV4_CHECK(hc <= 64, "hc_head: hc_mult above 64");
  for (int64_t j = 0; j < hc; ++j) pre[j] = sigmoid(m[j] * scale[0] + base[j]) + p.hc_eps;
  weighted_stream_sum(p, pre, x, y);
}

void hc_head(const HcParams& p, const float* fn, const float* scale, const float* base, const float* x, float* y) {
  std::vector<float> m(static_cast<size_t>(p.hc_mult));
  hc_mixes(p, fn, p.hc_mult, x, m.data());
  hc_head_apply(p, m.data(), scale, base, x, y);
}

}  // namespace dsv4::ref
