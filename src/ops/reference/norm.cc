// ops/reference: RMS norms with the reference's rounding points.
#include "ops/reference/norm.h"

#include <cmath>

#include "core/formats.h"

namespace dsv4::ref {

void rms_norm(const float* x, int64_t n_rows, int64_t dim, const float* weight, float eps, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i] * xr[i]);  // x.square() is fp32
    const float var = static_cast<float>(ss / static_cast<double>(dim));
    const float rs = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const float v = xr[i] * rs;
      yr[i] = round_bf16(weight ? weight[i] * v : v);
    }
  }
}

void head_rms_norm_bf16(float* x, int64_t n_vectors, int64_t dim, float eps) {
  for (int64_t r = 0; r < n_vectors; ++r) {
    float* xr = x + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(round_bf16(xr[i] * xr[i]));
    const float mean = round_bf16(static_cast<float>(ss / static_cast<double>(dim)));
    const float var = round_bf16(mean + eps);
    const float rs = round_bf16(1.0f / std::sqrt(var));
    for (int64_t i = 0; i < dim; ++i) xr[i] = round_bf16(xr[i] * rs);
  }
}

}  // namespace dsv4::ref
