// unit: the cost model against the spec's own numbers: §1 size check (≈284B total, ≈13B active), §4
// KV sizes at 1M (CSA 21 × 262144 × (512+128) × 2 B, HCA ≈0.17 GB, 584-byte FP8 rows) and hand-derived
// FLOP increments.
#include <gtest/gtest.h>

#include "io/model_config.h"
#include "model/cost_model.h"
#include "test_util.h"

namespace dsv4 {
namespace {

constexpr int64_t k1M = 1 << 20;

ModelConfig official() {
  auto cfg = load_model_config(test::shared_dir() / "spec/official/config.json");
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  return *cfg;
}

TEST(CostModel, OfficialParamsMatchAdvertisedSize) {
  const ParamCost p = param_cost(official());
  EXPECT_NEAR(static_cast<double>(p.params_total), 284e9, 0.02 * 284e9);
  EXPECT_NEAR(static_cast<double>(p.params_active_per_token), 13e9, 0.08 * 13e9);
  EXPECT_EQ(p.params_embedding, 129280ull * 4096);
  // 43 layers × 256 experts × (w1, w3, w2 of 2048 × 4096).
  EXPECT_EQ(p.params_routed_experts, 43ull * 256 * 3 * 2048 * 4096);
  // Active = total minus the 250 unchosen experts of each layer and the embedding table.
  EXPECT_EQ(p.params_total - p.params_active_with_embedding, 43ull * 250 * 3 * 2048 * 4096);
  EXPECT_EQ(p.params_active_with_embedding - p.params_active_per_token, p.params_embedding);
  // The MTP block: one more layer's experts + attention + e/h_proj; roughly 1/43 of the backbone.
  EXPECT_GT(p.params_mtp, 6'000'000'000ull);
  EXPECT_LT(p.params_mtp, 7'000'000'000ull);
  EXPECT_EQ(p.bytes_total, 159609485896ull);  // official index metadata.total_size
  uint64_t sum = 0;
  for (const auto& [dt, b] : p.bytes_by_dtype) sum += b;
  EXPECT_EQ(sum, p.bytes_total);
  EXPECT_EQ(p.bytes_by_dtype.at("I64"), 3ull * 129280 * 6 * 8);
}

TEST(CostModel, KvBytesAt1MMatchSpecSection4) {
  const ModelConfig cfg = official();
  EXPECT_EQ(kv_row_bytes(cfg, KvLayout::kFp8), 584u);
  EXPECT_EQ(kv_row_bytes(cfg, KvLayout::kBf16Reference), 1024u);
  const KvCost bf = kv_cost(cfg, k1M, KvLayout::kBf16Reference);
  // CSA: 21 layers × 262144 entries × (512 + 128) × 2 B; HCA: 20 × 8192 × 512 × 2 B.
  EXPECT_EQ(bf.indexer_bytes + bf.compressed_bytes, 21ull * 262144 * 640 * 2 + 20ull * 8192 * 1024);
  EXPECT_EQ(bf.indexer_bytes, 21ull * 262144 * 256);
  // Window rings: 43 backbone layers + the MTP layer, 128 rows each.
  EXPECT_EQ(bf.window_bytes, 44ull * 128 * 1024);
  // Partial-block state: CSA main [8,1024]×2 + indexer [8,256]×2, HCA [128,512]×2, all f32.
  EXPECT_EQ(bf.state_bytes, 21ull * (2 * 8 * 1024 * 4 + 2 * 8 * 256 * 4) + 20ull * (2 * 128 * 512 * 4));
  EXPECT_DOUBLE_EQ(bf.bytes_per_token, 21.0 * (1024 + 256) / 4 + 20.0 * 1024 / 128);
  const KvCost f8 = kv_cost(cfg, k1M, KvLayout::kFp8);
  EXPECT_EQ(f8.compressed_bytes, (21ull * 262144 + 20ull * 8192) * 584);
  EXPECT_EQ(f8.indexer_bytes, 21ull * 262144 * (64 + 4));
  EXPECT_LT(f8.bytes_at_context, bf.bytes_at_context);
  // Growth is linear once the windows are full.
  const KvCost a = kv_cost(cfg, 4096, KvLayout::kBf16Reference), b = kv_cost(cfg, 8192, KvLayout::kBf16Reference);
  EXPECT_DOUBLE_EQ(static_cast<double>(b.bytes_at_context - a.bytes_at_context), 4096 * a.bytes_per_token);
}

TEST(CostModel, FlopsFollowTheSparsityPattern) {
  const ModelConfig cfg = official();
  // Past the top-k saturation (512 × 4 tokens) and a multiple of 128: four more tokens add exactly one
  // compressed entry per CSA layer, scored by 64 index heads (2·128 + 2 FLOPs each) and nothing else
  // except HCA entries (none: 4 < 128) — attention over CSA is saturated at window + 512.
  const int64_t n = 65536;
  const FlopCost f0 = flops_per_token(cfg, n), f1 = flops_per_token(cfg, n + 4);
  EXPECT_DOUBLE_EQ(f1.indexer - f0.indexer, 21.0 * 64 * (2 * 128 + 2));
  EXPECT_DOUBLE_EQ(f1.attention, f0.attention);
  EXPECT_DOUBLE_EQ(f1.moe, f0.moe);
  // 128 more tokens: one more HCA entry in each of the 20 HCA layers, 64 heads × 4 × 512 FLOPs.
  const FlopCost f2 = flops_per_token(cfg, n + 128);
  EXPECT_DOUBLE_EQ(f2.attention - f0.attention, 20.0 * 64 * 4 * 512);
  // The matmul part is about 2 × active compute params (±10%: attention/indexer/mHC are not params).
  const ParamCost p = param_cost(cfg);
  const double dense = f0.projections + f0.moe + f0.head + f0.compressors;
  EXPECT_NEAR(dense, 2.0 * p.params_active_per_token, 0.1 * 2.0 * p.params_active_per_token);
  // Head: 2 × 4096 × 129280.
  EXPECT_DOUBLE_EQ(f0.head, 2.0 * 4096 * 129280);
}

TEST(CostModel, V32ModelIsSelfConsistent) {
  const V32Config v;
  const KvCost bf = v32_kv_cost(v, k1M, KvLayout::kBf16Reference);
  EXPECT_DOUBLE_EQ(bf.bytes_per_token, 61.0 * ((512 + 64) * 2 + 128 + 4));
  const KvCost f8 = v32_kv_cost(v, k1M, KvLayout::kFp8);
  EXPECT_DOUBLE_EQ(f8.bytes_per_token, 61.0 * (656 + 132));
  // Indexer scoring grows with every token (token-level selection), attention saturates at 2048.
  const FlopCost a = v32_flops_per_token(v, 100000), b = v32_flops_per_token(v, 100001);
  EXPECT_DOUBLE_EQ(b.indexer - a.indexer, 61.0 * 64 * (2 * 128 + 2));  // all 61 layers have an indexer
  EXPECT_DOUBLE_EQ(b.attention, a.attention);
  // Matmuls ≈ 2 × 37B activated params (V3's published figure), within 10%.
  EXPECT_NEAR(a.projections + a.moe + a.head, 2 * 37e9, 0.1 * 2 * 37e9);
}

TEST(CostModel, TinyConfigIsSmall) {
  auto cfg = load_model_config(test::shared_dir() / "golden/tiny/checkpoint");
  ASSERT_TRUE(cfg.is_ok());
  const ParamCost p = param_cost(*cfg);
  EXPECT_EQ(p.n_tensors, 585u);
  EXPECT_EQ(p.bytes_total, 13258740u);  // the golden index's total_size
  EXPECT_GT(p.params_total, p.params_active_per_token);
}

}  // namespace
}  // namespace dsv4
