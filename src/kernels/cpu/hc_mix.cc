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
  detail::HcMixTokenFn token;
};

HcFns fns_for(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512:
      return {detail::hc_mix_avx512, detail::hc_sumsq_avx512, detail::hc_mix_token_avx512};
    case Isa::kAvx2:
      return {detail::hc_mix_avx2, detail::hc_sumsq_avx2, detail::hc_mix_token_avx2};
#endif
    default:
      return {detail::hc_mix_scalar, detail::hc_sumsq_scalar, detail::hc_mix_token_scalar};
  }
}

// Below this many multiply-adds the mixes run on the calling thread (a pool wake-up costs more).
constexpr int64_t kMinPoolMacs = int64_t{1} << 17;
// hc_mixes_by_token keeps a token's sums on the stack: hc_pre has (2 + hc)·hc = 24 mixes at hc = 4.
constexpr int64_t kMaxByTokenLd = 64;

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

int64_t hc_fn_t_ld(int64_t n_mix) { return (n_mix + 7) / 8 * 8; }

std::vector<float> hc_transpose_fn(const float* fn, int64_t n_mix, int64_t width) {
  const int64_t ld = hc_fn_t_ld(n_mix);
  std::vector<float> t(static_cast<size_t>(width * ld), 0.0f);  // [width, ld], padding mixes zero
  for (int64_t k = 0; k < n_mix; ++k)
    for (int64_t i = 0; i < width; ++i) t[static_cast<size_t>(i * ld + k)] = fn[k * width + i];
  return t;
}

void hc_mixes_by_token(const float* fn_t, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens,
                       float norm_eps, float* m, Isa isa, ThreadPool* pool) {
  DSV4_CHECK(n_mix > 0 && width > 0 && n_tokens >= 0, "hc_mixes_by_token: bad shape");
  const HcFns f = fns_for(isa);
  const int64_t ld = hc_fn_t_ld(n_mix);
  DSV4_CHECK(ld <= kMaxByTokenLd, "hc_mixes_by_token: too many mixes");
  auto body = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      double ss = 0.0;
      double sums[kMaxByTokenLd];
      f.token(fn_t, ld, width, x + t * width, &ss, sums);
      // The same factor and product as hc_mixes (and the reference).
      const float rs = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(width)) + norm_eps);
      for (int64_t k = 0; k < n_mix; ++k) m[t * n_mix + k] = static_cast<float>(sums[k]) * rs;
    }
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->parallel_for(n_tokens, 1, body);
  } else {
    body(0, n_tokens, 0);
  }
}

}  // namespace dsv4::kernels
