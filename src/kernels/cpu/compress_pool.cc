// kernels: compressor pooling — ISA dispatch and the per-thread exp scratch.
#include "kernels/cpu/compress_pool.h"

#include <vector>

#include "core/check.h"

namespace dsv4::kernels {

void compress_pool(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc, float* out,
                   Isa isa) {
  DSV4_CHECK(n_cand > 0 && dc >= 0, "compress_pool: bad shape");
  detail::CompressPoolFn fn = detail::compress_pool_scalar;
#if defined(__x86_64__)
  switch (resolve_isa(isa)) {
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      fn = detail::compress_pool_avx512;
      break;
    case Isa::kAvx2:
      fn = detail::compress_pool_avx2;
      break;
    default:
      break;
  }
#else
  (void)isa;
#endif
  // Grow-only: the exps of one 16-channel block, [n_cand, 16].
  thread_local std::vector<float> e;
  if (static_cast<int64_t>(e.size()) < n_cand * detail::kPoolLanes)
    e.resize(static_cast<size_t>(n_cand * detail::kPoolLanes));
  fn(kv_rows, score_rows, n_cand, dc, out, e.data());
}

}  // namespace dsv4::kernels
