// tests: shared helpers.
#include "test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dsv4::test {

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("DSV4_SHARED_DIR")) return env;
  return DSV4_SHARED_DIR;
}
std::filesystem::path source_dir() { return DSV4_SOURCE_DIR; }
std::filesystem::path cli_path() { return DSV4_CLI_PATH; }

TempDir::TempDir() {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = std::filesystem::temp_directory_path() / ("dsv4-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temp dir");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_command(const std::string& command_line, std::chrono::milliseconds limit) {
  CommandResult r;
  int fds[2];
  if (::pipe(fds) != 0) {
    r.output = "run_command: pipe() failed";
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    r.output = "run_command: fork() failed";
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group: a timeout kills the shell and whatever it started
    // Out of the terminal's foreground group, a read of the terminal would stop it: stdin is empty instead.
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (null_fd > 0) ::close(null_fd);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl("/bin/sh", "sh", "-c", command_line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from this side, so the group exists before any kill below
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto ms_left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  };
  // Output until EOF (every writer closed it) or the deadline.
  std::array<char, 4096> buf;
  for (long long left = ms_left(); left > 0; left = ms_left()) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (ms_left() <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.output += "\n[run_command: killed after " + std::to_string(limit.count()) + " ms: " + command_line + "]\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

}  // namespace dsv4::test
