// unit: kernels::compress_pool against ref::compress_pool (spec §2.5 gated pooling). The kernel runs the
// reference's per-channel sequence with channels as vector lanes, so the output must match bit for bit on
// every ISA: candidate counts of the model's layouts (r = 4 overlap → 8, r = 128 → 128) and odd ones,
// channel counts around the 16-lane blocks, absent (−inf) candidates, a channel where only one candidate
// is present, ties at the maximum, and scores spread wide enough that any reordering of the sums shows.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/compress_pool.h"
#include "ops/reference/compressor.h"
#include "kernel_isas.h"

namespace dsv4::kernels {
namespace {

void expect_matches_reference(const std::vector<float>& kv, const std::vector<float>& sc, int64_t n_cand, int64_t dc,
                              const char* what) {
  std::vector<float> want(static_cast<size_t>(dc));
  ref::compress_pool(kv.data(), sc.data(), n_cand, dc, want.data());
  std::vector<const float*> kv_rows, sc_rows;
  for (int64_t c = 0; c < n_cand; ++c) {
    kv_rows.push_back(kv.data() + c * dc);
    sc_rows.push_back(sc.data() + c * dc);
  }
  for (Isa isa : isas()) {
    std::vector<float> got(static_cast<size_t>(dc), NAN);
    compress_pool(kv_rows.data(), sc_rows.data(), n_cand, dc, got.data(), isa);
    for (int64_t ch = 0; ch < dc; ++ch)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(ch)]),
                std::bit_cast<uint32_t>(want[static_cast<size_t>(ch)]))
          << what << " isa " << isa_name(isa) << " n_cand " << n_cand << " dc " << dc << " channel " << ch << ": "
          << got[static_cast<size_t>(ch)] << " vs " << want[static_cast<size_t>(ch)];
  }
}

TEST(KernelCompressPool, BitIdenticalToReferenceOverShapes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n_cand : {1, 2, 3, 4, 8, 9, 128})
    for (int64_t dc : {1, 7, 15, 16, 17, 33, 128, 512})
      for (float spread : {1.0f, 30.0f}) {
        std::vector<float> kv(static_cast<size_t>(n_cand * dc)), sc(kv.size());
        for (auto& v : kv) v = nd(rng) * 4.0f;
        for (auto& v : sc) v = nd(rng) * spread;
        expect_matches_reference(kv, sc, n_cand, dc, "random");
      }
}

TEST(KernelCompressPool, AbsentCandidatesAndTies) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n_cand = 8, dc = 40;
  std::vector<float> kv(static_cast<size_t>(n_cand * dc)), sc(kv.size());
  for (auto& v : kv) v = nd(rng);
  for (auto& v : sc) v = nd(rng);
  // The first half of the candidates absent everywhere (the overlap layout's block −1).
  std::vector<float> half = sc;
  for (int64_t i = 0; i < 4 * dc; ++i) half[static_cast<size_t>(i)] = -INFINITY;
  expect_matches_reference(kv, half, n_cand, dc, "block -1 absent");
  // One present candidate per channel (weight exactly 1), and exact ties at the maximum.
  std::vector<float> one(sc.size(), -INFINITY), ties = sc;
  for (int64_t ch = 0; ch < dc; ++ch) {
    one[static_cast<size_t>((ch % n_cand) * dc + ch)] = nd(rng);
    ties[static_cast<size_t>(2 * dc + ch)] = ties[static_cast<size_t>(5 * dc + ch)] = 3.5f;
  }
  expect_matches_reference(kv, one, n_cand, dc, "one present");
  expect_matches_reference(kv, ties, n_cand, dc, "ties");
}

}  // namespace
}  // namespace dsv4::kernels
