// kernels: FP8 activation fake-quantization — ISA dispatch and the scalar tier (core/quant.cc itself).
#include "kernels/cpu/act_quant.h"

#include <span>

#include "core/check.h"
#include "core/formats.h"
#include "core/quant.h"

namespace dsv4::kernels {

namespace detail {

void act_quant_fp8_scalar(const float* x, float* out, int64_t n, int64_t block, bool bf16_first) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_first ? round_bf16(x[i]) : x[i];
  fake_quant_fp8(std::span<float>(out, static_cast<size_t>(n)), static_cast<size_t>(block));
}

}  // namespace detail

namespace {

detail::ActQuantFn act_quant_fn(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      return detail::act_quant_fp8_avx512;
#endif
    default:  // AVX2 too: the scalar loop is a few percent of a layer there, not worth a third copy yet
      return detail::act_quant_fp8_scalar;
  }
}

}  // namespace

void act_quant_fp8(const float* x, float* out, int64_t n, int64_t block, bool bf16_first, Isa isa) {
  DSV4_CHECK(block > 0 && n >= 0 && n % block == 0, "act_quant_fp8: size not a multiple of block");
  act_quant_fn(isa)(x, out, n, block, bf16_first);
}

}  // namespace dsv4::kernels
