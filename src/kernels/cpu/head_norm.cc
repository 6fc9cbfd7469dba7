// kernels: per-head query RMS norm — ISA dispatch; the scalar tier is the reference itself.
#include "kernels/cpu/head_norm.h"

#include <algorithm>

#include "core/check.h"
#include "ops/reference/norm.h"

namespace dsv4::kernels {

void head_rms_norm_bf16(float* x, int64_t n_vectors, int64_t dim, float eps, Isa isa) {
  DSV4_CHECK(n_vectors >= 0 && dim > 0, "head_rms_norm_bf16: bad shape");
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      for (int64_t v = 0; v < n_vectors; v += 8)
        detail::head_rms_norm_bf16_avx512(x + v * dim, std::min<int64_t>(8, n_vectors - v), dim, eps);
      return;
#endif
    default:
      ref::head_rms_norm_bf16(x, n_vectors, dim, eps);
  }
}

}  // namespace dsv4::kernels
