// kernels: the mHC mix body compiled for the scalar instruction set (flags in src/kernels/CMakeLists.txt).
#include "kernels/cpu/hc_mix_body.h"

namespace dsv4::kernels::detail {

void hc_mix_panels_scalar(const float* fn_packed, int64_t width, int64_t p0, int64_t p1, const float* x, int n_tok,
                          double* ss, double* sums, int64_t ld) {
  hc_body::mix_panels(fn_packed, width, p0, p1, x, n_tok, ss, sums, ld);
}

}  // namespace dsv4::kernels::detail
