// kernels: SwiGLU epilogue — ISA dispatch and the scalar tier (swiglu_clamped itself).
#include "kernels/cpu/swiglu.h"

#include "core/check.h"
#include "core/formats.h"
#include "kernels/cpu/moe_expert.h"

namespace dsv4::kernels {

namespace detail {

void swiglu_bf16_scalar(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h) {
  for (int64_t i = 0; i < n; ++i) h[i] = swiglu_clamped(round_bf16(g[i]), round_bf16(u[i]), route_weight, limit);
}

SwigluFn swiglu_fn(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      return swiglu_bf16_avx512;
#endif
    default:
      return swiglu_bf16_scalar;
  }
}

}  // namespace detail

void swiglu_bf16(const float* g, const float* u, int64_t n, float route_weight, float limit, float* h, Isa isa) {
  DSV4_CHECK(n >= 0, "swiglu_bf16: negative length");
  detail::swiglu_fn(isa)(g, u, n, route_weight, limit, h);
}

}  // namespace dsv4::kernels
