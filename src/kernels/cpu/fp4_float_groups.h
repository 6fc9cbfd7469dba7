// kernels: a process-wide count of the 64-element activation groups the AVX2 FP4 tile ran on its fp32
// path because they are not exact in its fixed point (quant_tiles.h, Fp4XLayout::kAvx2Fixed: raw fp32
// values, blocks below 2^-88, non-finite ones). The model fake-quantizes every FP4 GEMM's activations to
// E4M3 (spec §3), which the fixed point always holds, so over real forwards the count stays zero
// (tests/model/bf16_refusal_test.cc); fp4_prepare_x_avx2 is the only code that adds to it.
#pragma once

#include <cstdint>

namespace dsv4::kernels {

// Groups since the process started (relaxed: a monotonic tally, read between forwards).
uint64_t fp4_float_groups();

namespace detail {
void note_fp4_float_groups(uint64_t n);
}  // namespace detail

}  // namespace dsv4::kernels
