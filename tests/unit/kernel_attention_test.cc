// unit: kernels::sparse_attention against ref::sparse_attention over a grid of shapes (head_dim off the
// vector widths, lists shorter than, equal to and across the 64-entry softmax blocks, masked rows, fully
// masked blocks and lists). Scalar is bit-identical for any input; every ISA is bit-identical when the
// dots are exact in fp32; for arbitrary floats the vector ISAs stay within the documented bound
// |out − ref| ≤ 2^-6·max_j|row_j[d]| and almost every element is still bit-identical. Thread count
// changes no bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_isas.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/sparse_attention.h"
#include "ops/reference/sparse_attention.h"

namespace dsv4::kernels {
namespace {

enum class Values { kExactDots, kGaussian };
enum class Mask { kNone, kRandom, kFirstBlock, kAll };

struct Case {
  int64_t n_heads, head_dim, n_idx;
  Mask mask;
};

struct Inputs {
  std::vector<float> q, kv, sink;
  std::vector<const float*> rows;
};

Inputs make_inputs(const Case& c, Values values, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-8, 8);
  // Exact dots: multiples of 1/16 below 1/2 in magnitude, so every partial sum of q·k is a multiple of
  // 2^-8 below 2^14 — exact in fp32 whatever the summation order.
  auto value = [&]() {
    return values == Values::kExactDots ? static_cast<float>(small(rng)) / 16.0f : nd(rng) * 2.0f;
  };
  Inputs in;
  in.q.resize(static_cast<size_t>(c.n_heads * c.head_dim));
  for (auto& v : in.q) v = value();
  const int64_t n_kv = std::max<int64_t>(1, c.n_idx / 2 + 3);  // rows repeat in the list, as windows + top-k may
  in.kv.resize(static_cast<size_t>(n_kv * c.head_dim));
  for (auto& v : in.kv) v = value();
  in.sink.resize(static_cast<size_t>(c.n_heads));
  for (auto& v : in.sink) v = nd(rng);
  if (c.n_heads > 1) in.sink[1] = 25.0f;  // a sink that dominates the denominator
  std::uniform_int_distribution<int64_t> pick(0, n_kv - 1);
  std::bernoulli_distribution masked(0.3);
  for (int64_t j = 0; j < c.n_idx; ++j) {
    const bool off = c.mask == Mask::kAll || (c.mask == Mask::kFirstBlock && j < 64) ||
                     (c.mask == Mask::kRandom && masked(rng));
    in.rows.push_back(off ? nullptr : in.kv.data() + pick(rng) * c.head_dim);
  }
  return in;
}

std::vector<Case> grid() {
  std::vector<Case> cases;
  for (auto [h, d] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {3, 20}, {4, 64}, {5, 72}, {8, 128}, {6, 512}, {12, 40}})
    for (int64_t n : {0, 1, 2, 63, 64, 65, 130, 200})
      for (Mask m : {Mask::kNone, Mask::kRandom, Mask::kFirstBlock, Mask::kAll}) cases.push_back({h, d, n, m});
  return cases;
}

std::vector<float> run_ref(const Case& c, const Inputs& in) {
  std::vector<float> out(static_cast<size_t>(c.n_heads * c.head_dim), -1.0f);
  const ref::SparseAttentionParams p{c.n_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  ref::sparse_attention(p, in.q.data(), in.rows.data(), c.n_idx, in.sink.data(), out.data());
  return out;
}

std::vector<float> run_fast(const Case& c, const Inputs& in, Isa isa, ThreadPool* pool, SparseAttentionScratch& s) {
  std::vector<float> out(static_cast<size_t>(c.n_heads * c.head_dim), -1.0f);
  const SparseAttentionShape p{c.n_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  sparse_attention(p, in.q.data(), in.rows.data(), c.n_idx, in.sink.data(), out.data(), s, {isa, pool});
  return out;
}

std::string name(const Case& c, Isa isa) {
  return std::string(isa_name(isa)) + " H=" + std::to_string(c.n_heads) + " D=" + std::to_string(c.head_dim) +
         " n=" + std::to_string(c.n_idx) + " mask=" + std::to_string(static_cast<int>(c.mask));
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

TEST(KernelSparseAttention, BitIdenticalWhenDotsAreExact) {
  SparseAttentionScratch scratch;
  uint64_t seed = 1;
  for (const Case& c : grid()) {
    const Inputs in = make_inputs(c, Values::kExactDots, seed++);
    const auto want = run_ref(c, in);
    for (Isa isa : isas()) {
      const auto got = run_fast(c, in, isa, nullptr, scratch);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_TRUE(same_bits(got[i], want[i])) << name(c, isa) << " at " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

TEST(KernelSparseAttention, ScalarBitIdenticalAndVectorWithinBound) {
  SparseAttentionScratch scratch;
  uint64_t seed = 1000;
  int64_t total = 0, identical = 0;
  double worst = 0;  // max |Δ| / max_j|row_j[d]| seen, for the failure message
  for (const Case& c : grid()) {
    const Inputs in = make_inputs(c, Values::kGaussian, seed++);
    const auto want = run_ref(c, in);
    // Per element d: the bound's max over the visible rows.
    std::vector<float> row_max(static_cast<size_t>(c.head_dim), 0.0f);
    for (const float* r : in.rows)
      if (r)
        for (int64_t d = 0; d < c.head_dim; ++d)
          row_max[static_cast<size_t>(d)] = std::max(row_max[static_cast<size_t>(d)], std::fabs(r[d]));
    for (Isa isa : isas()) {
      const auto got = run_fast(c, in, isa, nullptr, scratch);
      for (size_t i = 0; i < want.size(); ++i) {
        if (isa == Isa::kScalar) {
          ASSERT_TRUE(same_bits(got[i], want[i])) << name(c, isa) << " at " << i;
          continue;
        }
        const double bound = std::ldexp(static_cast<double>(row_max[i % static_cast<size_t>(c.head_dim)]), -6);
        const double diff = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
        ASSERT_LE(diff, bound) << name(c, isa) << " at " << i << ": " << got[i] << " vs " << want[i];
        if (bound > 0) worst = std::max(worst, diff / bound);
        ++total;
        identical += same_bits(got[i], want[i]) ? 1 : 0;
      }
    }
  }
  // A bf16 probability flips only when an fp32 score error crosses a rounding boundary: rare.
  if (total > 0) {
    EXPECT_GE(static_cast<double>(identical), 0.9 * static_cast<double>(total)) << "worst/bound " << worst;
  }
}

TEST(KernelSparseAttention, ThreadCountChangesNoBit) {
  ThreadPool pool(3);
  SparseAttentionScratch a, b;
  uint64_t seed = 5000;
  for (const Case& c : grid()) {
    if (c.n_heads < 4) continue;
    const Inputs in = make_inputs(c, Values::kGaussian, seed++);
    for (Isa isa : isas()) {
      const auto one = run_fast(c, in, isa, nullptr, a);
      const auto many = run_fast(c, in, isa, &pool, b);
      for (size_t i = 0; i < one.size(); ++i) ASSERT_TRUE(same_bits(one[i], many[i])) << name(c, isa) << " at " << i;
    }
  }
}

TEST(KernelSparseAttention, FullyMaskedListGivesZeros) {
  // No visible row: the reference's denominator is exp(sink + inf) = inf and the output 0.
  const Case c{4, 64, 70, Mask::kAll};
  const Inputs in = make_inputs(c, Values::kGaussian, 9);
  SparseAttentionScratch scratch;
  for (Isa isa : isas())
    for (float v : run_fast(c, in, isa, nullptr, scratch)) EXPECT_TRUE(same_bits(v, 0.0f)) << isa_name(isa);
}

// The online-softmax block of every ISA against the scalar loop (std::exp, std::max, in order), bit for bit, on
// scores the model's blocks rarely show: spreads past exp's underflow (x < −88: glibc's slow path, per lane),
// NaN and ±inf scores, a running max above every score, a head whose scores and max are all −inf, zeros of
// both signs, and every block length 1..64 (the vector loop's masked tails).
TEST(KernelSparseAttention, SoftmaxBlockMatchesTheScalarLoop) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  const int64_t nh = 6;
  for (int64_t n = 1; n <= 64; ++n) {
    std::vector<float> sc(static_cast<size_t>(nh * n));
    for (auto& v : sc) v = nd(rng);
    std::vector<float> m{-INFINITY, 2.0f, 500.0f, -INFINITY, 0.0f, -0.0f};
    // Head 1: NaN and -inf scores; head 3: every score -inf (and m -inf); head 4/5: signed zeros.
    sc[static_cast<size_t>(1 * n + (n - 1))] = std::nanf("");
    if (n > 2) sc[static_cast<size_t>(1 * n + 1)] = -INFINITY;
    for (int64_t j = 0; j < n; ++j) sc[static_cast<size_t>(3 * n + j)] = -INFINITY;
    for (int64_t j = 0; j < n; j += 2) sc[static_cast<size_t>(4 * n + j)] = j % 4 ? -0.0f : 0.0f;
    for (int64_t j = 0; j < n; ++j) sc[static_cast<size_t>(5 * n + j)] = j % 3 ? -0.0f : -1e-3f * static_cast<float>(j);
    if (n > 5) sc[static_cast<size_t>(2 * n + 5)] = INFINITY;  // head 2: +inf score (exp(inf − inf) = NaN)
    auto run = [&](detail::AttnSoftmaxFn fn, std::vector<float>& bmax, std::vector<float>& rescale,
                   std::vector<double>& psum, std::vector<float>& probs) {
      bmax.assign(nh, 7.0f);
      rescale.assign(nh, 7.0f);
      psum.assign(nh, 7.0);
      probs.assign(static_cast<size_t>(nh * n), 7.0f);
      fn(sc.data(), nh, n, m.data(), bmax.data(), rescale.data(), psum.data(), probs.data());
    };
    std::vector<float> bmax0, rescale0, probs0;
    std::vector<double> psum0;
    run(detail::attn_softmax_scalar, bmax0, rescale0, psum0, probs0);
    for (Isa isa : isas()) {
      std::vector<float> bmax, rescale, probs;
      std::vector<double> psum;
      run(detail::attn_tiles_for(isa).softmax, bmax, rescale, psum, probs);
      for (int64_t h = 0; h < nh; ++h) {
        const std::string what = std::string(isa_name(isa)) + " n=" + std::to_string(n) + " h=" + std::to_string(h);
        // The maximum: the same value (a zero maximum may differ in sign; every use is exp of a difference).
        EXPECT_TRUE(bmax[h] == bmax0[h] || (std::isnan(bmax[h]) && std::isnan(bmax0[h]))) << what;
        EXPECT_TRUE(same_bits(rescale[h], rescale0[h])) << what;
        EXPECT_EQ(std::bit_cast<uint64_t>(psum[h]), std::bit_cast<uint64_t>(psum0[h])) << what;
        for (int64_t j = 0; j < n; ++j)
          EXPECT_TRUE(same_bits(probs[h * n + j], probs0[h * n + j])) << what << " j=" << j;
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels
