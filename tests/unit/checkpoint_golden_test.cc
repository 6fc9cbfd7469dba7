// unit: the loader opens DeepSeek-format golden checkpoints (sharded, with index) and their configs.
#include <gtest/gtest.h>

#include "core/formats.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace dsv4 {
namespace {

TEST(GoldenCheckpoint, OpensShardedCheckpointLazily) {
  const auto dir = test::shared_dir() / "golden/tiny/checkpoint";
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->tensors().size(), 585u);
  EXPECT_EQ(ck->shard_paths().size(), 2u);
  EXPECT_EQ(ck->total_bytes(), 13258740u);  // index metadata.total_size
  const TensorInfo* wq = ck->find("layers.0.attn.wq_a.weight");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->dtype, DType::kF8E4M3);
  EXPECT_EQ(wq->shape, (std::vector<uint64_t>{128, 256}));
  const TensorInfo* tid = ck->find("layers.0.ffn.gate.tid2eid");
  ASSERT_NE(tid, nullptr);
  EXPECT_EQ(tid->dtype, DType::kI64);
  EXPECT_EQ(ck->find("no.such.tensor"), nullptr);
}

// The loading progress hook: each tensor counts once, on its first lookup, so the reported bytes grow
// monotonically to total_bytes() when every tensor has been reached (repeat lookups add nothing).
TEST(GoldenCheckpoint, ProgressCountsEachTensorOnceUpToTheTotal) {
  auto ck = Checkpoint::open(test::shared_dir() / "golden/tiny/checkpoint");
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  const TensorInfo* before = ck->find("embed.weight");  // no hook yet: not counted
  ASSERT_NE(before, nullptr);
  std::vector<uint64_t> seen;
  ck->set_progress([&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, 13258740u);
    seen.push_back(done);
  });
  ASSERT_NE(ck->find("layers.0.attn.wq_a.weight"), nullptr);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], ck->find("layers.0.attn.wq_a.weight")->data.size());
  EXPECT_EQ(seen.size(), 1u) << "a repeated lookup is not progress";
  EXPECT_EQ(ck->find("no.such.tensor"), nullptr);
  for (const TensorInfo& t : ck->tensors()) ck->find(t.name);
  ASSERT_EQ(seen.size(), ck->tensors().size());
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.back(), ck->total_bytes());
  ck->set_progress({});
  ck->find("embed.weight");
  EXPECT_EQ(seen.size(), ck->tensors().size()) << "a cleared hook reports nothing";
}

TEST(GoldenCheckpoint, ConfigParses) {
  auto cfg = load_model_config(test::shared_dir() / "golden/tiny/checkpoint");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->vocab_size, 1024);
  EXPECT_EQ(cfg->dim, 256);
  EXPECT_EQ(cfg->n_layers, 6);
  EXPECT_EQ(cfg->n_mtp_layers, 1);
  EXPECT_EQ(cfg->window_size, 16);
  EXPECT_EQ(cfg->compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 8, 0, 0}));
  EXPECT_EQ(cfg->attention_kind(1), AttentionKind::kCompressedSparse);
  EXPECT_EQ(cfg->attention_kind(4), AttentionKind::kHeavilyCompressed);
  EXPECT_EQ(cfg->original_seq_len, 65536);
  EXPECT_EQ(cfg->index_topk, 8);
}

TEST(OfficialConfig, ParsesV4Flash) {
  auto cfg = load_model_config(test::shared_dir() / "spec/official/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->n_layers, 43);
  EXPECT_EQ(cfg->compress_ratios.size(), 44u);
  EXPECT_EQ(cfg->n_hash_layers, 3);
  EXPECT_EQ(cfg->index_topk, 512);
}

}  // namespace
}  // namespace dsv4
