// tests/model: the forward pass on a `make-tiny` checkpoint with other shapes than the golden one
// (hidden 1024, 8 heads of 256, 4 output groups, window 64, CSA/HCA r=8 layers): the checkpoint passes
// the loader, and decode / chunked prefill reproduce the one-shot prefill bit for bit — also for
// prefixes shorter than the window, where the 64-block partition of the index list matters.
#include <gtest/gtest.h>

#include <random>

#include "golden_case.h"
#include "model/make_tiny.h"
#include "model/model.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

TEST(MakeTinyModel, DecodeAndChunksEqualPrefillOnOtherShapes) {
  auto cfg = make_tiny_preset("small");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  ModelConfig c = *cfg;
  // Fewer layers and a small vocabulary keep the test quick; every attention kind stays.
  c.vocab_size = 1024;
  c.n_layers = 3;
  c.n_hash_layers = 1;
  c.compress_ratios = {4, 8, 0, 0};
  c.index_topk = 8;  // saturates within the run
  c.n_activated_experts = 2;
  TempDir dir;
  MakeTinyOptions opt;
  opt.seed = 11;
  auto rep = make_tiny_checkpoint(c, dir.path(), opt);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  // The cpu kernels without AMX (AVX-512 requested, or the best below it): every output is one fixed
  // sequence of operations whatever the row count, so exactness holds as on the reference.
  ModelOptions mo;
  mo.isa = kernels::Isa::kAvx512;
  mo.threads = 2;
  auto model = Model::load(dir.path(), mo);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Model& m = **model;
  EXPECT_EQ(m.config().window_size, 64);

  std::mt19937 rng(3);
  std::vector<int32_t> ids = {0};
  for (int i = 1; i < 72; ++i)  // crosses the 64-window, r=4/8 blocks, top-k saturation
    ids.push_back(static_cast<int32_t>(2 + rng() % 1022));
  const auto n = static_cast<int64_t>(ids.size());
  const auto one = run_sequence(m, ids, n, n);
  ASSERT_EQ(one.logits.size(), static_cast<size_t>(n * 1024));
  for (float v : one.logits) ASSERT_TRUE(std::isfinite(v));
  const auto dec = run_sequence(m, ids, 37, 37);
  const auto chunk = run_sequence(m, ids, n, 13);
  EXPECT_EQ(dec.logits, one.logits);
  EXPECT_EQ(chunk.logits, one.logits);

  // MTP in one call equals MTP fed one position at a time.
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i + 1 < n; ++i) batch.push_back({0, static_cast<int32_t>(i), ids[static_cast<size_t>(i + 1)], true});
  auto s1 = m.new_sequence(), s2 = m.new_sequence();
  SequenceState* st1[] = {s1.get()};
  SequenceState* st2[] = {s2.get()};
  const int64_t per = m.config().hc_mult * m.config().dim;  // one position's streams
  std::vector<float> all, step, stepped;
  ASSERT_TRUE(m.forward_mtp(batch, std::span<const float>(one.streams.data(), static_cast<size_t>((n - 1) * per)), st1, &all).is_ok());
  for (int64_t i = 0; i + 1 < n; ++i) {
    ASSERT_TRUE(m.forward_mtp(std::span<const BatchToken>(&batch[static_cast<size_t>(i)], 1),
                              std::span<const float>(one.streams.data() + i * per, static_cast<size_t>(per)), st2, &step)
                    .is_ok());
    stepped.insert(stepped.end(), step.begin(), step.end());
  }
  EXPECT_EQ(stepped, all);
}

}  // namespace
}  // namespace dsv4::test
