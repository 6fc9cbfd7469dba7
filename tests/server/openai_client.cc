// tests/server: the npm openai client runner (see openai_client.h).
#include "openai_client.h"

#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "test_util.h"

namespace dsv4::server::test {

void run_openai_client(const std::string& script, int port, const std::string& args, std::chrono::seconds limit) {
  const auto js_dir = dsv4::test::source_dir() / "tests" / "js";
  ASSERT_TRUE(std::filesystem::exists(js_dir / "node_modules" / "openai"))
      << "tests/js/node_modules is missing: run scripts/install-deps.sh";
  const std::string cmd =
      "node " + (js_dir / script).string() + " http://127.0.0.1:" + std::to_string(port) + "/v1 " + args;
  const dsv4::test::CommandResult r = dsv4::test::run_command(cmd, limit);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checks passed"), std::string::npos) << r.output;
  std::printf("%s", r.output.c_str());
}

}  // namespace dsv4::server::test
