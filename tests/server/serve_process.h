// tests/server: a child `dsv4 serve` process with its stdout+stderr on a pipe, for tests of the real
// binary over HTTP (flags, SIGTERM drain, the real model end to end).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace dsv4::server::test {

struct ServeProcess {
  // `env`: "NAME=VALUE" entries set in the child on top of the test's environment.
  explicit ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
  ~ServeProcess();  // SIGKILL if still running
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Reads output until `needle` appears or `limit` passes.
  bool read_until(const std::string& needle, std::chrono::milliseconds limit);
  // The port from "listening on http://127.0.0.1:PORT" (after read_until found it); -1 if absent.
  int listening_port() const;
  // Waits for the exit status (bounded); -1 if it did not exit in time.
  int wait_exit(std::chrono::milliseconds limit);
  // SIGTERM (the graceful drain), then wait_exit(limit); 0 if it had already been reaped. A server that
  // outlives `limit` is killed by the destructor.
  int terminate(std::chrono::milliseconds limit);

  pid_t pid = -1;
  int out_fd = -1;
  std::string output;
};

}  // namespace dsv4::server::test
