// kernels: the mHC post-mix body compiled for the avx2 instruction set (flags in src/kernels/CMakeLists.txt).
#include "kernels/cpu/hc_mix_post_body.h"

namespace dsv4::kernels::detail {

void hc_post_avx2(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual,
                  const float* post, const float* comb, float* out) {
  hc_post_body::post(hc, dim, d0, d1, x, residual, post, comb, out);
}

}  // namespace dsv4::kernels::detail
