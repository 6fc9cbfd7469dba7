// ops/reference: Sylvester Hadamard rotation. The butterflies run in float64, where sums of bf16
// values are exact, so the result is the exact H·x scaled once and rounded (fp32, then bf16).
#include "ops/reference/hadamard.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/formats.h"

namespace dsv4::ref {

void hadamard_rotate(float* x, int64_t n) {
  DSV4_CHECK(n > 0 && (n & (n - 1)) == 0, "hadamard_rotate: n must be a power of two");
  thread_local std::vector<double> v;  // grow-only: the decode step loop calls this per head and row
  v.assign(x, x + n);
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const double a = v[static_cast<size_t>(j)], b = v[static_cast<size_t>(j + h)];
        v[static_cast<size_t>(j)] = a + b;
        v[static_cast<size_t>(j + h)] = a - b;
      }
  const float scale = static_cast<float>(std::pow(static_cast<double>(n), -0.5));
  for (int64_t i = 0; i < n; ++i) x[i] = round_bf16(static_cast<float>(v[static_cast<size_t>(i)]) * scale);
}

}  // namespace dsv4::ref
