// tests/unit: the suites' command runner (tests/test_util.h): exit codes and output come back, and a
// command past its limit is killed with everything it started, so a hung child fails its test.
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace dsv4::test {
namespace {

using namespace std::chrono_literals;

TEST(RunCommand, ReturnsExitCodeAndInterleavedOutput) {
  const CommandResult r = run_command("echo out; echo err 1>&2; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output, "out\nerr\n");
}

// The shell's child (a sleep far past the limit) holds the output pipe open too: both are killed, so
// the call returns with what was printed and a note naming the command.
TEST(RunCommand, KillsACommandAndItsChildrenPastTheLimit) {
  const CommandResult r = run_command("sleep 600 & echo $!; wait", 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_NE(r.output.find("killed after 200 ms"), std::string::npos) << r.output;
  // The sleep was killed with the shell: its /proc entry is gone or a zombie awaiting its reaper.
  const int sleep_pid = std::atoi(r.output.c_str());
  ASSERT_GT(sleep_pid, 0) << r.output;
  const auto stat = std::filesystem::path("/proc") / std::to_string(sleep_pid) / "stat";
  bool dead = false;
  for (int i = 0; i < 1000 && !dead; ++i) {  // the kill is asynchronous: look again for up to ~10 s
    const std::string s = read_text_file(stat);
    const size_t paren = s.rfind(')');
    dead = s.empty() || (paren != std::string::npos && s.compare(paren + 1, 3, " Z ") == 0);
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(dead) << "the command's child outlived the timeout: " << read_text_file(stat);
}

}  // namespace
}  // namespace dsv4::test
