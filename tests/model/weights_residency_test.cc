// tests/model: the model computes the same logits whatever the weights' residency — a huge-page copy,
// a populated mapping or a lazy one (ModelOptions::weights) — bit for bit, on the golden tiny model; and
// the default (auto, this host's real memory figures) loads in the mode the policy names and meets the
// golden prefill logits (golden/README.md thresholds).
#include <gtest/gtest.h>

#include <cstring>

#include "io/npy.h"
#include "io/residency_policy.h"
#include "golden_metrics.h"
#include "model/model.h"
#include "golden_case.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::filesystem::path tiny_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

struct PrefillRun {
  ResidencyChoice residency;
  std::vector<float> logits;  // [n_tokens, vocab]
};

PrefillRun prefill(Residency residency, bool populate, const std::vector<int32_t>& ids) {
  ModelOptions o;
  o.threads = 2;
  o.isa = kernels::Isa::kAvx512;  // batch-invariant below AMX; every run uses the same kernels
  o.weights.residency = residency;
  o.weights.populate = populate;
  o.weights.mem_available = [] { return std::optional<uint64_t>(64ull << 30); };
  auto m = Model::load(tiny_dir(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return {};
  auto s = (*m)->new_sequence();
  SequenceState* st[] = {s.get()};
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i) b.push_back({0, static_cast<int32_t>(i), ids[i], true});
  PrefillRun r;
  r.residency = (*m)->weights().checkpoint->residency();
  EXPECT_TRUE((*m)->forward(b, st, &r.logits).is_ok());
  return r;
}

TEST(WeightsResidency, CopyAndMmapGiveIdenticalLogits) {
  const std::vector<int32_t> ids = test::golden_tokens(96);  // crosses the sliding window and several compressed blocks
  ASSERT_EQ(ids.size(), 96u);
  const PrefillRun copy = prefill(Residency::kCopy, true, ids);
  const PrefillRun mapped = prefill(Residency::kMmap, true, ids);
  const PrefillRun lazy = prefill(Residency::kMmap, false, ids);
  EXPECT_EQ(copy.residency.resolved, Residency::kCopy);
  EXPECT_EQ(mapped.residency.resolved, Residency::kMmap);
  EXPECT_TRUE(mapped.residency.populate);
  EXPECT_FALSE(lazy.residency.populate);
  ASSERT_EQ(copy.logits.size(), ids.size() * 1024);
  ASSERT_EQ(mapped.logits.size(), copy.logits.size());
  ASSERT_EQ(lazy.logits.size(), copy.logits.size());
  EXPECT_EQ(std::memcmp(copy.logits.data(), mapped.logits.data(), copy.logits.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(copy.logits.data(), lazy.logits.data(), copy.logits.size() * sizeof(float)), 0);
}

// The default options, nothing injected: auto decides from this host's MemAvailable, lock limit and reclaim.
TEST(WeightsResidency, AutoLoadsInThePolicysModeAndMeetsTheGoldens) {
  ModelOptions o;
  o.threads = 2;
  o.isa = kernels::Isa::kAvx512;
  auto m = Model::load(tiny_dir(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const ResidencyChoice& c = (*m)->weights().checkpoint->residency();
  EXPECT_EQ(c.requested, Residency::kAuto);
  // The same facts through the policy give the mode the loader took (and the reason it reports).
  auto want = decide_residency({Residency::kAuto, true, 0.75},
                               {c.file_bytes, c.mem_available, lockable_bytes(), c.proactive_reclaim});
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(c.resolved, want->resolved);
  EXPECT_EQ(c.populate, want->populate);
  EXPECT_EQ(c.reason, want->reason);
  EXPECT_FALSE(c.reason.empty());
  // The startup line (serve prints it): the mode as it turned out, then the same reason.
  const std::string summary = (*m)->weights_summary();
  EXPECT_EQ(summary.rfind(resident_mode_name(c), 0), 0u) << summary;
  EXPECT_NE(summary.find(c.reason), std::string::npos) << summary;
  // How the bytes ended up agrees with the decision, all of them in memory.
  EXPECT_EQ(c.resolved == Residency::kCopy ? c.copied_bytes : c.mapped_bytes, c.file_bytes);
  if (c.resolved == Residency::kCopy || c.populate) {
    EXPECT_EQ((*m)->weights().checkpoint->resident_bytes(), c.file_bytes);
  }

  const std::vector<int32_t> ids = test::golden_tokens(1u << 20);  // all of them
  auto golden = read_npy(test::shared_dir() / "golden/tiny/golden/prefill_logits.npy");
  ASSERT_TRUE(golden.is_ok()) << golden.status().to_string();
  ASSERT_FALSE(ids.empty());
  auto s = (*m)->new_sequence();
  SequenceState* st[] = {s.get()};
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i) b.push_back({0, static_cast<int32_t>(i), ids[i], true});
  std::vector<float> logits;
  ASSERT_TRUE((*m)->forward(b, st, &logits).is_ok());
  const int64_t vocab = (*m)->config().vocab_size;
  ASSERT_EQ(logits.size(), ids.size() * static_cast<size_t>(vocab));
  const auto stats = test::compare_logits(logits, golden->to_f32(), vocab, static_cast<int64_t>(ids.size()));
  EXPECT_GE(stats.top1, 0.70);  // golden/README.md: gross-breakage floors, as golden_end_to_end_test
  EXPECT_LE(stats.mean_abs, 0.25);
  // And bit for bit what an explicit copy computes (the same kernels, only the bytes' home differs).
  const PrefillRun copy = prefill(Residency::kCopy, true, ids);
  ASSERT_EQ(copy.logits.size(), logits.size());
  EXPECT_EQ(std::memcmp(copy.logits.data(), logits.data(), logits.size() * sizeof(float)), 0);
}

TEST(WeightsResidency, ModelsDefaultToAutoAndTheReferenceBackendMaps) {
  auto m = Model::load(tiny_dir());
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ((*m)->weights().checkpoint->residency().requested, Residency::kAuto);
  // The reference backend decodes every linear to fp32 at load: a copy would only add a read.
  ModelOptions o;
  o.backend = Backend::kReference;
  o.weights.mem_available = [] { return std::optional<uint64_t>(64ull << 30); };
  auto r = Model::load(tiny_dir(), o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)->weights().checkpoint->residency().resolved, Residency::kMmap);
}

}  // namespace
}  // namespace dsv4
