// e2e: the built `dsv4` CLI — inspect on the golden checkpoint and the official config, make-tiny then
// inspect, and bad inputs (missing paths, bad presets, invalid configs, mismatched or truncated
// checkpoints) ending in a clear message and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }
std::string cli() { return q(test::cli_path()); }
fs::path golden_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

// Runs a command that prints JSON on stdout (stderr dropped) and parses it.
json run_json(const std::string& cmd, int* exit_code) {
  const auto r = test::run_command(cmd + " 2>/dev/null");
  *exit_code = r.exit_code;
  json j = json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

// A clean failure: a non-zero status from main, not a signal, with the reason printed.
void expect_clean_failure(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
}

TEST(CliInspect, GoldenCheckpointListsExactlyItsTensors) {
  const auto r = test::run_command(cli() + " inspect " + q(golden_dir()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weights: 585 tensors"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 missing, 0 extra, 0 mis-shaped, 0 wrong dtype"), std::string::npos) << r.output;
  int rc = -1;
  const json j = run_json(cli() + " inspect --json " + q(golden_dir()), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(j["n_tensors"], 585);
  EXPECT_EQ(j["checkpoint"]["n_tensors"], 585);
  EXPECT_TRUE(j["checkpoint"]["ok"].get<bool>());
  EXPECT_TRUE(j["checkpoint"]["missing"].empty());
  EXPECT_TRUE(j["checkpoint"]["extra"].empty());
  EXPECT_EQ(j["checkpoint"]["bytes"], 13258740);  // the golden index's total_size
  ASSERT_EQ(j["layers"].size(), 7u);
  const char* kinds[] = {"swa", "csa", "hca", "csa", "hca", "swa", "swa"};  // golden README
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(j["layers"][i]["attention"], kinds[i]) << i;
}

TEST(CliInspect, OfficialConfigMatchesAdvertisedSize) {
  int rc = -1;
  const json j = run_json(cli() + " inspect --json --compare-v32 " + q(test::shared_dir() / "spec/official/config.json"), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NEAR(j["params_total"].get<double>(), 284e9, 0.02 * 284e9);
  EXPECT_NEAR(j["params_active_per_token"].get<double>(), 13e9, 0.08 * 13e9);
  EXPECT_EQ(j["n_tensors"], 69187);  // no weights: the expected count
  EXPECT_FALSE(j["checkpoint"]["present"].get<bool>());
  ASSERT_EQ(j["layers"].size(), 44u);
  int csa = 0, hca = 0, swa = 0;
  for (const auto& l : j["layers"]) {
    const std::string a = l["attention"];
    csa += a == "csa", hca += a == "hca", swa += a == "swa";
  }
  EXPECT_EQ(csa, 21);  // spec §1
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(swa, 3);   // layers 0, 1 and the MTP block
  EXPECT_GT(j["compare_v32"]["flops_ratio"].get<double>(), 0.0);
  EXPECT_LT(j["compare_v32"]["kv_ratio_fp8"].get<double>(), 1.0);
}

TEST(CliInspect, MakeTinyThenInspectPasses) {
  test::TempDir dir;
  const fs::path out = dir / "tiny";
  const auto made = test::run_command(cli() + " make-tiny " + q(out) + " --preset tiny --seed 5");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  EXPECT_TRUE(fs::exists(out / "inference/config.json"));
  const auto r = test::run_command(cli() + " inspect " + q(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint: OK"), std::string::npos) << r.output;
  int rc = -1;
  const json j = run_json(cli() + " inspect --json " + q(out), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(j["n_tensors"], 585);
  // Making it again into the same directory is refused rather than overwriting it.
  expect_clean_failure(test::run_command(cli() + " make-tiny " + q(out)), "already exists");
}

TEST(CliInspect, MismatchedAndTruncatedCheckpointsFailCleanly) {
  test::TempDir dir;
  const fs::path out = dir / "m";
  ASSERT_EQ(test::run_command(cli() + " make-tiny " + q(out) + " --config " + q(golden_dir() / "config.json")).exit_code, 0);
  // The config now claims 6 experts: experts 6 and 7 are extra, gate shapes no longer match.
  json cfg = json::parse(test::read_text_file(out / "config.json"));
  cfg["n_routed_experts"] = 6;
  test::write_text_file(out / "config.json", cfg.dump());
  std::string inf = test::read_text_file(out / "inference/config.json");
  json infj = json::parse(inf);
  infj["n_routed_experts"] = 6;
  test::write_text_file(out / "inference/config.json", infj.dump());
  auto r = test::run_command(cli() + " inspect " + q(out));
  expect_clean_failure(r, "DOES NOT MATCH");
  EXPECT_NE(r.output.find("extra layers.0.ffn.experts.6.w1.weight"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mis-shaped layers.0.ffn.gate.weight"), std::string::npos) << r.output;
  int rc = -1;
  const json j = run_json(cli() + " inspect --json " + q(out), &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_FALSE(j["checkpoint"]["ok"].get<bool>());
  EXPECT_EQ(j["checkpoint"]["extra"].size(), 7u * 2 * 6);  // 7 blocks × 2 experts × (3 weights + 3 scales)
  // Truncating a shard is caught by the loader with its rule id.
  fs::resize_file(out / "model-00002-of-00002.safetensors", 1000);
  expect_clean_failure(test::run_command(cli() + " inspect " + q(out)), "safetensors.");
}

TEST(CliInspect, BadInputsGiveClearErrors) {
  expect_clean_failure(test::run_command(cli() + " inspect /nonexistent/model"), "no such file or directory");
  expect_clean_failure(test::run_command(cli() + " inspect"), "expected exactly one");
  expect_clean_failure(test::run_command(cli() + " inspect " + q(golden_dir()) + " --context abc"), "--context");
  expect_clean_failure(test::run_command(cli() + " inspect " + q(golden_dir()) + " --bogus"), "unknown flag");
  test::TempDir dir;
  expect_clean_failure(test::run_command(cli() + " make-tiny " + q(dir / "x") + " --preset huge"), "unknown preset");
  expect_clean_failure(test::run_command(cli() + " make-tiny"), "expected exactly one");
  expect_clean_failure(test::run_command(cli() + " make-tiny " + q(dir / "x") + " --seed -3"), "--seed");
  // A config with 0 attention heads: rejected by validation in both commands.
  json cfg = json::parse(test::read_text_file(golden_dir() / "config.json"));
  cfg["num_attention_heads"] = 0;
  fs::create_directories(dir / "bad");
  test::write_text_file(dir / "bad/config.json", cfg.dump());
  expect_clean_failure(test::run_command(cli() + " inspect " + q(dir / "bad")), "num_attention_heads");
  expect_clean_failure(test::run_command(cli() + " make-tiny " + q(dir / "y") + " --config " + q(dir / "bad/config.json")),
                       "num_attention_heads");
  EXPECT_FALSE(fs::exists(dir / "y"));
  test::write_text_file(dir / "bad/config.json", "{not json");
  expect_clean_failure(test::run_command(cli() + " inspect " + q(dir / "bad/config.json")), "not valid JSON");
}

}  // namespace
}  // namespace dsv4
