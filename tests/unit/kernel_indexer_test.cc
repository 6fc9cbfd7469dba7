// unit: kernels::indexer_scores against ref::indexer_scores and kernels::topk_desc against
// ref::topk_desc (the stable descending sort of the golden contract). FP4-simulated q and keys (what the
// model feeds) give bit-identical scores on every ISA over a grid of head counts, head dims and key
// counts around the 8/16-key tiles; keys with a wide spread of block scales stay within the documented
// bound. Top-k matches the reference exactly, ties (including −0 vs +0) going to the lower index.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/kv_row.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/indexer.h"
#include "ops/reference/indexer.h"
#include "kernel_isas.h"

namespace dsv4::kernels {
namespace {

// Gaussian rows, FP4-simulated per 32-block; `spread` multiplies block b by 2^(spread·b) before the
// quantization (0: the model's Hadamard-rotated vectors, whose blocks have similar scales).
std::vector<float> fp4_rows(std::mt19937& rng, int64_t n, int64_t d, int spread) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n * d; ++i) x[static_cast<size_t>(i)] = std::ldexp(nd(rng), spread * static_cast<int>((i % d) / 32));
  for (int64_t r = 0; r < n; ++r) fake_quant_fp4(std::span<float>(x.data() + r * d, static_cast<size_t>(d)), 32);
  return x;
}

std::vector<float> head_weights(std::mt19937& rng, int64_t nh) {
  std::normal_distribution<float> nd(0.0f, 0.2f);
  std::vector<float> w(static_cast<size_t>(nh));
  for (auto& v : w) v = round_bf16(nd(rng));  // negative weights too (golden README item 11)
  return w;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// got == want bit for bit, naming the first key that differs.
::testing::AssertionResult same_scores(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t t = 0; t < want.size(); ++t)
    if (!same_bits(got[t], want[t]))
      return ::testing::AssertionFailure() << "t=" << t << ": " << got[t] << " vs " << want[t];
  return ::testing::AssertionSuccess();
}

// On every ISA this CPU has, serially and on `pool`, score(isa, pool, got) writes `want` bit for bit.
template <typename Score>
void expect_scores_on_every_isa(ThreadPool& pool, const std::vector<float>& want, Score score,
                                const std::string& what) {
  for (Isa isa : isas())
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> got(want.size(), -7.0f);
      score(isa, p, got.data());
      ASSERT_TRUE(same_scores(got, want)) << isa_name(isa) << (p ? " pool " : " serial ") << what;
    }
}

TEST(KernelIndexer, ScoresBitIdenticalOnFp4Inputs) {
  std::mt19937 rng(11);
  ThreadPool pool(3);
  for (int64_t nh : {1, 4, 7, 64})
    for (int64_t hd : {32, 64, 128})
      for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 300}) {
        const auto q = fp4_rows(rng, nh, hd, 0);
        auto keys = fp4_rows(rng, n, hd, 0);
        if (n > 3) std::copy(keys.begin(), keys.begin() + hd, keys.begin() + 3 * hd);  // a duplicate key: a tie
        const auto w = head_weights(rng, nh);
        std::vector<float> want(static_cast<size_t>(n));
        ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
        ASSERT_NO_FATAL_FAILURE(expect_scores_on_every_isa(
            pool, want,
            [&](Isa isa, ThreadPool* p, float* got) {
              indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), got, {isa, p});
            },
            "nh=" + std::to_string(nh) + " hd=" + std::to_string(hd) + " n=" + std::to_string(n)));
      }
}

// The AMX loop holds up to 64 heads as four 16-head C tiles and head_dim up to 256 as 32-wide steps; the
// grid above has one partial head tile (1, 4, 7 heads) or four full ones (64). Here two and three head
// tiles with a partial last one (17, 33), three full ones (48), more heads than the tiles hold (65: the
// fp32 loop), and head_dim 96 / 256 (AMX) and 288 (past its key buffer: the fp32 loop), on misaligned q
// and keys, against the reference bit for bit on every ISA, serial and on 3 threads.
TEST(KernelIndexer, ScoresBitIdenticalAtEveryHeadTileCount) {
  std::mt19937 rng(15);
  ThreadPool pool(3);
  for (int64_t nh : {17, 33, 48, 65})
    for (int64_t hd : {96, 256, 288})
      for (int64_t n : {17, 40}) {
        // q and keys 4 or 8 bytes past a 64-byte boundary (vector loads must not assume alignment).
        const size_t off = n == 17 ? 1 : 2;
        auto q = fp4_rows(rng, nh, hd, 0);
        auto keys = fp4_rows(rng, n, hd, 0);
        q.insert(q.begin(), off, 0.0f);
        keys.insert(keys.begin(), off, 0.0f);
        const float* qp = q.data() + off;
        const float* kp = keys.data() + off;
        const auto w = head_weights(rng, nh);
        std::vector<float> want(static_cast<size_t>(n));
        ref::indexer_scores(qp, nh, hd, kp, n, w.data(), want.data());
        ASSERT_NO_FATAL_FAILURE(expect_scores_on_every_isa(
            pool, want,
            [&](Isa isa, ThreadPool* p, float* got) { indexer_scores(qp, nh, hd, kp, n, w.data(), got, {isa, p}); },
            "nh=" + std::to_string(nh) + " hd=" + std::to_string(hd) + " n=" + std::to_string(n)));
      }
}

TEST(KernelIndexer, ScoresWithinBoundForWideBlockScales) {
  std::mt19937 rng(12);
  const int64_t nh = 8, hd = 128, n = 200;
  const auto q = fp4_rows(rng, nh, hd, 9);
  const auto keys = fp4_rows(rng, n, hd, 9);  // block scales 2^0..2^27 apart: fp32 sums are not exact
  const auto w = head_weights(rng, nh);
  std::vector<float> want(static_cast<size_t>(n));
  ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
  // Σ_h |term_h| from the reference's own terms.
  std::vector<double> abs_terms(static_cast<size_t>(n), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[static_cast<size_t>(h * hd + i)]) * keys[static_cast<size_t>(t * hd + i)];
      const float s = round_bf16(static_cast<float>(dot));
      abs_terms[static_cast<size_t>(t)] += std::fabs(round_bf16((s > 0 ? s : 0.0f) * w[static_cast<size_t>(h)]));
    }
  for (Isa isa : isas()) {
    std::vector<float> got(static_cast<size_t>(n));
    indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), got.data(), {isa, nullptr});
    for (int64_t t = 0; t < n; ++t) {
      const double r = want[static_cast<size_t>(t)];
      const double bound = std::ldexp(abs_terms[static_cast<size_t>(t)], -7) + std::ldexp(std::fabs(r), -7);
      EXPECT_LE(std::fabs(got[static_cast<size_t>(t)] - r), bound) << isa_name(isa) << " t=" << t;
    }
  }
}

TEST(KernelIndexer, KeysBf16CannotHoldTakeTheFp32Path) {
  // Mostly FP4 keys with a few raw floats: the AMX loop must hand the groups holding raw keys to the fp32
  // loop (bf16 would round them). FP4 keys stay bit-identical; raw keys are within the fp32 bound.
  std::mt19937 rng(14);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t nh = 64, hd = 128, n = 100;
  const auto q = fp4_rows(rng, nh, hd, 0);
  auto keys = fp4_rows(rng, n, hd, 0);
  std::vector<bool> raw(static_cast<size_t>(n), false);
  for (int64_t t = 5; t < n; t += 37) {
    raw[static_cast<size_t>(t)] = true;
    for (int64_t i = 0; i < hd; ++i) keys[static_cast<size_t>(t * hd + i)] = nd(rng);
  }
  const auto w = head_weights(rng, nh);
  std::vector<float> want(static_cast<size_t>(n));
  ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
  for (Isa isa : isas()) {
    std::vector<float> got(static_cast<size_t>(n));
    indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), got.data(), {isa, nullptr});
    for (int64_t t = 0; t < n; ++t) {
      const float g = got[static_cast<size_t>(t)], r = want[static_cast<size_t>(t)];
      if (!raw[static_cast<size_t>(t)]) {
        EXPECT_TRUE(same_bits(g, r)) << isa_name(isa) << " t=" << t << ": " << g << " vs " << r;
      } else {
        // Σ|terms| ≤ Σ_h |w_h|·|q_h|·|k_t| (Cauchy–Schwarz), generous but independent of the kernel.
        double bound_terms = 0;
        for (int64_t h = 0; h < nh; ++h) {
          double qq = 0, kk = 0;
          for (int64_t i = 0; i < hd; ++i) {
            qq += static_cast<double>(q[static_cast<size_t>(h * hd + i)]) * q[static_cast<size_t>(h * hd + i)];
            kk += static_cast<double>(keys[static_cast<size_t>(t * hd + i)]) * keys[static_cast<size_t>(t * hd + i)];
          }
          bound_terms += std::fabs(w[static_cast<size_t>(h)]) * std::sqrt(qq * kk) * 1.01;
        }
        EXPECT_LE(std::fabs(static_cast<double>(g) - r), std::ldexp(bound_terms, -7) + std::ldexp(std::fabs(r), -7))
            << isa_name(isa) << " t=" << t;
      }
    }
  }
}

// A NaN in a key makes its dots NaN; the reference's ReLU (s > 0 ? s : 0) turns them into 0, and so must
// every ISA (a NaN is exact in bf16, so the VDPBF16PS loop keeps such a key). Float keys and packed keys
// (scale code 255 is E8M0's NaN) on every ISA, serial and on 3 threads.
TEST(KernelIndexer, NanDotsScoreZeroAsTheReferenceReLU) {
  std::mt19937 rng(18);
  ThreadPool pool(3);
  const int64_t nh = 16, hd = 128, n = 40;
  const auto q = fp4_rows(rng, nh, hd, 0);
  auto keys = fp4_rows(rng, n, hd, 0);
  keys[static_cast<size_t>(5 * hd + 17)] = std::numeric_limits<float>::quiet_NaN();
  std::fill(keys.begin() + 9 * hd, keys.begin() + 10 * hd, -std::numeric_limits<float>::quiet_NaN());
  const auto w = head_weights(rng, nh);
  std::vector<float> want(static_cast<size_t>(n));
  ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
  ASSERT_TRUE(std::isfinite(want[5]) && std::isfinite(want[9]));
  ASSERT_NO_FATAL_FAILURE(expect_scores_on_every_isa(
      pool, want,
      [&](Isa isa, ThreadPool* p, float* got) { indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), got, {isa, p}); },
      "float keys"));

  const int64_t kb = index_key_bytes(hd);
  std::vector<uint8_t> packed(static_cast<size_t>(n * kb));
  std::vector<const uint8_t*> rows(static_cast<size_t>(n));
  const auto clean = fp4_rows(rng, n, hd, 0);
  for (int64_t t = 0; t < n; ++t) {
    encode_index_key({clean.data() + t * hd, static_cast<size_t>(hd)}, {packed.data() + t * kb, static_cast<size_t>(kb)});
    rows[static_cast<size_t>(t)] = packed.data() + t * kb;
  }
  packed[static_cast<size_t>(7 * kb + hd / 2 + 2)] = 255;
  std::vector<float> decoded(static_cast<size_t>(n * hd));
  for (int64_t t = 0; t < n; ++t)
    decode_index_key({rows[static_cast<size_t>(t)], static_cast<size_t>(kb)}, {decoded.data() + t * hd, static_cast<size_t>(hd)});
  ASSERT_TRUE(std::isnan(decoded[static_cast<size_t>(7 * hd + 64)]));
  ref::indexer_scores(q.data(), nh, hd, decoded.data(), n, w.data(), want.data());
  ASSERT_NO_FATAL_FAILURE(expect_scores_on_every_isa(
      pool, want,
      [&](Isa isa, ThreadPool* p, float* got) { indexer_scores_packed(q.data(), nh, hd, rows.data(), n, w.data(), got, {isa, p}); },
      "packed keys"));
}

// bf16 values with random exponents in [-e, e] (independent per element): the fp32 sums of their
// products are inexact, so every summation order gives other bits — what pins down the VDPBF16PS order.
std::vector<float> wide_bf16(std::mt19937& rng, int64_t n, int e) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-e, e);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = round_bf16(std::ldexp(nd(rng), ex(rng)));
  return x;
}

// Makes every q·k cancel: k[0] = 2^16, k[d-1] = −2^16 and q[0] = q[d-1] = 1 for every head, so the rest
// of the dot is summed next to 2^16 (fp32 ulp 2^-7) in an order-dependent way, then the big terms cancel.
void add_cancellation(std::vector<float>& q, int64_t nh, std::vector<float>& keys, int64_t n, int64_t d) {
  if (d < 2) return;
  for (int64_t h = 0; h < nh; ++h) q[static_cast<size_t>(h * d)] = q[static_cast<size_t>(h * d + d - 1)] = 1.0f;
  for (int64_t t = 0; t < n; ++t) {
    keys[static_cast<size_t>(t * d)] = 65536.0f;
    keys[static_cast<size_t>(t * d + d - 1)] = -65536.0f;
  }
}

// The avx512bf16 loop's documented order (attention_tiles_avx512bf16.cc), written from VDPBF16PS's
// definition: per pair p, acc = (acc + q[2p+1]·k[2p+1]) + q[2p]·k[2p] in fp32 (bf16 products are exact in
// fp32; an odd head_dim's last pair has a zero high half), then the reference's per-head steps.
void emulate_bf16_scores(const float* q, int64_t nh, int64_t d, const float* keys, int64_t n, const float* w,
                         float* scores) {
  for (int64_t t = 0; t < n; ++t) {
    double sum = 0.0;
    for (int64_t h = 0; h < nh; ++h) {
      float acc = 0.0f;
      for (int64_t p = 0; 2 * p < d; ++p) {
        const float odd = 2 * p + 1 < d ? q[h * d + 2 * p + 1] * keys[t * d + 2 * p + 1] : 0.0f;
        acc = acc + odd;
        acc = acc + q[h * d + 2 * p] * keys[t * d + 2 * p];
      }
      const float s = round_bf16(acc);
      sum += static_cast<double>(round_bf16((s > 0.0f ? s : 0.0f) * w[h]));
    }
    scores[t] = round_bf16(static_cast<float>(sum));
  }
}

// The VDPBF16PS loop (32 keys × 8 heads per pass) against its scalar emulation, bit for bit, on
// bf16-exact inputs whose sums are inexact: keys around the 16/32-key groups, heads around the 8-head
// blocks, head_dim odd / off the 32-dim transpose blocks, misaligned pointers, serial and 3 threads; no
// bf16 refusal on any of them (all magnitudes far above the 2^-56 guard).
TEST(KernelIndexer, Bf16PathMatchesItsEmulationBitForBit) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(16);
  ThreadPool pool(3);
  const uint64_t refusals0 = bf16_refusals();
  int64_t differs_from_ref = 0;
  for (int64_t nh : {1, 7, 8, 9, 17, 64})
    for (int64_t hd : {7, 32, 33, 100, 128})
      for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 65, 200}) {
        const size_t off = static_cast<size_t>((nh + hd + n) % 3);  // 0-2 floats past the vector's start
        auto q = wide_bf16(rng, nh * hd, 4);
        auto keys = wide_bf16(rng, n * hd, 4);
        add_cancellation(q, nh, keys, n, hd);
        q.insert(q.begin(), off, 0.0f);
        keys.insert(keys.begin(), off, 0.0f);
        const float* qp = q.data() + off;
        const float* kp = keys.data() + off;
        const auto w = head_weights(rng, nh);
        std::vector<float> want(static_cast<size_t>(n)), ref_scores(static_cast<size_t>(n));
        emulate_bf16_scores(qp, nh, hd, kp, n, w.data(), want.data());
        ref::indexer_scores(qp, nh, hd, kp, n, w.data(), ref_scores.data());
        for (int64_t t = 0; t < n; ++t) differs_from_ref += !same_bits(want[static_cast<size_t>(t)], ref_scores[static_cast<size_t>(t)]);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> got(static_cast<size_t>(n), -7.0f);
          indexer_scores(qp, nh, hd, kp, n, w.data(), got.data(), {Isa::kAvx512Bf16, p});
          for (int64_t t = 0; t < n; ++t)
            ASSERT_TRUE(same_bits(got[static_cast<size_t>(t)], want[static_cast<size_t>(t)]))
                << "nh=" << nh << " hd=" << hd << " n=" << n << " t=" << t << ": " << got[static_cast<size_t>(t)]
                << " vs " << want[static_cast<size_t>(t)];
        }
      }
  EXPECT_EQ(bf16_refusals(), refusals0);
  // The inputs really are order-sensitive (else this test could not tell orders apart).
  EXPECT_GT(differs_from_ref, 100);
}

// The guard: a q value below 2^-56 (VDPBF16PS would flush products of it) or not exact in bf16 sends the
// whole call to the AVX-512 fp32 loop; such a key sends its 32-key group. One refusal per decision; the
// other groups stay on VDPBF16PS (their emulation's bits).
TEST(KernelIndexer, Bf16PathFallsBackOnTinyOrInexactValues) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(17);
  const int64_t nh = 16, hd = 128, n = 96;  // three 32-key groups
  const auto w = head_weights(rng, nh);
  auto base_q = wide_bf16(rng, nh * hd, 4);
  auto base_keys = wide_bf16(rng, n * hd, 4);
  add_cancellation(base_q, nh, base_keys, n, hd);
  auto run = [&](const std::vector<float>& q, const std::vector<float>& keys, Isa isa, std::vector<float>* out) {
    out->assign(static_cast<size_t>(n), -7.0f);
    const uint64_t r0 = bf16_refusals();
    indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), out->data(), {isa, nullptr});
    return bf16_refusals() - r0;
  };
  std::vector<float> got, fp32, emul(static_cast<size_t>(n));
  for (const float odd : {std::ldexp(1.0f, -57), std::ldexp(-1.0f, -80), 1.0f + std::ldexp(1.0f, -12)}) {
    // In q: the whole call on the fp32 loop.
    auto q = base_q;
    q[5 * hd + 77] = odd;  // not a cancelling element
    EXPECT_EQ(run(q, base_keys, Isa::kAvx512Bf16, &got), 1u);
    run(q, base_keys, Isa::kAvx512, &fp32);
    for (int64_t t = 0; t < n; ++t) EXPECT_TRUE(same_bits(got[static_cast<size_t>(t)], fp32[static_cast<size_t>(t)])) << t;
    // In key 40 (group 1): that group on the fp32 loop, groups 0 and 2 on VDPBF16PS.
    auto keys = base_keys;
    keys[40 * hd + 3] = odd;
    EXPECT_EQ(run(base_q, keys, Isa::kAvx512Bf16, &got), 1u);
    run(base_q, keys, Isa::kAvx512, &fp32);
    emulate_bf16_scores(base_q.data(), nh, hd, keys.data(), n, w.data(), emul.data());
    int64_t fp32_differs = 0;
    for (int64_t t = 0; t < n; ++t) {
      const float want = t >= 32 && t < 64 ? fp32[static_cast<size_t>(t)] : emul[static_cast<size_t>(t)];
      EXPECT_TRUE(same_bits(got[static_cast<size_t>(t)], want)) << "t=" << t;
      fp32_differs += !same_bits(fp32[static_cast<size_t>(t)], emul[static_cast<size_t>(t)]);
    }
    EXPECT_GT(fp32_differs, 0);  // the two orders are distinguishable on these inputs
  }
  // Exactly 2^-56 and zeros pass the guard.
  auto q = base_q;
  q[3] = std::ldexp(1.0f, -56);
  q[4] = 0.0f;
  q[5] = -0.0f;
  EXPECT_EQ(run(q, base_keys, Isa::kAvx512Bf16, &got), 0u);
  emulate_bf16_scores(q.data(), nh, hd, base_keys.data(), n, w.data(), emul.data());
  for (int64_t t = 0; t < n; ++t) EXPECT_TRUE(same_bits(got[static_cast<size_t>(t)], emul[static_cast<size_t>(t)])) << t;
}

// indexer_scores_packed on keys stored as the model stores them (core/kv_row.h encode_index_key) against the
// reference on the decoded keys, bit for bit, on every ISA, serial and on 3 threads, at key counts around the
// 8/32-key groups and the 256-key decode slices, head_dim 64, 128 and 288; some keys get scale codes the
// integer paths do not take (0, 60, 200, 255: the per-key fallback, NaN included), some calls a q the VNNI
// path refuses.
TEST(KernelIndexer, PackedKeysMatchTheReferenceOnDecodedKeys) {
  std::mt19937 rng(31);
  ThreadPool pool(3);
  for (int64_t hd : {64, 128, 288})
    for (int64_t n : {1, 9, 33, 300, 600}) {
      const int64_t nh = 64, kb = index_key_bytes(hd);
      auto q = fp4_rows(rng, nh, hd, 0);
      // At two key counts a q head whose block 1 is 16x larger (still FP4-like, 4 binades above its block 0):
      // the VNNI path refuses the call, which then runs on the decoded keys.
      if (n == 33 || n == 600)
        for (int64_t i = 32; i < 64; ++i) q[static_cast<size_t>(5 * hd + i)] *= 16.0f;
      const auto raw = fp4_rows(rng, n, hd, 0);
      std::vector<uint8_t> packed(static_cast<size_t>(n * kb));
      for (int64_t t = 0; t < n; ++t)
        encode_index_key({raw.data() + t * hd, static_cast<size_t>(hd)}, {packed.data() + t * kb, static_cast<size_t>(kb)});
      const uint8_t odd_scales[] = {0, 60, 200, 255};
      for (int64_t t = 3, i = 0; t < n; t += 11, ++i) packed[static_cast<size_t>(t * kb + hd / 2 + i % (hd / 32))] = odd_scales[i % 4];
      std::vector<float> keys(static_cast<size_t>(n * hd));
      std::vector<const uint8_t*> rows(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) {
        decode_index_key({packed.data() + t * kb, static_cast<size_t>(kb)}, {keys.data() + t * hd, static_cast<size_t>(hd)});
        rows[static_cast<size_t>(t)] = packed.data() + t * kb;
      }
      const auto w = head_weights(rng, nh);
      std::vector<float> want(static_cast<size_t>(n));
      ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
      ASSERT_NO_FATAL_FAILURE(expect_scores_on_every_isa(
          pool, want,
          [&](Isa isa, ThreadPool* p, float* got) {
            indexer_scores_packed(q.data(), nh, hd, rows.data(), n, w.data(), got, {isa, p});
          },
          "hd=" + std::to_string(hd) + " n=" + std::to_string(n)));
    }
}

// indexer_prepare_packed + indexer_scores_prepared (keys converted once, many queries over growing prefixes,
// as prefill calls them) against indexer_scores_packed on the same prefix, bit for bit, on every ISA that has
// the prepared form (the AVX-512 tiers, AMX's too, on VNNI: checked), preparing and scoring serially and on 3 threads; key
// counts around the 16-key groups and the pool's 256-key preparing chunks, prefixes ending inside a group,
// odd scale codes (the per-key fallback from the rows), and a q the integer path refuses.
TEST(KernelIndexer, PreparedKeysMatchPackedScores) {
  std::mt19937 rng(32);
  ThreadPool pool(3);
  int64_t prepared_isas = 0;
  for (Isa isa : isas()) {
    if (isa != Isa::kAvx512 && isa != Isa::kAvx512Bf16 && isa != Isa::kAmx) {
      EXPECT_EQ(indexer_prepared_lines(100, 128, isa), 0) << isa_name(isa);
    }
    for (int64_t hd : {64, 128, 288})
      for (int64_t n : {1, 17, 300, 600}) {
        const int64_t lines = indexer_prepared_lines(n, hd, isa);
        if (lines == 0) continue;
        ++prepared_isas;
        const int64_t nh = 64, kb = index_key_bytes(hd);
        auto q = fp4_rows(rng, nh, hd, 0);
        auto q_wide = q;
        for (int64_t i = 32; i < 64; ++i) q_wide[static_cast<size_t>(5 * hd + i)] *= 16.0f;
        const auto raw = fp4_rows(rng, n, hd, 0);
        std::vector<uint8_t> packed(static_cast<size_t>(n * kb));
        std::vector<const uint8_t*> rows(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) {
          encode_index_key({raw.data() + t * hd, static_cast<size_t>(hd)}, {packed.data() + t * kb, static_cast<size_t>(kb)});
          rows[static_cast<size_t>(t)] = packed.data() + t * kb;
        }
        const uint8_t odd_scales[] = {0, 60, 200, 255};
        for (int64_t t = 5, i = 0; t < n; t += 13, ++i) packed[static_cast<size_t>(t * kb + hd / 2 + i % (hd / 32))] = odd_scales[i % 4];
        const auto w = head_weights(rng, nh);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<IndexerKeyLine> prepared(static_cast<size_t>(lines));
          indexer_prepare_packed(rows.data(), n, hd, prepared.data(), {isa, p});
          for (const float* qp : {q.data(), q_wide.data()})
            for (int64_t visible : {int64_t{1}, std::min<int64_t>(n, 16), std::min<int64_t>(n, 17), (n + 1) / 2, n}) {
              std::vector<float> want(static_cast<size_t>(visible), -7.0f), got(static_cast<size_t>(visible), -9.0f);
              indexer_scores_packed(qp, nh, hd, rows.data(), visible, w.data(), want.data(), {isa, p});
              indexer_scores_prepared(qp, nh, hd, rows.data(), prepared.data(), n, visible, w.data(), got.data(), {isa, p});
              ASSERT_TRUE(same_scores(got, want)) << isa_name(isa) << " hd=" << hd << " n=" << n << " visible=" << visible
                                                  << (p ? " pool" : " serial") << (qp == q.data() ? "" : " wide q");
            }
        }
      }
  }
  if (has_avx512_vnni_vbmi()) {
    EXPECT_GT(prepared_isas, 0);
    // More keys than prepared is an invariant failure (DSV4_CHECK), never a read past the lines.
    std::vector<IndexerKeyLine> lines(static_cast<size_t>(indexer_prepared_lines(16, 128, Isa::kAvx512)));
    std::vector<float> q(64 * 128, 0.0f), w(64, 0.0f), scores(32);
    std::vector<const uint8_t*> rows(32, nullptr);
    EXPECT_DEATH(indexer_scores_prepared(q.data(), 64, 128, rows.data(), lines.data(), 16, 17, w.data(), scores.data(),
                                         {Isa::kAvx512, nullptr}),
                 "more keys than prepared");
  }
}

#if defined(__x86_64__)
// The AVX2 integer path (indexer_int8_avx2.cc) at its edges on fp32 keys, against the reference and its own
// fp32 loop: a key whose blocks are 4-bit integers beyond E2M1 (±7, ±9 .. ±15) times powers of two up to 3
// binades apart (they pass its test and stay exact), keys with blocks 4 and 12 binades apart, a key with one
// raw block and one with a NaN (each takes the fp32 loop alone: its group's other keys keep the integer
// path), an all-zero key, head_dim 64 and 128, key counts off the 8-key groups, and every split of the keys
// into two calls (a key's group changes, its bits must not). A q with one raw block, or one whose blocks are 4
// binades apart, sends the call to the fp32 loop, bit for bit.
TEST(KernelIndexer, Avx2IntegerPathEdges) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> small(-15, 15), expo(0, 3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t hd : {64, 128})
    for (int64_t n : {9, 23}) {
      const int64_t nh = 64;
      const auto q = fp4_rows(rng, nh, hd, 0);
      auto keys = fp4_rows(rng, n, hd, 0);
      for (int64_t b = 0; b < hd / 32; ++b) {  // key 1: 4-bit integers times 2^e per block, e 3 binades apart
        const int e = b == 0 ? 0 : b == 1 ? 3 : expo(rng);
        for (int64_t i = 0; i < 32; ++i) keys[static_cast<size_t>(hd + 32 * b + i)] = std::ldexp(static_cast<float>(small(rng)), e);
      }
      for (int64_t i = 0; i < 32; ++i) {  // blocks 0 and 1 of key 2 4 binades apart, of key 3 12: the fp32 loop
        keys[static_cast<size_t>(2 * hd + 32 + i)] = 16.0f * keys[static_cast<size_t>(2 * hd + i)];
        keys[static_cast<size_t>(3 * hd + i)] = 4096.0f * keys[static_cast<size_t>(3 * hd + 32 + i)];
      }
      std::fill(keys.begin() + 4 * hd, keys.begin() + 5 * hd, 0.0f);                            // key 4: zeros
      for (int64_t i = 32; i < 64; ++i) keys[static_cast<size_t>(6 * hd + i)] = nd(rng);         // key 6: a raw block
      keys[static_cast<size_t>(8 * hd + 3)] = std::numeric_limits<float>::quiet_NaN();          // key 8: a NaN
      const auto w = head_weights(rng, nh);
      std::vector<float> want(static_cast<size_t>(n)), fp32(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
      detail::indexer_scores_avx2_fp32(q.data(), nh, hd, keys.data(), 0, n, w.data(), fp32.data());
      for (int64_t split = 0; split <= n; ++split) {
        std::fill(got.begin(), got.end(), -7.0f);
        detail::indexer_scores_avx2(q.data(), nh, hd, keys.data(), 0, split, w.data(), got.data());
        detail::indexer_scores_avx2(q.data(), nh, hd, keys.data(), split, n, w.data(), got.data());
        for (int64_t t = 0; t < n; ++t) {
          const float g = got[static_cast<size_t>(t)];
          const bool takes_fp32 = t == 2 || t == 3 || t == 6 || t == 8;
          const float r = takes_fp32 ? fp32[static_cast<size_t>(t)] : want[static_cast<size_t>(t)];
          ASSERT_TRUE(same_bits(g, r)) << "hd=" << hd << " n=" << n << " split=" << split << " t=" << t << ": " << g
                                       << " vs " << r;
        }
      }
      auto q_raw = q;
      q_raw[static_cast<size_t>(5 * hd + 40)] = 0.3f * nd(rng) + 0.01f;  // head 5: not FP4-like
      std::vector<float> want_raw(static_cast<size_t>(n));
      detail::indexer_scores_avx2_fp32(q_raw.data(), nh, hd, keys.data(), 0, n, w.data(), want_raw.data());
      detail::indexer_scores_avx2(q_raw.data(), nh, hd, keys.data(), 0, n, w.data(), got.data());
      ASSERT_TRUE(same_scores(got, want_raw)) << "raw q";
      auto q_wide = q;  // head 3: block 1 = block 0 times 16 (still FP4-like, 4 binades above block 0)
      for (int64_t i = 0; i < 32; ++i) q_wide[static_cast<size_t>(3 * hd + 32 + i)] = 16.0f * q[static_cast<size_t>(3 * hd + i)];
      detail::indexer_scores_avx2_fp32(q_wide.data(), nh, hd, keys.data(), 0, n, w.data(), want_raw.data());
      detail::indexer_scores_avx2(q_wide.data(), nh, hd, keys.data(), 0, n, w.data(), got.data());
      ASSERT_TRUE(same_scores(got, want_raw)) << "q 4 binades apart";
    }
}

constexpr float kFallbackMark = 1.0e30f;
void marking_fallback(const float*, int64_t, int64_t, const float*, int64_t k0, int64_t k1, const float*, float* scores) {
  for (int64_t t = k0; t < k1; ++t) scores[t] = kFallbackMark;
}

// The integer paths on packed keys (indexer_int8_avx2.cc, indexer_int8_avx512.cc: one contract) at their edges: blocks
// up to 3 binades above the key's lowest (one exact integer dot: the reference bit for bit), an all-zero block whose
// scale code is far below the rest (it does not count towards the spread), an all-zero key, every E2M1 code; keys 4 and
// 12 binades apart and scale codes it refuses (the fallback's result for that key alone: a marking fallback shows which
// keys take it), in the first 16-key group and in the second; heads 64 and 9 (head passes of 4 or 8, plus one),
// head_dim 64, 128 and 256, key counts off the 8- and 16-key groups (and off the AVX-512 path's pairs of groups), every
// split of the keys into two calls. A q head whose blocks are 4 binades apart makes it refuse the call (the caller then
// decodes the keys). `fp32`: the tier's fp32 loop.
using PackedIntegerScores = bool (*)(const float* q, int64_t n_heads, int64_t d, const uint8_t* const* keys,
                                     int64_t k0, int64_t k1, const float* w, float* scores,
                                     detail::IndexerScoresFn fp32);
void expect_packed_integer_edges(PackedIntegerScores score, detail::IndexerScoresFn fp32_loop, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t nh : {64, 9})
    for (int64_t hd : {64, 128, 256})
      for (int64_t n : {17, 40}) {
        const int64_t kb = index_key_bytes(hd), nb = hd / 32;
        const auto q = fp4_rows(rng, nh, hd, 0);
        const auto raw = fp4_rows(rng, n, hd, 0);
        std::vector<uint8_t> packed(static_cast<size_t>(n * kb));
        for (int64_t t = 0; t < n; ++t)
          encode_index_key({raw.data() + t * hd, static_cast<size_t>(hd)}, {packed.data() + t * kb, static_cast<size_t>(kb)});
        auto codes = [&](int64_t t) { return packed.data() + t * kb; };
        auto scale = [&](int64_t t, int64_t b) -> uint8_t& { return packed[static_cast<size_t>(t * kb + hd / 2 + b)]; };
        // The edge keys at 1 .. 8 of the first group, and again of the second where n reaches it (the AVX-512 path
        // scores two groups per pass).
        const std::vector<int64_t> bases = n > 24 ? std::vector<int64_t>{0, 16} : std::vector<int64_t>{0};
        for (int64_t o : bases) {
          for (int64_t b = 0; b < nb; ++b)
            scale(o + 1, b) = static_cast<uint8_t>(125 + (b % 2) * 3);  // spread 3: integer
          for (int64_t b = 0; b < nb; ++b) scale(o + 2, b) = static_cast<uint8_t>(125 + (b % 2) * 4);  // spread 4: fp32
          std::fill(codes(o + 3), codes(o + 3) + 16, uint8_t{0x88});  // block 0 all −0, its scale far below the others
          scale(o + 3, 0) = 80;
          std::fill(codes(o + 4), codes(o + 4) + hd / 2, uint8_t{0});  // all zeros, odd scales
          for (int64_t b = 0; b < nb; ++b) scale(o + 4, b) = static_cast<uint8_t>(72 + 16 * b);  // 72 .. 184
          for (int64_t i = 0; i < hd / 2; ++i) codes(o + 5)[i] = static_cast<uint8_t>(i * 17);   // every code pair
          for (int64_t b = 0; b < nb; ++b)
            scale(o + 6, b) = static_cast<uint8_t>(120 + (b % 2) * 12);  // spread 12: fp32
          scale(o + 7, nb - 1) = 185;                                    // refused code
          scale(o + 8, 0) = 71;
        }
        auto takes_fp32 = [&](int64_t t) {
          const int64_t o = t - t % 16, i = t % 16;
          return std::find(bases.begin(), bases.end(), o) != bases.end() && (i == 2 || i == 6 || i == 7 || i == 8);
        };
        std::vector<float> keys(static_cast<size_t>(n * hd));
        std::vector<const uint8_t*> rows(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) {
          decode_index_key({codes(t), static_cast<size_t>(kb)}, {keys.data() + t * hd, static_cast<size_t>(hd)});
          rows[static_cast<size_t>(t)] = codes(t);
        }
        const auto w = head_weights(rng, nh);
        std::vector<float> want(static_cast<size_t>(n)), fp32(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        ref::indexer_scores(q.data(), nh, hd, keys.data(), n, w.data(), want.data());
        fp32_loop(q.data(), nh, hd, keys.data(), 0, n, w.data(), fp32.data());
        const std::string what = "nh=" + std::to_string(nh) + " hd=" + std::to_string(hd) + " n=" + std::to_string(n);
        for (int64_t split = 0; split <= n; ++split) {
          // The fallback marks the keys it scores, so the test sees which ones take it.
          std::fill(got.begin(), got.end(), -7.0f);
          ASSERT_TRUE(score(q.data(), nh, hd, rows.data(), 0, split, w.data(), got.data(), marking_fallback));
          ASSERT_TRUE(score(q.data(), nh, hd, rows.data(), split, n, w.data(), got.data(), marking_fallback));
          for (int64_t t = 0; t < n; ++t) {
            const float r = takes_fp32(t) ? kFallbackMark : want[static_cast<size_t>(t)];
            ASSERT_TRUE(same_bits(got[static_cast<size_t>(t)], r))
                << what << " split=" << split << " t=" << t << ": " << got[static_cast<size_t>(t)] << " vs " << r;
          }
        }
        // With the tier's real fp32 loop behind it, the fallback keys get that loop's scores.
        ASSERT_TRUE(score(q.data(), nh, hd, rows.data(), 0, n, w.data(), got.data(), fp32_loop));
        for (int64_t t = 0; t < n; ++t) {
          if (!takes_fp32(t)) continue;
          EXPECT_TRUE(same_bits(got[static_cast<size_t>(t)], fp32[static_cast<size_t>(t)])) << what << " t=" << t;
        }
        auto q_wide = q;  // head 3: block 1 = block 0 times 16 (still FP4-like, 4 binades above block 0)
        for (int64_t i = 0; i < 32; ++i) q_wide[static_cast<size_t>(3 * hd + 32 + i)] = 16.0f * q[static_cast<size_t>(3 * hd + i)];
        EXPECT_FALSE(score(q_wide.data(), nh, hd, rows.data(), 0, n, w.data(), got.data(), fp32_loop)) << what;
      }
}

TEST(KernelIndexer, Avx2PackedIntegerPathEdges) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  expect_packed_integer_edges(detail::indexer_scores_packed_avx2, detail::indexer_scores_avx2_fp32, 23);
}

TEST(KernelIndexer, Avx512VnniIntegerPathEdges) {
  if (!has_avx512_vnni_vbmi()) GTEST_SKIP() << "no AVX512_VNNI + VBMI";
  expect_packed_integer_edges(detail::indexer_scores_packed_avx512vnni, detail::indexer_scores_avx512, 22);
}
#endif

TEST(KernelIndexer, TopkMatchesStableDescendingSort) {
  std::mt19937 rng(13);
  TopkScratch scratch;
  for (int64_t n : {1, 2, 5, 64, 257, 1000, 5000}) {
    // Few distinct values (many ties), both zeros, negatives and one large outlier.
    std::uniform_int_distribution<int> v(-6, 6);
    std::vector<float> s(static_cast<size_t>(n));
    for (auto& x : s) x = static_cast<float>(v(rng)) * 0.25f;
    for (size_t i = 0; i < s.size(); i += 7) s[i] = (i % 2) ? -0.0f : 0.0f;
    s[s.size() / 2] = 1e30f;
    for (int64_t k : {int64_t{0}, int64_t{1}, n / 3, n / 2, n - 1, n}) {
      if (k < 0) continue;
      std::vector<int32_t> want(static_cast<size_t>(k)), got(static_cast<size_t>(k), -1);
      ref::topk_desc(s.data(), n, k, want.data());
      topk_desc(s.data(), n, k, got.data(), scratch);
      ASSERT_EQ(got, want) << "n=" << n << " k=" << k;
    }
  }
}

// Distinct floats that share their top digits (a run of consecutive floats, a cluster of bf16 values, wide
// normals): the select must decide every radix digit of the threshold; and all-equal scores (every key tied).
TEST(KernelIndexer, TopkDecidesEveryByteOfTheThreshold) {
  std::mt19937 rng(19);
  TopkScratch scratch;
  for (int64_t n : {3, 100, 4096, 16384}) {
    std::vector<std::vector<float>> cases(5, std::vector<float>(static_cast<size_t>(n)));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.0f, 0.06f);
    float x = 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      cases[0][static_cast<size_t>(i)] = x = std::nextafter(x, 2.0f);  // one run, shuffled below
      cases[1][static_cast<size_t>(i)] = round_bf16(1.0f + 0.01f * nd(rng));  // many ties, low bytes zero
      cases[2][static_cast<size_t>(i)] = nd(rng) * 1e3f;
      cases[3][static_cast<size_t>(i)] = 0.0f;
      cases[4][static_cast<size_t>(i)] = 1.0f + ud(rng);  // one 12-bit top digit, distinct below it
    }
    std::shuffle(cases[0].begin(), cases[0].end(), rng);
    for (const auto& s : cases)
      for (int64_t k : {int64_t{1}, n / 7 + 1, n / 2, n}) {
        std::vector<int32_t> want(static_cast<size_t>(k)), got(static_cast<size_t>(k), -1);
        ref::topk_desc(s.data(), n, k, want.data());
        topk_desc(s.data(), n, k, got.data(), scratch);
        ASSERT_EQ(got, want) << "n=" << n << " k=" << k;
      }
  }
}

TEST(KernelIndexer, TopkTiesGoToLowerIndex) {
  // Most real ties are exact zeros (every head's ReLU is zero): the k picked must be the first k indices.
  const std::vector<float> s{0.0f, 0.5f, 0.0f, -0.0f, 0.0f, 0.5f, 0.0f};
  TopkScratch scratch;
  std::vector<int32_t> got(4);
  topk_desc(s.data(), 7, 4, got.data(), scratch);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 5, 0, 2}));
}

}  // namespace
}  // namespace dsv4::kernels
