// unit: kernels::hc_mixes against ref::hc_mixes (spec §2.2 step 3), one token at a time, and kernels::hc_post
// against ref::hc_post. The mix kernel sums every (token, mix) in the reference's order with exact double
// products, so the mixes must match bit for bit on every ISA, for any thread count, over token counts around
// its 8-token passes, widths with odd tails, mix counts around the 4-mix panels (hc_head's hc, hc_pre's
// (2+hc)·hc), and inputs from bf16 streams to wide-range values whose float sums would differ under any
// reordering.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/thread_pool.h"
#include "kernels/cpu/hc_mix.h"
#include "kernels/cpu/hc_mix_post.h"
#include "ops/reference/mhc.h"
#include "kernel_isas.h"

namespace dsv4::kernels {
namespace {

// Values spread over `decades` powers of two, bf16-rounded like the residual streams.
std::vector<float> values(std::mt19937& rng, int64_t n, int decades) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-decades, decades);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = round_bf16(std::ldexp(nd(rng), ex(rng)));
  return v;
}

// The reference's mixes of n tokens, one token at a time: [n, n_mix].
std::vector<float> reference_mixes(const std::vector<float>& fn, int64_t n_mix, int64_t width,
                                   const std::vector<float>& x, int64_t n, float norm_eps) {
  ref::HcParams p;
  p.hc_mult = 1;  // the reference's mix width is hc_mult·dim
  p.dim = width;
  p.norm_eps = norm_eps;
  std::vector<float> want(static_cast<size_t>(n * n_mix));
  for (int64_t t = 0; t < n; ++t) ref::hc_mixes(p, fn.data(), n_mix, x.data() + t * width, want.data() + t * n_mix);
  return want;
}

// Runs `kernel(isa, pool, out)` on every ISA, serially and on 2 and 3 threads, and requires want's bits.
template <typename Kernel>
void expect_reference_bits(const std::vector<float>& want, const std::string& label, Kernel&& kernel) {
  static ThreadPool pool2(2), pool3(3);  // one pair per kernel, not one per shape
  for (Isa isa : isas())
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      std::vector<float> got(want.size(), NAN);
      kernel(isa, pool, got.data());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "isa " << isa_name(isa) << " " << label << " element " << i << ": " << got[i] << " vs " << want[i];
    }
}

// The same bits as the reference over mix counts around the panel and the panels of one pass (1, 4, 5, 24,
// 33, 64), widths with odd tails and across the kernel's 256-position blocks, token counts around its
// 1/2/4/8-token passes and 8-token groups (up to 17: three groups), and thread counts (the panels split
// over threads).
TEST(KernelHcMix, BitIdenticalToReference) {
  std::mt19937 rng(6);
  constexpr float kEps = 1e-6f;
  for (int64_t width : {1, 7, 64, 130, 1027})
    for (int64_t n_mix : {1, 4, 5, 24, 33, 64})
      for (int64_t n : {1, 2, 3, 5, 8, 9, 17})
        for (int decades : {0, 20}) {
          const auto fn = values(rng, n_mix * width, decades);
          const auto x = values(rng, n * width, decades);
          const auto packed = hc_pack_fn(fn.data(), n_mix, width);
          ASSERT_EQ(packed.size(), static_cast<size_t>(width * hc_packed_fn_ld(n_mix)));
          const std::string label = "width " + std::to_string(width) + " n_mix " + std::to_string(n_mix) + " n " +
                                    std::to_string(n) + " decades " + std::to_string(decades);
          expect_reference_bits(reference_mixes(fn, n_mix, width, x, n, kEps), label,
                                [&](Isa isa, ThreadPool* pool, float* out) {
                                  hc_mixes(packed.data(), n_mix, width, x.data(), n, kEps, out, isa, pool);
                                });
        }
}

// A zero stream: the reference gives rs = 1/sqrt(eps) and mixes of exactly 0; masked lanes of a partial
// group must not leak into the real ones either.
TEST(KernelHcMix, ZeroTokenAmongOthers) {
  std::mt19937 rng(9);
  const int64_t width = 96, n_mix = 24, n = 3;
  const auto fn = values(rng, n_mix * width, 3);
  auto x = values(rng, n * width, 3);
  std::fill(x.begin() + width, x.begin() + 2 * width, 0.0f);
  ref::HcParams p;
  p.hc_mult = 4;
  p.dim = width / 4;
  const auto packed = hc_pack_fn(fn.data(), n_mix, width);
  for (Isa isa : isas()) {
    std::vector<float> got(static_cast<size_t>(n * n_mix));
    hc_mixes(packed.data(), n_mix, width, x.data(), n, p.norm_eps, got.data(), isa, nullptr);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> want(static_cast<size_t>(n_mix));
      ref::hc_mixes(p, fn.data(), n_mix, x.data() + t * width, want.data());
      for (int64_t k = 0; k < n_mix; ++k)
        EXPECT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(t * n_mix + k)]),
                  std::bit_cast<uint32_t>(want[static_cast<size_t>(k)]))
            << isa_name(isa) << " token " << t << " mix " << k;
    }
  }
}

// The post-mix against ref::hc_post token by token: stream counts 1 and 4, widths with odd tails and across
// the kernel's 1024-wide pool blocks, token counts and thread counts, values over 20 binades plus the
// rounding edges — NaN (quieted), ±inf, values that round up to inf, exact bf16 ties.
TEST(KernelHcMix, PostBitIdenticalToReference) {
  std::mt19937 rng(11);
  for (int64_t hc : {1, 4})
    for (int64_t dim : {1, 17, 1057, 4096})
      for (int64_t n : {1, 3, 8}) {
        auto x = values(rng, n * dim, 20);
        auto residual = values(rng, n * hc * dim, 20);
        const auto post = values(rng, n * hc, 2);
        const auto comb = values(rng, n * hc * hc, 2);
        // Edges in the first token: a NaN sublayer output, an infinite residual, a finite value that
        // rounds to inf, and a bf16 tie (0x3F808000 lies halfway between two bf16 values).
        if (dim >= 17) {
          x[3] = NAN;
          residual[5] = INFINITY;
          x[7] = 3.4e38f;
          residual[7] = 0.0f;
          x[9] = std::bit_cast<float>(0x3F808000u);
        }
        ref::HcParams p;
        p.hc_mult = hc;
        p.dim = dim;
        std::vector<float> want(static_cast<size_t>(n * hc * dim));
        for (int64_t t = 0; t < n; ++t)
          ref::hc_post(p, x.data() + t * dim, residual.data() + t * hc * dim, post.data() + t * hc,
                       comb.data() + t * hc * hc, want.data() + t * hc * dim);
        const std::string label = "hc " + std::to_string(hc) + " dim " + std::to_string(dim) + " n " + std::to_string(n);
        expect_reference_bits(want, label, [&](Isa isa, ThreadPool* pool, float* out) {
          hc_post(hc, dim, x.data(), residual.data(), post.data(), comb.data(), n, out, isa, pool);
        });
      }
}

}  // namespace
}  // namespace dsv4::kernels
