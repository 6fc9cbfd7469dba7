// unit: config.json validation, one bad value per rule (docs/reliability.md §A1). The base is the tiny
// configuration of spec §6, written out here; each case breaks one constraint the forward pass relies on.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/model_config.h"
#include "test_util.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// spec §6, inference/config.json names.
const char* kTinyConfig = R"({"vocab_size":129280,"dim":256,"moe_inter_dim":256,"n_layers":6,"n_hash_layers":2,
 "n_mtp_layers":1,"n_heads":4,"n_routed_experts":8,"n_shared_experts":1,"n_activated_experts":2,
 "score_func":"sqrtsoftplus","route_scale":1.5,"swiglu_limit":10.0,
 "q_lora_rank":128,"head_dim":128,"rope_head_dim":64,"o_groups":2,"o_lora_rank":128,
 "window_size":16,"compress_ratios":[0,4,128,4,8,0,0],
 "rope_theta":10000,"compress_rope_theta":160000,"original_seq_len":65536,"rope_factor":16,
 "beta_fast":32,"beta_slow":1,"index_n_heads":4,"index_head_dim":128,"index_topk":8,
 "hc_mult":4,"hc_sinkhorn_iters":20,"hc_eps":1e-6,"norm_eps":1e-6,
 "dtype":"fp8","scale_fmt":"ue8m0","expert_dtype":"fp4","max_seq_len":1024,"max_batch_size":2})";

constexpr const char* kSource = "models/tiny/config.json";

struct Case {
  std::string label;
  std::string text;  // the whole config.json
  std::string rule;
};

// The tiny config with `edit` applied.
std::string tiny_with(const std::function<void(json&)>& edit) {
  json j = json::parse(kTinyConfig);
  edit(j);
  return j.dump();
}
// The tiny config with one raw "key":value text spliced in after the opening brace (a duplicate key).
std::string tiny_raw(const std::string& kv) {
  return "{" + kv + "," + std::string(kTinyConfig + 1);
}
// The tiny config text with `from` replaced by `to` (both raw JSON text).
std::string tiny_replace(const std::string& from, const std::string& to) {
  std::string s = kTinyConfig;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

std::vector<Case> cases() {
  std::string deep = R"({"x":)";
  for (int i = 0; i < 20; ++i) deep += "[";
  for (int i = 0; i < 20; ++i) deep += "]";
  deep += "}";
  return {
      {"NotJson", R"({"dim":)", "config.json_syntax"},
      {"EmptyText", "", "config.json_syntax"},
      {"NotAnObject", "[1,2,3]", "config.json_shape"},
      {"NestedTooDeep", deep, "config.json_too_deep"},
      {"DuplicateField", tiny_raw(R"("dim":512)"), "config.duplicate_key"},
      {"TooLarge", std::string((1 << 20) + 1, ' '), "config.too_large"},
      {"UnknownModelType", tiny_with([](json& j) { j["model_type"] = "llama"; }), "config.model_type"},
      {"IntFieldIsString", tiny_with([](json& j) { j["n_heads"] = "4"; }), "config.type"},
      {"IntFieldIsBool", tiny_with([](json& j) { j["n_heads"] = true; }), "config.type"},
      {"IntFieldIsFraction", tiny_with([](json& j) { j["n_heads"] = 4.5; }), "config.type"},
      {"StringFieldIsNumber", tiny_with([](json& j) { j["score_func"] = 1; }), "config.type"},
      {"ListHoldsString", tiny_with([](json& j) { j["compress_ratios"][1] = "4"; }), "config.type"},
      {"ListIsObject", tiny_with([](json& j) { j["compress_ratios"] = json::object(); }), "config.type"},
      {"RopeScalingNotObject", tiny_with([](json& j) { j["rope_scaling"] = 16; }), "config.type"},
      {"ZeroHeads", tiny_with([](json& j) { j["n_heads"] = 0; }), "config.range"},
      {"NegativeLayers", tiny_with([](json& j) { j["n_layers"] = -6; }), "config.range"},
      {"HugeVocab", tiny_with([](json& j) { j["vocab_size"] = int64_t{1} << 40; }), "config.range"},
      {"IntBeyondInt64", tiny_replace(R"("n_heads":4)", R"("n_heads":18446744073709551615)"), "config.range"},
      {"ZeroOriginalSeqLen", tiny_with([](json& j) { j["original_seq_len"] = 0; }), "config.range"},
      {"NumberOverflowsDouble", tiny_replace(R"("rope_theta":10000)", R"("rope_theta":1e999)"), "config.json_syntax"},
      {"NegativeSharedExperts", tiny_with([](json& j) { j["n_shared_experts"] = -1; }), "config.shared_experts"},
      {"HashLayersBeyondLayers", tiny_with([](json& j) { j["n_hash_layers"] = 7; }), "config.hash_layers"},
      {"TooManyMtpLayers", tiny_with([](json& j) { j["n_mtp_layers"] = 17; }), "config.mtp_layers"},
      {"TopkAboveExperts", tiny_with([](json& j) { j["n_activated_experts"] = 9; }), "config.experts_per_tok"},
      {"HiddenNotMultipleOf128", tiny_with([](json& j) { j["dim"] = 200; }), "config.hidden_block"},
      {"MoeInterNotMultipleOf128", tiny_with([](json& j) { j["moe_inter_dim"] = 320; }), "config.moe_inter_block"},
      {"QLoraNotMultipleOf128", tiny_with([](json& j) { j["q_lora_rank"] = 100; }), "config.q_lora_block"},
      {"RopeDimOdd", tiny_with([](json& j) { j["rope_head_dim"] = 63; }), "config.rope_head_dim"},
      {"RopeDimAboveHeadDim", tiny_with([](json& j) { j["rope_head_dim"] = 192; }), "config.rope_head_dim"},
      {"NopeDimNotMultipleOf64", tiny_with([](json& j) { j["head_dim"] = 160; }), "config.nope_head_dim"},
      {"HeadsNotDivisibleByOGroups", tiny_with([](json& j) { j["o_groups"] = 3; }), "config.o_groups"},
      {"OGroupWidthNotMultipleOf128", tiny_with([](json& j) {
         j["n_heads"] = 2;
         j["head_dim"] = 192;
       }),
       "config.o_group_width"},
      {"OLoraNotBlockAligned", tiny_with([](json& j) { j["o_lora_rank"] = 32; }), "config.o_lora_block"},
      {"RatiosTooShort", tiny_with([](json& j) { j["compress_ratios"] = {0, 4, 128, 4, 8, 0}; }),
       "config.compress_ratios_length"},
      {"RatiosTooLong", tiny_with([](json& j) { j["compress_ratios"].push_back(0); }), "config.compress_ratios_length"},
      {"RatioOne", tiny_with([](json& j) { j["compress_ratios"][2] = 1; }), "config.compress_ratio_value"},
      {"RatioNegative", tiny_with([](json& j) { j["compress_ratios"][2] = -4; }), "config.compress_ratio_value"},
      {"MtpRatioNotZero", tiny_with([](json& j) { j["compress_ratios"][6] = 4; }), "config.mtp_compress_ratio"},
      {"IndexHeadsZero", tiny_with([](json& j) { j["index_n_heads"] = 0; }), "config.index_n_heads"},
      {"IndexHeadDimNotPow2", tiny_with([](json& j) { j["index_head_dim"] = 96; }), "config.index_head_dim"},
      {"IndexHeadDimNotAboveRope", tiny_with([](json& j) { j["index_head_dim"] = 64; }), "config.index_head_dim"},
      {"IndexTopkZero", tiny_with([](json& j) { j["index_topk"] = 0; }), "config.index_topk"},
      {"UnknownScoreFunc", tiny_with([](json& j) { j["score_func"] = "relu"; }), "config.score_func"},
      {"UnknownExpertDtype", tiny_with([](json& j) { j["expert_dtype"] = "int4"; }), "config.expert_dtype"},
      {"RopeFactorBelowOne", tiny_with([](json& j) { j["rope_factor"] = 0.5; }), "config.rope"},
      {"ZeroNormEps", tiny_with([](json& j) { j["norm_eps"] = 0; }), "config.eps"},
      {"NegativeSwigluLimit", tiny_with([](json& j) { j["swiglu_limit"] = -1.0; }), "config.swiglu_limit"},
      {"ZeroRouteScale", tiny_with([](json& j) { j["route_scale"] = 0; }), "config.route_scale"},
      {"EosOutsideVocab", tiny_with([](json& j) { j["eos_token_id"] = 129280; }), "config.token_ids"},
      {"DsparkTargetNotALayer", tiny_with([](json& j) {
         j["n_mtp_layers"] = 2;
         j["compress_ratios"] = {0, 4, 128, 4, 8, 0, 0, 0};
         j["dspark_block_size"] = 3;
         j["dspark_markov_rank"] = 16;
         j["dspark_noise_token_id"] = 128799;
         j["dspark_target_layer_ids"] = {3, 4, 6};
       }),
       "config.dspark"},
  };
}

class ConfigMalformed : public ::testing::TestWithParam<Case> {};

TEST_P(ConfigMalformed, RejectedWithItsRule) {
  const Case& c = GetParam();
  auto r = parse_model_config(c.text, kSource);
  ASSERT_FALSE(r.is_ok()) << "accepted a malformed config";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidFile) << r.status().to_string();
  EXPECT_EQ(r.status().rule(), c.rule) << r.status().to_string();
  EXPECT_TRUE(r.status().message().starts_with(kSource)) << r.status().message();
  // Loading the same text from a file gives the same rule and names that file.
  test::TempDir dir;
  test::write_text_file(dir / "config.json", c.text);
  auto loaded = load_model_config(dir.path());
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().rule(), c.rule) << loaded.status().to_string();
  EXPECT_NE(loaded.status().message().find((dir / "config.json").string()), std::string::npos)
      << loaded.status().message();
}

INSTANTIATE_TEST_SUITE_P(Rules, ConfigMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

TEST(ConfigValid, TinySpecConfigParses) {
  auto r = parse_model_config(kTinyConfig, kSource);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->dim, 256);
  EXPECT_EQ(r->n_total_layers(), 7);
  EXPECT_EQ(r->nope_head_dim(), 64);
  EXPECT_EQ(r->attention_kind(0), AttentionKind::kSlidingWindow);
  EXPECT_EQ(r->attention_kind(2), AttentionKind::kHeavilyCompressed);
  EXPECT_FALSE(r->has_dspark());
}

TEST(ConfigValid, DsparkVariantOfSpecSection6Parses) {
  auto r = parse_model_config(tiny_with([](json& j) {
                                j["n_mtp_layers"] = 2;
                                j["compress_ratios"] = {0, 4, 128, 4, 8, 0, 0, 0};
                                j["dspark_block_size"] = 3;
                                j["dspark_markov_rank"] = 16;
                                j["dspark_noise_token_id"] = 128799;
                                j["dspark_target_layer_ids"] = {3, 4, 5};
                              }),
                              kSource);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->has_dspark());
  EXPECT_EQ(r->dspark_target_layer_ids, (std::vector<int64_t>{3, 4, 5}));
}

TEST(ConfigValid, IntegralFloatsAndNullsAreAccepted) {
  // HF exporters sometimes write 256.0; a null keeps the default.
  auto r = parse_model_config(tiny_with([](json& j) {
                                j["dim"] = 256.0;
                                j["hc_mult"] = nullptr;
                              }),
                              kSource);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->dim, 256);
  EXPECT_EQ(r->hc_mult, 4);
}

TEST(ConfigValid, OfficialConfigAndTinyGoldenLoad) {
  auto off = load_model_config(test::shared_dir() / "spec/official/config.json");
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  EXPECT_EQ(off->dim, 4096);
  EXPECT_EQ(off->n_heads, 64);
  auto tiny = load_model_config(test::shared_dir() / "golden/tiny/checkpoint");
  ASSERT_TRUE(tiny.is_ok()) << tiny.status().to_string();
}

TEST(ConfigLoad, MissingFileIsNotFound) {
  test::TempDir dir;
  auto r = load_model_config(dir.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().rule(), "config.missing");
  EXPECT_NE(r.status().message().find((dir / "config.json").string()), std::string::npos);
}

TEST(ConfigLoad, BadInferenceOverlayNamesThatFile) {
  test::TempDir dir;
  test::write_text_file(dir / "config.json", kTinyConfig);
  std::filesystem::create_directory(dir / "inference");
  test::write_text_file(dir / "inference/config.json", R"({"n_mtp_layers":"two"})");
  auto r = load_model_config(dir.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "config.type");
  EXPECT_NE(r.status().message().find((dir / "inference/config.json").string()), std::string::npos);
}

TEST(ConfigMalformedCoverage, EveryRuleInTheSourceHasACase) {
  const std::string src = test::read_text_file(test::source_dir() / "src/io/model_config.cc");
  ASSERT_FALSE(src.empty());
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.rule);
  covered.insert("config.missing");  // ConfigLoad.MissingFileIsNotFound
  const std::regex rule_re("\"(config\\.[a-z_0-9]+)\"");
  int n_rules = 0;
  for (auto it = std::sregex_iterator(src.begin(), src.end(), rule_re); it != std::sregex_iterator(); ++it) {
    const std::string rule = (*it)[1];
    if (rule == "config.open" || rule == "config.json") continue;  // the OS refusing to open; a file name
    ++n_rules;
    EXPECT_TRUE(covered.count(rule)) << rule << " has no malformed-config case";
  }
  EXPECT_GE(n_rules, 30);
}

}  // namespace
}  // namespace dsv4
