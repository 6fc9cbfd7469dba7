// tests/server: the `dsv4 serve` command as a process — flag errors, clear model-load errors (bad
// directory, config, tokenizer, --ctx-size) and the SIGTERM drain (reliability.md §B6) on --fake-engine.
#include <signal.h>

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "test_util.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

TEST(ServeCli, FlagErrorsAreUsageErrors) {
  const std::string cli = dsv4::test::cli_path().string();
  auto conflict = dsv4::test::run_command(cli + " serve --fake-engine --model /x");
  EXPECT_EQ(conflict.exit_code, 2) << conflict.output;
  EXPECT_NE(conflict.output.find("--model"), std::string::npos);
  auto bad_port = dsv4::test::run_command(cli + " serve --model /x --port 70000");
  EXPECT_EQ(bad_port.exit_code, 2) << bad_port.output;
  auto unknown = dsv4::test::run_command(cli + " serve --model /x --bogus 1");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
}

// The state-budget flags: each bad value is one line naming the flag and its rule, before any model is
// looked at (the model path does not exist), exit 2 like every usage error.
TEST(ServeCli, BudgetFlagErrorsAreOneLine) {
  const std::string cli = dsv4::test::cli_path().string();
  const std::pair<const char*, const char*> cases[] = {
      {"--state-budget-mib -1", "[cli.out_of_range]"}, {"--state-budget-mib 1.5", "[cli.not_integer]"},
      {"--state-budget-mib x", "[cli.not_integer]"},   {"--state-budget-mib 1073741825", "[cli.out_of_range]"},
      {"--prefix-cache -2", "[cli.out_of_range]"},     {"--prefix-cache 65537", "[cli.out_of_range]"},
      {"--prefix-cache many", "[cli.not_integer]"},
  };
  for (const auto& [flags, rule] : cases) {
    auto r = dsv4::test::run_command(cli + " serve --model /nonexistent/dsv4-model " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(rule), std::string::npos) << flags << "\n" << r.output;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_NE(r.output.find(flag), std::string::npos) << flags << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("/nonexistent"), std::string::npos) << "flags are checked before the model: " << r.output;
  }
}

TEST(ServeCli, RefusesClearlyWhenItCannotLoadTheModel) {
  const std::string cli = dsv4::test::cli_path().string();
  auto r = dsv4::test::run_command(cli + " serve --model /nonexistent/dsv4-model --port 0");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/dsv4-model"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("listening"), std::string::npos) << "must not pretend to serve: " << r.output;
}

// Each load problem is a one-line error naming the file and the fix, found before any weight is read.
TEST(ServeCli, ModelLoadErrorsAreClear) {
  const std::string cli = dsv4::test::cli_path().string();
  const auto golden = dsv4::test::shared_dir() / "golden" / "tiny" / "checkpoint";  // no tokenizer.json
  auto expect_error = [&](const std::string& flags, const std::string& rule, const std::string& text) {
    auto r = dsv4::test::run_command(cli + " serve --port 0 " + flags);
    EXPECT_NE(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find("[" + rule + "]"), std::string::npos) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("listening"), std::string::npos) << r.output;
  };
  expect_error("--model " + golden.string(), "serve.no_tokenizer", (golden / "tokenizer.json").string());
  // The golden model's max_position_embeddings is 1024.
  expect_error("--model " + golden.string() + " --ctx-size 4096", "serve.ctx_size",
               "--ctx-size 4096 exceeds the model's maximum context of 1024");
  expect_error("--model " + (golden / "config.json").string(), "serve.model_dir", "not a directory");
  // Model flags are checked before anything is loaded or generated.
  expect_error("--model " + golden.string() + " --isa bogus", "cli.isa", "--isa must be");
  expect_error("--model " + golden.string() + " --backend gpu", "cli.backend", "--backend must be cpu or reference");
  expect_error("--model " + golden.string() + " --weights bogus", "cli.weights", "--weights must be mmap, copy or auto");

  dsv4::test::TempDir tmp;
  std::filesystem::create_directories(tmp / "bad");
  dsv4::test::write_text_file(tmp / "bad" / "config.json", "{\"vocab_size\": ");
  expect_error("--model " + (tmp / "bad").string(), "config.json_syntax", "config.json");
  std::filesystem::create_directories(tmp / "empty");
  expect_error("--model " + (tmp / "empty").string(), "serve.no_config", "no config.json");
  // The real tokenizer (129280 tokens) on the golden model (vocab 1024) could emit ids the model lacks.
  std::filesystem::copy(golden, tmp / "mismatch", std::filesystem::copy_options::recursive);
  std::filesystem::copy_file(dsv4::test::shared_dir() / "tokenizer" / "tokenizer.json", tmp / "mismatch" / "tokenizer.json");
  expect_error("--model " + (tmp / "mismatch").string(), "serve.tokenizer_vocab", "more than the model's vocabulary of 1024");
}

TEST(ServeCli, SigtermDrainsAndExits) {
  ServeProcess proc({"serve", "--fake-engine", "--port", "0", "--served-model-name", "m", "--drain-timeout-s", "5"});
  ASSERT_GT(proc.pid, 0);
  ASSERT_TRUE(proc.read_until(" (model", 20s)) << proc.output;
  const int port = proc.listening_port();
  ASSERT_GT(port, 0) << proc.output;
  httplib::Client cli("127.0.0.1", port);
  auto h = cli.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto r = cli.Post("/v1/chat/completions", R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8})",
                    "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["usage"]["completion_tokens"], 8);
  ASSERT_EQ(::kill(proc.pid, SIGTERM), 0);
  ASSERT_TRUE(proc.read_until("stopped", 20s)) << proc.output;
  EXPECT_EQ(proc.wait_exit(20s), 0) << proc.output;
  EXPECT_NE(proc.output.find("SIGTERM received, draining"), std::string::npos) << proc.output;
}

}  // namespace
}  // namespace dsv4::server::test
