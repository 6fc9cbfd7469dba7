// e2e: `dsv4 generate` with a text prompt on a make-tiny model (tokenizer.json shipped beside the weights),
// the clear error when a model has no tokenizer, and `--dry-run` on the official config (no weights).
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dsv4 {
namespace {

std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

TEST(CliGenerateText, TextPromptStreamsTheGreedyContinuationAsText) {
  test::TempDir tmp;
  const auto model = tmp / "tiny";
  auto made = test::run_command(q(test::cli_path()) + " make-tiny " + q(model) + " --preset tiny --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string gen = q(test::cli_path()) + " generate --model " + q(model) + " -n 6 --ignore-eos";
  auto text = test::run_command(gen + " --prompt 'Hello world' 2>/dev/null");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  // The same prompt as ids (BOS + the tokenizer's encoding) must give the same tokens, printed as ids.
  auto tok = Tokenizer::load(model / "tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  std::string ids = "0";
  for (int32_t id : tok->encode("Hello world", false)) ids += "," + std::to_string(id);
  auto as_ids = test::run_command(gen + " --prompt-ids " + ids + " 2>/dev/null");
  ASSERT_EQ(as_ids.exit_code, 0) << as_ids.output;
  std::vector<int32_t> out_ids;
  std::stringstream ss(as_ids.output);
  for (int32_t v; ss >> v;) out_ids.push_back(v);
  ASSERT_EQ(out_ids.size(), 6u) << as_ids.output;
  EXPECT_EQ(text.output, tok->decode(out_ids) + "\n");
}

TEST(CliGenerateText, TextPromptWithoutTokenizerIsAClearError) {
  const auto golden = test::shared_dir() / "golden/tiny/checkpoint";  // vocab 1024, ships no tokenizer
  auto r = test::run_command(q(test::cli_path()) + " generate --model " + q(golden) + " --prompt hi -n 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("tokenizer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--prompt-ids"), std::string::npos) << r.output;
}

TEST(CliGenerateText, DryRunPlansTheOfficialConfigWithoutWeights) {
  const auto cfg = test::shared_dir() / "spec/official/config.json";
  auto r = test::run_command(q(test::cli_path()) + " generate --model " + q(cfg) + " --dry-run --ctx-size 1048576");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("valid (43 layers + 1 MTP"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("284."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1048576 tokens (fp8)"), std::string::npos) << r.output;
  auto bad = test::run_command(q(test::cli_path()) + " generate --model /nonexistent --dry-run");
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace dsv4
