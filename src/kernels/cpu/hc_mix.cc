// kernels: mHC mixes — ISA dispatch, fn packing and the split of mixes over the pool.
#include "kernels/cpu/hc_mix.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"

namespace dsv4::kernels {
namespace {

detail::HcMixPanelsFn panels_fn(Isa isa) {
  switch (resolve_isa(isa)) {
#if defined(__x86_64__)
    case Isa::kAmx:
    case Isa::kAvx512Bf16:
    case Isa::kAvx512:
      return detail::hc_mix_panels_avx512;
    case Isa::kAvx2:
      return detail::hc_mix_panels_avx2;
#endif
    default:
      return detail::hc_mix_panels_scalar;
  }
}

// Below this many multiply-adds the mixes run on the calling thread (a pool wake-up costs more).
constexpr int64_t kMinPoolMacs = int64_t{1} << 17;
}  // namespace

int64_t hc_packed_fn_ld(int64_t n_mix) {
  return (n_mix + detail::kHcPanel - 1) / detail::kHcPanel * detail::kHcPanel;
}

std::vector<float> hc_pack_fn(const float* fn, int64_t n_mix, int64_t width) {
  constexpr int64_t P = detail::kHcPanel;
  std::vector<float> t(static_cast<size_t>(width * hc_packed_fn_ld(n_mix)), 0.0f);  // [panels, width, P], padding zero
  for (int64_t k = 0; k < n_mix; ++k)
    for (int64_t i = 0; i < width; ++i) t[static_cast<size_t>(((k / P) * width + i) * P + k % P)] = fn[k * width + i];
  return t;
}

void hc_mixes(const float* fn_packed, int64_t n_mix, int64_t width, const float* x, int64_t n_tokens, float norm_eps,
              float* m, Isa isa, ThreadPool* pool) {
  DSV4_CHECK(n_mix > 0 && width > 0 && n_tokens >= 0, "hc_mixes: bad shape");
  constexpr int64_t kMaxTok = kHcMixMaxTokens;
  const detail::HcMixPanelsFn panels = panels_fn(isa);
  const int64_t ld = hc_packed_fn_ld(n_mix), n_panels = ld / detail::kHcPanel;
  // Grow-only, this thread's: one group's sums [kMaxTok, ld].
  thread_local std::vector<double> sums_buf;
  if (static_cast<int64_t>(sums_buf.size()) < kMaxTok * ld) sums_buf.resize(static_cast<size_t>(kMaxTok * ld));
  double* sums = sums_buf.data();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTok) {
    const int nt = static_cast<int>(std::min(kMaxTok, n_tokens - t0));
    double ss[kMaxTok];
    // Whole panels per thread, one part per thread: a part is one pass over its panels for all the group's
    // tokens, so more parts than threads would only re-read x. Part 0 (the caller's) also sums x².
    const int64_t n_parts = pool != nullptr && n_panels > 1 && ld * width * nt >= kMinPoolMacs
                                ? std::min<int64_t>(pool->n_threads(), n_panels)
                                : 1;
    auto body = [&](int64_t c0, int64_t c1, int) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t pa = c * n_panels / n_parts, pb = (c + 1) * n_panels / n_parts;
        panels(fn_packed, width, pa, pb, x + t0 * width, nt, pa == 0 ? ss : nullptr, sums, ld);
      }
    };
    if (n_parts > 1) {
      pool->parallel_for(n_parts, 1, body);
    } else {
      body(0, 1, 0);
    }
    for (int t = 0; t < nt; ++t) {
      // The reference's factor and product.
      const float rs = 1.0f / std::sqrt(static_cast<float>(ss[t] / static_cast<double>(width)) + norm_eps);
      for (int64_t k = 0; k < n_mix; ++k) m[(t0 + t) * n_mix + k] = static_cast<float>(sums[t * ld + k]) * rs;
    }
  }
}

}  // namespace dsv4::kernels
