// e2e: `dsv4 generate --batch-file` — requests of a JSONL file served together through the engine
// (continuous batching, MTP speculation) give each request the tokens `dsv4 generate` gives it alone,
// and the run ends with throughput, acceptance per draft position and pool usage; a bad line is a clear
// error naming the file and line.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace dsv4 {
namespace {

std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(2 + (i * 7919 + salt * 104729) % 1000);
  return p;
}

std::string joined(const std::vector<int32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

TEST(CliGenerateBatch, BatchedSpeculativeRequestsEqualEachRunAloneAndReportStats) {
  const auto golden = test::shared_dir() / "golden/tiny/checkpoint";  // has an MTP module
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 1), prompt_of(12, 2), prompt_of(30, 3)};
  test::TempDir tmp;
  std::string jsonl;
  for (const auto& p : prompts) jsonl += "{\"prompt_ids\": [" + joined(p, ", ") + "]}\n";
  test::write_text_file(tmp / "prompts.jsonl", jsonl);
  // The batch mode defaults to avx512 (batch-invariant); the solo runs use the same ISA.
  auto batch = test::run_command(q(test::cli_path()) + " generate --model " + q(golden) + " --batch-file " +
                                 q(tmp / "prompts.jsonl") +
                                 " --concurrency 2 --speculative 2 --max-tokens 6 --ignore-eos 2>&1");
  ASSERT_EQ(batch.exit_code, 0) << batch.output;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto solo = test::run_command(q(test::cli_path()) + " generate --model " + q(golden) + " --prompt-ids " +
                                  joined(prompts[i], ",") + " -n 6 --ignore-eos --isa avx512 2>/dev/null");
    ASSERT_EQ(solo.exit_code, 0) << solo.output;
    std::stringstream ss(solo.output);
    std::vector<int32_t> ids;
    for (int32_t v; ss >> v;) ids.push_back(v);
    ASSERT_EQ(ids.size(), 6u) << solo.output;
    const std::string want = "request " + std::to_string(i + 1) + ": " + joined(ids, " ") + "\n";
    EXPECT_NE(batch.output.find(want), std::string::npos) << "want '" << want << "' in\n" << batch.output;
  }
  for (const char* line : {"generated tokens 18", "tok/s", "draft position 0: accepted", "draft position 1: accepted",
                           "acceptance", "pool:", "state pages"})
    EXPECT_NE(batch.output.find(line), std::string::npos) << line << " missing from\n" << batch.output;
}

TEST(CliGenerateBatch, ABadLineIsAClearErrorNamingFileAndLine) {
  const auto golden = test::shared_dir() / "golden/tiny/checkpoint";
  test::TempDir tmp;
  test::write_text_file(tmp / "bad.jsonl", "{\"prompt_ids\": [1, 2]}\n{\"prompt_ids\": \"oops\"}\n");
  auto r = test::run_command(q(test::cli_path()) + " generate --model " + q(golden) + " --batch-file " +
                             q(tmp / "bad.jsonl") + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bad.jsonl:2:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prompt_ids"), std::string::npos) << r.output;
  auto missing = test::run_command(q(test::cli_path()) + " generate --model " + q(golden) + " --batch-file " +
                                   q(tmp / "absent.jsonl") + " 2>&1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("cannot open"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace dsv4
