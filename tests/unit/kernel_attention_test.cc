// unit: kernels::sparse_attention against ref::sparse_attention over a grid of shapes (head_dim off the
// vector widths, lists shorter than, equal to and across the 64-entry softmax blocks, masked rows, fully
// masked blocks and lists). Scalar is bit-identical for any input; when the dots are exact in fp32 every
// vector ISA is bit-identical to the reference with its block P·V taken as an fp32 fused multiply-add chain
// in list order (sparse_attention.h; emulated below), and so to the reference itself wherever that chain
// is exact; for arbitrary floats the vector ISAs stay within the documented bound
// |out − ref| ≤ 2^-6·max_j|row_j[d]| and almost every element is still bit-identical. Thread count
// changes no bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/formats.h"
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

// ref::sparse_attention, step for step, with each block's P·V accumulated as the vector ISAs do: an fp32
// fused multiply-add chain from +0 over the block's visible rows in list order (the reference: double).
// Scores use the reference's double dots, which equal any fp32 order when the dots are exact.
std::vector<float> emulate_fp32_pv(const Case& c, const Inputs& in) {
  const int64_t D = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> out(static_cast<size_t>(c.n_heads * D), -1.0f), s(64), acc(static_cast<size_t>(D)),
      blk(static_cast<size_t>(D));
  for (int64_t h = 0; h < c.n_heads; ++h) {
    const float* qh = in.q.data() + h * D;
    float m = -INFINITY, l = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b0 = 0; b0 < c.n_idx; b0 += 64) {
      const int64_t nb = std::min<int64_t>(64, c.n_idx - b0);
      float bmax = m;
      for (int64_t j = 0; j < nb; ++j) {
        const float* r = in.rows[static_cast<size_t>(b0 + j)];
        double dot = 0.0;
        if (r)
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qh[d]) * static_cast<double>(r[d]);
        s[static_cast<size_t>(j)] = r ? static_cast<float>(dot) * scale : -INFINITY;
        bmax = std::max(bmax, s[static_cast<size_t>(j)]);
      }
      if (bmax == -INFINITY) continue;
      const float rescale = std::exp(m - bmax);
      double psum = 0.0;
      std::fill(blk.begin(), blk.end(), 0.0f);
      for (int64_t j = 0; j < nb; ++j) {
        const float pj = std::exp(s[static_cast<size_t>(j)] - bmax);
        psum += pj;
        const float* r = in.rows[static_cast<size_t>(b0 + j)];
        if (!r) continue;
        const float pb = round_bf16(pj);
        for (int64_t d = 0; d < D; ++d) blk[static_cast<size_t>(d)] = std::fma(pb, r[d], blk[static_cast<size_t>(d)]);
      }
      l = l * rescale + static_cast<float>(psum);
      for (int64_t d = 0; d < D; ++d)
        acc[static_cast<size_t>(d)] = acc[static_cast<size_t>(d)] * rescale + blk[static_cast<size_t>(d)];
      m = bmax;
    }
    l += std::exp(in.sink[static_cast<size_t>(h)] - m);
    for (int64_t d = 0; d < D; ++d) out[static_cast<size_t>(h * D + d)] = round_bf16(acc[static_cast<size_t>(d)] / l);
  }
  return out;
}

// Exact dots over a wide spread of scores (integer q up to ±8 against rows of sixteenths up to ±1/2: every
// partial sum a multiple of 2^-4 below 2^11), so the block's probabilities span tens of binades: the vector
// ISAs give the emulation's bits end to end, scalar the reference's. (The output's bf16 rounding hides most
// fp32-vs-double differences; the tile test below tells the two apart.)
TEST(KernelSparseAttention, VectorIsaIsTheReferenceWithAnFp32PvChain) {
  SparseAttentionScratch scratch;
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> q_int(-8, 8), sixteenths(-8, 8);
  int64_t compared = 0;
  for (const Case& c : grid()) {
    if (c.head_dim < 64 || c.n_idx < 2) continue;
    Inputs in = make_inputs(c, Values::kExactDots, 500 + static_cast<uint64_t>(compared));
    for (auto& v : in.q) v = static_cast<float>(q_int(rng));
    for (auto& v : in.kv) v = static_cast<float>(sixteenths(rng)) / 16.0f;
    const auto want = run_ref(c, in), emulated = emulate_fp32_pv(c, in);
    for (Isa isa : isas()) {
      const auto got = run_fast(c, in, isa, nullptr, scratch);
      const auto& expect = isa == Isa::kScalar ? want : emulated;
      for (size_t i = 0; i < expect.size(); ++i)
        ASSERT_TRUE(same_bits(got[i], expect[i]))
            << name(c, isa) << " at " << i << ": " << got[i] << " vs " << expect[i];
    }
    ++compared;
  }
  EXPECT_GT(compared, 20);
}

// The P·V tile itself (attention_tiles.h AttnPvFn) on Gaussian rows and bf16 probabilities across [2^-40, 1]:
// scalar gives the double sum rounded once, every vector ISA the fp32 fused multiply-add chain from +0 in
// row order, bit for bit, at head counts around the passes of 4 / 8 heads, dims around the 2-vector chunks
// and the masked tail, 1..64 rows; and the two differ in some lanes (so the test tells them apart). The
// block is written, not added to: it starts as garbage.
TEST(KernelSparseAttention, PvTileIsDoubleOnScalarAndAnFp32ChainOnVectorIsas) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-40.0f, 0.0f);
  int64_t lanes = 0, differ = 0;
  for (int64_t n_heads : {1, 3, 4, 8, 9, 13})
    for (int64_t d : {1, 7, 16, 31, 32, 33, 64, 70, 512})
      for (int64_t n_rows : {1, 5, 64}) {
        std::vector<float> probs(static_cast<size_t>(n_heads * n_rows)), kv(static_cast<size_t>(n_rows * d));
        for (float& p : probs) p = round_bf16(std::exp2(expo(rng)));
        for (float& v : kv) v = nd(rng);
        std::vector<const float*> rows;
        for (int64_t j = 0; j < n_rows; ++j) rows.push_back(kv.data() + (n_rows - 1 - j) * d);  // any order
        std::vector<float> dbl(static_cast<size_t>(n_heads * d)), f32(dbl.size());
        for (int64_t h = 0; h < n_heads; ++h)
          for (int64_t i = 0; i < d; ++i) {
            double sd = 0.0;
            float sf = 0.0f;
            for (int64_t j = 0; j < n_rows; ++j) {
              const float p = probs[static_cast<size_t>(h * n_rows + j)], v = rows[static_cast<size_t>(j)][i];
              sd += static_cast<double>(p) * static_cast<double>(v);
              sf = std::fma(p, v, sf);
            }
            dbl[static_cast<size_t>(h * d + i)] = static_cast<float>(sd);
            f32[static_cast<size_t>(h * d + i)] = sf;
          }
        for (size_t i = 0; i < dbl.size(); ++i) differ += same_bits(dbl[i], f32[i]) ? 0 : 1;
        lanes += static_cast<int64_t>(dbl.size());
        for (Isa isa : isas()) {
          std::vector<float> got(dbl.size(), std::nanf("")), want = isa == Isa::kScalar ? dbl : f32;
          detail::attn_tiles_for(isa).pv(probs.data(), n_heads, rows.data(), n_rows, d, got.data());
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << isa_name(isa) << " H=" << n_heads << " d=" << d << " rows=" << n_rows << " at " << i << ": "
                << got[i] << " vs " << want[i];
        }
      }
  EXPECT_GT(differ, lanes / 100) << "fp32 and double P·V barely differ here: the test cannot tell them apart";
}

// The scores tile (attention_tiles.h AttnScoresFn) on Gaussian q and rows, bit for bit: scalar the double dot
// rounded once, then · scale; a vector ISA of W fp32 lanes an fma chain from +0 per lane (lane l takes
// elements l, l + W, ...; the masked tail adds nothing), then the lanes as a halving tree (l + (l + W/2),
// then + W/4, ... + 1), then · scale — at head counts around the 4-head passes and row counts around the
// 4 × 4 tiles, whose 16 sums AVX-512 reduces in one transposed tree. The two orders differ in some scores
// (so the test tells a tree from another).
TEST(KernelSparseAttention, ScoresTileIsAnFp32LaneChainAndItsTree) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float scale = 0.0441941738f;  // 1/sqrt(512)
  int64_t compared = 0, differ = 0;
  for (int64_t n_heads : {1, 3, 4, 5, 8})
    for (int64_t d : {1, 7, 16, 33, 64, 512})
      for (int64_t n_rows : {1, 2, 3, 4, 5, 9}) {
        std::vector<float> q(static_cast<size_t>(n_heads * d)), kv(static_cast<size_t>(n_rows * d));
        for (float& v : q) v = nd(rng);
        for (float& v : kv) v = nd(rng) * 3.0f;
        std::vector<const float*> rows;
        for (int64_t j = 0; j < n_rows; ++j) rows.push_back(kv.data() + (n_rows - 1 - j) * d);
        auto lane_tree = [&](int64_t h, int64_t j, int w) {
          float lane[16] = {};
          for (int64_t i = 0; i < d; ++i)
            lane[i % w] = std::fma(q[static_cast<size_t>(h * d + i)], rows[static_cast<size_t>(j)][i], lane[i % w]);
          for (int half = w / 2; half >= 1; half /= 2)
            for (int l = 0; l < half; ++l) lane[l] = lane[l] + lane[l + half];
          return lane[0] * scale;
        };
        for (Isa isa : isas()) {
          const int w = isa == Isa::kScalar ? 0 : isa == Isa::kAvx2 ? 8 : 16;
          std::vector<float> got(static_cast<size_t>(n_heads * n_rows), std::nanf(""));
          detail::attn_tiles_for(isa).scores(q.data(), n_heads, d, rows.data(), n_rows, scale, got.data());
          for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t j = 0; j < n_rows; ++j) {
              double dot = 0.0;
              for (int64_t i = 0; i < d; ++i)
                dot += static_cast<double>(q[static_cast<size_t>(h * d + i)]) * rows[static_cast<size_t>(j)][i];
              const float dbl = static_cast<float>(dot) * scale;
              const float want = w == 0 ? dbl : lane_tree(h, j, w);
              if (w == 16) {
                ++compared;
                differ += same_bits(want, lane_tree(h, j, 8)) ? 0 : 1;
              }
              ASSERT_TRUE(same_bits(got[static_cast<size_t>(h * n_rows + j)], want))
                  << isa_name(isa) << " H=" << n_heads << " d=" << d << " rows=" << n_rows << " head " << h << " row "
                  << j << ": " << got[static_cast<size_t>(h * n_rows + j)] << " vs " << want;
            }
        }
      }
  if (compared > 0) {
    EXPECT_GT(differ, compared / 10) << "16- and 8-lane trees barely differ: the test cannot tell trees apart";
  }
}

// The output step (attention_tiles.h AttnOutputFn) of every ISA against the scalar loop bf16(acc / l), bit
// for bit: NaNs with payloads, infinities, ±0, subnormals, values whose quotient overflows or vanishes, and
// denominators 1, 0.37, 2^-120, +0 (quotients ±inf / NaN), +inf and NaN, at lengths off the 8 / 16 lanes.
TEST(KernelSparseAttention, OutputStepIsTheScalarLoopOnEveryIsa) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // NaNs whose payload fills the low half (a rounding that ignored NaN would carry them into ±0 / −inf).
  const float specials[] = {std::bit_cast<float>(0x7FA00001u),
                            std::bit_cast<float>(0xFFC12345u),
                            std::bit_cast<float>(0x7FFFFFFFu),
                            std::bit_cast<float>(0xFFFF8001u),
                            INFINITY,
                            -INFINITY,
                            0.0f,
                            -0.0f,
                            std::ldexp(1.0f, -140),
                            3e38f,
                            -1e-38f};
  for (int64_t d : {1, 7, 16, 17, 100, 512})
    for (float l : {1.0f, 0.37f, std::ldexp(1.0f, -120), 0.0f, INFINITY, std::nanf("")}) {
      std::vector<float> acc(static_cast<size_t>(d));
      for (size_t i = 0; i < acc.size(); ++i)
        acc[i] = i % 5 == 4 ? specials[(i / 5) % std::size(specials)] : nd(rng) * 8.0f;
      std::vector<float> want(acc.size());
      for (size_t i = 0; i < acc.size(); ++i) want[i] = round_bf16(acc[i] / l);
      for (Isa isa : isas()) {
        std::vector<float> got(acc.size() + 1, 7.0f);  // one past the end: must stay untouched
        detail::attn_tiles_for(isa).output(acc.data(), d, l, got.data());
        for (size_t i = 0; i < acc.size(); ++i)
          ASSERT_TRUE(same_bits(got[i], want[i]))
              << isa_name(isa) << " d=" << d << " l=" << l << " at " << i << ": " << got[i] << " vs " << want[i];
        EXPECT_EQ(got[acc.size()], 7.0f) << isa_name(isa) << " wrote past d=" << d;
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
