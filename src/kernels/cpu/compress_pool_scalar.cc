// kernels: the compressor pooling body compiled for the scalar instruction set (flags in
// src/kernels/CMakeLists.txt).
#include "kernels/cpu/compress_pool_body.h"

namespace dsv4::kernels::detail {

void compress_pool_scalar(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc,
                          float* out, float* e) {
  pool_body::pool(kv_rows, score_rows, n_cand, dc, out, e);
}

}  // namespace dsv4::kernels::detail
