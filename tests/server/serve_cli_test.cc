// tests/server: the `dsv4 serve` command as a process — flag errors, the missing-engine error, and the
// SIGTERM drain (reliability.md §B6) on the --fake-engine test hook.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

TEST(ServeCli, FlagErrorsAreUsageErrors) {
  const std::string cli = dsv4::test::cli_path().string();
  auto no_model = dsv4::test::run_command(cli + " serve");
  EXPECT_EQ(no_model.exit_code, 2) << no_model.output;
  EXPECT_NE(no_model.output.find("--model"), std::string::npos);
  auto bad_port = dsv4::test::run_command(cli + " serve --model /x --port 70000");
  EXPECT_EQ(bad_port.exit_code, 2) << bad_port.output;
  auto unknown = dsv4::test::run_command(cli + " serve --model /x --bogus 1");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
}

TEST(ServeCli, RefusesClearlyWhenItCannotLoadTheModel) {
  const std::string cli = dsv4::test::cli_path().string();
  auto r = dsv4::test::run_command(cli + " serve --model /nonexistent/dsv4-model --port 0");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/dsv4-model"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("listening"), std::string::npos) << "must not pretend to serve: " << r.output;
}

// A child `dsv4 serve` process with its stdout+stderr on a pipe.
struct ServeProcess {
  pid_t pid = -1;
  int out_fd = -1;
  std::string output;

  explicit ServeProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      std::vector<char*> argv;
      const std::string cli = dsv4::test::cli_path().string();
      argv.push_back(const_cast<char*>(cli.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(cli.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_fd = fds[0];
  }
  ~ServeProcess() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out_fd >= 0) ::close(out_fd);
  }
  // Reads output until `needle` appears or `limit` passes.
  bool read_until(const std::string& needle, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (output.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      const ssize_t n = ::read(out_fd, buf, sizeof(buf));
      if (n <= 0) return output.find(needle) != std::string::npos;
      output.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // Waits for the exit status (bounded); -1 if it did not exit in time.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }
};

TEST(ServeCli, SigtermDrainsAndExits) {
  ServeProcess proc({"serve", "--fake-engine", "--port", "0", "--served-model-name", "m", "--drain-timeout-s", "5"});
  ASSERT_GT(proc.pid, 0);
  const std::string marker = "listening on http://127.0.0.1:";
  ASSERT_TRUE(proc.read_until(" (model", 20s)) << proc.output;
  const size_t at = proc.output.find(marker);
  ASSERT_NE(at, std::string::npos) << proc.output;
  const int port = std::stoi(proc.output.substr(at + marker.size()));
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
