// kernels: the mHC mix body compiled for the avx512 instruction set (flags in src/kernels/CMakeLists.txt).
#include "kernels/cpu/hc_mix_body.h"

namespace dsv4::kernels::detail {

void hc_mix_avx512(const float* fn, int64_t width, int64_t k0, int64_t k1, const float* xt, const float* rs,
                   int n_lanes, float* m, int64_t ldm) {
  hc_body::mix(fn, width, k0, k1, xt, rs, n_lanes, m, ldm);
}

void hc_sumsq_avx512(const float* xt, int64_t width, double* ss) {
  hc_body::sumsq(xt, width, ss);
}

void hc_mix_panels_avx512(const float* fn_t, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld) {
  hc_body::mix_panels(fn_t, width, p0, p1, x, n_tok, ss, sums, ld);
}

}  // namespace dsv4::kernels::detail
