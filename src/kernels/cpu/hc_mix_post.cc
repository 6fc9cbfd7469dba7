// kernels: mHC post-mix — ISA dispatch and the split of (token, block of d) over the pool.
#include "kernels/cpu/hc_mix_post.h"

#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"

namespace dsv4::kernels {
namespace {

detail::HcPostFn post_fn(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      return detail::hc_post_avx512;
    case Isa::kAvx2:
      return detail::hc_post_avx2;
#endif
    default:
      return detail::hc_post_scalar;
  }
}

// Outputs d per pool item: 1024 of a 4096-wide token (× hc streams) is ~4K outputs, well above a pool
// wake-up, and leaves 4 items per token to balance two threads at one token.
constexpr int64_t kBlockD = 1024;
// Below this many outputs the call stays on the calling thread.
constexpr int64_t kMinPoolOutputs = int64_t{1} << 13;

}  // namespace

void hc_post(int64_t hc, int64_t dim, const float* x, const float* residual, const float* post, const float* comb,
             int64_t n_tokens, float* out, Isa isa, ThreadPool* pool) {
  DSV4_CHECK(hc > 0 && dim > 0 && n_tokens >= 0, "hc_post: bad shape");
  const detail::HcPostFn fn = post_fn(isa);
  const int64_t n_blocks = (dim + kBlockD - 1) / kBlockD;
  auto body = [&](int64_t b, int64_t e, int) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / n_blocks, d0 = item % n_blocks * kBlockD, d1 = std::min(dim, d0 + kBlockD);
      fn(hc, dim, d0, d1, x + t * dim, residual + t * hc * dim, post + t * hc, comb + t * hc * hc, out + t * hc * dim);
    }
  };
  const int64_t items = n_tokens * n_blocks;
  if (pool != nullptr && n_tokens * hc * dim >= kMinPoolOutputs) {
    pool->parallel_for(items, 1, body);
  } else {
    body(0, items, 0);
  }
}

}  // namespace dsv4::kernels
