// tests/server: the child `dsv4 serve` process (see serve_process.h).
#include "serve_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "test_util.h"

namespace dsv4::server::test {

ServeProcess::ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  int fds[2];
  if (::pipe(fds) != 0) return;
  const std::string cli = dsv4::test::cli_path().string();
  pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(cli.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(cli.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out_fd = fds[0];
}

ServeProcess::~ServeProcess() {
  if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  if (out_fd >= 0) ::close(out_fd);
}

bool ServeProcess::read_until(const std::string& needle, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (output.find(needle) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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

int ServeProcess::listening_port() const {
  const std::string marker = "listening on http://127.0.0.1:";
  const size_t at = output.find(marker);
  if (at == std::string::npos) return -1;
  return std::atoi(output.c_str() + at + marker.size());
}

int ServeProcess::terminate(std::chrono::milliseconds limit) {
  if (pid <= 0) return 0;
  ::kill(pid, SIGTERM);
  return wait_exit(limit);
}

int ServeProcess::wait_exit(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

}  // namespace dsv4::server::test
