// kernels: mHC mixes — ISA dispatch, the per-group transpose of x and the split of mixes over the pool.
#include "kernels/cpu/hc_mix.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"

namespace dsv4::kernels {
namespace {

using detail::kHcLanes;

struct HcFns {
  detail::HcMixFn mix;
  detail::HcSumSqFn sumsq;
};

HcFns fns_for(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512:
      return {detail::hc_mix_avx512, detail::hc_sumsq_avx512};
    case Isa::kAvx2:
      return {detail::hc_mix_avx2, detail::hc_sumsq_avx2};
#endif
    default:
      return {detail::hc_mix_scalar, detail::hc_sumsq_scalar};
  }
}

// Below this many multiply-adds the mixes run on the calling thread (a pool wake-up costs more).
constexpr int64_t kMinPoolMacs = int64_t{1} << 17;

}  // namespace

void hc_mixes(const float* fn, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens, float norm_eps, float* m,
              Isa isa, ThreadPool* pool) {
  DSV4_CHECK(n_mix > 0 && width > 0 && n_tokens >= 0, "hc_mixes: bad shape");
  const HcFns f = fns_for(isa);
  // Grow-only: [width, kHcLanes] transposed tokens of one group.
  thread_local std::vector<float> xt_buf;
  if (static_cast<int64_t>(xt_buf.size()) < width * kHcLanes) xt_buf.resize(static_cast<size_t>(width * kHcLanes));
  float* xt = xt_buf.data();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kHcLanes) {
    const int lanes = static_cast<int>(std::min<int64_t>(kHcLanes, n_tokens - t0));
    for (int64_t i = 0; i < width; ++i)
      for (int t = 0; t < kHcLanes; ++t) xt[i * kHcLanes + t] = t < lanes ? x[(t0 + t) * width + i] : 0.0f;
    double ss[kHcLanes];
    f.sumsq(xt, width, ss);
    float rs[kHcLanes];
    for (int t = 0; t < kHcLanes; ++t)
      rs[t] = 1.0f / std::sqrt(static_cast<float>(ss[t] / static_cast<double>(width)) + norm_eps);
    float* mg = m + t0 * n_mix;
    auto body = [&](int64_t k0, int64_t k1, int) { f.mix(fn, width, k0, k1, xt, rs, lanes, mg, n_mix); };
    // Chunks of whole mix blocks (4 mixes), each thread reading only its own fn rows.
    if (pool != nullptr && n_mix * width * lanes >= kMinPoolMacs) {
      pool->parallel_for(n_mix, 4, body);
    } else {
      body(0, n_mix, 0);
    }
  }
}

}  // namespace dsv4::kernels
