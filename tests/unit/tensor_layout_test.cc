// unit: the spec §3 tensor table against the golden checkpoint (585 tensors, official format) and the
// official index's published totals; check_checkpoint reports every kind of deviation.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/tensor_layout.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::filesystem::path golden_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

ModelConfig golden_config() {
  auto cfg = load_model_config(golden_dir());
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  return *cfg;
}

TEST(TensorLayout, MatchesGoldenCheckpointExactly) {
  const ModelConfig cfg = golden_config();
  auto ck = Checkpoint::open(golden_dir());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  const auto table = expected_tensors(cfg);
  ASSERT_EQ(table.size(), 585u);
  std::set<std::string> names;
  uint64_t bytes = 0;
  for (const auto& t : table) {
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
    const TensorInfo* got = ck->find(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->dtype, t.dtype) << t.name;
    EXPECT_EQ(got->shape, t.shape) << t.name;
    EXPECT_EQ(got->data.size(), t.n_bytes()) << t.name;
    bytes += t.n_bytes();
  }
  EXPECT_EQ(bytes, ck->total_bytes());
  const CheckpointCheck r = check_checkpoint(cfg, *ck);
  EXPECT_TRUE(r.ok()) << r.to_status("golden").to_string();
  EXPECT_EQ(r.n_expected, 585u);
  EXPECT_EQ(r.n_present, 585u);
}

TEST(TensorLayout, QuantizedWeightIsFollowedByItsScale) {
  const auto table = expected_tensors(golden_config());
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& t = table[i];
    if (t.format != TensorFormat::kFp8Block && t.format != TensorFormat::kFp4Packed) continue;
    ASSERT_LT(i + 1, table.size());
    const auto& s = table[i + 1];
    const std::string stem = t.name.substr(0, t.name.size() - std::string(".weight").size());
    EXPECT_EQ(s.name, stem + ".scale");
    EXPECT_EQ(s.format, TensorFormat::kScale);
    if (t.format == TensorFormat::kFp8Block)
      EXPECT_EQ(s.shape, (std::vector<uint64_t>{(t.shape[0] + 127) / 128, (t.shape[1] + 127) / 128}));
    else  // packed FP4: [o, i/2] weight, [o, i/32] scale
      EXPECT_EQ(s.shape, (std::vector<uint64_t>{t.shape[0], t.shape[1] * 2 / 32}));
  }
}

// The official April index: 69,187 tensors whose bytes sum to metadata.total_size 159,609,485,896
// (golden/README.md "Facts for the engine" 2). An independent check of every shape formula at full size.
TEST(TensorLayout, OfficialConfigMatchesPublishedIndexTotals) {
  auto cfg = load_model_config(test::shared_dir() / "spec/official/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  size_t n = 0;
  uint64_t bytes = 0;
  std::map<std::string, std::pair<DType, std::vector<uint64_t>>> by_name;
  for_each_expected_tensor(*cfg, [&](const ExpectedTensor& t) {
    ++n;
    bytes += t.n_bytes();
    if (t.layer == 2 || t.layer == 3 || t.layer == 0 || t.layer == -1) by_name[t.name] = {t.dtype, t.shape};
  });
  EXPECT_EQ(n, 69187u);
  EXPECT_EQ(bytes, 159609485896ull);
  // Spot checks against the spec §3 table.
  using S = std::vector<uint64_t>;
  EXPECT_EQ(by_name["layers.2.attn.wq_b.scale"].second, (S{256, 8}));
  EXPECT_EQ(by_name["layers.2.attn.wo_a.weight"].second, (S{8192, 4096}));
  EXPECT_EQ(by_name["layers.2.attn.wo_b.scale"].second, (S{32, 64}));
  EXPECT_EQ(by_name["layers.2.attn.compressor.wkv.weight"].second, (S{1024, 4096}));
  EXPECT_EQ(by_name["layers.3.attn.compressor.wkv.weight"].second, (S{512, 4096}));
  EXPECT_EQ(by_name["layers.3.attn.compressor.ape"].second, (S{128, 512}));
  EXPECT_EQ(by_name["layers.2.attn.indexer.compressor.ape"].second, (S{4, 256}));
  EXPECT_EQ(by_name["layers.2.attn.indexer.wq_b.scale"].second, (S{64, 8}));
  EXPECT_EQ(by_name["layers.0.ffn.gate.tid2eid"], std::make_pair(DType::kI64, S{129280, 6}));
  EXPECT_EQ(by_name["layers.3.ffn.experts.255.w2.weight"], std::make_pair(DType::kI8, S{4096, 1024}));
  EXPECT_EQ(by_name["layers.3.ffn.experts.255.w2.scale"].second, (S{4096, 64}));
  EXPECT_EQ(by_name["layers.3.ffn.shared_experts.w1.scale"].second, (S{16, 32}));
  EXPECT_EQ(by_name.count("layers.3.attn.indexer.wq_b.weight"), 0u);  // HCA: no indexer
  EXPECT_EQ(by_name.count("layers.0.attn.compressor.ape"), 0u);       // SWA: no compressor
  EXPECT_EQ(by_name.count("layers.3.ffn.gate.tid2eid"), 0u);          // hash layers are 0..2
}

TEST(TensorLayout, DsparkVariantFollowsSpec) {
  ModelConfig cfg = golden_config();
  // spec §6 DSpark variant of the tiny config.
  cfg.n_mtp_layers = 2;
  cfg.compress_ratios = {0, 4, 128, 4, 8, 0, 0, 0};
  cfg.dspark_block_size = 3;
  cfg.dspark_target_layer_ids = {3, 4, 5};
  cfg.dspark_markov_rank = 16;
  cfg.dspark_noise_token_id = 1023;
  ASSERT_TRUE(validate_model_config(cfg, "dspark").is_ok());
  std::map<std::string, std::pair<DType, std::vector<uint64_t>>> t;
  for_each_expected_tensor(cfg, [&](const ExpectedTensor& e) { t[e.name] = {e.dtype, e.shape}; });
  using S = std::vector<uint64_t>;
  EXPECT_EQ(t["mtp.0.main_proj.weight"], std::make_pair(DType::kF8E4M3, S{256, 768}));
  EXPECT_EQ(t["mtp.0.main_proj.scale"].second, (S{2, 6}));
  EXPECT_EQ(t["mtp.0.main_norm.weight"].second, (S{256}));
  EXPECT_EQ(t["mtp.1.markov_head.markov_w1.weight"], std::make_pair(DType::kBF16, S{1024, 16}));
  EXPECT_EQ(t["mtp.1.markov_head.markov_w2.weight"].second, (S{1024, 16}));
  EXPECT_EQ(t["mtp.1.confidence_head.proj.weight"].second, (S{1, 272}));
  EXPECT_EQ(t["mtp.1.hc_head_fn"].second, (S{4, 1024}));
  EXPECT_EQ(t["mtp.1.norm.weight"].second, (S{256}));
  EXPECT_EQ(t["mtp.1.ffn.gate.bias"].second, (S{8}));
  EXPECT_EQ(t.count("mtp.0.e_proj.weight"), 0u);
  EXPECT_EQ(t.count("mtp.0.enorm.weight"), 0u);
  EXPECT_EQ(t.count("mtp.0.hc_head_fn"), 0u);  // only the last stage owns the head
  EXPECT_EQ(t.count("mtp.1.main_proj.weight"), 0u);
  EXPECT_EQ(t.count("mtp.1.attn.wkv.weight"), 1u);
}

TEST(TensorLayout, Fp8ExpertsUseBlockScales) {
  ModelConfig cfg = golden_config();
  cfg.expert_dtype = "fp8";
  std::map<std::string, std::pair<DType, std::vector<uint64_t>>> t;
  for_each_expected_tensor(cfg, [&](const ExpectedTensor& e) { t[e.name] = {e.dtype, e.shape}; });
  using S = std::vector<uint64_t>;
  EXPECT_EQ(t["layers.0.ffn.experts.3.w1.weight"], std::make_pair(DType::kF8E4M3, S{256, 256}));
  EXPECT_EQ(t["layers.0.ffn.experts.3.w1.scale"], std::make_pair(DType::kF8E8M0, S{2, 2}));
}

// A checkpoint written with deliberate deviations: each lands in the right bucket.
TEST(CheckCheckpoint, ReportsMissingExtraMisshapedAndWrongDtype) {
  const ModelConfig cfg = golden_config();
  std::vector<TensorToWrite> tensors;
  for (const auto& e : expected_tensors(cfg)) {
    if (e.name == "layers.0.attn.wkv.weight") continue;  // missing
    TensorToWrite t{e.name, e.dtype, e.shape, {}};
    if (e.name == "layers.1.attn.wq_a.scale") t.shape = {1, 1};  // scale grid wrong for its weight
    if (e.name == "layers.0.ffn.gate.tid2eid") t.dtype = DType::kI32;
    uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    t.bytes.resize(n * dtype_size(t.dtype));
    tensors.push_back(std::move(t));
  }
  tensors.push_back({"layers.0.attn.extra_thing", DType::kF32, {2}, std::vector<std::byte>(8)});
  test::TempDir dir;
  ASSERT_TRUE(write_sharded_checkpoint(dir.path(), tensors, 1).is_ok());
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  const CheckpointCheck r = check_checkpoint(cfg, *ck);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, (std::vector<std::string>{"layers.0.attn.wkv.weight"}));
  EXPECT_EQ(r.extra, (std::vector<std::string>{"layers.0.attn.extra_thing"}));
  ASSERT_EQ(r.misshaped.size(), 1u);
  EXPECT_EQ(r.misshaped[0].name, "layers.1.attn.wq_a.scale");
  EXPECT_EQ(r.misshaped[0].expected, "F8_E8M0 [1, 2]");
  ASSERT_EQ(r.wrong_dtype.size(), 1u);
  EXPECT_EQ(r.wrong_dtype[0].name, "layers.0.ffn.gate.tid2eid");
  const Status s = r.to_status("x");
  EXPECT_EQ(s.rule(), "checkpoint.layout");
  EXPECT_NE(s.message().find("missing layers.0.attn.wkv.weight"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
